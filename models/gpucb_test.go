package models

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func newBandit(t testing.TB, s Spec, key string) Bandit {
	t.Helper()
	b, ok := mustNew(t, s, key).(Bandit)
	if !ok {
		t.Fatalf("%s is not a Bandit", s.Algorithm)
	}
	return b
}

// testArms returns n points uniform in [-1,1]^d from r.
func testArms(r *Rand, n, d int) [][]float64 {
	arms := make([][]float64, n)
	for i := range arms {
		arms[i] = make([]float64, d)
		for k := range arms[i] {
			arms[i][k] = 2*r.Float64() - 1
		}
	}
	return arms
}

// testReward is a smooth deterministic function plus noise from r.
func testReward(x []float64, r *Rand) float64 {
	s := 0.0
	for k, v := range x {
		s += math.Sin(float64(k+1) * v)
	}
	return s/float64(len(x)) + 0.1*r.Norm()
}

// playBandit runs n rounds of Choose/Observe on arms and returns the decisions.
func playBandit(t testing.TB, b Bandit, arms [][]float64, n int, r *Rand) []Decision {
	t.Helper()
	out := make([]Decision, n)
	for i := range out {
		out[i] = b.Choose(arms)
		if err := b.Observe(arms[out[i].Arm], testReward(arms[out[i].Arm], r)); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	return out
}

// directGP computes the exact posterior mean and variance at q given the
// pulled points xs and rewards ys with gonum (dense solve, no incremental
// algebra).
func directGP(k Kernel, xs [][]float64, ys []float64, lambda float64, q [][]float64) (mu, s2 []float64) {
	n := len(xs)
	a := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := 0; j <= i; j++ {
			v := k.Eval(xs[i], xs[j])
			if i == j {
				v += lambda
			}
			a.SetSym(i, j, v)
		}
	}
	var ch mat.Cholesky
	if !ch.Factorize(a) {
		panic("directGP: not positive definite")
	}
	alpha := mat.NewVecDense(n, nil)
	if err := ch.SolveVecTo(alpha, mat.NewVecDense(n, append([]float64(nil), ys...))); err != nil {
		panic(err)
	}
	for _, x := range q {
		kx := mat.NewVecDense(n, nil)
		for i := range xs {
			kx.SetVec(i, k.Eval(xs[i], x))
		}
		sol := mat.NewVecDense(n, nil)
		if err := ch.SolveVecTo(sol, kx); err != nil {
			panic(err)
		}
		mu = append(mu, mat.Dot(kx, alpha))
		s2 = append(s2, k.Diag(x)-mat.Dot(kx, sol))
	}
	return mu, s2
}

func TestGPUCBIncrementalPosteriorMatchesDirect(t *testing.T) {
	r := NewRand(3)
	arms := testArms(r, 25, 3)
	spec := gaussianSpec("gp-ucb", 3, 0.8, map[string]any{"xi": 0.2, "lambda": 0.04, "beta": 1.5})
	g := newBandit(t, spec, "k").(*GPUCB)
	var xs [][]float64
	var ys []float64
	for step := 0; step < 60; step++ {
		d := g.Choose(arms)
		// Every 7th pull is an arm outside the cached set (forward-substitution path).
		x := arms[d.Arm]
		if step%7 == 3 {
			x = testArms(r, 1, 3)[0]
		}
		y := testReward(x, r)
		if err := g.Observe(x, y); err != nil {
			t.Fatal(err)
		}
		xs, ys = append(xs, x), append(ys, y)
	}
	g.Choose(arms) // make sure the cache describes arms
	mu, s2 := directGP(g.kernel, xs, ys, 0.04, arms)
	for j := range arms {
		if math.Abs(g.mu[j]-mu[j]) > 1e-9 || math.Abs(g.sig2[j]-s2[j]) > 1e-9 {
			t.Fatalf("arm %d: cached (%g, %g), direct (%g, %g)", j, g.mu[j], g.sig2[j], mu[j], s2[j])
		}
		p := g.Predict(arms[j])
		if math.Abs(p.Value-mu[j]) > 1e-9 || math.Abs(p.Std-math.Sqrt(math.Max(s2[j], 0))) > 1e-7 {
			t.Fatalf("arm %d: Predict (%g, %g), direct (%g, %g)", j, p.Value, p.Std, mu[j], math.Sqrt(s2[j]))
		}
	}
	// log det(I + K/lambda) against gonum.
	n := len(xs)
	a := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := 0; j <= i; j++ {
			v := g.kernel.Eval(xs[i], xs[j]) / 0.04
			if i == j {
				v++
			}
			a.SetSym(i, j, v)
		}
	}
	var ch mat.Cholesky
	ch.Factorize(a)
	if ld := ch.LogDet(); math.Abs(ld-g.logdet) > 1e-8*math.Abs(ld) {
		t.Fatalf("logdet %g, gonum %g", g.logdet, ld)
	}
}

