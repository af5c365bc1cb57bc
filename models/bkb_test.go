package models

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/kernelstream/kernelstream/internal/linalg"
	"gonum.org/v1/gonum/mat"
)

// pullSequence is a fixed stream of (arm, reward) pulls concentrated on a few
// arms, like a bandit's, but independent of any learner.
func pullSequence(r *Rand, arms [][]float64, n int) (xs [][]float64, ys []float64) {
	for i := 0; i < n; i++ {
		a := r.Intn(len(arms))
		if r.Float64() < 0.6 {
			a = r.Intn(5)
		}
		xs = append(xs, arms[a])
		ys = append(ys, testReward(arms[a], r))
	}
	return xs, ys
}

// TestBKBConvergesToGPUCB feeds the same pulls to BKB with growing qbar and
// checks that its posterior mean and variance approach the exact GP's, ending
// exact once every pulled arm is an inducing point.
func TestBKBConvergesToGPUCB(t *testing.T) {
	const lambda = 0.01
	r := NewRand(21)
	arms := testArms(r, 40, 3)
	xs, ys := pullSequence(r, arms, 150)
	k := NewGaussian(1)
	mu, s2 := directGP(k, xs, ys, lambda, arms)
	qbars := []float64{1, 3, 10, 30, 1e9}
	errMu := make([]float64, len(qbars))
	errVar := make([]float64, len(qbars))
	const keys = 8
	for qi, q := range qbars {
		for key := 0; key < keys; key++ {
			b := newBandit(t, gaussianSpec("bkb", 3, 1, map[string]any{"xi": 0.1, "lambda": 0.01, "qbar": q}), string(rune('a'+key)))
			for i := range xs {
				if err := b.Observe(xs[i], ys[i]); err != nil {
					t.Fatal(err)
				}
			}
			em, ev := 0.0, 0.0
			for j, a := range arms {
				p := b.Predict(a)
				em = math.Max(em, math.Abs(p.Value-mu[j]))
				ev = math.Max(ev, math.Abs(p.Std*p.Std-s2[j]))
			}
			errMu[qi] += em / keys
			errVar[qi] += ev / keys
		}
	}
	t.Logf("qbar %v: max |mu~ - mu| %v, max |lambda sigma~^2 - sigma^2| %v", qbars, errMu, errVar)
	last := len(qbars) - 1
	if errMu[last] > 1e-8 || errVar[last] > 1e-8 {
		t.Fatalf("with every pulled arm in S BKB must be exact: errors %g %g", errMu[last], errVar[last])
	}
	if errMu[0] < 100*errMu[last] || errVar[0] < 100*errVar[last] {
		t.Fatalf("qbar = 1 should be a coarse approximation: %v %v", errMu, errVar)
	}
	for i := 1; i < len(qbars); i++ {
		if errMu[i] > 1.1*errMu[i-1]+1e-9 || errVar[i] > 1.1*errVar[i-1]+1e-9 {
			t.Fatalf("errors do not shrink with qbar: mu %v var %v", errMu, errVar)
		}
	}
}

