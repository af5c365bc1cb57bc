package models

import (
	"errors"
	"math"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The numerical contract (input.go) over every registered algorithm: wrong
// length, NaN, Inf, huge values, kernel widths at their bounds, duplicate
// points and large targets give an error or a finite prediction, never a
// panic and never a NaN output.

// contractParams are the few params an algorithm needs to build at dim 3
// with a small budget (everything else is its default).
func contractParams(alg string) map[string]any {
	switch alg {
	case "oks", "oks++", "ioks", "rf-oks++", "rf-ioks":
		return map[string]any{"sigmas": []any{0.5, 2.0}}
	}
	return nil
}

// contractSpec builds alg's spec at dim 3 with kernel width sigma (0: absent).
func contractSpec(alg string, sigma float64) Spec {
	sp := Spec{Algorithm: alg, Dim: 3, Params: contractParams(alg), Seed: 5}
	if sigma != 0 && contractParams(alg) == nil {
		sp.Kernel = KernelSpec{Type: "gaussian", Sigma: sigma}
	}
	if sigma != 0 && contractParams(alg) != nil {
		sp.Params = map[string]any{"sigmas": []any{sigma, 1.0}}
	}
	return sp
}

// checkPrediction fails unless p is finite or flagged with an error (then
// its Value must still be finite: it is never emitted, but never NaN either).
func checkPrediction(t *testing.T, what string, p Prediction, wantErr bool) {
	t.Helper()
	if isBad(p.Value) || isBad(p.Std) {
		t.Fatalf("%s: non-finite prediction %+v", what, p)
	}
	if wantErr && p.Err == nil {
		t.Fatalf("%s: prediction %+v not flagged", what, p)
	}
}

// noPanic runs f, turning a panic into a test failure naming what.
func noPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%s: panic: %v", what, r)
		}
	}()
	f()
}

func warmStream(n int) ([][]float64, []float64) {
	r := NewRand(9)
	xs, ys := make([][]float64, n), make([]float64, n)
	for i := range xs {
		xs[i] = []float64{r.Float64()*2 - 1, r.Float64()*2 - 1, r.Float64()*2 - 1}
		ys[i] = math.Sin(3 * xs[i][0])
	}
	return xs, ys
}

func TestNumericalContractAllAlgorithms(t *testing.T) {
	algs := Algorithms()
	if len(algs) != 17 {
		t.Fatalf("%d algorithms registered, the contract names 17: %v", len(algs), algs)
	}
	nan, inf := math.NaN(), math.Inf(1)
	bad := []struct {
		name string
		x    []float64
		want error
	}{
		{"empty", []float64{}, ErrDim},
		{"short", []float64{0.1, 0.2}, ErrDim},
		{"long", []float64{0.1, 0.2, 0.3, 0.4}, ErrDim},
		{"nan", []float64{0.1, nan, 0.3}, ErrNumerical},
		{"+inf", []float64{inf, 0.2, 0.3}, ErrNumerical},
		{"-inf", []float64{0.1, 0.2, -inf}, ErrNumerical},
		{"norm overflows", []float64{1e200, -1e200, 1e200}, ErrNumerical},
		{"max float", []float64{math.MaxFloat64, 0, 0}, ErrNumerical},
	}
	for _, alg := range algs {
		t.Run(alg, func(t *testing.T) {
			t.Parallel()
			l := mustNew(t, contractSpec(alg, 0), "k")
			xs, ys := warmStream(12)
			for i := range xs[:6] {
				p := l.Predict(xs[i])
				checkPrediction(t, "warm-up", p, false)
				if err := l.Update(xs[i], p, ys[i]); err != nil {
					t.Fatalf("warm-up %d: %v", i, err)
				}
			}
			before := mustMarshal(t, l)
			for _, b := range bad {
				noPanic(t, b.name, func() {
					p := l.Predict(b.x)
					checkPrediction(t, b.name, p, true)
					if !errors.Is(p.Err, b.want) {
						t.Fatalf("%s: Predict err = %v, want %v", b.name, p.Err, b.want)
					}
					if _, err := PredictChecked(l, b.x); !errors.Is(err, b.want) {
						t.Fatalf("%s: PredictChecked err = %v, want %v", b.name, err, b.want)
					}
					if err := l.Update(b.x, p, 0.5); !errors.Is(err, b.want) {
						t.Fatalf("%s: Update err = %v, want %v", b.name, err, b.want)
					}
				})
			}
			// A refused input never touches the state (nor the PRNG).
			if string(mustMarshal(t, l)) != string(before) {
				t.Fatal("refused inputs changed the learner state")
			}
			// Non-finite labels are refused, the state kept.
			for _, y := range []float64{nan, inf, -inf} {
				noPanic(t, "label", func() {
					p := l.Predict(xs[6])
					if err := l.Update(xs[6], p, y); err == nil {
						t.Fatalf("label %v accepted", y)
					}
				})
			}
			// Huge but finite values: an error or a finite prediction.
			for _, x := range [][]float64{{1e150, -1e150, 1e150}, {1e100, 0, 0}, {-1e-300, 5e-324, 0}} {
				noPanic(t, "huge", func() {
					p := l.Predict(x)
					checkPrediction(t, "huge", p, false)
					_ = l.Update(x, p, 0.5)
					checkPrediction(t, "after huge", l.Predict(xs[7]), false)
				})
			}
			// Duplicate points and large targets (raw units, e.g. 1e6).
			for i := range 20 {
				noPanic(t, "duplicates", func() {
					x := xs[8+i%2]
					p := l.Predict(x)
					checkPrediction(t, "duplicate", p, false)
					if p.Err != nil {
						t.Fatalf("duplicate %d: valid x refused: %v", i, p.Err)
					}
					y := 1e6 * (1 + float64(i%3))
					if strings.Contains(alg, "oks") || alg == "forks" || alg == "fogd" || alg == "nogd" {
						y = float64(1 - 2*(i%2)) // classification-capable defaults: a label
					}
					_ = l.Update(x, p, y) // an error (rejected, state kept) is allowed
				})
			}
			checkPrediction(t, "end", l.Predict(xs[11]), false)
		})
	}
}

