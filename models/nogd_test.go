package models

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
)

func nogdSpec(params map[string]any) Spec {
	return Spec{Algorithm: "nogd", Dim: 4, Kernel: KernelSpec{Sigma: 1}, Params: params, Seed: 5}
}

func TestNOGDRoundTripExact(t *testing.T) {
	xs, ys := forksStream(300, 4, 31)
	for _, loss := range []string{"hinge", "logistic", "squared-hinge", "square"} {
		spec := nogdSpec(map[string]any{"B": 30, "k": 6})
		spec.Loss = loss
		forksCheckRoundTrip(t, spec, xs, ys, []int{0, 20, 50, 299})
	}
}

// With k = B the Nystrom map is exact on the span of the support vectors, so
// the transferred w reproduces the KOGD model: w^T phi(x) = alpha^T k_SV(x).
func TestNOGDTransferReproducesKOGD(t *testing.T) {
	xs, ys := forksStream(500, 4, 32)
	spec := Spec{Algorithm: "nogd", Dim: 4, Kernel: KernelSpec{Sigma: 0.5}, Params: map[string]any{"B": 20, "k": 20}}
	l := mustNew(t, spec, "key-1").(*NOGD)
	i := 0
	for ; l.st1.n < l.budget-1; i++ {
		_ = l.Update(xs[i], l.Predict(xs[i]), ys[i])
	}
	// Next admitted record builds the map; remember the KOGD model first.
	var kogd budgetKOGD
	kogd.init(l.budget, 4)
	for ; !l.sketched; i++ {
		kogd = budgetKOGD{dim: 4, n: l.st1.n, sv: append([]float64(nil), l.st1.sv...), alpha: append([]float64(nil), l.st1.alpha...), kv: make([]float64, l.budget)}
		_ = l.Update(xs[i], l.Predict(xs[i]), ys[i])
	}
	kogd.add(l.st1.sv[(l.budget-1)*4:], l.st1.alpha[l.budget-1])
	worst := 0.0
	for _, x := range xs[400:] {
		worst = math.Max(worst, math.Abs(l.Predict(x).Value-kogd.score(l.kernel, x)))
	}
	if worst > 1e-6 {
		t.Fatalf("transferred model differs from KOGD by %v", worst)
	}
}

func TestNOGDErrors(t *testing.T) {
	for _, p := range []map[string]any{{"B": 0}, {"B": 10, "k": 11}, {"eta": 0}, {"D": 3}} {
		if _, err := New(nogdSpec(p), ""); !errors.Is(err, ErrSpec) {
			t.Errorf("%v: want ErrSpec, got %v", p, err)
		}
	}
	d := mustNew(t, nogdSpec(nil), "key-1").(*NOGD)
	if d.budget != 100 || d.k != 10 || d.eta != 0.2 {
		t.Fatalf("defaults B=%d k=%d eta=%v", d.budget, d.k, d.eta)
	}
	xs, ys := forksStream(200, 4, 33)
	l := mustNew(t, nogdSpec(map[string]any{"B": 20}), "key-1")
	for i := range xs {
		_ = l.Update(xs[i], l.Predict(xs[i]), ys[i])
	}
	blob := mustMarshal(t, l)
	for n := 0; n < len(blob); n += 7 {
		rejectBlob(t, l, blob, fmt.Sprintf("truncated at %d", n), blob[:n])
	}
	rejectBlob(t, l, blob, "foreign blob", mustMarshal(t, mustNew(t, fogdSpec(nil), "key-1")))
	sq := nogdSpec(map[string]any{"B": 20})
	sq.Loss = "square"
	g := mustNew(t, sq, "key-1")
	for i := range xs {
		_ = g.Update(xs[i], g.Predict(xs[i]), ys[i])
	}
	if !g.(*NOGD).sketched {
		t.Fatal("map not built")
	}
	before := mustMarshal(t, g)
	if err := g.Update(xs[0], g.Predict(xs[0]), -1e308); !errors.Is(err, ErrNumerical) {
		t.Fatalf("want ErrNumerical, got %v", err)
	}
	if !bytes.Equal(before, mustMarshal(t, g)) {
		t.Fatal("rejected update changed the state")
	}
}