// TestBanditRoundTripExact checks that a learner restored mid-stream makes
// bit-identical further decisions and ends with the same state bytes.
func TestBanditRoundTripExact(t *testing.T) {
	specs := []Spec{
		gaussianSpec("gp-ucb", 4, 1, map[string]any{"xi": 0.1, "lambda": 0.01}),
		gaussianSpec("bkb", 4, 1, map[string]any{"xi": 0.1, "lambda": 0.01, "qbar": 2}),
		gaussianSpec("bkb", 4, 1.5, map[string]any{"xi": 0.1, "lambda": 0.01, "qbar": 50, "beta": 2}),
		gaussianSpec("bkb", 4, 1, map[string]any{"xi": 0.1, "lambda": 0.01, "qbar": 4, "max_history": 12, "max_budget": 6}),
	}
	midEpoch := 0 // BKB snapshots taken with a valid arm memo (updated per pull, serialized)
	for _, spec := range specs {
		t.Run(fmt.Sprint(spec.Algorithm, spec.Params), func(t *testing.T) {
			r := NewRand(11)
			arms := testArms(r, 30, 4)
			for _, cut := range []int{0, 1, 37, 90} {
				orig := newBandit(t, spec, "user-1")
				rr := NewRand(5)
				playBandit(t, orig, arms, cut, rr)
				blob, err := orig.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				if bk, ok := orig.(*BKB); ok && bk.armOK && bk.t%bkbDefaultRefresh != 0 {
					midEpoch++
				}
				restored := newBandit(t, spec, "user-1")
				if err := restored.UnmarshalBinary(blob); err != nil {
					t.Fatalf("cut %d: %v", cut, err)
				}
				if p, q := orig.Predict(arms[3]), restored.Predict(arms[3]); p != q {
					t.Fatalf("cut %d: Predict %+v vs %+v", cut, p, q)
				}
				r1, r2 := *rr, *rr
				d1 := playBandit(t, orig, arms, 40, &r1)
				d2 := playBandit(t, restored, arms, 40, &r2)
				for i := range d1 {
					if d1[i] != d2[i] {
						t.Fatalf("cut %d round %d: %+v vs %+v", cut, i, d1[i], d2[i])
					}
				}
				b1, _ := orig.MarshalBinary()
				b2, _ := restored.MarshalBinary()
				if !bytes.Equal(b1, b2) {
					t.Fatalf("cut %d: final states differ", cut)
				}
			}
		})
	}
	if midEpoch == 0 {
		t.Fatal("no BKB snapshot was taken with an updated memo: its restore is untested")
	}
}

func TestBanditBlobRejections(t *testing.T) {
	for _, alg := range []string{"gp-ucb", "bkb"} {
		t.Run(alg, func(t *testing.T) {
			spec := gaussianSpec(alg, 3, 1, map[string]any{"xi": 0.1, "lambda": 0.01})
			r := NewRand(2)
			arms := testArms(r, 10, 3)
			b := newBandit(t, spec, "k")
			playBandit(t, b, arms, 15, r)
			blob, _ := b.MarshalBinary()
			other := "bkb"
			if alg == "bkb" {
				other = "gp-ucb"
			}
			foreign, _ := newBandit(t, gaussianSpec(other, 3, 1, nil), "k").MarshalBinary()
			wrongDim, _ := newBandit(t, gaussianSpec(alg, 2, 1, nil), "k").MarshalBinary()
			cases := map[string][]byte{
				"truncated": blob[:len(blob)-9],
				"corrupted": flip(blob, len(blob)/2),
				"foreign":   foreign,
				"wrong dim": wrongDim,
				"empty":     nil,
			}
			for name, bad := range cases {
				fresh := newBandit(t, spec, "k")
				playBandit(t, fresh, arms, 3, NewRand(9))
				rejectBlob(t, fresh, mustMarshal(t, fresh), name, bad)
				playBandit(t, fresh, arms, 2, NewRand(9)) // still usable
			}
		})
	}
}

