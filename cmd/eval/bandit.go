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
	Algorithm  string  `json:"algorithm"`
	Rounds     int     `json:"rounds"`
	Regret     float64 `json:"regret"`
	Seconds    float64 `json:"seconds"`
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
// observes it. regret is the cumulative pseudo-regret sum_t (max f - f(a_t));
// seconds is the time of the rounds only; dictionary is the learner's Size()
// at the end (BKB: inducing points; GP-UCB: t).
func runBandit(env string, spec models.Spec, arms, dim, rounds int, seed uint64) (banditResult, error) {
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
	regret := 0.0
	start := time.Now()
	for t := 0; t < rounds; t++ {
		d := b.Choose(x)
		regret += e.Regret(d.Arm)
		if err := b.Observe(x[d.Arm], e.Reward(d.Arm, noise)); err != nil {
			if errors.Is(err, models.ErrRoundCap) {
				return banditResult{}, fmt.Errorf("round %d: %w (raise params.max_rounds)", t, err)
			}
			return banditResult{}, fmt.Errorf("round %d: %w", t, err)
		}
	}
	return banditResult{
		Algorithm:  spec.Algorithm,
		Rounds:     rounds,
		Regret:     regret,
		Seconds:    time.Since(start).Seconds(),
		Dictionary: l.Size(),
	}, nil
}
