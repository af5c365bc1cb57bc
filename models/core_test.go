package models

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestStateRoundTripAndRejections(t *testing.T) {
	r0 := NewRand(42)
	r0.Uint64()
	w := NewStateWriter(nil, "alg", 3)
	w.Int(-7)
	w.Float(math.Pi)
	w.Floats([]float64{1, -2, math.Inf(1), 0})
	w.Ints([]int{5, -1})
	w.Bool(true)
	w.Rand(r0)
	blob := w.Finish()

	r, v, err := NewStateReader(blob, "alg", 3)
	if err != nil || v != 3 {
		t.Fatalf("reader: v=%d err=%v", v, err)
	}
	var got Rand
	i, f, fs, is, b := r.Int(), r.Float(), r.Floats(nil), r.Ints(nil), r.Bool()
	r.Rand(&got)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if i != -7 || f != math.Pi || len(fs) != 4 || fs[1] != -2 || !math.IsInf(fs[2], 1) || len(is) != 2 || is[1] != -1 || !b || got != *r0 {
		t.Fatalf("round trip mismatch: %v %v %v %v %v", i, f, fs, is, b)
	}

	cases := []struct {
		name    string
		blob    []byte
		alg     string
		maxV    uint64
		wantMsg string
	}{
		{"empty", nil, "alg", 3, "not a kernelstream state"},
		{"truncated", blob[:len(blob)-5], "alg", 3, "checksum"},
		{"corrupted", flip(blob, 12), "alg", 3, "checksum"},
		{"foreign algorithm", blob, "other", 3, `holds "alg" state`},
		{"newer version", blob, "alg", 2, "newer"},
		{"garbage", []byte("not a blob at all"), "alg", 3, "not a kernelstream state"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := NewStateReader(c.blob, c.alg, c.maxV)
			if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), c.wantMsg) {
				t.Fatalf("err = %v, want ErrState mentioning %q", err, c.wantMsg)
			}
		})
	}

	// Reading past the payload is a sticky error, never a panic.
	r, _, _ = NewStateReader(blob, "alg", 3)
	for k := 0; k < 20; k++ {
		r.Floats(nil)
	}
	if r.Err() == nil {
		t.Fatal("over-read not reported")
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x40
	return c
}

func FuzzStateReader(f *testing.F) {
	w := NewStateWriter(nil, "alg", 1)
	w.Floats([]float64{1, 2})
	w.Ints([]int{3})
	f.Add(w.Finish())
	f.Add([]byte("KS\x01\x03alg\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, _, err := NewStateReader(b, "alg", 1)
		if err != nil {
			return
		}
		r.Floats(nil)
		r.Ints(nil)
		r.Bool()
		r.Float()
		_ = r.Err()
	})
}

func TestParams(t *testing.T) {
	cases := []struct {
		name    string
		params  map[string]any
		read    func(p *Params)
		wantErr string
	}{
		{"defaults", nil, func(p *Params) { p.Float("eta", 0.5, 0, 1); p.Int("B", 10, 1, 100) }, ""},
		{"int and float forms", map[string]any{"B": 20.0, "eta": 1}, func(p *Params) { p.Int("B", 10, 1, 100); p.Float("eta", 0.5, 0, 2) }, ""},
		{"unknown", map[string]any{"etaa": 1.0}, func(p *Params) { p.Float("eta", 0.5, 0, 1) }, "unknown params etaa"},
		{"out of range", map[string]any{"eta": 5.0}, func(p *Params) { p.Float("eta", 0.5, 0, 1) }, "eta = 5 out of range"},
		{"not integer", map[string]any{"B": 2.5}, func(p *Params) { p.Int("B", 10, 1, 100) }, "want an integer"},
		{"wrong type", map[string]any{"eta": "big"}, func(p *Params) { p.Float("eta", 0.5, 0, 1) }, "want a finite number"},
		{"positive", map[string]any{"mu": 0.0}, func(p *Params) { p.Positive("mu", 1) }, "must be > 0"},
		{"list", map[string]any{"sigmas": []any{0.5, 1.0}}, func(p *Params) { p.Floats("sigmas", nil, 1e-9, 1e9) }, ""},
		{"bad list", map[string]any{"sigmas": []any{0.5, -1.0}}, func(p *Params) { p.Floats("sigmas", nil, 1e-9, 1e9) }, "sigmas[1]"},
		{"enum", map[string]any{"mode": "x"}, func(p *Params) { p.String("mode", "awv", "awv", "ridge") }, "want one of awv, ridge"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := NewParams("alg", c.params)
			c.read(p)
			err := p.Err()
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want %q", err, c.wantErr)
			}
		})
	}
}

