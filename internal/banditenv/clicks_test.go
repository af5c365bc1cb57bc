package banditenv

import (
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// clickSpec is the demo's learner: BKB per user on the items' features.
var clickSpec = models.Spec{Algorithm: "bkb", Dim: DefaultClickDim, Kernel: models.KernelSpec{Type: "gaussian", Sigma: 1.5},
	Params: map[string]any{"xi": 0.5, "lambda": 0.25, "beta": 1.0, "max_budget": 48}, Seed: 1}

// loopResult is a closed loop run directly (no Kafka).
type loopResult struct {
	byKey    map[string][]string // each user's records, in order
	clicks   []bool              // by plan position
	prob     []float64           // click probability of the chosen item, by plan position
	random   []float64           // expected click rate of a uniform choice, by plan position
	outcomes int
}

// runLoop runs n decisions of e with one learner of spec per user, as a
// consumer would: each decision is chosen when its record is processed
// (records in stream order), and the answers reach the stream in FIFO order,
// or in a shuffled order (late, out-of-order outputs) when shuffle > 0.
func runLoop(t testing.TB, e *Clicks, n int, spec models.Spec, shuffle uint64) loopResult {
	t.Helper()
	s := e.Stream(n)
	learners := map[string]models.Bandit{}
	res := loopResult{byKey: map[string][]string{}, clicks: make([]bool, n), prob: make([]float64, n), random: make([]float64, n)}
	rng := models.NewRand(shuffle)
	type answer struct{ id, item string }
	var waiting []answer
	chosen := map[string]string{}
	dec := wire.NewDecoder(e.Config().Dim, wire.Limits{})
	var r ClickRecord
	for !s.Done() {
		if !s.Next(&r) {
			if len(waiting) == 0 {
				t.Fatalf("stream blocked with nothing to answer (%d/%d decisions)", s.decided, n)
			}
			k := 0
			if shuffle > 0 {
				k = rng.Intn(len(waiting))
			}
			a := waiting[k]
			waiting = append(waiting[:k], waiting[k+1:]...)
			o, known, err := s.Choose(a.id, a.item)
			if err != nil || !known {
				t.Fatalf("Choose(%s): known %v, %v", a.id, known, err)
			}
			if _, known, err := s.Choose(a.id, a.item); known || err != nil {
				t.Fatalf("repeated Choose(%s): known %v, %v", a.id, known, err)
			}
			res.clicks[o.Seq], res.prob[o.Seq], res.random[o.Seq] = o.Click, o.Prob, o.Random
			res.outcomes++
			continue
		}
		key := string(r.Key)
		res.byKey[key] = append(res.byKey[key], string(r.Value))
		l, ok := learners[key]
		if !ok {
			m, err := models.New(spec, key)
			if err != nil {
				t.Fatal(err)
			}
			l = m.(models.Bandit)
			learners[key] = l
		}
		v, err := dec.Decode(r.Value)
		if err != nil || wire.Token(v.ID).String() != r.ID {
			t.Fatalf("record %s: %v", r.Value, err)
		}
		if r.Reward {
			arm := wire.Token(v.Arm).String()
			if v.Kind != wire.KindLabel || !v.Reward || arm != chosen[r.ID] {
				t.Fatalf("reward %s: chosen %s", r.Value, chosen[r.ID])
			}
			if err := l.Observe(itemX(t, e, arm), v.Y); err != nil {
				t.Fatal(err)
			}
			continue
		}
		d := l.Choose(v.Arms)
		arm := wire.Token(v.ArmIDs[d.Arm]).String()
		chosen[r.ID] = arm
		waiting = append(waiting, answer{r.ID, arm})
	}
	if res.outcomes != n {
		t.Fatalf("%d outcomes for %d decisions", res.outcomes, n)
	}
	return res
}

func itemX(t testing.TB, e *Clicks, id string) []float64 {
	for i, s := range e.ids {
		if s == id {
			return e.items[i]
		}
	}
	t.Fatalf("no item %s", id)
	return nil
}

func rate(b []bool) float64 {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return float64(n) / float64(len(b))
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// TestClickStreamDeterministic: a user's records depend only on the choices
// made for the user, not on when the answers come back nor on how the users
// interleave; and every decision gets exactly one reward, after it.
func TestClickStreamDeterministic(t *testing.T) {
	e, err := NewClicks(ClickConfig{Users: 5, Items: 60, Dim: 3, Candidates: 6, MaxDelay: 4}, 3)
	if err != nil {
		t.Fatal(err)
	}
	spec := clickSpec
	spec.Dim = 3
	a := runLoop(t, e, 600, spec, 0)
	b := runLoop(t, e, 600, spec, 9)
	if !reflect.DeepEqual(a.byKey, b.byKey) {
		t.Fatal("per-user records differ between in-order and shuffled answers")
	}
	if !reflect.DeepEqual(a.clicks, b.clicks) {
		t.Fatal("clicks differ between in-order and shuffled answers")
	}
	delayed, rewards := 0, 0
	dec := wire.NewDecoder(e.Config().Dim, wire.Limits{})
	for key, recs := range a.byKey {
		decided := map[string]int{} // decision id -> decisions of the user before it
		nDec := 0
		for _, v := range recs {
			r, err := dec.Decode([]byte(v))
			if err != nil {
				t.Fatalf("%s: %v", v, err)
			}
			id := wire.Token(r.ID).String()
			if !r.Reward {
				decided[id] = nDec
				nDec++
				continue
			}
			j, ok := decided[id]
			if !ok {
				t.Fatalf("%s: reward of %s before its decision", key, id)
			}
			// Decisions of the user between the decision and its reward:
			// delay-1, in [0, MaxDelay-1].
			if between := nDec - j - 1; between > 3 {
				t.Errorf("%s: reward of %s after %d later decisions", key, id, between)
			} else if between > 0 {
				delayed++
			}
			rewards++
			delete(decided, id)
			if r.Y != 0 && r.Y != 1 {
				t.Errorf("%s: reward %v", key, r.Y)
			}
		}
		if len(decided) != 0 {
			t.Errorf("%s: %d decisions without a reward", key, len(decided))
		}
	}
	if rewards != 600 || delayed < rewards/2 {
		t.Errorf("%d rewards, %d of them after later decisions of their user", rewards, delayed)
	}
	c := e.Stream(10)
	var r ClickRecord
	if !c.Next(&r) || r.Reward {
		t.Fatal("first record is not a decision")
	}
	if _, _, err := c.Choose(r.ID, "item-99"); err == nil {
		t.Error("an item that was not offered is accepted")
	}
	if _, _, err := c.Choose("user-9-0", "item-01"); err == nil {
		t.Error("an unknown decision is accepted")
	}
	if _, err := NewClicks(ClickConfig{Items: 5, Candidates: 6}, 1); err == nil {
		t.Error("more candidates than items accepted")
	}
}

// TestClickBaselines: the random-choice and best-choice rates announced by
// the environment match the offers of a stream.
func TestClickBaselines(t *testing.T) {
	e, err := NewClicks(ClickConfig{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := e.Stream(20000)
	var r ClickRecord
	var rnd, best float64
	n := 0
	for s.Next(&r) {
		if r.Reward {
			continue
		}
		d := s.open[r.ID]
		a, b := e.offerRates(d.u, d.off.cands)
		rnd += a
		best += b
		n++
		if _, _, err := s.Choose(r.ID, e.ItemID(d.off.cands[0])); err != nil {
			t.Fatal(err)
		}
	}
	if n != 20000 {
		t.Fatalf("%d decisions", n)
	}
	rnd, best = rnd/float64(n), best/float64(n)
	if math.Abs(rnd-e.RandomRate()) > 0.01 || math.Abs(best-e.BestRate()) > 0.01 {
		t.Errorf("stream: random %.4f best %.4f; announced %.4f %.4f", rnd, best, e.RandomRate(), e.BestRate())
	}
	if !(e.RandomRate() > 0.1 && e.RandomRate() < 0.3 && e.BestRate() > 0.6) {
		t.Errorf("defaults give random %.3f best %.3f: the demo needs room above random", e.RandomRate(), e.BestRate())
	}
}

// TestClickAudiences: per audience, the click probability is the stated
// formula, the ideal points lie in [-Spread, Spread]^D, the decision records
// (users, offers) are those of the linear audience of the same seed, random
// and best choice leave the demo room, and the least-squares linear fit of
// each user's click logit over the catalogue, ranking the candidates, clicks
// at the oracle's rate on the linear audience and far below it on the ideal
// ones (no linear score of the features ranks them).
func TestClickAudiences(t *testing.T) {
	sigmoid := func(z float64) float64 { return 1 / (1 + math.Exp(-z)) }
	lin, err := NewClicks(ClickConfig{}, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		cfg       ClickConfig
		fitBelow  float64 // the linear fit's rate is at most best minus this (negative: equal to best)
		rnd, best [2]float64
	}{
		{"linear", ClickConfig{}, -1, [2]float64{0.17, 0.23}, [2]float64{0.65, 0.75}},
		{"ideal", ClickConfig{Audience: AudienceIdeal}, 0.2, [2]float64{0.15, 0.23}, [2]float64{0.6, 0.72}},
		{"ideal-2-peaks", ClickConfig{Audience: AudienceIdeal, Peaks: 2, Spread: 0.75, Bias: 3, Scale: 3.5}, 0.2, [2]float64{0.12, 0.25}, [2]float64{0.6, 0.75}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := NewClicks(c.cfg, 4)
			if err != nil {
				t.Fatal(err)
			}
			cfg := e.Config()
			for u := 0; u < cfg.Users; u++ {
				for i := 0; i < cfg.Items; i += 7 {
					x := e.Item(i)
					var want float64
					if cfg.Audience == AudienceIdeal {
						d2 := math.Inf(1)
						for k := 0; k < cfg.Peaks; k++ {
							s := 0.0
							for j, cj := range e.Ideal(u, k) {
								if math.Abs(cj) > cfg.Spread {
									t.Fatalf("user %d ideal point %d: %v outside [-%g,%g]", u, k, e.Ideal(u, k), cfg.Spread, cfg.Spread)
								}
								s += (x[j] - cj) * (x[j] - cj)
							}
							d2 = math.Min(d2, s)
						}
						want = sigmoid(cfg.Bias - cfg.Scale*d2)
					} else {
						a := 0.0
						for j, v := range e.prefs[u] {
							a += v * x[j]
						}
						want = sigmoid(cfg.Bias + cfg.Scale*a)
					}
					if got := e.Prob(u, i); math.Abs(got-want) > 1e-12 {
						t.Fatalf("Prob(%d, %d) = %v, want %v", u, i, got, want)
					}
				}
			}
			// The least-squares linear score of each user's logit over the
			// catalogue: LinUCB with alpha 0, a negligible lambda and an
			// intercept feature.
			fits := make([]*LinUCB, cfg.Users)
			for u := range fits {
				if fits[u], err = NewLinUCB(cfg.Dim+1, 1e-9, 0); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < cfg.Items; i++ {
					fits[u].Observe(append([]float64{1}, e.Item(i)...), e.Logit(u, i))
				}
			}
			s, ls := e.Stream(4000), lin.Stream(4000)
			var r, lr ClickRecord
			var fit, rnd, best float64
			n := 0
			for s.Next(&r) {
				if !ls.Next(&lr) || r.Reward != lr.Reward || string(r.Value) != string(lr.Value) && !r.Reward {
					t.Fatalf("record %d: %s, the linear audience's %s", n, r.Value, lr.Value)
				}
				if r.Reward {
					continue
				}
				d := r.dec
				var arms [][]float64
				for _, i := range d.off.cands {
					arms = append(arms, append([]float64{1}, e.Item(i)...))
				}
				fit += e.Prob(d.u, d.off.cands[fits[d.u].Choose(arms)])
				a, b := e.offerRates(d.u, d.off.cands)
				rnd += a
				best += b
				n++
				for _, st := range []*ClickStream{s, ls} {
					if _, _, err := st.Choose(r.ID, e.ItemID(d.off.cands[0])); err != nil {
						t.Fatal(err)
					}
				}
			}
			fit, rnd, best = fit/float64(n), rnd/float64(n), best/float64(n)
			t.Logf("%+v: random %.3f, best %.3f, least-squares linear score %.3f", cfg, rnd, best, fit)
			if rnd < c.rnd[0] || rnd > c.rnd[1] || best < c.best[0] || best > c.best[1] {
				t.Errorf("random %.3f (want %v), best %.3f (want %v)", rnd, c.rnd, best, c.best)
			}
			if c.fitBelow < 0 && math.Abs(fit-best) > 1e-9 || c.fitBelow >= 0 && fit > best-c.fitBelow {
				t.Errorf("the linear fit clicks at %.4f, best %.4f (want below best - %g, or equal if negative)", fit, best, c.fitBelow)
			}
		})
	}
	if _, err := NewClicks(ClickConfig{Audience: "quadratic"}, 1); err == nil {
		t.Error("an unknown audience is accepted")
	}
	if _, err := NewClicks(ClickConfig{Audience: AudienceIdeal, Spread: 1.5}, 1); err == nil {
		t.Error("ideal points outside the catalogue's cube are accepted")
	}
}

// TestClickBKBLearns: BKB per user (the demo's learner) ends clearly above
// the random-choice click rate of the same offers, and above its own start,
// on both audiences; on the ideal-point audience it also ends clearly above
// LinUCB played on the same offers (which a linear score cannot rank).
func TestClickBKBLearns(t *testing.T) {
	for _, c := range []struct {
		audience   string
		overRandom float64 // bkb's last 1000 minus random, at least
		overLinUCB float64 // bkb's last 1000 minus linucb's, at least (-1: not asserted)
	}{
		{AudienceLinear, 0.3, -1},
		{AudienceIdeal, 0.25, 0.15},
	} {
		t.Run(c.audience, func(t *testing.T) {
			t.Parallel()
			e, err := NewClicks(ClickConfig{Audience: c.audience}, 1)
			if err != nil {
				t.Fatal(err)
			}
			const n, w = 3000, 1000
			res := runLoop(t, e, n, clickSpec, 0)
			first, last := rate(res.clicks[:w]), rate(res.clicks[n-w:])
			random := mean(res.random[n-w:])
			lin, _, _, _ := playLinUCB(t, e, n, DefaultLinUCBLambda, DefaultLinUCBAlpha, true)
			linLast := rate(lin[n-w:])
			t.Logf("random %.3f best %.3f; bkb clicks: first %d %.3f, last %d %.3f (expected %.3f); linucb last %d %.3f",
				e.RandomRate(), e.BestRate(), w, first, w, last, mean(res.prob[n-w:]), w, linLast)
			if last < random+c.overRandom || last < first {
				t.Errorf("bkb click rate over the last %d decisions %.3f, random %.3f (want + %.2f), first %d %.3f", w, last, random, c.overRandom, w, first)
			}
			if c.overLinUCB >= 0 && last < linLast+c.overLinUCB {
				t.Errorf("bkb click rate over the last %d decisions %.3f, linucb %.3f (want + %.2f)", w, last, linLast, c.overLinUCB)
			}
		})
	}
}

// TestClickTuning prints click rates for learner settings (KS_CLICK_TUNE=1
// KS_CLICK_ENV="users items dim candidates"
// KS_CLICK_AUDIENCE="audience bias scale peaks spread" KS_CLICK_SPECS='spec;spec'),
// and LinUCB's (lambda 1, alpha 1) on the same offers.
func TestClickTuning(t *testing.T) {
	if os.Getenv("KS_CLICK_TUNE") == "" {
		t.Skip("set KS_CLICK_TUNE=1")
	}
	var c ClickConfig
	fmt.Sscan(os.Getenv("KS_CLICK_ENV"), &c.Users, &c.Items, &c.Dim, &c.Candidates)
	fmt.Sscan(os.Getenv("KS_CLICK_AUDIENCE"), &c.Audience, &c.Bias, &c.Scale, &c.Peaks, &c.Spread)
	e, err := NewClicks(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v random %.3f best %.3f", e.Config(), e.RandomRate(), e.BestRate())
	{
		n := 6000
		fmt.Sscan(os.Getenv("KS_CLICK_N"), &n)
		clicks, prob, _, _ := playLinUCB(t, e, n, DefaultLinUCBLambda, DefaultLinUCBAlpha, true)
		l := min(1000, n)
		t.Logf("linucb: all %.3f first %d %.3f last %d %.3f (expected %.3f)", rate(clicks), l, rate(clicks[:l]), l, rate(clicks[n-l:]), mean(prob[n-l:]))
	}
	for _, p := range strings.Split(os.Getenv("KS_CLICK_SPECS"), ";") {
		spec, err := models.ParseSpec(p)
		if err != nil {
			t.Fatal(err)
		}
		n := 6000
		fmt.Sscan(os.Getenv("KS_CLICK_N"), &n)
		start := time.Now()
		res := runLoop(t, e, n, spec, 0)
		w := n / 12
		var parts []string
		for i := 0; i+w <= n; i += w {
			parts = append(parts, fmt.Sprintf("%.2f", mean(res.prob[i:i+w])))
		}
		l := min(1000, n)
		t.Logf("%s: all %.3f first %d %.3f last %d %.3f (expected %.3f); expected by %d: %s (%v)", p, rate(res.clicks), l, rate(res.clicks[:l]), l, rate(res.clicks[n-l:]), mean(res.prob[n-l:]), w, strings.Join(parts, " "), time.Since(start))
	}
}

// TestClickDecimals: a rounded catalogue is what the decision records
// carry, to the last digit (the benchmark's short records, exact replays).
func TestClickDecimals(t *testing.T) {
	e, err := NewClicks(ClickConfig{Users: 3, Items: 50, Dim: 16, Candidates: 20, Decimals: 4}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < e.Config().Items; i++ {
		for _, v := range e.Item(i) {
			if r := math.Round(v*1e4) / 1e4; r != v {
				t.Fatalf("item %d: feature %v is not rounded to 4 decimals", i, v)
			}
		}
	}
	var rec ClickRecord
	if !e.Stream(1).Next(&rec) {
		t.Fatal("no record")
	}
	d, err := wire.NewDecoder(16, wire.Limits{}).Decode(rec.Value)
	if err != nil || len(d.Arms) != 20 {
		t.Fatalf("record %s: %v", rec.Value, err)
	}
	for k, x := range d.Arms {
		id := wire.Token(d.ArmIDs[k]).String()
		var i int
		fmt.Sscanf(id, "item-%d", &i)
		if !reflect.DeepEqual(x, e.Item(i)) {
			t.Fatalf("arm %s: x %v, item %v", id, x, e.Item(i))
		}
	}
	// Each number is at most "-0.1234": 7 characters.
	if n := len(rec.Value); n > 20*(len(`{"id":"item-00","x":[]},`)+16*8)+100 {
		t.Fatalf("record of %d bytes: features not short", n)
	}
	if _, err := NewClicks(ClickConfig{Decimals: -1}, 1); err == nil {
		t.Fatal("negative decimals accepted")
	}
}
