package models

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
)

// Tests of the paper-000 regression learners: kogd, aogd-ald, kons, nons-ald.

// s0Data draws n instances uniform in [-1,1]^d with a smooth target in about
// [0,1] plus noise (deterministic).
func s0Data(n, d int, seed uint64) (xs [][]float64, ys []float64) {
	r := NewRand(seed)
	for i := 0; i < n; i++ {
		x := make([]float64, d)
		for k := range x {
			x[k] = 2*r.Float64() - 1
		}
		y := 0.5 + 0.3*math.Sin(2*x[0])*math.Cos(x[1%d]) + 0.1*x[d-1] + 0.05*r.Norm()
		xs = append(xs, x)
		ys = append(ys, y)
	}
	return xs, ys
}

// s0Run feeds the data to l (predict, then update) and returns the predictions.
func s0Run(tb testing.TB, l Learner, xs [][]float64, ys []float64) []float64 {
	tb.Helper()
	out := make([]float64, len(xs))
	for i, x := range xs {
		p := l.Predict(x)
		out[i] = p.Value
		if err := l.Update(x, p, ys[i]); err != nil {
			tb.Fatalf("round %d: %v", i, err)
		}
	}
	return out
}

// s0Specs are one representative spec per learner (d = 3).
func s0Specs() []Spec {
	return []Spec{
		gaussianSpec("kogd", 3, 0.8, map[string]any{"U": 2.0}),
		gaussianSpec("kogd", 3, 0.8, map[string]any{"U": 2.0, "eta": 0.2}),
		gaussianSpec("aogd-ald", 3, 0.8, map[string]any{"alpha": 0.01, "U": 2.0}),
		gaussianSpec("aogd-ald", 3, 0.8, map[string]any{"alpha": 0.05, "B0": 5, "max_budget": 40}),
		gaussianSpec("kons", 3, 0.8, map[string]any{"mu": 1.0}),
		gaussianSpec("nons-ald", 3, 0.8, map[string]any{"alpha": 0.01, "mu": 1.0, "U": 0.7}),
	}
}

// AOGD-ALD with alpha = 0 and no cap appends every point (ALD never holds), so
// it must be KOGD with the same adaptive rate (docs/regression.md, the oracle
// test).
func TestSeed000AOGDALDAlphaZeroIsKOGD(t *testing.T) {
	xs, ys := s0Data(300, 4, 1)
	ref := mustNew(t, gaussianSpec("kogd", 4, 0.7, map[string]any{"U": 0.5}), "key")
	aogd := mustNew(t, gaussianSpec("aogd-ald", 4, 0.7, map[string]any{"alpha": 0.0, "U": 0.5, "B0": 100000, "max_budget": 16384}), "key")
	pk := s0Run(t, ref, xs, ys)
	pa := s0Run(t, aogd, xs, ys)
	worst := maxAbsDiff(pk, pa)
	if worst > 1e-9 {
		t.Fatalf("max |aogd-ald(alpha=0) - kogd| = %g over %d rounds", worst, len(pk))
	}
	if aogd.Size() != ref.Size() || ref.Size() != len(xs) {
		t.Fatalf("sizes: aogd-ald %d, kogd %d, rounds %d", aogd.Size(), ref.Size(), len(xs))
	}
	// The test must not be vacuous: the projection onto the U-ball is active.
	if n2 := ref.(*KOGD).n2; n2 != 0.25 {
		t.Fatalf("kogd ||f||^2 = %v: the ball projection was never active", n2)
	}
	t.Logf("max |diff| = %.3g", worst)
}

