package models

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
)

func fogdSpec(params map[string]any) Spec {
	return Spec{Algorithm: "fogd", Dim: 4, Kernel: KernelSpec{Sigma: 1}, Params: params, Seed: 9}
}

func TestFOGDRoundTripExact(t *testing.T) {
	xs, ys := forksStream(300, 4, 21)
	for _, loss := range []string{"hinge", "logistic", "squared-hinge", "square"} {
		spec := fogdSpec(map[string]any{"D": 50})
		spec.Loss = loss
		forksCheckRoundTrip(t, spec, xs, ys, []int{0, 100, 299})
	}
}

// z(x)^T z(x') is a Monte-Carlo estimate of the Gaussian kernel with error
// O(1/sqrt(D)).
func TestFOGDFeaturesApproximateKernel(t *testing.T) {
	const D = 4000
	l := mustNew(t, Spec{Algorithm: "fogd", Dim: 4, Kernel: KernelSpec{Sigma: 1.5}, Params: map[string]any{"D": D}}, "key-1").(*FOGD)
	xs, _ := forksStream(100, 4, 22)
	za, zb := make([]float64, 2*D), make([]float64, 2*D)
	g := NewGaussian(1.5)
	worst := 0.0
	for i := 0; i+1 < len(xs); i += 2 {
		l.features(za, xs[i])
		l.features(zb, xs[i+1])
		e := 0.0
		for j := range za {
			e += za[j] * zb[j]
		}
		worst = math.Max(worst, math.Abs(e-g.Eval(xs[i], xs[i+1])))
	}
	if worst > 4/math.Sqrt(D) {
		t.Fatalf("worst kernel error %v > 4/sqrt(D)", worst)
	}
}

func TestFOGDErrors(t *testing.T) {
	for _, spec := range []Spec{
		{Algorithm: "fogd", Dim: 4, Kernel: KernelSpec{Type: "laplacian"}},
		fogdSpec(map[string]any{"D": 0}),
		fogdSpec(map[string]any{"eta": -1}),
		fogdSpec(map[string]any{"B": 10}),
	} {
		if _, err := New(spec, ""); !errors.Is(err, ErrSpec) {
			t.Errorf("%+v: want ErrSpec, got %v", spec, err)
		}
	}
	l := mustNew(t, fogdSpec(map[string]any{"D": 20}), "key-1")
	xs, ys := forksStream(50, 4, 23)
	for i := range xs {
		_ = l.Update(xs[i], l.Predict(xs[i]), ys[i])
	}
	blob := mustMarshal(t, l)
	for n := 0; n < len(blob); n += 5 {
		rejectBlob(t, l, blob, fmt.Sprintf("truncated at %d", n), blob[:n])
	}
	other := mustNew(t, fogdSpec(map[string]any{"D": 21}), "key-1")
	if err := other.UnmarshalBinary(blob); !errors.Is(err, ErrState) {
		t.Fatalf("restore into another D: %v", err)
	}
	// Numerical guard.
	sq := fogdSpec(map[string]any{"D": 20})
	sq.Loss = "square"
	g := mustNew(t, sq, "key-1")
	before := mustMarshal(t, g)
	if err := g.Update(xs[0], g.Predict(xs[0]), -1e308); !errors.Is(err, ErrNumerical) {
		t.Fatalf("want ErrNumerical, got %v", err)
	}
	if !bytes.Equal(before, mustMarshal(t, g)) {
		t.Fatal("rejected update changed the state")
	}
}
