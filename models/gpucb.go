package models

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

// ErrRoundCap reports an observation refused because an exact learner
// reached its documented round cap (gp-ucb's max_rounds).
var ErrRoundCap = errors.New("round cap reached")

const gpucbStateVersion = 1

func init() {
	Register(Algorithm{
		Name:    "gp-ucb",
		Losses:  []string{"square"},
		Summary: "exact GP-UCB kernel bandit (oracle, O(A t) per step, capped rounds)",
		New:     newGPUCB,
	})
}

// GPUCB is the exact Gaussian-process upper-confidence-bound bandit
// (algorithm "gp-ucb"), the oracle that BKB approximates, as D. Calandriello,
// L. Carratino, A. Lazaric, M. Valko and L. Rosasco, "Gaussian process
// optimization with adaptive sketching: scalable and no regret", COLT 2019
// state it [Calandriello et al. 2019, Sec. 2, eq. 1-3 (posterior mean,
// variance and UCB); Sec. 4.1, eq. 7-8 (the frequentist confidence radius of
// [Chowdhury & Gopalan 2017])]. Notes and measurements: docs/bandits.md.
//
// Posterior over the t pulled arms x_1..x_t (with repetitions):
//
//	mu_t(x)      = k_t(x)' (K_t + lambda I)^{-1} y_t                           (eq. 1)
//	sigma_t^2(x) = k(x,x) - k_t(x)' (K_t + lambda I)^{-1} k_t(x)               (eq. 2)
//	u_t(x)       = mu_t(x) + beta_t sqrt(sigma_t^2(x)/lambda)                   (eq. 8 scaling)
//	beta_t       = sqrt(lambda) F + xi sqrt(2 (log det(K_t/lambda + I) + log(1/delta)))   (eq. 7)
//
// Choices:
//   - [SUGGEST] O(A t) per step instead of the paper's O(A t^2): keep the
//     lower Cholesky factor L of K_t + lambda I, v = L^{-1} y and, for the
//     last arm set seen, W = L^{-1} K_{t,A} (t x A) with mu(A) = W'v and
//     sigma^2(A) = diag(K_AA) - colsum(W.^2). Pulling arm j appends one row:
//     l = W[:, j], l_nn = sqrt(k(x_j,x_j) + lambda - l'l),
//     w = (k(x_j, A) - l'W)/l_nn, v_new = (y - l'v)/l_nn, mu += w v_new,
//     sigma^2 -= w.^2, log det += log(l_nn^2/lambda).
//   - The W cache is derived, not stored: the state holds X, y, L, v and
//     log det; a restored learner (or a new arm set) rebuilds W by replaying
//     the rows with the same code (appendCacheRow), and the direct forward
//     substitution of an arm outside the cache uses the same summation order,
//     so cached and rebuilt values are bit-identical and a restored learner
//     makes exactly the choices the original would have made.
//   - [RECON] Std in Decision and Prediction is the posterior standard
//     deviation of f(x) in reward units, sqrt(sigma_t^2(x)); the UCB is
//     mu + beta_t sqrt(sigma_t^2/lambda) (eq. 8), i.e.
//     mu + (beta_t/sqrt(lambda)) Std. A constant beta param replaces the
//     whole multiplier of Std: UCB = mu + beta Std (the common GP-UCB
//     reading).
//   - [SUGGEST] Exact ties of the UCB (all arms at t = 0 for a stationary
//     kernel) are broken uniformly at random with the learner's PRNG, which
//     reproduces the paper's "pick x_1 uniformly at random".
//   - Hard cap: exact GP-UCB keeps L (t^2/2 floats) and W (A t floats), so
//     max_rounds bounds t; past it Observe returns ErrRoundCap and the
//     learner keeps its state (it still chooses).
//
// Cost: Choose O(A) on the cached arm set (O(A t (t + d)) to rebuild the
// cache for a new one); Observe O(A t) for a cached arm, O(t^2 + A t)
// otherwise; Predict O(t^2). The state holds L: about 4 t^2 bytes (64 MiB at
// t = 4096). GP-UCB is an offline oracle; the service uses BKB.
//
// Parameters and their defaults:
//   - lambda: the ridge (1), in [1e-12, 1e12]; xi, the noise's sub-Gaussian
//     constant (0.5); delta (0.1); F, the bound on ||f||_H (1).
//   - radius: "constant" (UCB = mean + beta Std) or "theory" (beta_t above)
//     ("constant"); beta: the constant radius (0.5).
//   - max_rounds: the cap on observations (4096), in [1, 16384].
//   - kernel.sigma (1).
//
// Loss: square (the reward's).
type GPUCB struct {
	kernel    Kernel
	dim       int
	bp        banditParams
	maxRounds int
	rng       Rand

	// Dynamic state (serialized).
	t      int
	x      []float64  // t x dim pulled arms, row-major
	y      []float64  // t rewards
	l      linalg.Tri // Cholesky factor of K_t + lambda I
	v      []float64  // L^{-1} y
	logdet float64    // log det(I + K_t/lambda)

	// Cache for the last arm set (derived; rebuilt by replaying rows).
	arms  []float64 // A x dim copy of the arm features
	nArms int
	valid bool
	w     []float64 // t x A, W = L^{-1} K_{t,A}
	mu    []float64 // A
	sig2  []float64 // A, sigma_t^2 (reward units squared)
	kdiag []float64 // A
	last  int       // index of the last chosen arm, to find it fast in Observe

	// Scratch.
	lrow []float64 // t
}

