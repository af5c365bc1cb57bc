package models

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// forksStream is a synthetic binary stream in [-1,1]^d whose label is a
// smooth non-linear function of x (so a Gaussian-kernel learner can learn it).
func forksStream(n, d int, seed uint64) ([][]float64, []float64) {
	r := NewRand(seed)
	xs := make([][]float64, n)
	ys := make([]float64, n)
	for i := range xs {
		x := make([]float64, d)
		s := 0.0
		for j := range x {
			x[j] = 2*r.Float64() - 1
			s += math.Sin(2 * x[j] * float64(j+1))
		}
		xs[i] = x
		ys[i] = 1
		if s < 0 {
			ys[i] = -1
		}
	}
	return xs, ys
}

// forksCheckRoundTrip runs the stream through a learner, and at each
// checkpoint restores a fresh learner from its blob; the restored learner must
// predict bit-identically on the rest of the stream and end with the same
// bytes. Predict must not change the state.
func forksCheckRoundTrip(t *testing.T, spec Spec, xs [][]float64, ys []float64, checkpoints []int) {
	t.Helper()
	l := mustNew(t, spec, "key-1")
	next := 0
	for i := range xs {
		if next < len(checkpoints) && i == checkpoints[next] {
			next++
			blob := mustMarshal(t, l)
			c := mustNew(t, spec, "key-1")
			if err := c.UnmarshalBinary(blob); err != nil {
				t.Fatalf("record %d: restore: %v", i, err)
			}
			if got := mustMarshal(t, c); !bytes.Equal(got, blob) {
				t.Fatalf("record %d: re-marshalled blob differs", i)
			}
			for j := i; j < len(xs); j++ {
				p, q := l.Predict(xs[j]), c.Predict(xs[j])
				if math.Float64bits(p.Value) != math.Float64bits(q.Value) {
					t.Fatalf("checkpoint %d, record %d: prediction %v vs restored %v", i, j, p.Value, q.Value)
				}
				if err := l.Update(xs[j], p, ys[j]); err != nil {
					t.Fatal(err)
				}
				if err := c.Update(xs[j], q, ys[j]); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(mustMarshal(t, l), mustMarshal(t, c)) {
				t.Fatalf("checkpoint %d: final states differ", i)
			}
			// Rewind: replay from a fresh learner up to the next checkpoint.
			l = mustNew(t, spec, "key-1")
			for j := 0; j <= i; j++ {
				before := mustMarshal(t, l)
				p := l.Predict(xs[j])
				if !bytes.Equal(before, mustMarshal(t, l)) {
					t.Fatalf("record %d: Predict changed the state", j)
				}
				if err := l.Update(xs[j], p, ys[j]); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		p := l.Predict(xs[i])
		if err := l.Update(xs[i], p, ys[i]); err != nil {
			t.Fatal(err)
		}
	}
}

func forksSpec(loss string, params map[string]any) Spec {
	return Spec{Algorithm: "forks", Dim: 4, Loss: loss, Kernel: KernelSpec{Sigma: 1}, Params: params, Seed: 3}
}

func TestFORKSRoundTripExact(t *testing.T) {
	xs, ys := forksStream(400, 4, 1)
	for _, tc := range []struct {
		name, loss string
		params     map[string]any
	}{
		{"hinge-eager", "hinge", map[string]any{"B": 30, "rho": 7}},
		{"hinge-lazy", "hinge", map[string]any{"B": 30, "rho": 7, "projection": "lazy"}},
		{"logistic", "logistic", map[string]any{"B": 30, "sp": 20, "sm": 8, "k": 5, "rho": 5}},
		{"squared-hinge", "squared-hinge", map[string]any{"B": 30, "rho": 11}},
		{"square", "square", map[string]any{"B": 25, "rho": 9, "C": 2}},
		{"window-wraps", "hinge", map[string]any{"B": 30, "rho": 3, "window": 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// checkpoints in stage 1, right around the sketch build, and after update rounds
			forksCheckRoundTrip(t, forksSpec(tc.loss, tc.params), xs, ys, []int{0, 10, 40, 60, 150, 399})
			l := mustNew(t, forksSpec(tc.loss, tc.params), "key-1").(*FORKS)
			for i := range xs[:60] {
				_ = l.Update(xs[i], l.Predict(xs[i]), ys[i])
			}
			if !l.sketched {
				t.Fatal("the sketch is not built by record 60: the checkpoints miss stage 2")
			}
		})
	}
}

func TestFORKSDeterministicPerKey(t *testing.T) {
	xs, ys := forksStream(300, 4, 2)
	spec := forksSpec("", map[string]any{"B": 30, "rho": 10})
	run := func(key string) []byte {
		l, err := New(spec, key)
		if err != nil {
			t.Fatal(err)
		}
		for i := range xs {
			if err := l.Update(xs[i], l.Predict(xs[i]), ys[i]); err != nil {
				t.Fatal(err)
			}
		}
		return mustMarshal(t, l)
	}
	if !bytes.Equal(run("a"), run("a")) {
		t.Fatal("same key, different state")
	}
	if bytes.Equal(run("a"), run("b")) {
		t.Fatal("different keys gave identical sketches: the seed is not used")
	}
}

func TestFORKSBlobErrors(t *testing.T) {
	xs, ys := forksStream(200, 4, 3)
	spec := forksSpec("", map[string]any{"B": 30, "rho": 10})
	l := mustNew(t, spec, "key-1")
	for i := range xs {
		if err := l.Update(xs[i], l.Predict(xs[i]), ys[i]); err != nil {
			t.Fatal(err)
		}
	}
	blob := mustMarshal(t, l)
	victim := mustNew(t, spec, "key-1")
	for i := range xs[:50] { // some state of its own
		_ = victim.Update(xs[i], victim.Predict(xs[i]), ys[i])
	}
	want := mustMarshal(t, victim)
	check := func(name string, b []byte) {
		t.Helper()
		rejectBlob(t, victim, want, name, b)
	}
	for n := 0; n < len(blob); n += 1 + n/7 {
		check("truncated", blob[:n])
	}
	flipped := append([]byte(nil), blob...)
	flipped[len(flipped)/2] ^= 0x10
	check("corrupted", flipped)
	nb := mustMarshal(t, mustNew(t, Spec{Algorithm: "nogd", Dim: 4, Params: map[string]any{"B": 30}}, "key-1"))
	check("foreign", nb)
	other := mustNew(t, forksSpec("", map[string]any{"B": 30, "sp": 20, "rho": 10}), "key-1")
	for i := range xs {
		_ = other.Update(xs[i], other.Predict(xs[i]), ys[i])
	}
	check("other shape", mustMarshal(t, other))
}

func TestFORKSParams(t *testing.T) {
	good := mustNew(t, forksSpec("", nil), "key-1").(*FORKS)
	if good.budget != 100 || good.sp != 100 || good.sm != 20 || good.k != 10 || good.rho != 2000 ||
		good.eta != 0.2 || good.alpha != 0.01 || good.beta != 0.5 || good.bound != 1 || !good.eager {
		t.Fatalf("defaults: %+v", good)
	}
	adv := mustNew(t, forksSpec("", map[string]any{"B": 200, "sp": 150}), "key-1").(*FORKS)
	if adv.sm != 30 || adv.k != 20 {
		t.Fatalf("derived defaults at B=200, sp=150: sm=%d k=%d, want 30, 20", adv.sm, adv.k)
	}
	for _, bad := range []map[string]any{
		{"B": 1}, {"B": 10, "sm": 11}, {"sp": 5, "k": 6}, {"rho": 0}, {"alpha": 0}, {"beta": -1},
		{"C": 0}, {"eta": "x"}, {"projection": "sometimes"}, {"k": 2.5}, {"bogus": 1}, {"window": -1}, {"B": 5000},
	} {
		if _, err := New(forksSpec("", bad), ""); !errors.Is(err, ErrSpec) {
			t.Errorf("params %v: want ErrSpec, got %v", bad, err)
		}
	}
	if _, err := New(forksSpec("absolute", nil), ""); !errors.Is(err, ErrSpec) {
		t.Errorf("absolute loss accepted: %v", err)
	}
}

// A record whose update would overflow is rejected with ErrNumerical and
// leaves the state bit-identical, in stage 1, in a regular round and in an
// update round (whose PRNG draw must be undone too).
func TestFORKSNumericalGuard(t *testing.T) {
	xs, ys := forksStream(120, 4, 4)
	huge := 1e308
	for _, tc := range []struct {
		name   string
		params map[string]any
		warm   int
	}{
		{"stage1", map[string]any{"B": 30}, 5},
		{"regular", map[string]any{"B": 30, "rho": 1000}, 100},
		{"update-round", map[string]any{"B": 30, "rho": 1}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := forksSpec("square", tc.params)
			spec.Params["C"] = 1e300
			l := mustNew(t, spec, "key-1")
			for i := 0; i < tc.warm; i++ {
				if err := l.Update(xs[i], l.Predict(xs[i]), ys[i]); err != nil {
					t.Fatal(err)
				}
			}
			if sk := l.(*FORKS).sketched; sk != (tc.name != "stage1") {
				t.Fatalf("sketched = %v at the guarded record", sk)
			}
			before := mustMarshal(t, l)
			x := xs[tc.warm]
			err := l.Update(x, l.Predict(x), -huge)
			if !errors.Is(err, ErrNumerical) {
				t.Fatalf("want ErrNumerical, got %v", err)
			}
			if !bytes.Equal(before, mustMarshal(t, l)) {
				t.Fatal("rejected update changed the state")
			}
			// And the learner goes on normally.
			if err := l.Update(x, l.Predict(x), ys[tc.warm]); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Eq. 5: after the sketch is built, phi(x)^T phi(x') approximates the kernel.
func TestFORKSFeatureMapApproximatesKernel(t *testing.T) {
	xs, ys := forksStream(2000, 4, 5)
	spec := Spec{Algorithm: "forks", Dim: 4, Kernel: KernelSpec{Sigma: 2}, Params: map[string]any{"B": 100, "sp": 100, "sm": 40, "k": 20}, Seed: 1}
	l := mustNew(t, spec, "key-1").(*FORKS)
	i := 0
	for ; !l.sketched; i++ {
		if err := l.Update(xs[i], l.Predict(xs[i]), ys[i]); err != nil {
			t.Fatal(err)
		}
	}
	p1, p2 := make([]float64, l.k), make([]float64, l.k)
	var se, s2 float64
	for j := 0; j < 300; j++ {
		a, b := xs[1000+j], xs[1500+j]
		l.features(p1, a)
		l.features(p2, b)
		e := 0.0
		for q := range p1 {
			e += p1[q] * p2[q]
		}
		kv := l.kernel.Eval(a, b)
		se += (e - kv) * (e - kv)
		s2 += kv * kv
	}
	rel := math.Sqrt(se / s2)
	t.Logf("relative kernel approximation error: %.4g", rel)
	if rel > 0.02 {
		t.Fatalf("phi^T phi' misses the kernel by %.3g (relative)", rel)
	}
}

// Update rounds are allocation-free, as are regular rounds.
func TestFORKSUpdateAllocs(t *testing.T) {
	xs, ys := forksStream(400, 4, 6)
	for _, rho := range []int{1, 1 << 30} {
		l := mustNew(t, forksSpec("", map[string]any{"B": 40, "rho": rho}), "key-1")
		for i := 0; i < 200; i++ {
			_ = l.Update(xs[i], l.Predict(xs[i]), ys[i])
		}
		i := 200
		allocs := testing.AllocsPerRun(100, func() {
			x := xs[i%len(xs)]
			_ = l.Update(x, l.Predict(x), ys[i%len(xs)])
			i++
		})
		if allocs != 0 {
			t.Errorf("rho=%d: %v allocs per round", rho, allocs)
		}
	}
}

// Degenerate but legal shapes (B = 2, s_p = 1, k > s_m, rho = 1, ...) must run
// and round-trip without panics or non-finite state.
func TestFORKSTinyShapes(t *testing.T) {
	xs, ys := forksStream(60, 3, 8)
	for B := 2; B <= 5; B++ {
		for sp := 1; sp <= 4; sp++ {
			for sm := 1; sm <= B; sm += 2 {
				for k := 1; k <= sp; k += 2 {
					for _, rho := range []int{1, 3} {
						spec := Spec{Algorithm: "forks", Dim: 3, Kernel: KernelSpec{Sigma: 0.7}, Seed: uint64(B*sp + k),
							Params: map[string]any{"B": B, "sp": sp, "sm": sm, "k": k, "rho": rho}}
						l := mustNew(t, spec, "key-1")
						for i := range xs {
							if err := l.Update(xs[i], l.Predict(xs[i]), ys[i]); err != nil {
								t.Fatalf("B=%d sp=%d sm=%d k=%d rho=%d: %v", B, sp, sm, k, rho, err)
							}
						}
						c := mustNew(t, spec, "key-1")
						if err := c.UnmarshalBinary(mustMarshal(t, l)); err != nil {
							t.Fatalf("B=%d sp=%d sm=%d k=%d: restore: %v", B, sp, sm, k, err)
						}
					}
				}
			}
		}
	}
}

// Eq. 11 on the learner itself: after 600 update rounds, Phi_pm equals its
// recomputation from the support vectors' and inserted points' CountSketch
// rows. With window >= the insertions psi runs over every sketched point (the
// paper's Eq. 4), Phi_pp = S_p^T K S_p stays PSD, and TISVD's factors must
// match the full eigendecomposition of the exactly maintained Phi_pp up to
// the truncation TISVD cannot recover. With window = 0 (the reference code's
// psi over the B support vectors only) Phi_pp turns indefinite as insertions
// outnumber B, and TISVD, which keeps the positive part, departs from it: the
// test records that instead of hiding it.
func TestFORKSSketchMatchesRecomputation(t *testing.T) {
	const d, B, sp, sm, k = 3, 40, 40, 10, 6
	xs, ys := forksStream(700, d, 9)
	for _, window := range []int{1000, 0} {
		spec := Spec{Algorithm: "forks", Dim: d, Kernel: KernelSpec{Sigma: 1.5}, Seed: 2,
			Params: map[string]any{"B": B, "sp": sp, "sm": sm, "k": k, "rho": 1, "window": window}}
		l := mustNew(t, spec, "key-1").(*FORKS)
		i := 0
		for ; !l.sketched; i++ {
			if err := l.Update(xs[i], l.Predict(xs[i]), ys[i]); err != nil {
				t.Fatal(err)
			}
		}
		kern := l.kernel
		var pts [][]float64
		var codes []int
		for a := 0; a < B; a++ {
			pts = append(pts, l.st1.sv[a*d:(a+1)*d])
			codes = append(codes, l.code[a])
		}
		sv := l.st1.sv
		pm := make([]float64, sp*sm)
		pp := make([]float64, sp*sp)
		for a := range pts {
			ba, ga := forksDecode(codes[a])
			for b := range pts {
				bb, gb := forksDecode(codes[b])
				pp[ba*sp+bb] += ga * gb * kern.Eval(pts[a], pts[b])
			}
			for j, m := range l.lm {
				pm[ba*sm+j] += ga * kern.Eval(pts[a], sv[m*d:(m+1)*d])
			}
		}
		inserted := 0
		for ; i < len(xs); i++ {
			x := xs[i]
			r := l.rng // the draws updateRound will make
			h := r.Intn(sp)
			sg := 1.0
			if r.Uint64()&1 == 1 {
				sg = -1
			}
			if err := l.Update(x, l.Predict(x), ys[i]); err != nil {
				t.Fatal(err)
			}
			inserted++
			a := make([]float64, sp)
			n := B
			if window > 0 {
				n = len(pts)
			}
			for b := 0; b < n; b++ {
				bb, gb := forksDecode(codes[b])
				a[bb] += gb * kern.Eval(x, pts[b])
			}
			for j, m := range l.lm {
				pm[h*sm+j] += sg * kern.Eval(x, sv[m*d:(m+1)*d])
			}
			for c := 0; c < sp; c++ {
				pp[h*sp+c] += sg * a[c]
				pp[c*sp+h] += sg * a[c]
			}
			pp[h*sp+h] += kern.Diag(x)
			pts = append(pts, x)
			codes = append(codes, int(sg)*(h+1))
		}
		if inserted < 600 {
			t.Fatalf("only %d update rounds", inserted)
		}
		for j := range pm {
			if math.Abs(pm[j]-l.phiPM[j]) > 1e-9*(1+math.Abs(pm[j])) {
				t.Fatalf("window %d: Phi_pm[%d] = %v, recomputed %v", window, j, l.phiPM[j], pm[j])
			}
		}
		all, vecs := tisvdTopK(t, pp, sp, sp)
		t.Logf("window %d: exact Phi_pp top-%d %.4g, smallest %.4g", window, k, all[:k], all[sp-1])
		t.Logf("window %d: TISVD           %.4g", window, l.ts.lam)
		if window == 0 {
			if all[sp-1] > -1 {
				t.Errorf("expected the reference-code sketch to be clearly indefinite, smallest eigenvalue %v", all[sp-1])
			}
			continue
		}
		if all[sp-1] < -1e-9*all[0] {
			t.Errorf("the exact sketch is not PSD: smallest eigenvalue %v", all[sp-1])
		}
		for j := 0; j < 3; j++ {
			if rel := math.Abs(l.ts.lam[j]-all[j]) / all[j]; rel > 0.01 {
				t.Errorf("eigenvalue %d: TISVD %v, full %v", j, l.ts.lam[j], all[j])
			}
		}
		top := func(m *mat.Dense) *mat.Dense { return mat.DenseCopyOf(m.Slice(0, sp, 0, 3)) }
		if ang := tisvdMaxAngle(top(tisvdDenseV(l.ts)), top(vecs)); ang > 0.05 {
			t.Errorf("top-3 subspace angle %v rad", ang)
		}
	}
}