func TestSpecErrors(t *testing.T) {
	cases := []struct{ spec, want string }{
		{`{"algorithm":"no-such","dim":2}`, `unknown algorithm "no-such"`},
		{`{"algorithm":"x","dim":2,"extra":1}`, `unknown field "extra"`},
		{`{"algorithm":"x","dim":"two"}`, "dim"},
		{`not json`, "invalid"},
	}
	for _, c := range cases {
		sp, err := ParseSpec(c.spec)
		if err == nil {
			err = sp.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.spec, err, c.want)
		}
	}
	if _, err := ParseSpec("@/nonexistent/spec.json"); err == nil {
		t.Error("missing spec file accepted")
	}
}

func TestKernelSpecs(t *testing.T) {
	x, v := []float64{1, 2}, []float64{0, 0}
	cases := []struct {
		spec KernelSpec
		want float64
		err  bool
	}{
		{KernelSpec{}, math.Exp(-5.0 / 2), false},
		{KernelSpec{Type: "gaussian", Sigma: 2}, math.Exp(-5.0 / 8), false},
		{KernelSpec{Type: "laplacian", Sigma: 2}, math.Exp(-math.Sqrt(5) / 2), false},
		{KernelSpec{Type: "polynomial", Degree: 2, C: 1}, 1, false},
		{KernelSpec{Type: "linear"}, 0, false},
		{KernelSpec{Type: "gaussian", Sigma: -1}, 0, true},
		{KernelSpec{Type: "polynomial", Degree: 40}, 0, true},
		{KernelSpec{Type: "cosine"}, 0, true},
	}
	for _, c := range cases {
		k, err := c.spec.Build()
		if (err != nil) != c.err {
			t.Fatalf("%+v: err %v", c.spec, err)
		}
		if err == nil && math.Abs(k.Eval(x, v)-c.want) > 1e-15 {
			t.Errorf("%+v: k = %v, want %v", c.spec, k.Eval(x, v), c.want)
		}
	}
	// KernelVector's inlined Gaussian path equals Eval.
	g := NewGaussian(0.7)
	dict := []float64{0, 1, 2, 3, -1, 0.5}
	dst := make([]float64, 3)
	KernelVector(g, dst, dict, []float64{0.3, -0.2})
	for i := range dst {
		if want := g.Eval(dict[2*i:2*i+2], []float64{0.3, -0.2}); dst[i] != want {
			t.Errorf("row %d: %v != %v", i, dst[i], want)
		}
	}
}

func TestLossDerivatives(t *testing.T) {
	losses := []Loss{Square{}, Absolute{}, Hinge{}, SquaredHinge{}, Logistic{}}
	for _, l := range losses {
		for _, y := range []float64{-1, 1, 0.3} {
			for _, yh := range []float64{-2.1, -0.4, 0.35, 1.7, 30} {
				h := 1e-6
				num := (l.Value(yh+h, y) - l.Value(yh-h, y)) / (2 * h)
				if d := l.Deriv(yh, y); math.Abs(d-num) > 1e-5 {
					t.Errorf("%s: l'(%v,%v) = %v, numeric %v", l.Name(), yh, y, d, num)
				}
			}
		}
		got, err := LossByName(l.Name())
		if err != nil || got.Name() != l.Name() {
			t.Errorf("LossByName(%q) = %v, %v", l.Name(), got, err)
		}
	}
	if v := (Logistic{}).Value(-800, 1); math.IsInf(v, 0) || math.Abs(v-800) > 1e-9 {
		t.Errorf("logistic overflow: %v", v)
	}
	if _, err := LossByName("huber"); err == nil {
		t.Error("unknown loss accepted")
	}
}