// NONS-ALD with alpha = 0 adds every point, so its Nystrom space is the span of
// all past instances and it must be exact KONS (docs/regression.md). U is large so
// that neither the clip nor the W_t projection (absent from KONS) is active.
func TestSeed000NONSALDAlphaZeroIsKONS(t *testing.T) {
	xs, ys := s0Data(250, 4, 2)
	kons := mustNew(t, gaussianSpec("kons", 4, 0.7, map[string]any{"mu": 1.0, "eta": 0.125}), "key")
	nons := mustNew(t, gaussianSpec("nons-ald", 4, 0.7, map[string]any{"alpha": 0.0, "mu": 1.0, "eta": 0.125, "U": 1e6, "max_budget": 1000}), "key")
	pk := s0Run(t, kons, xs, ys)
	pn := s0Run(t, nons, xs, ys)
	worst := maxAbsDiff(pk, pn)
	if worst > 1e-9 {
		t.Fatalf("max |nons-ald(alpha=0) - kons| = %g", worst)
	}
	if nons.Size() != len(xs) || kons.Size() != len(xs) {
		t.Fatalf("sizes: nons-ald %d, kons %d", nons.Size(), kons.Size())
	}
	t.Logf("max |diff| = %.3g", worst)
}

// TestSeed000KONSAgainstDirectNewtonStep checks the bordered finite KONS
// against A^{-1} computed directly in the explicit feature space of a linear
// kernel (phi(x) = x), where Algorithm 2 can be run literally.
func TestSeed000KONSAgainstDirectNewtonStep(t *testing.T) {
	const d, mu, eta = 3, 0.5, 0.3
	xs, ys := s0Data(60, d, 3)
	sp := Spec{Algorithm: "kons", Dim: d, Kernel: KernelSpec{Type: "linear"}, Params: map[string]any{"mu": mu, "eta": eta}}
	l := mustNew(t, sp, "key")
	A := [][]float64{{mu, 0, 0}, {0, mu, 0}, {0, 0, mu}}
	w := make([]float64, d)
	for i, x := range xs {
		p := l.Predict(x)
		want := s0Dot3(w, x)
		if math.Abs(p.Value-want) > 1e-9 {
			t.Fatalf("round %d: kons %v, direct ONS %v", i, p.Value, want)
		}
		if err := l.Update(x, p, ys[i]); err != nil {
			t.Fatal(err)
		}
		g := 2 * (want - ys[i])
		for a := 0; a < d; a++ {
			for b := 0; b < d; b++ {
				A[a][b] += eta * g * g * x[a] * x[b]
			}
		}
		step := s0Solve3(A, []float64{g * x[0], g * x[1], g * x[2]})
		for a := range w {
			w[a] -= step[a]
		}
	}
}

func s0Dot3(a, b []float64) float64 { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }

// s0Solve3 solves a 3x3 system by Cramer's rule.
func s0Solve3(A [][]float64, b []float64) []float64 {
	det := func(m [][]float64) float64 {
		return m[0][0]*(m[1][1]*m[2][2]-m[1][2]*m[2][1]) - m[0][1]*(m[1][0]*m[2][2]-m[1][2]*m[2][0]) + m[0][2]*(m[1][0]*m[2][1]-m[1][1]*m[2][0])
	}
	D := det(A)
	out := make([]float64, 3)
	for c := 0; c < 3; c++ {
		m := [][]float64{append([]float64(nil), A[0]...), append([]float64(nil), A[1]...), append([]float64(nil), A[2]...)}
		for r := 0; r < 3; r++ {
			m[r][c] = b[r]
		}
		out[c] = det(m) / D
	}
	return out
}

// AOGD-ALD's two phases: while |S| < B0 only ALD failures are appended; from
// B0 on (exact KOGD, Alg. 1 lines 13-15) every round appends, until max_budget.
func TestSeed000AOGDALDPhasesAndCap(t *testing.T) {
	xs, ys := s0Data(400, 3, 4)
	l := mustNew(t, gaussianSpec("aogd-ald", 3, 0.6, map[string]any{"alpha": 0.3, "B0": 6, "max_budget": 50}), "key").(*AOGDALD)
	reached := -1
	for i, x := range xs {
		before := l.Size()
		p := l.Predict(x)
		if err := l.Update(x, p, ys[i]); err != nil {
			t.Fatal(err)
		}
		switch {
		case before >= 6 && before < 50 && l.Size() != before+1:
			t.Fatalf("round %d: KOGD phase at |S|=%d did not append", i, before)
		case before == 50 && l.Size() != 50:
			t.Fatalf("round %d: grew past max_budget", i)
		}
		if before == 50 && reached < 0 {
			reached = i
		}
	}
	if reached < 0 {
		t.Fatal("cap never reached")
	}
	// At the cap the learner keeps learning (ALD-projected steps).
	b1 := mustMarshal(t, l)
	p := l.Predict(xs[0])
	if err := l.Update(xs[0], p, ys[0]+0.5); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(b1, mustMarshal(t, l)) {
		t.Fatal("update at the cap changed nothing")
	}
	// ||f|| <= U holds and the tracked norm matches a' K a.
	if got, want := l.n2, l.exactNorm2(); math.Abs(got-want) > 1e-9 || got > 4+1e-12 {
		t.Fatalf("tracked ||f||^2 = %v, exact %v (U^2 = 4)", got, want)
	}
}

