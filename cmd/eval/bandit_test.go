package main

import (
	"math"
	"strings"
	"testing"

	"github.com/kernelstream/kernelstream/models"
)

func mustSpec(t *testing.T, s string) models.Spec {
	t.Helper()
	spec, err := models.ParseSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestRunBanditSmallPrefix is a quick quality check on a small problem:
// both learners beat uniform play by far, are deterministic, and BKB with a
// large qbar (every pulled arm an inducing point) plays exactly GP-UCB.
func TestRunBanditSmallPrefix(t *testing.T) {
	const arms, dim, rounds = 30, 3, 300
	gp := mustSpec(t, `{"algorithm":"gp-ucb","dim":3,"kernel":{"sigma":1.5},"params":{"xi":0.1,"lambda":0.01,"beta":2}}`)
	bkbExact := mustSpec(t, `{"algorithm":"bkb","dim":3,"kernel":{"sigma":1.5},"params":{"xi":0.1,"lambda":0.01,"beta":2,"qbar":1e9}}`)
	bkb := mustSpec(t, `{"algorithm":"bkb","dim":3,"kernel":{"sigma":1.5},"params":{"xi":0.1,"lambda":0.01,"beta":2,"qbar":4}}`)
	for seed := uint64(1); seed <= 2; seed++ {
		g, err := runBandit("gp", gp, arms, dim, rounds, seed, 0)
		if err != nil {
			t.Fatal(err)
		}
		e, err := runBandit("gp", bkbExact, arms, dim, rounds, seed, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := runBandit("gp", bkb, arms, dim, rounds, seed, 0)
		if err != nil {
			t.Fatal(err)
		}
		b2, _ := runBandit("gp", bkb, arms, dim, rounds, seed, 0)
		uniform := uniformRegret(t, gp, arms, dim, seed) * rounds
		t.Logf("seed %d: gp-ucb %.3f, bkb(qbar=1e9) %.3f, bkb(qbar=4) %.3f (m=%d), uniform %.3f", seed, g.Regret, e.Regret, b.Regret, b.Dictionary, uniform)
		if g.Regret != e.Regret {
			t.Errorf("seed %d: bkb with every pulled arm in S (%v) differs from gp-ucb (%v)", seed, e.Regret, g.Regret)
		}
		if b.Regret != b2.Regret || b.Dictionary != b2.Dictionary {
			t.Errorf("seed %d: bkb not deterministic", seed)
		}
		if g.Regret > 0.2*uniform || b.Regret > 0.3*uniform {
			t.Errorf("seed %d: regret too large vs uniform play %v: gp %v bkb %v", seed, uniform, g.Regret, b.Regret)
		}
		if b.Dictionary < 1 || b.Dictionary >= rounds/4 || g.Dictionary != rounds || b.Rounds != rounds || b.Algorithm != "bkb" {
			t.Errorf("seed %d: result fields %+v %+v", seed, g, b)
		}
	}
}

// uniformRegret is the expected per-round regret of choosing arms uniformly.
func uniformRegret(t *testing.T, spec models.Spec, arms, dim int, seed uint64) float64 {
	t.Helper()
	k, _ := spec.Kernel.Build()
	e, err := newEnv("gp", k, arms, dim, seed)
	if err != nil {
		t.Fatal(err)
	}
	s := 0.0
	for a := 0; a < arms; a++ {
		s += e.Regret(a)
	}
	return s / float64(arms)
}

func TestRunBanditErrors(t *testing.T) {
	bkb := mustSpec(t, `{"algorithm":"bkb","dim":2}`)
	cases := []struct {
		env  string
		spec models.Spec
		want string
	}{
		{"nope", bkb, "unknown bandit environment"},
		{"gp:noise=x", bkb, "noise"},
		{"gp:color=1", bkb, "unknown bandit environment option"},
		{"gp", mustSpec(t, `{"algorithm":"kogd","dim":2}`), "not a bandit"},
		{"gp", mustSpec(t, `{"algorithm":"gp-ucb","dim":2,"params":{"max_rounds":5}}`), "max_rounds"},
	}
	for _, c := range cases {
		_, err := runBandit(c.env, c.spec, 5, 2, 10, 1, 0)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: err = %v, want %q", c.env, c.spec.Algorithm, err, c.want)
		}
	}
	if _, err := runBandit("gp:noise=0.05,norm=2,centers=5", bkb, 5, 2, 10, 1, 0); err != nil {
		t.Errorf("environment options: %v", err)
	}
}

// TestRunBanditWindows: -window splits the run into windows whose regrets
// add up to the total, the last window ending with the final dictionary.
func TestRunBanditWindows(t *testing.T) {
	spec := mustSpec(t, `{"algorithm":"bkb","dim":2}`)
	whole, err := runBandit("gp:fresh=1", spec, 6, 2, 120, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []int{40, 50} {
		r, err := runBandit("gp:fresh=1", spec, 6, 2, 120, 3, w)
		if err != nil {
			t.Fatal(err)
		}
		want := 120 / w
		if len(r.Windows) != want {
			t.Fatalf("window %d: %d windows, want %d", w, len(r.Windows), want)
		}
		sum := 0.0
		for i, win := range r.Windows {
			sum += win.Regret
			if win.End != (i+1)*w || win.Micros < 0 {
				t.Fatalf("window %d: %+v", w, win)
			}
		}
		if r.Regret != whole.Regret || (120%w == 0 && math.Abs(sum-r.Regret) > 1e-9*r.Regret) {
			t.Fatalf("window %d: regrets %v (sum %v), whole run %v", w, r.Regret, sum, whole.Regret)
		}
		if 120%w == 0 && r.Windows[len(r.Windows)-1].Dictionary != r.Dictionary {
			t.Fatalf("window %d: last window dictionary %d, final %d", w, r.Windows[len(r.Windows)-1].Dictionary, r.Dictionary)
		}
	}
}

// TestBKBDefaultCapFreshCandidates: with its defaults (spec = algorithm +
// dim) on fresh candidates, BKB's dictionary reaches the default cap
// (max_budget 128) within the first 2500 rounds and stays there, which is
// what holds its time per round flat from there (docs/bandits.md, "The
// dictionary cap"), while the regret per round over the whole run falls
// below the first window's and stays far below uniform choice's.
func TestBKBDefaultCapFreshCandidates(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, `{"algorithm":"bkb","dim":5}`)
	const cap, window = 128, 1000
	r, err := runBandit("gp:fresh=1", spec, 20, 5, 3000, 4, window)
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	for i, w := range r.Windows {
		t.Logf("rounds %5d: regret per round %.4f, dictionary %d", w.End, w.Regret/window, w.Dictionary)
		if w.Dictionary > cap {
			t.Errorf("window %d: dictionary %d above the default cap %d", i, w.Dictionary, cap)
		}
		most = max(most, w.Dictionary)
	}
	if most < cap-8 {
		t.Errorf("dictionary at most %d over %d rounds: the default cap %d not reached", most, r.Rounds, cap)
	}
	// Cumulative regret/T falls (the window regrets of one seed are noisy).
	if first, all := r.Windows[0].Regret/window, r.Regret/float64(r.Rounds); all >= 0.8*first {
		t.Errorf("regret per round %.4f over the first %d rounds, %.4f over all %d: not falling", first, window, all, r.Rounds)
	}
	if r.Regret > 0.1*r.RandomRegret {
		t.Errorf("regret %.1f, uniform choice %.1f: want at most a tenth", r.Regret, r.RandomRegret)
	}
}