func TestBanditNumericalGuard(t *testing.T) {
	for _, alg := range []string{"gp-ucb", "bkb"} {
		t.Run(alg, func(t *testing.T) {
			r := NewRand(4)
			arms := testArms(r, 8, 2)
			b := newBandit(t, gaussianSpec(alg, 2, 1, map[string]any{"xi": 0.1, "lambda": 0.01}), "k")
			playBandit(t, b, arms, 10, r)
			before, _ := b.MarshalBinary()
			bad := [][]float64{{math.NaN(), 0}, {math.Inf(1), 0}}
			for _, x := range bad {
				if err := b.Observe(x, 1); !errors.Is(err, ErrNumerical) {
					t.Fatalf("x=%v: err = %v", x, err)
				}
			}
			for _, y := range []float64{math.NaN(), math.Inf(-1)} {
				if err := b.Observe(arms[0], y); !errors.Is(err, ErrNumerical) {
					t.Fatalf("y=%v: err = %v", y, err)
				}
			}
			// Two huge rewards on the same arm overflow the reward sums / the solve.
			var err error
			for i := 0; i < 3 && err == nil; i++ {
				mid, _ := b.MarshalBinary()
				before = mid
				err = b.Observe(arms[1], math.MaxFloat64)
			}
			if !errors.Is(err, ErrNumerical) {
				t.Fatalf("huge rewards accepted: %v", err)
			}
			after, _ := b.MarshalBinary()
			if !bytes.Equal(before, after) {
				t.Fatal("rejected update changed the state")
			}
			playBandit(t, b, arms, 3, r)
		})
	}
}

func TestGPUCBRoundCap(t *testing.T) {
	r := NewRand(1)
	arms := testArms(r, 5, 2)
	b := newBandit(t, gaussianSpec("gp-ucb", 2, 1, map[string]any{"max_rounds": 4}), "k")
	playBandit(t, b, arms, 4, r)
	before, _ := b.MarshalBinary()
	if err := b.Observe(arms[0], 1); !errors.Is(err, ErrRoundCap) {
		t.Fatalf("err = %v, want ErrRoundCap", err)
	}
	after, _ := b.MarshalBinary()
	if !bytes.Equal(before, after) || b.Size() != 4 {
		t.Fatal("capped observation changed the state")
	}
	b.Choose(arms) // still chooses
}

func TestBanditParamValidation(t *testing.T) {
	cases := []struct {
		alg    string
		params map[string]any
		want   string
	}{
		{"gp-ucb", map[string]any{"qbar": 2}, "unknown params qbar"},
		{"gp-ucb", map[string]any{"lambda": -1}, "lambda"},
		{"gp-ucb", map[string]any{"delta": 1.5}, "delta"},
		{"gp-ucb", map[string]any{"max_rounds": 20000}, "max_rounds"},
		{"bkb", map[string]any{"qbar": 0.5}, "qbar"},
		{"bkb", map[string]any{"max_budget": 0}, "max_budget"},
		{"bkb", map[string]any{"max_history": 0}, "max_history"},
		{"bkb", map[string]any{"eps": 1}, "eps"},
		{"bkb", map[string]any{"xi": 0}, "xi"},
		{"bkb", map[string]any{"beta": -1}, "beta"},
		{"bkb", map[string]any{"max_rounds": 10}, "unknown params max_rounds"},
	}
	for _, c := range cases {
		_, err := New(gaussianSpec(c.alg, 2, 1, c.params), "")
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: err = %v, want ErrSpec mentioning %q", c.alg, c.params, err, c.want)
		}
	}
	for _, alg := range []string{"gp-ucb", "bkb"} {
		if _, err := New(gaussianSpec(alg, 2, 1, nil), ""); err != nil {
			t.Errorf("%s defaults: %v", alg, err)
		}
	}
}

// TestBanditLearnerView checks the Learner side: Predict fills Choice -1 and
// Prob 1, and Update is Observe.
func TestBanditLearnerView(t *testing.T) {
	for _, alg := range []string{"gp-ucb", "bkb"} {
		r := NewRand(8)
		arms := testArms(r, 6, 2)
		a := newBandit(t, gaussianSpec(alg, 2, 1, nil), "k")
		b := newBandit(t, gaussianSpec(alg, 2, 1, nil), "k")
		for i := 0; i < 12; i++ {
			x, y := arms[i%6], float64(i%3)
			p := a.Predict(x)
			if p.Choice != -1 || p.Prob != 1 || !(p.Std > 0) {
				t.Fatalf("%s: Predict = %+v", alg, p)
			}
			if err := a.Update(x, p, y); err != nil {
				t.Fatal(err)
			}
			if err := b.Observe(x, y); err != nil {
				t.Fatal(err)
			}
		}
		ba, _ := a.MarshalBinary()
		bb, _ := b.MarshalBinary()
		if !bytes.Equal(ba, bb) {
			t.Fatalf("%s: Update and Observe differ", alg)
		}
	}
}
