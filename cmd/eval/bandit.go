package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/kernelstream/kernelstream/internal/banditenv"
	"github.com/kernelstream/kernelstream/models"
)

// banditResult is the JSON line of `eval -bandit`.
type banditResult struct {
	Algorithm string  `json:"algorithm"`
	Rounds    int     `json:"rounds"`
	Regret    float64 `json:"regret"`
	// RandomRegret is the expected regret of uniform choice over the same
	// rounds' arms: the reference for "it learns".
	RandomRegret float64 `json:"random_regret"`
	Seconds      float64 `json:"seconds"`
	Dictionary   int     `json:"dictionary"`
	// Windows (with -window W) splits the run into windows of W rounds, so
	// that one run shows whether the time per round stays flat and the
	// regret per round falls.
	Windows []banditWindow `json:"windows,omitempty"`
}

// banditWindow is one window of -window rounds ending at round End.
type banditWindow struct {
	End        int     `json:"end"`
	Regret     float64 `json:"regret"`
	Micros     float64 `json:"us_per_round"`
	Dictionary int     `json:"dictionary"`
}

// newEnv draws the environment named env ("gp[:options]", banditenv.Parse).
func newEnv(env string, kern models.Kernel, arms, dim int, seed uint64) (*banditenv.Env, error) {
	cfg, err := banditenv.Parse(env)
	if err != nil {
		return nil, err
	}
	cfg.Arms, cfg.Dim = arms, dim
	return banditenv.New(kern, cfg, seed)
}

// banditKey is the routing key the bandit learner is built for, so the
// learner's PRNG seed is KeySeed(spec.seed, "bandit-<seed>"): each -seed gets
// its own environment and its own learner randomness.
func banditKey(seed uint64) string { return "bandit-" + strconv.FormatUint(seed, 10) }

// runBandit plays a synthetic kernel bandit (README.md: eval -bandit gp;
// environment in internal/banditenv, drawn from seed with the model's
// kernel). Each round the learner chooses among all arms, gets f(arm) plus
// Gaussian noise (noise drawn from a second PRNG seeded from seed) and
// observes it; with fresh=1 the arms are redrawn before every round but the
// first. regret is the cumulative pseudo-regret sum_t (max f - f(a_t));
// random_regret is sum_t (max f - mean f) over the same rounds' arms;
// seconds is the time of the learner's rounds only (not the redraws); dictionary is the learner's Size()
// at the end (BKB: inducing points; GP-UCB: t).
func runBandit(env string, spec models.Spec, arms, dim, rounds int, seed uint64, window int) (banditResult, error) {
	kern, err := spec.Kernel.Build()
	if err != nil {
		return banditResult{}, err
	}
	e, err := newEnv(env, kern, arms, dim, seed)
	if err != nil {
		return banditResult{}, err
	}
	l, err := models.New(spec, banditKey(seed))
	if err != nil {
		return banditResult{}, err
	}
	b, ok := l.(models.Bandit)
	if !ok {
		return banditResult{}, fmt.Errorf("algorithm %q is not a bandit (use bkb or gp-ucb)", spec.Algorithm)
	}
	noise := models.NewRand(seed ^ 0x6e6f697365) // "noise"
	x := e.Arms()
	regret, random := 0.0, 0.0
	var envTime time.Duration // redrawing arms is the environment's time, not the learner's
	start := time.Now()
	var windows []banditWindow
	winStart, winEnv, winRegret := start, time.Duration(0), 0.0
	closeWindow := func(end int) { // the learner's time only, as for seconds
		now := time.Now()
		windows = append(windows, banditWindow{End: end, Regret: regret - winRegret,
			Micros: float64((now.Sub(winStart) - (envTime - winEnv)).Microseconds()) / float64(window), Dictionary: l.Size()})
		winStart, winEnv, winRegret = now, envTime, regret
	}
	for t := 0; t < rounds; t++ {
		if e.Fresh() && t > 0 {
			t0 := time.Now()
			e.Redraw()
			envTime += time.Since(t0)
		}
		if window > 0 && t > 0 && t%window == 0 {
			closeWindow(t)
		}
		random += e.RandomRegret()
		d := b.Choose(x)
		regret += e.Regret(d.Arm)
		if err := b.Observe(x[d.Arm], e.Reward(d.Arm, noise)); err != nil {
			if errors.Is(err, models.ErrRoundCap) {
				return banditResult{}, fmt.Errorf("round %d: %w (raise params.max_rounds)", t, err)
			}
			return banditResult{}, fmt.Errorf("round %d: %w", t, err)
		}
	}
	if window > 0 && rounds%window == 0 {
		closeWindow(rounds)
	}
	return banditResult{
		Windows:      windows,
		Algorithm:    spec.Algorithm,
		Rounds:       rounds,
		Regret:       regret,
		RandomRegret: random,
		Seconds:      (time.Since(start) - envTime).Seconds(),
		Dictionary:   l.Size(),
	}, nil
}
