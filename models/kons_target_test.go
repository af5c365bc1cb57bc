package models

import (
	"bytes"
	"math"
	"testing"
)

// konsBigStream is y = 1e6 + 1e5 sin(3 x_0) on x uniform in [-1, 1]^3:
// unscaled targets around 1e6, on which KONS must not blow up (KONS, eta_t).
func konsBigStream(n int) (xs [][]float64, ys []float64) {
	r := NewRand(11)
	for i := 0; i < n; i++ {
		x := []float64{2*r.Float64() - 1, 2*r.Float64() - 1, 2*r.Float64() - 1}
		xs = append(xs, x)
		ys = append(ys, 1e6+1e5*math.Sin(3*x[0]))
	}
	return xs, ys
}

// TestKONSLargeTargets: on unscaled targets near 1e6 the running target bound
// Y_t keeps eta_t g^2 bounded (kons.go), so no update is refused, every
// prediction is finite and the second half's MSE is below the target variance
// (a fixed eta = 1/8 made |y_hat| reach 1e133 and refused 1,871 of 2,000
// updates). With online scaling (the default) the same stream is learnt in
// standard deviations.
func TestKONSLargeTargets(t *testing.T) {
	t.Parallel()
	xs, ys := konsBigStream(600)
	variance := 0.0
	for _, y := range ys {
		variance += (y - 1e6) * (y - 1e6)
	}
	variance /= float64(len(ys))
	for _, c := range []struct {
		name string
		spec Spec
	}{
		{"unscaled", gaussianSpec("kons", 3, 1, nil)},
		{"online scaling", Spec{Algorithm: "kons", Dim: 3, Scale: ScaleSpec{X: "standard", Y: "standard"}}},
	} {
		l := mustNew(t, c.spec, "k")
		se, n := 0.0, 0
		for i, x := range xs {
			p := l.Predict(x)
			if p.Err != nil || math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
				t.Fatalf("%s: record %d: prediction %v (err %v)", c.name, i, p.Value, p.Err)
			}
			if i >= len(xs)/2 {
				se += (p.Value - ys[i]) * (p.Value - ys[i])
				n++
			}
			if err := l.Update(x, p, ys[i]); err != nil {
				t.Fatalf("%s: record %d: update refused: %v", c.name, i, err)
			}
		}
		if mse := se / float64(n); !(mse < 0.5*variance) {
			t.Errorf("%s: second-half MSE %.4g, want < half the target variance %.4g", c.name, mse, variance)
		}
	}
}

// TestKONSStateVersion1 restores a version-1 blob (no Y_t): it continues with
// Y_t = 1, the bound its rounds were taken with, and writes version 2.
func TestKONSStateVersion1(t *testing.T) {
	t.Parallel()
	xs, ys := s0Data(30, 3, 5)
	spec := gaussianSpec("kons", 3, 0.8, nil)
	ref := mustNew(t, spec, "k").(*KONS)
	s0Run(t, ref, xs[:20], ys[:20])
	if ref.ymax != 1 {
		t.Fatalf("targets in [0, 1] moved Y_t to %v", ref.ymax)
	}
	w := NewStateWriter(nil, "kons", 1)
	w.Int(ref.t)
	w.Int(ref.dropped)
	w.Floats(ref.dict)
	w.Floats(ref.c)
	w.Floats(ref.dg)
	w.Floats(ref.minv.Data)
	v1 := w.Finish()
	got := mustNew(t, spec, "k")
	if err := got.UnmarshalBinary(v1); err != nil {
		t.Fatalf("version-1 blob: %v", err)
	}
	if !bytes.Equal(mustMarshal(t, got), mustMarshal(t, ref)) {
		t.Fatal("a version-1 blob does not restore to the learner that wrote it")
	}
	for i := 20; i < 30; i++ {
		if a, b := got.Predict(xs[i]), ref.Predict(xs[i]); a.Value != b.Value {
			t.Fatalf("record %d: %v after restore, %v before", i, a.Value, b.Value)
		}
		s0Run(t, got, xs[i:i+1], ys[i:i+1])
		s0Run(t, ref, xs[i:i+1], ys[i:i+1])
	}
}