// TestBKBPosteriorIsDTC checks the incremental posterior against a dense
// evaluation of eq. (4) for BKB's own dictionary S (the DTC form with
// H = K_SU C K_US + lambda K_SS):
//
//	mu~ = k_S' H^{-1} K_SU ysum,  sigma~^2 = (k - k_S' K_SS^{-1} k_S)/lambda + k_S' H^{-1} k_S.
func TestBKBPosteriorIsDTC(t *testing.T) {
	const lambda = 0.04
	r := NewRand(5)
	arms := testArms(r, 30, 2)
	for _, q := range []float64{2, 8} {
		b := newBandit(t, gaussianSpec("bkb", 2, 0.7, map[string]any{"xi": 0.2, "lambda": 0.04, "qbar": q}), "k").(*BKB)
		xs, ys := pullSequence(r, arms, 300)
		for i := range xs {
			if err := b.Observe(xs[i], ys[i]); err != nil {
				t.Fatal(err)
			}
			if i%50 != 49 {
				continue
			}
			sel, u := b.dict, len(b.cnt)
			m := len(sel)
			kss := mat.NewSymDense(m, nil)
			ksu := mat.NewDense(m, u, nil)
			for a := 0; a < m; a++ {
				for c := 0; c < m; c++ {
					kss.SetSym(a, c, b.kernel.Eval(b.point(sel[a]), b.point(sel[c])))
				}
				for i := 0; i < u; i++ {
					ksu.Set(a, i, b.kernel.Eval(b.point(sel[a]), b.point(i)))
				}
			}
			h := mat.NewDense(m, m, nil)
			for a := 0; a < m; a++ {
				for c := 0; c < m; c++ {
					s := lambda * kss.At(a, c)
					for i := 0; i < u; i++ {
						s += ksu.At(a, i) * float64(b.cnt[i]) * ksu.At(c, i)
					}
					h.Set(a, c, s)
				}
			}
			rhs := mat.NewVecDense(m, nil)
			for a := 0; a < m; a++ {
				s := 0.0
				for i := 0; i < u; i++ {
					s += ksu.At(a, i) * b.ysum[i]
				}
				rhs.SetVec(a, s)
			}
			var wH mat.VecDense
			if err := wH.SolveVec(h, rhs); err != nil {
				t.Fatal(err)
			}
			for _, x := range arms {
				ks := mat.NewVecDense(m, nil)
				for a := 0; a < m; a++ {
					ks.SetVec(a, b.kernel.Eval(b.point(sel[a]), x))
				}
				var g1, g2 mat.VecDense
				if err := g1.SolveVec(kss, ks); err != nil {
					t.Fatal(err)
				}
				if err := g2.SolveVec(h, ks); err != nil {
					t.Fatal(err)
				}
				wantMu := mat.Dot(ks, &wH)
				wantS2 := (1-mat.Dot(ks, &g1))/lambda + mat.Dot(ks, &g2)
				gotMu, gotS2 := b.posterior(x)
				if math.Abs(gotMu-wantMu) > 1e-6 || math.Abs(gotS2-wantS2) > 1e-6*math.Max(1, wantS2) {
					t.Fatalf("qbar %g step %d m %d: got (%g, %g), want (%g, %g)", q, i, m, gotMu, gotS2, wantMu, wantS2)
				}
			}
		}
	}
}

// TestBKBNoVarianceStarvation: far from every inducing point the variance
// stays the prior's (k(x,x) is never replaced by z'z, P2).
func TestBKBNoVarianceStarvation(t *testing.T) {
	b := newBandit(t, gaussianSpec("bkb", 2, 0.3, map[string]any{"xi": 0.1, "lambda": 0.01}), "k")
	r := NewRand(1)
	for i := 0; i < 50; i++ {
		x := []float64{-1 + 0.2*r.Float64(), -1 + 0.2*r.Float64()}
		if err := b.Observe(x, 1+0.1*r.Norm()); err != nil {
			t.Fatal(err)
		}
	}
	far := b.Predict([]float64{1, 1})
	near := b.Predict([]float64{-0.9, -0.9})
	if far.Std < 0.99 || math.Abs(far.Value) > 1e-6 {
		t.Fatalf("far point: %+v, want the prior (mean 0, std 1)", far)
	}
	if near.Std > 0.1 || math.Abs(near.Value-1) > 0.1 {
		t.Fatalf("near point: %+v, want a tight posterior around 1", near)
	}
}