// KOGD and KONS freeze at their cap; NONS-ALD keeps learning with a fixed basis.
func TestSeed000CapBehaviour(t *testing.T) {
	xs, ys := s0Data(60, 3, 5)
	for _, c := range []struct {
		sp     Spec
		learns bool
	}{
		{gaussianSpec("kogd", 3, 0.8, map[string]any{"max_budget": 10}), false},
		{gaussianSpec("kons", 3, 0.8, map[string]any{"max_budget": 10}), false},
		{gaussianSpec("nons-ald", 3, 0.8, map[string]any{"alpha": 1e-6, "max_budget": 10}), true},
	} {
		t.Run(c.sp.Algorithm, func(t *testing.T) {
			l := mustNew(t, c.sp, "key")
			s0Run(t, l, xs[:40], ys[:40])
			if l.Size() != 10 {
				t.Fatalf("size %d, want the cap 10", l.Size())
			}
			before := l.Predict(xs[50]).Value
			s0Run(t, l, xs[40:], ys[40:])
			after := l.Predict(xs[50]).Value
			if l.Size() != 10 || (before != after) == !c.learns {
				t.Fatalf("size %d, prediction %v -> %v, learns=%v", l.Size(), before, after, c.learns)
			}
		})
	}
}

// Round trip: a restored learner marshals to the same bytes and then predicts
// bit-identically; Predict changes no state byte.
func TestSeed000StateRoundTrip(t *testing.T) {
	xs, ys := s0Data(220, 3, 6)
	for _, sp := range s0Specs() {
		t.Run(sp.Algorithm, func(t *testing.T) {
			a := mustNew(t, sp, "key")
			s0Run(t, a, xs[:150], ys[:150])
			blob := mustMarshal(t, a)
			b := mustNew(t, sp, "key")
			if err := b.UnmarshalBinary(blob); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(blob, mustMarshal(t, b)) {
				t.Fatal("re-marshalled state differs")
			}
			a.Predict(xs[200])
			if !bytes.Equal(blob, mustMarshal(t, a)) {
				t.Fatal("Predict changed the state")
			}
			pa := s0Run(t, a, xs[150:], ys[150:])
			pb := s0Run(t, b, xs[150:], ys[150:])
			for i := range pa {
				if math.Float64bits(pa[i]) != math.Float64bits(pb[i]) {
					t.Fatalf("round %d after restore: %v != %v", i, pa[i], pb[i])
				}
			}
			if !bytes.Equal(mustMarshal(t, a), mustMarshal(t, b)) {
				t.Fatal("states diverged after restore")
			}
		})
	}
}

// Truncated, corrupted, foreign and shape-mismatched blobs are errors, and a
// failed restore leaves the learner as it was.
func TestSeed000BadBlobs(t *testing.T) {
	xs, ys := s0Data(80, 3, 7)
	specs := s0Specs()
	blobs := map[string][]byte{}
	for _, sp := range specs {
		l := mustNew(t, sp, "key")
		s0Run(t, l, xs, ys)
		blobs[sp.Algorithm] = mustMarshal(t, l)
	}
	for _, sp := range specs {
		t.Run(sp.Algorithm, func(t *testing.T) {
			own := blobs[sp.Algorithm]
			l := mustNew(t, sp, "key")
			s0Run(t, l, xs[:20], ys[:20])
			before := mustMarshal(t, l)
			bad := [][]byte{nil, own[:len(own)/2], own[:len(own)-1], append(append([]byte(nil), own...), 0)}
			flipped := append([]byte(nil), own...)
			flipped[len(flipped)/2] ^= 0x10
			bad = append(bad, flipped)
			for alg, b := range blobs {
				if alg != sp.Algorithm {
					bad = append(bad, b)
				}
			}
			// A blob of the same algorithm for another dimension.
			other := sp
			other.Dim = 2
			lo := mustNew(t, other, "key")
			s0Run(t, lo, [][]float64{{0.1, 0.2}, {0.5, -0.3}}, []float64{0.3, 0.9})
			bad = append(bad, mustMarshal(t, lo))
			for i, b := range bad {
				rejectBlob(t, l, before, fmt.Sprintf("bad blob %d", i), b)
			}
		})
	}
}