func newGPUCB(s *Setup) (Learner, error) {
	g := &GPUCB{kernel: s.Kernel, dim: s.Dim, last: -1}
	g.bp = readBanditParams(s.Params)
	g.maxRounds = s.Params.Int("max_rounds", 4096, 1, 16384)
	g.rng.Seed(s.Seed)
	return g, nil
}

// Size is the number of observations t.
func (g *GPUCB) Size() int { return g.t }

// multiplier is the factor of Std in the UCB (see the GPUCB type).
func (g *GPUCB) multiplier() float64 {
	if !g.bp.theory {
		return g.bp.beta
	}
	beta := math.Sqrt(g.bp.lambda)*g.bp.F + g.bp.xi*math.Sqrt(2*(g.logdet+math.Log(1/g.bp.delta)))
	return beta / math.Sqrt(g.bp.lambda)
}

// sameArms reports whether arms equals the cached arm set.
func (g *GPUCB) sameArms(arms [][]float64) bool {
	if !g.valid || len(arms) != g.nArms {
		return false
	}
	d := g.dim
	for j, a := range arms {
		c := g.arms[j*d : (j+1)*d]
		for i := range c {
			if c[i] != a[i] {
				return false
			}
		}
	}
	return true
}

// rebuildCache makes the cache describe arms by replaying every row of L.
func (g *GPUCB) rebuildCache(arms [][]float64) {
	a, d := len(arms), g.dim
	g.arms = growFloats(g.arms, a*d)
	for j, x := range arms {
		if len(x) != d {
			panic(fmt.Sprintf("gp-ucb: arm %d has dimension %d, want %d", j, len(x), d))
		}
		copy(g.arms[j*d:(j+1)*d], x)
	}
	g.nArms = a
	g.mu = growFloats(g.mu, a)
	g.sig2 = growFloats(g.sig2, a)
	g.kdiag = growFloats(g.kdiag, a)
	for j := 0; j < a; j++ {
		g.mu[j] = 0
		g.kdiag[j] = g.kernel.Diag(g.arms[j*d : (j+1)*d])
		g.sig2[j] = g.kdiag[j]
	}
	g.w = growFloats(g.w, g.t*a)
	for i := 0; i < g.t; i++ {
		g.appendCacheRow(i)
	}
	g.valid = true
	g.last = -1
}