func TestKernelWidthBounds(t *testing.T) {
	for _, alg := range Algorithms() {
		t.Run(alg, func(t *testing.T) {
			t.Parallel()
			for _, sigma := range []float64{minSigma, maxSigma} {
				l := mustNew(t, contractSpec(alg, sigma), "k")
				xs, ys := warmStream(8)
				for i := range xs {
					noPanic(t, "bound", func() {
						p := l.Predict(xs[i])
						checkPrediction(t, "sigma bound", p, false)
						_ = l.Update(xs[i], p, ys[i])
					})
				}
			}
			for _, sigma := range []float64{minSigma / 10, maxSigma * 10, -1, math.Inf(1)} {
				if _, err := New(contractSpec(alg, sigma), "k"); !errors.Is(err, ErrSpec) {
					t.Fatalf("sigma %v: err = %v, want ErrSpec", sigma, err)
				}
			}
		})
	}
}

// TestSpecZeroIsNotDefault: an absent field takes its default, an explicit
// invalid 0 is an error naming the field.
func TestSpecZeroIsNotDefault(t *testing.T) {
	for _, tc := range []struct {
		spec, field string // field: "" when the spec is valid
	}{
		{`{"algorithm":"kogd","dim":2}`, ""},
		{`{"algorithm":"kogd","dim":2,"kernel":{"type":"gaussian"}}`, ""},
		{`{"algorithm":"kogd","dim":2,"kernel":{"type":"gaussian","sigma":0}}`, "kernel.sigma"},
		{`{"algorithm":"kogd","dim":2,"kernel":{"type":"laplacian","sigma":0}}`, "kernel.sigma"},
		{`{"algorithm":"kogd","dim":2,"kernel":{"type":"gaussian","sigma":1e-200}}`, "kernel.sigma"},
		{`{"algorithm":"kogd","dim":2,"kernel":{"type":"polynomial","degree":0}}`, "kernel.degree"},
		{`{"algorithm":"kogd","dim":2,"kernel":{"type":"polynomial","c":0}}`, ""},
		{`{"algorithm":"oks","dim":2,"kernel":{"sigma":0}}`, "kernel.sigma"},
		{`{"algorithm":"oks","dim":2,"params":{"sigmas":[1,0]}}`, "sigmas"},
		{`{"algorithm":"kogd","dim":2,"kernel":{"type":"gaussian","sigmaa":1}}`, "sigmaa"},
	} {
		sp, err := ParseSpec(tc.spec)
		if err == nil {
			err = sp.Validate()
		}
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.spec, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: err = %v, want an error naming %s", tc.spec, err, tc.field)
		}
	}
}

// The consumer's YAML config decodes the same distinction.
func TestSpecZeroIsNotDefaultYAML(t *testing.T) {
	for doc, bad := range map[string]bool{
		"algorithm: kogd\ndim: 2\nkernel:\n  type: gaussian\n  sigma: 0\n": true,
		"algorithm: kogd\ndim: 2\nkernel:\n  type: gaussian\n":             false,
		"algorithm: kogd\ndim: 2\nkernel:\n  sigma: 3\n":                   false,
	} {
		var sp Spec
		if err := yaml.Unmarshal([]byte(doc), &sp); err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		err := sp.Validate()
		if bad != (err != nil) || (bad && !strings.Contains(err.Error(), "kernel.sigma")) {
			t.Errorf("%q: err = %v, want error naming kernel.sigma: %v", doc, err, bad)
		}
	}
}
