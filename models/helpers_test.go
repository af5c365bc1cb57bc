package models

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
)

// Test helpers shared by the learners' tests.

// gaussianSpec builds a spec for alg on a Gaussian kernel of width sigma.
func gaussianSpec(alg string, dim int, sigma float64, params map[string]any) Spec {
	return Spec{Algorithm: alg, Dim: dim, Kernel: KernelSpec{Type: "gaussian", Sigma: sigma}, Params: params, Seed: 7}
}

// paperScale is the papers' setting, no online scaling: the learners' own
// tests check their formulas on inputs they scale themselves.
var paperScale = ScaleSpec{X: "none", Y: "none"}

// mustNew builds the learner of key from spec, or fails the test. A spec
// without "scale" gets paperScale, so the result is the algorithm's own type.
func mustNew(tb testing.TB, spec Spec, key string) Learner {
	tb.Helper()
	if spec.Scale == (ScaleSpec{}) {
		spec.Scale = paperScale
	}
	l, err := New(spec, key)
	if err != nil {
		tb.Fatalf("New(%s): %v", spec.Algorithm, err)
	}
	return l
}

// mustMarshal returns the state of l, or fails the test.
func mustMarshal(tb testing.TB, l Learner) []byte {
	tb.Helper()
	b, err := l.MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// rejectBlob checks that restoring l from blob fails with ErrState and
// leaves l's state bytes equal to before; what names the blob.
func rejectBlob(tb testing.TB, l Learner, before []byte, what string, blob []byte) {
	tb.Helper()
	if err := l.UnmarshalBinary(blob); !errors.Is(err, ErrState) {
		tb.Fatalf("%s: err = %v, want ErrState", what, err)
	}
	if !bytes.Equal(mustMarshal(tb, l), before) {
		tb.Fatalf("%s: a failed restore changed the learner", what)
	}
}

// runStream feeds the stream to l (predict, then update) and returns the
// predictions; an update error fails the test.
func runStream(tb testing.TB, l Learner, xs [][]float64, ys []float64) []Prediction {
	tb.Helper()
	out := make([]Prediction, len(xs))
	for i, x := range xs {
		p := l.Predict(x)
		out[i] = p
		if err := l.Update(x, p, ys[i]); err != nil {
			tb.Fatalf("round %d: %v", i, err)
		}
	}
	return out
}

// maxAbsDiff returns max_i |a_i - b_i| over the common length.
func maxAbsDiff(a, b []float64) float64 {
	worst := 0.0
	for i := range min(len(a), len(b)) {
		worst = math.Max(worst, math.Abs(a[i]-b[i]))
	}
	return worst
}

// oksOf returns the kernel-selection learner inside l, one of the five
// kernel selectors (OKS, OKSPlus, IOKS, RFOKSPlus, RFIOKS).
func oksOf(l Learner) *oksLearner {
	switch v := l.(type) {
	case *OKS:
		return &v.oksLearner
	case *OKSPlus:
		return &v.oksLearner
	case *IOKS:
		return &v.oksLearner
	case *RFOKSPlus:
		return &v.oksLearner
	case *RFIOKS:
		return &v.oksLearner
	}
	panic(fmt.Sprintf("%T is not a kernel selector", l))
}