// appendCacheRow computes row i of W from row i of L and folds it into mu and
// sigma^2. W must already have room for row i. The accumulation order here
// must match forwardSubst (bit-identical cache and direct paths).
func (g *GPUCB) appendCacheRow(i int) {
	a, d := g.nArms, g.dim
	row := g.l.Row(i)
	wi := g.w[i*a : (i+1)*a : (i+1)*a]
	KernelVector(g.kernel, wi, g.arms[:a*d], g.x[i*d:(i+1)*d])
	for k := 0; k < i; k++ {
		lk := row[k]
		wk := g.w[k*a : (k+1)*a : (k+1)*a]
		for j := range wi {
			wi[j] -= lk * wk[j]
		}
	}
	lii, vi := row[i], g.v[i]
	mu, sig2 := g.mu[:a:a], g.sig2[:a:a]
	for j := range wi {
		wj := wi[j] / lii
		wi[j] = wj
		mu[j] += wj * vi
		sig2[j] -= wj * wj
	}
}

// forwardSubst sets dst = L^{-1} k_t(x) (len t) in the same order as appendCacheRow.
func (g *GPUCB) forwardSubst(dst, x []float64) {
	t, d := g.t, g.dim
	KernelVector(g.kernel, dst[:t], g.x[:t*d], x)
	for i := 0; i < t; i++ {
		row := g.l.Row(i)
		acc := dst[i]
		for k := 0; k < i; k++ {
			acc -= row[k] * dst[k]
		}
		dst[i] = acc / row[i]
	}
}

// Choose returns the arm with the largest UCB (ties broken at random).
func (g *GPUCB) Choose(arms [][]float64) Decision {
	if len(arms) == 0 {
		panic("gp-ucb: Choose with no arms")
	}
	if !g.sameArms(arms) {
		g.rebuildCache(arms)
	}
	mult := g.multiplier()
	best, ties := -1, 0
	var bestU float64
	for j := 0; j < g.nArms; j++ {
		u := g.mu[j] + mult*math.Sqrt(math.Max(g.sig2[j], 0))
		switch {
		case best < 0 || u > bestU:
			best, bestU, ties = j, u, 1
		case u == bestU:
			ties++
			if g.rng.Intn(ties) == 0 {
				best = j
			}
		}
	}
	g.last = best
	std := math.Sqrt(math.Max(g.sig2[best], 0))
	return Decision{Arm: best, Mean: g.mu[best], Std: std, UCB: bestU}
}

// cachedArm returns the index of x in the cached arm set, or -1.
func (g *GPUCB) cachedArm(x []float64) int {
	if !g.valid {
		return -1
	}
	d := g.dim
	eq := func(j int) bool { return sameVector(g.arms[j*d:(j+1)*d], x) } // len(x) == d: Observe checked it
	if g.last >= 0 && g.last < g.nArms && eq(g.last) {
		return g.last
	}
	for j := 0; j < g.nArms; j++ {
		if eq(j) {
			return j
		}
	}
	return -1
}

// Observe adds the reward of pulling x. O(A t) when x is in the cached arm
// set, O(t^2 + A t) otherwise.
func (g *GPUCB) Observe(x []float64, reward float64) error {
	if len(x) != g.dim { // input.go: an error, never a panic
		return fmt.Errorf("gp-ucb: len(x) = %d, want dim = %d: %w", len(x), g.dim, ErrDim)
	}
	if checkInput(x, g.dim) != nil || math.IsNaN(reward) || math.IsInf(reward, 0) { // input.go: also an overflowing ||x||^2
		return fmt.Errorf("gp-ucb: non-finite input: %w", ErrNumerical)
	}
	if g.t >= g.maxRounds {
		return fmt.Errorf("gp-ucb: %d observations = max_rounds: %w", g.t, ErrRoundCap)
	}
	t := g.t
	g.lrow = growFloats(g.lrow, t+1)
	l := g.lrow[:t]
	if j := g.cachedArm(x); j >= 0 {
		for i := 0; i < t; i++ {
			l[i] = g.w[i*g.nArms+j]
		}
	} else {
		g.forwardSubst(l, x)
	}
	nn2 := g.kernel.Diag(x) + g.bp.lambda
	lv := reward
	for i := 0; i < t; i++ {
		nn2 -= l[i] * l[i]
		lv -= l[i] * g.v[i]
	}
	if !(nn2 > 0) || math.IsInf(nn2, 0) {
		return fmt.Errorf("gp-ucb: pivot %g: %w", nn2, ErrNumerical)
	}
	lnn := math.Sqrt(nn2)
	vNew := lv / lnn
	logdet := g.logdet + math.Log(nn2/g.bp.lambda)
	if math.IsNaN(vNew) || math.IsInf(vNew, 0) || math.IsInf(logdet, 0) || math.IsNaN(logdet) {
		return fmt.Errorf("gp-ucb: non-finite posterior: %w", ErrNumerical)
	}
	g.x = append(g.x, x...)
	g.y = append(g.y, reward)
	g.l.Append(l, lnn)
	g.v = append(g.v, vNew)
	g.logdet = logdet
	g.t++
	if g.valid {
		g.w = growFloats(g.w, g.t*g.nArms)
		g.appendCacheRow(t)
	}
	return nil
}