// TestBKBLargeQbarIsGPUCB: with every pulled arm kept, BKB is GP-UCB and
// makes the same decisions.
func TestBKBLargeQbarIsGPUCB(t *testing.T) {
	r := NewRand(17)
	arms := testArms(r, 30, 3)
	params := map[string]any{"xi": 0.1, "lambda": 0.01, "beta": 2}
	g := newBandit(t, gaussianSpec("gp-ucb", 3, 1, params), "k")
	bp := map[string]any{"xi": 0.1, "lambda": 0.01, "beta": 2, "qbar": 1e9}
	b := newBandit(t, gaussianSpec("bkb", 3, 1, bp), "k")
	r1, r2 := *r, *r
	dg := playBandit(t, g, arms, 150, &r1)
	db := playBandit(t, b, arms, 150, &r2)
	for i := range dg {
		if dg[i].Arm != db[i].Arm || math.Abs(dg[i].Mean-db[i].Mean) > 1e-8 || math.Abs(dg[i].Std-db[i].Std) > 1e-8 {
			t.Fatalf("round %d: gp-ucb %+v, bkb %+v", i, dg[i], db[i])
		}
	}
}

func TestBKBCaps(t *testing.T) {
	r := NewRand(2)
	arms := testArms(r, 20, 2)
	b := newBandit(t, gaussianSpec("bkb", 2, 0.5, map[string]any{"xi": 0.1, "lambda": 0.01, "max_history": 5, "max_budget": 3}), "k").(*BKB)
	for i := 0; i < 200; i++ {
		x := arms[i%20]
		if i%3 == 0 {
			x = arms[0] // arm 0 is pulled every third round: never the least recent
		}
		if err := b.Observe(x, testReward(x, r)); err != nil {
			t.Fatal(err)
		}
		if len(b.cnt) > 5 || len(b.dict) > 3 || b.Size() > 3 {
			t.Fatalf("step %d: %d points, |S| = %d, size %d", i, len(b.cnt), len(b.dict), b.Size())
		}
	}
	if b.slotOf(arms[0]) < 0 {
		t.Fatal("the most pulled arm was evicted")
	}
	if b.t != 200 {
		t.Fatalf("t = %d", b.t)
	}
}

// TestBKBRejectsInconsistentBlobs: blobs with a valid frame and checksum but
// contents no BKB could have written are refused, leaving the learner as it was.
func TestBKBRejectsInconsistentBlobs(t *testing.T) {
	spec := gaussianSpec("bkb", 2, 1, map[string]any{"xi": 0.1, "lambda": 0.01})
	r := NewRand(4)
	arms := testArms(r, 6, 2)
	src := newBandit(t, spec, "k").(*BKB)
	playBandit(t, src, arms, 12, r)
	good, _ := src.MarshalBinary()
	if err := newBandit(t, spec, "k").UnmarshalBinary(good); err != nil {
		t.Fatalf("consistent blob refused: %v", err)
	}
	bad := map[string]func(*BKB){
		"dict out of range":     func(v *BKB) { v.dict[0] = len(v.cnt) },
		"dict repeats a slot":   func(v *BKB) { v.dict = append(v.dict, v.dict[0]) },
		"zero count":            func(v *BKB) { v.cnt[0] = 0 },
		"t below the counts":    func(v *BKB) { v.t = 2 },
		"uniform out of range":  func(v *BKB) { v.umin[0] = 1.5 },
		"points without counts": func(v *BKB) { v.pts = append(v.pts, 3, 3) },
		"duplicate arm":         func(v *BKB) { copy(v.point(1), v.point(0)) },
		"non-finite sum":        func(v *BKB) { v.ysum[0] = math.Inf(1) },
		"short factor":          func(v *BKB) { v.lv.Data = v.lv.Data[:len(v.lv.Data)-1] },
		"negative pivot":        func(v *BKB) { v.ls.Data[0] = -v.ls.Data[0] },
		"non-finite variance":   func(v *BKB) { v.qs[0] = math.NaN() },
	}
	for name, mutate := range bad {
		v := newBandit(t, spec, "k").(*BKB)
		if err := v.UnmarshalBinary(good); err != nil {
			t.Fatal(err)
		}
		mutate(v)
		blob, _ := v.MarshalBinary()
		l := newBandit(t, spec, "k")
		before, _ := l.MarshalBinary()
		if err := l.UnmarshalBinary(blob); err == nil {
			t.Errorf("%s: accepted", name)
		}
		after, _ := l.MarshalBinary()
		if string(before) != string(after) {
			t.Errorf("%s: refused blob changed the learner", name)
		}
	}
}

