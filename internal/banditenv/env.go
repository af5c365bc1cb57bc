// Package banditenv is the synthetic kernel bandit of `eval -bandit gp` and
// of the consumer's bandit demo: a finite set of arms in [-1,1]^D and a
// reward function drawn from the kernel's RKHS with a fixed norm, observed
// with Gaussian noise.
//
// Construction (a [SUGGEST] choice after Calandriello et al., COLT 2019, Sec. 5 (a): "sample f from the
// service kernel on a finite arm set"; P003 has no bandit experiment of its
// own, so this setup is ours):
//   - arms: A points uniform in the cube [-1,1]^D (the papers scale inputs to
//     [-1,1]^d);
//   - f = sum_{i<J} c_i k(z_i, .), J centres z_i uniform in [-1,1]^D and
//     c ~ N(0, I), rescaled so that ||f||_H = sqrt(c' K_ZZ c) = Norm exactly
//     (so F >= Norm is a valid bound for the learners);
//   - reward of arm a: f(a) + N(0, Noise^2).
//
// Everything is drawn from a models.Rand seeded with the seed, so one seed
// gives one environment on every machine.
package banditenv

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/kernelstream/kernelstream/models"
)

// Config describes an environment. Zero fields take the defaults below.
type Config struct {
	Arms, Dim int
	// Centers is J, the number of kernel centres of f (default 20).
	Centers int
	// Norm is ||f||_H (default 1).
	Norm float64
	// Noise is the standard deviation of the Gaussian reward noise (default 0.1).
	Noise float64
	// Fresh redraws the arms every round (Env.Redraw) from the same
	// distribution, with the same reward function: the candidates of a
	// recommendation request (default false: one fixed arm set).
	Fresh bool
}

// Defaults of the optional Config fields.
const (
	DefaultCenters = 20
	DefaultNorm    = 1.0
	DefaultNoise   = 0.1
)

// Parse reads an environment name: "gp" or "gp:noise=0.1,norm=1,centers=20".
// Arms and Dim are left to the caller.
func Parse(name string) (Config, error) {
	kind, opts, _ := strings.Cut(name, ":")
	if kind != "gp" {
		return Config{}, fmt.Errorf("unknown bandit environment %q (want gp[:noise=X,norm=X,centers=N,fresh=0|1])", name)
	}
	var c Config
	if opts == "" {
		return c, nil
	}
	for _, kv := range strings.Split(opts, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return Config{}, fmt.Errorf("bandit environment option %q: want key=value", kv)
		}
		switch k {
		case "noise", "norm":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
				return Config{}, fmt.Errorf("bandit environment option %s=%q: want a finite number >= 0", k, v)
			}
			if k == "noise" {
				c.Noise = f
			} else {
				c.Norm = f
			}
		case "fresh":
			switch v {
			case "1", "true":
				c.Fresh = true
			case "0", "false":
				c.Fresh = false
			default:
				return Config{}, fmt.Errorf("bandit environment option fresh=%q: want 0 or 1", v)
			}
		case "centers":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 100000 {
				return Config{}, fmt.Errorf("bandit environment option centers=%q: want an integer in [1, 100000]", v)
			}
			c.Centers = n
		default:
			return Config{}, fmt.Errorf("unknown bandit environment option %q (noise, norm, centers, fresh)", k)
		}
	}
	return c, nil
}

// Env is one drawn environment.
type Env struct {
	arms  [][]float64
	means []float64
	best  float64
	noise float64
	// f = sum_i coef[i] k(centers[i], .), kept for tests and inspection.
	centers [][]float64
	coef    []float64
	kern    models.Kernel
	fresh   bool
	redraw  *models.Rand // arms of later rounds (fresh), independent of the first draw
}

// New draws an environment for kernel k from seed.
func New(k models.Kernel, c Config, seed uint64) (*Env, error) {
	if c.Arms < 1 || c.Dim < 1 {
		return nil, fmt.Errorf("bandit environment: arms %d and dim %d must be >= 1", c.Arms, c.Dim)
	}
	if c.Centers == 0 {
		c.Centers = DefaultCenters
	}
	if c.Norm == 0 {
		c.Norm = DefaultNorm
	}
	if c.Noise == 0 {
		c.Noise = DefaultNoise
	}
	r := models.NewRand(seed)
	uniform := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = 2*r.Float64() - 1
		}
		return x
	}
	e := &Env{noise: c.Noise, kern: k, fresh: c.Fresh, redraw: models.NewRand(seed ^ 0x6672657368)} // "fresh"
	e.arms = make([][]float64, c.Arms)
	for i := range e.arms {
		e.arms[i] = uniform(c.Dim)
	}
	z := make([][]float64, c.Centers)
	coef := make([]float64, c.Centers)
	for i := range z {
		z[i] = uniform(c.Dim)
		coef[i] = r.Norm()
	}
	norm2 := 0.0
	for i := range z {
		for j := range z {
			norm2 += coef[i] * coef[j] * k.Eval(z[i], z[j])
		}
	}
	if !(norm2 > 0) {
		return nil, fmt.Errorf("bandit environment: degenerate reward function (||f||^2 = %g)", norm2)
	}
	scale := c.Norm / math.Sqrt(norm2)
	for i := range coef {
		coef[i] *= scale
	}
	e.centers, e.coef = z, coef
	e.means = make([]float64, c.Arms)
	e.evalMeans()
	return e, nil
}

// evalMeans computes f on the current arms and their best value.
func (e *Env) evalMeans() {
	e.best = math.Inf(-1)
	for a, x := range e.arms {
		f := 0.0
		for i, z := range e.centers {
			f += e.coef[i] * e.kern.Eval(z, x)
		}
		e.means[a] = f
		e.best = math.Max(e.best, f)
	}
}

// Fresh reports whether the arms are redrawn every round.
func (e *Env) Fresh() bool { return e.fresh }

// Redraw replaces the arms, in place, by new points uniform in [-1,1]^D
// (same reward function f). Slices returned by Arms see the new arms.
func (e *Env) Redraw() {
	for _, x := range e.arms {
		for j := range x {
			x[j] = 2*e.redraw.Float64() - 1
		}
	}
	e.evalMeans()
}

// RandomRegret is the expected pseudo-regret of choosing an arm uniformly:
// Best() - mean_a f(a).
func (e *Env) RandomRegret() float64 {
	m := 0.0
	for _, f := range e.means {
		m += f
	}
	return e.best - m/float64(len(e.means))
}

// Arms returns the arm features (shared; do not modify).
func (e *Env) Arms() [][]float64 { return e.arms }

// Mean is f(arm), the expected reward.
func (e *Env) Mean(arm int) float64 { return e.means[arm] }

// Best is max_a f(a).
func (e *Env) Best() float64 { return e.best }

// Regret is the pseudo-regret of pulling arm: Best() - Mean(arm).
func (e *Env) Regret(arm int) float64 { return e.best - e.means[arm] }

// Reward draws a noisy reward of arm with r.
func (e *Env) Reward(arm int, r *models.Rand) float64 { return e.means[arm] + e.noise*r.Norm() }