// Predict returns the posterior mean and standard deviation of f(x). O(t^2).
func (g *GPUCB) Predict(x []float64) Prediction {
	if err := checkInput(x, g.dim); err != nil { // input.go: flagged, never a panic
		return invalidPrediction(err)
	}
	g.lrow = growFloats(g.lrow, g.t+1)
	l := g.lrow[:g.t]
	g.forwardSubst(l, x)
	mean, s2 := 0.0, g.kernel.Diag(x)
	for i := range l {
		mean += l[i] * g.v[i]
		s2 -= l[i] * l[i]
	}
	return finitePrediction(Prediction{Value: mean, Std: math.Sqrt(math.Max(s2, 0)), Choice: -1, Prob: 1})
}

// Update is Observe (the Learner view of a bandit: y is the reward of x).
func (g *GPUCB) Update(x []float64, _ Prediction, y float64) error { return g.Observe(x, y) }

// MarshalBinary writes t, X, y, L, v, log det and the PRNG.
func (g *GPUCB) MarshalBinary() ([]byte, error) { return g.AppendBinary(nil) }

func (g *GPUCB) AppendBinary(dst []byte) ([]byte, error) {
	n := g.t
	w := NewStateWriter(slices.Grow(dst, 64+8*(n*g.dim+2*n+n*(n+1)/2)), "gp-ucb", gpucbStateVersion)
	w.Int(g.dim)
	w.Int(n)
	w.Floats(g.x)
	w.Floats(g.y)
	w.Floats(g.l.Data)
	w.Floats(g.v)
	w.Float(g.logdet)
	w.Rand(&g.rng)
	return w.Finish(), nil
}

// UnmarshalBinary restores a state written by MarshalBinary for the same spec.
func (g *GPUCB) UnmarshalBinary(blob []byte) error {
	r, _, err := NewStateReader(blob, "gp-ucb", gpucbStateVersion)
	if err != nil {
		return err
	}
	dim := r.Int()
	r.Check(dim == g.dim, "dimension differs from the spec")
	n := r.Int()
	r.Check(n >= 0 && n <= g.maxRounds, "rounds out of range [0, max_rounds]")
	x := r.Floats(nil)
	y := r.Floats(nil)
	ld := r.Floats(nil)
	v := r.Floats(nil)
	logdet := r.Float()
	var rng Rand
	r.Rand(&rng)
	if err := r.Err(); err != nil {
		return err
	}
	if len(x) != n*dim || len(y) != n || len(ld) != n*(n+1)/2 || len(v) != n {
		return fmt.Errorf("%w: gp-ucb: shapes do not match %d rounds", ErrState, n)
	}
	if !linalg.AllFinite(x) || !linalg.AllFinite(y) || !linalg.AllFinite(ld) || !linalg.AllFinite(v) || math.IsNaN(logdet) || math.IsInf(logdet, 0) {
		return fmt.Errorf("%w: gp-ucb: non-finite numbers", ErrState)
	}
	for i := 0; i < n; i++ {
		if !(ld[i*(i+1)/2+i] > 0) {
			return fmt.Errorf("%w: gp-ucb: Cholesky pivot %d not positive", ErrState, i)
		}
	}
	g.t, g.x, g.y, g.v, g.logdet, g.rng = n, x, y, v, logdet, rng
	g.l = linalg.Tri{N: n, Data: ld}
	g.valid, g.last, g.nArms = false, -1, 0
	return nil
}