// Numerical guard: a label or instance that would put NaN/Inf into the state
// is rejected with ErrNumerical and the state bytes stay the same.
func TestSeed000NumericalGuard(t *testing.T) {
	xs, ys := s0Data(60, 3, 8)
	for _, sp := range s0Specs() {
		t.Run(sp.Algorithm, func(t *testing.T) {
			l := mustNew(t, sp, "key")
			s0Run(t, l, xs[:50], ys[:50])
			before := mustMarshal(t, l)
			cases := []struct {
				x []float64
				y float64
			}{
				{xs[55], math.NaN()},
				{xs[55], math.Inf(1)},
				{xs[55], 1e300},
				{xs[55], -1e300},
				{[]float64{0.1, math.NaN(), 0.2}, 0.5},
				{[]float64{0.1, math.Inf(-1), 0.2}, 0.5},
			}
			for i, c := range cases {
				err := l.Update(c.x, l.Predict(c.x), c.y)
				if !errors.Is(err, ErrNumerical) {
					t.Fatalf("case %d: err = %v, want ErrNumerical", i, err)
				}
				if !bytes.Equal(before, mustMarshal(t, l)) {
					t.Fatalf("case %d: state changed", i)
				}
			}
			// and the learner still works
			s0Run(t, l, xs[50:], ys[50:])
		})
	}
}

func TestSeed000Params(t *testing.T) {
	bad := []Spec{
		gaussianSpec("kogd", 3, 1, map[string]any{"mu": 1.0}),
		gaussianSpec("kogd", 3, 1, map[string]any{"eta": -1.0}),
		gaussianSpec("kogd", 3, 1, map[string]any{"max_budget": 0}),
		gaussianSpec("aogd-ald", 3, 1, map[string]any{"alpha": 1.5}),
		gaussianSpec("aogd-ald", 3, 1, map[string]any{"U": 0.0}),
		gaussianSpec("aogd-ald", 3, 1, map[string]any{"B0": -1}),
		gaussianSpec("aogd-ald", 3, 1, map[string]any{"T": 0}),
		gaussianSpec("aogd-ald", 3, 1, map[string]any{"mu": 1.0}),
		gaussianSpec("aogd-ald", 3, 1, map[string]any{"max_budget": 100000}),
		gaussianSpec("kons", 3, 1, map[string]any{"mu": 0.0}),
		gaussianSpec("kons", 3, 1, map[string]any{"max_budget": 1e6}),
		gaussianSpec("kons", 3, 1, map[string]any{"alpha": 0.1}),
		gaussianSpec("nons-ald", 3, 1, map[string]any{"alpha": -0.1}),
		gaussianSpec("nons-ald", 3, 1, map[string]any{"eta": "fast"}),
		gaussianSpec("nons-ald", 3, 1, map[string]any{"max_budget": 2.5}),
		gaussianSpec("nons-ald", 3, 1, map[string]any{"B0": 10}),
		gaussianSpec("nons-ald", 3, 1, map[string]any{"sigma": 1.0}),
		{Algorithm: "nons-ald", Dim: 3, Loss: "logistic"},
	}
	for i, sp := range bad {
		if _, err := New(sp, "k"); !errors.Is(err, ErrSpec) {
			t.Errorf("case %d (%s %v): err = %v, want ErrSpec", i, sp.Algorithm, sp.Params, err)
		}
	}
	good := []Spec{
		gaussianSpec("kogd", 3, 1, map[string]any{"eta": 0.1, "U": 1.0, "max_budget": 5}),
		gaussianSpec("aogd-ald", 3, 1, map[string]any{"alpha": 0.0, "U": 2.0, "B0": 0, "max_budget": 16, "T": 100}),
		gaussianSpec("kons", 3, 1, map[string]any{"mu": 5.0, "eta": 0.1, "U": 1.0, "max_budget": 10}),
		gaussianSpec("nons-ald", 3, 1, map[string]any{"alpha": 0.01, "mu": 15.0, "eta": 0.125, "U": 1.0, "max_budget": 16, "T": 100}),
	}
	for _, sp := range good {
		if _, err := New(sp, "k"); err != nil {
			t.Errorf("%s %v: %v", sp.Algorithm, sp.Params, err)
		}
	}
	// Defaults that come from the horizon T.
	// Theorem 3.2 gives B0 = 537 for d = 18, T = 16599; it is clamped to
	// max_budget (default 256), and 537 comes back when the cap allows it.
	l := mustNew(t, gaussianSpec("aogd-ald", 18, 8, map[string]any{"T": 16599}), "key").(*AOGDALD)
	if math.Abs(l.alpha-25.0/16599) > 1e-15 || l.b0 != 256 || l.u != 2 || l.maxBudget != 256 {
		t.Fatalf("aogd-ald defaults: alpha %v B0 %d U %v max_budget %d", l.alpha, l.b0, l.u, l.maxBudget)
	}
	l = mustNew(t, gaussianSpec("aogd-ald", 18, 8, map[string]any{"T": 16599, "max_budget": 1024}), "key").(*AOGDALD)
	if l.b0 != 537 {
		t.Fatalf("aogd-ald B0 %d with max_budget 1024, want 537 (Theorem 3.2)", l.b0)
	}
	n := mustNew(t, gaussianSpec("nons-ald", 18, 8, nil), "key").(*NONSALD)
	if n.alpha != 25.0/10000 || n.u != 1 || n.mu != 1 || n.eta != 1.0/8 {
		t.Fatalf("nons-ald defaults: alpha %v U %v mu %v eta %v", n.alpha, n.u, n.mu, n.eta)
	}
}