// playFresh plays n rounds of a fresh-candidate bandit: a new set of a arms
// every round (a recommender's retrieval stage), reward testReward.
func playFresh(t testing.TB, b Bandit, dim, a, n int, r *Rand) []Decision {
	t.Helper()
	arms := make([][]float64, a)
	for i := range arms {
		arms[i] = make([]float64, dim)
	}
	var out []Decision
	for i := 0; i < n; i++ {
		for _, x := range arms {
			for j := range x {
				x[j] = 2*r.Float64() - 1
			}
		}
		d := b.Choose(arms)
		if err := b.Observe(arms[d.Arm], testReward(arms[d.Arm], r)); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// TestBKBIncrementalMatchesRecomputed: with fresh candidates S gains and
// loses points in many rounds and arms are evicted at max_history; the
// members' variances, tr(V^{-1}) and the sum of variances kept
// incrementally (rank-one, bordered, Givens and downdate steps) equal their
// direct recomputation.
func TestBKBIncrementalMatchesRecomputed(t *testing.T) {
	for _, params := range []map[string]any{
		{"qbar": 1, "beta": 0.5},
		{"qbar": 2, "max_history": 40, "max_budget": 12},
	} {
		b := newBandit(t, gaussianSpec("bkb", 3, 1, params), "inc").(*BKB)
		r := NewRand(8)
		adds, removes := 0, 0
		for round := 0; round < 300; round++ {
			m0 := append([]int(nil), b.dict...)
			playFresh(t, b, 3, 10, 1, r)
			for _, s := range b.dict {
				if !slices.Contains(m0, s) {
					adds++
				}
			}
			for _, s := range m0 {
				if !slices.Contains(b.dict, s) {
					removes++
				}
			}
			if round%7 != 3 {
				continue
			}
			qs, tr := append([]float64(nil), b.qs...), b.trVinv
			sum := b.sumVariances()
			b.refreshMembers()
			for k := range qs {
				if math.Abs(qs[k]-b.qs[k]) > 1e-8*math.Max(1, b.qs[k]) {
					t.Fatalf("%v round %d: member %d variance %g, recomputed %g", params, round, k, qs[k], b.qs[k])
				}
			}
			if math.Abs(tr-b.trVinv) > 1e-8*b.trVinv {
				t.Fatalf("%v round %d: tr(V^-1) %g, recomputed %g", params, round, tr, b.trVinv)
			}
			direct := 0.0
			for i, c := range b.cnt {
				_, s2 := b.posterior(b.point(i))
				direct += float64(c) * s2
			}
			if math.Abs(sum-direct) > 1e-6*math.Max(1, direct) {
				t.Fatalf("%v round %d: sum of variances %g, direct %g", params, round, sum, direct)
			}
		}
		if adds < 20 || removes < 10 {
			t.Fatalf("%v: %d additions, %d removals: the test does not exercise S changing", params, adds, removes)
		}
		// The fallback that recomputes V from the stored arms (used when a
		// downdate loses positive definiteness to rounding) gives the same
		// posterior as the incremental one.
		probe := testArms(NewRand(3), 6, 3)
		var before [][2]float64
		for _, x := range probe {
			mu, s2 := b.posterior(x)
			before = append(before, [2]float64{mu, s2})
		}
		b.rebuildPosterior(-1)
		for i, x := range probe {
			mu, s2 := b.posterior(x)
			if math.Abs(mu-before[i][0]) > 1e-8 || math.Abs(s2-before[i][1]) > 1e-8*math.Max(1, s2) {
				t.Fatalf("%v: rebuilt posterior (%g, %g), incremental (%g, %g)", params, mu, s2, before[i][0], before[i][1])
			}
		}
	}
}

// TestBKBFreshRoundTripExact: with fresh candidates a learner restored at any
// round makes bit-identical decisions and ends with the same state bytes.
func TestBKBFreshRoundTripExact(t *testing.T) {
	spec := gaussianSpec("bkb", 3, 1, map[string]any{"qbar": 2, "max_history": 30})
	for _, cut := range []int{0, 1, 17, 64} {
		orig := newBandit(t, spec, "u")
		r := NewRand(9)
		playFresh(t, orig, 3, 8, cut, r)
		if orig.(*BKB).armOK {
			t.Fatalf("cut %d: fresh candidates became the arm memo (the state would carry them)", cut)
		}
		blob, _ := orig.MarshalBinary()
		restored := newBandit(t, spec, "u")
		if err := restored.UnmarshalBinary(blob); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		r1, r2 := *r, *r
		d1 := playFresh(t, orig, 3, 8, 80, &r1)
		d2 := playFresh(t, restored, 3, 8, 80, &r2)
		if !slices.Equal(d1, d2) {
			t.Fatalf("cut %d: decisions differ after the restore", cut)
		}
		b1, _ := orig.MarshalBinary()
		b2, _ := restored.MarshalBinary()
		if !bytes.Equal(b1, b2) {
			t.Fatalf("cut %d: final states differ", cut)
		}
	}
}

// TestBKBTinyCaps: the smallest caps (one stored arm, one inducing point)
// with fresh candidates: every step succeeds, decisions stay finite, S is
// never empty after a pull, the caps hold and a restored learner continues
// bit-identically.
func TestBKBTinyCaps(t *testing.T) {
	for _, c := range []struct{ history, budget int }{{1, 1}, {2, 1}, {1, 2}, {3, 2}, {2, 3}} {
		spec := gaussianSpec("bkb", 2, 0.7, map[string]any{"max_history": c.history, "max_budget": c.budget, "qbar": 3})
		b := newBandit(t, spec, "tiny").(*BKB)
		r := NewRand(uint64(c.history*10 + c.budget))
		for round, d := range playFresh(t, b, 2, 4, 60, r) {
			if math.IsNaN(d.UCB) || math.IsInf(d.UCB, 0) || math.IsNaN(d.Std) {
				t.Fatalf("%+v round %d: decision %+v", c, round, d)
			}
		}
		if len(b.cnt) > c.history || b.Size() > c.budget || b.Size() < 1 {
			t.Fatalf("%+v: %d arms stored, |S| = %d", c, len(b.cnt), b.Size())
		}
		blob, _ := b.MarshalBinary()
		restored := newBandit(t, spec, "tiny")
		if err := restored.UnmarshalBinary(blob); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		r1, r2 := *r, *r
		if d1, d2 := playFresh(t, b, 2, 4, 20, &r1), playFresh(t, restored, 2, 4, 20, &r2); !slices.Equal(d1, d2) {
			t.Fatalf("%+v: decisions differ after the restore", c)
		}
	}
}

// TestBKBEvictionOrder: the eviction list holds the stored arms by (last
// pull, slot) and its victim is the scan's (the stored arm outside S pulled
// least recently, lowest slot on a tie; the least recent of all if every
// arm is in S), through evictions, re-pulls of stored arms and a restore.
func TestBKBEvictionOrder(t *testing.T) {
	check := func(b *BKB, where string) {
		t.Helper()
		u := len(b.cnt)
		var order []int
		for i := b.lruHead; i >= 0; i = b.lruNext[i] {
			order = append(order, i)
		}
		if len(order) != u {
			t.Fatalf("%s: the list holds %d of %d arms", where, len(order), u)
		}
		for k := 1; k < u; k++ {
			p, q := order[k-1], order[k]
			if b.last[p] > b.last[q] || (b.last[p] == b.last[q] && p > q) || b.lruPrev[q] != p {
				t.Fatalf("%s: list out of order at %d", where, k)
			}
		}
		want, inS := -1, true
		for i := 0; i < u; i++ {
			mi := b.member(i) >= 0
			if want < 0 || (inS && !mi) || (inS == mi && b.last[i] < b.last[want]) {
				want, inS = i, mi
			}
		}
		if got := b.evictionVictim(); u > 0 && got != want {
			t.Fatalf("%s: victim %d, scan %d", where, got, want)
		}
		for _, m := range b.mark {
			if m {
				t.Fatalf("%s: scratch marks left set", where)
			}
		}
	}
	for _, c := range []struct{ history, budget int }{{12, 4}, {5, 5}, {3, 8}} {
		spec := gaussianSpec("bkb", 2, 0.7, map[string]any{"max_history": c.history, "max_budget": c.budget, "qbar": 3})
		b := newBandit(t, spec, "lru").(*BKB)
		r := NewRand(uint64(c.history))
		for round := 0; round < 200; round++ {
			arms := testArms(r, 3, 2)
			if len(b.cnt) > 0 { // a stored arm among the candidates: re-pulls reorder the list
				arms = append(arms, append([]float64(nil), b.point(r.Intn(len(b.cnt)))...))
			}
			d := b.Choose(arms)
			if err := b.Observe(arms[d.Arm], testReward(arms[d.Arm], r)); err != nil {
				t.Fatal(err)
			}
			check(b, fmt.Sprintf("%+v round %d", c, round))
		}
		blob, _ := b.MarshalBinary()
		restored := newBandit(t, spec, "lru").(*BKB)
		if err := restored.UnmarshalBinary(blob); err != nil {
			t.Fatal(err)
		}
		check(restored, fmt.Sprintf("%+v restored", c))
	}
}

// TestBKBArmValues2IsOneAtATime: Choose computes two new arms at once
// (armValues2, the triangular solves interleaved); each arm's mean and
// variance term must be bit for bit what embed and quad give one arm at a
// time, for every dictionary size the rounds pass through, with the
// Gaussian kernel (evaluated inline) and another (through the interface).
func TestBKBArmValues2IsOneAtATime(t *testing.T) {
	for _, kernel := range []KernelSpec{{Type: "gaussian", Sigma: 0.8}, {Type: "laplacian", Sigma: 1.5}} {
		spec := Spec{Algorithm: "bkb", Dim: 6, Kernel: kernel, Params: map[string]any{"qbar": 2, "max_budget": 40}, Seed: 3}
		b := newBandit(t, spec, "pair").(*BKB)
		r := NewRand(11)
		sizes := map[int]bool{}
		for round := 0; round < 150; round++ {
			arms := testArms(r, 5, 6)
			m := b.ls.N
			sizes[m] = true
			b.scratch(m)
			for j := 0; j+1 < len(arms); j += 2 {
				mu1, s1, mu2, s2 := b.armValues2(arms[j], arms[j+1])
				for k, got := range [][2]float64{{mu1, s1}, {mu2, s2}} {
					res := b.embed(b.zb[:m], arms[j+k])
					mu := linalg.Dot(b.zb[:m], b.w[:m])
					s := res + math.Max(b.quad(b.zb, b.ub), 0)
					if math.Float64bits(got[0]) != math.Float64bits(mu) || math.Float64bits(got[1]) != math.Float64bits(s) {
						t.Fatalf("%s, round %d, m=%d, arm %d: paired (%v, %v), alone (%v, %v)", kernel.Type, round, m, j+k, got[0], got[1], mu, s)
					}
				}
			}
			d := b.Choose(arms)
			if err := b.Observe(arms[d.Arm], testReward(arms[d.Arm], r)); err != nil {
				t.Fatal(err)
			}
		}
		if len(sizes) < 5 {
			t.Fatalf("%s: the dictionary took only the sizes %v", kernel.Type, sizes)
		}
	}
}