// Update reuses what Predict computed for the same x (predictCache). The
// result must be bit-identical to an Update without a Predict before it, or
// after a Predict of another instance, or after x was overwritten in place.
func TestSeed000PredictCacheIsTransparent(t *testing.T) {
	xs, ys := s0Data(200, 3, 9)
	for _, sp := range s0Specs() {
		if sp.Algorithm != "aogd-ald" && sp.Algorithm != "nons-ald" {
			continue
		}
		t.Run(sp.Algorithm, func(t *testing.T) {
			a, b, c, d := mustNew(t, sp, "key"), mustNew(t, sp, "key"), mustNew(t, sp, "key"), mustNew(t, sp, "key")
			buf := make([]float64, 3)
			for i, x := range xs {
				if err := a.Update(x, a.Predict(x), ys[i]); err != nil {
					t.Fatal(err)
				}
				if err := b.Update(x, Prediction{}, ys[i]); err != nil {
					t.Fatal(err)
				}
				c.Predict(xs[(i+1)%len(xs)])
				if err := c.Update(x, Prediction{}, ys[i]); err != nil {
					t.Fatal(err)
				}
				copy(buf, xs[(i+7)%len(xs)])
				d.Predict(buf)
				copy(buf, x)
				if err := d.Update(buf, Prediction{}, ys[i]); err != nil {
					t.Fatal(err)
				}
			}
			want := mustMarshal(t, a)
			for k, l := range []Learner{b, c, d} {
				if !bytes.Equal(want, mustMarshal(t, l)) {
					t.Fatalf("variant %d: state differs from predict-then-update", k)
				}
			}
		})
	}
}

// Blobs with a valid frame and checksum but an inconsistent payload (as a
// buggy writer or a hand-made blob could produce) are ErrState, never a panic.
func TestSeed000InconsistentPayloads(t *testing.T) {
	ones := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	type writeFn func(w *StateWriter)
	cases := map[string][]writeFn{
		"kogd": {
			func(w *StateWriter) {
				w.Int(1)
				w.Int(0)
				w.Float(2)
				w.Float(0)
				w.Floats(ones(4))
				w.Floats(ones(1))
			}, // dict not 1 x 3
			func(w *StateWriter) {
				w.Int(-1)
				w.Int(0)
				w.Float(2)
				w.Float(0)
				w.Floats(nil)
				w.Floats(nil)
			},
			func(w *StateWriter) {
				w.Int(1)
				w.Int(0)
				w.Float(0.5)
				w.Float(0)
				w.Floats(nil)
				w.Floats(nil)
			}, // G2 < 1
			func(w *StateWriter) { w.Int(1); w.Int(0); w.Float(2); w.Float(0); w.Floats(ones(3)) }, // truncated payload
		},
		"aogd-ald": {
			func(w *StateWriter) {
				w.Int(1)
				w.Float(2)
				w.Float(0)
				w.Int(1 << 40)
				w.Floats(ones(3))
				w.Floats(ones(1))
				w.Floats(ones(1))
			},
			func(w *StateWriter) {
				w.Int(1)
				w.Float(2)
				w.Float(0)
				w.Int(-3)
				w.Floats(nil)
				w.Floats(nil)
				w.Floats(nil)
			},
			func(w *StateWriter) {
				w.Int(1)
				w.Float(2)
				w.Float(0)
				w.Int(2)
				w.Floats(ones(6))
				w.Floats(ones(2))
				w.Floats(ones(2))
			}, // L not 2x2 packed
			func(w *StateWriter) {
				w.Int(1)
				w.Float(2)
				w.Float(0)
				w.Int(1)
				w.Floats(ones(3))
				w.Floats([]float64{-1})
				w.Floats(ones(1))
			}, // non-positive pivot
		},
		"kons": {
			func(w *StateWriter) {
				w.Int(1)
				w.Int(0)
				w.Floats(ones(3))
				w.Floats(ones(1))
				w.Floats(ones(1))
				w.Floats(ones(3))
			},
			func(w *StateWriter) {
				w.Int(1)
				w.Int(0)
				w.Floats(ones(3))
				w.Floats(ones(1))
				w.Floats(nil)
				w.Floats(ones(1))
			},
		},
		"nons-ald": {
			func(w *StateWriter) {
				w.Int(1)
				w.Bool(true)
				w.Int(1 << 40)
				w.Floats(ones(3))
				w.Floats(ones(1))
				w.Floats(ones(1))
				w.Floats(ones(1))
			},
			func(w *StateWriter) {
				w.Int(1)
				w.Bool(true)
				w.Int(1)
				w.Floats(ones(3))
				w.Floats(ones(1))
				w.Floats(ones(1))
				w.Floats([]float64{0})
			}, // A factor not PD
			func(w *StateWriter) {
				w.Int(1)
				w.Bool(true)
				w.Int(1)
				w.Floats(ones(3))
				w.Floats(ones(1))
				w.Floats(ones(2))
				w.Floats(ones(1))
			},
		},
	}
	for alg, fns := range cases {
		sp := gaussianSpec(alg, 3, 1, nil)
		for i, fn := range fns {
			l := mustNew(t, sp, "key")
			before := mustMarshal(t, l)
			w := NewStateWriter(nil, alg, 1)
			fn(&w)
			if err := l.UnmarshalBinary(w.Finish()); !errors.Is(err, ErrState) {
				t.Errorf("%s case %d: err = %v, want ErrState", alg, i, err)
			}
			if !bytes.Equal(before, mustMarshal(t, l)) {
				t.Errorf("%s case %d: learner changed", alg, i)
			}
		}
	}
	// The valid counterpart of the kogd payloads decodes (so the cases above
	// fail for the reason they name).
	l := mustNew(t, gaussianSpec("kogd", 3, 1, nil), "key")
	w := NewStateWriter(nil, "kogd", 1)
	w.Int(1)
	w.Int(0)
	w.Float(2)
	w.Float(0.25)
	w.Floats(ones(3))
	w.Floats([]float64{0.5})
	if err := l.UnmarshalBinary(w.Finish()); err != nil || l.Size() != 1 || l.Predict([]float64{1, 1, 1}).Value != 0.5 {
		t.Fatalf("valid hand-made kogd blob: err %v size %d", err, l.Size())
	}
}
