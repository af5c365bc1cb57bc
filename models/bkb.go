// BKB: Budgeted Kernelized Bandit, GP-UCB on a Nystrom embedding whose
// inducing points are resampled at every step by ridge-leverage-score
// sampling of the pulled arms.
//
// Paper: Calandriello, Carratino, Lazaric, Valko, Rosasco, "Gaussian process
// optimization with adaptive sketching: scalable and no regret" (COLT 2019),
// sec. 3.1 eq. (4) (approximate posterior), sec. 3.1/App. C.1 (resampling),
// sec. 3.2 (counts instead of the pull list), Theorem 2/App. D.1 (beta~_t).
// Spec: specs/seed-002-003-pkawv-and-bkb.md §8 (Algorithm 1 [RECON] §8.4),
// §11 pitfalls P2-P5 and suggestions S1, S5-S8, S11.
//
// Per step, with S_t the inducing points, z(x) = (K_S^{1/2})^+ k_S(x) and the
// pulled arms x~_1..x~_t (eq. 4 and its [DERIVED] variance form, §8.2):
//
//	V_t           = Z_t' Z_t + lambda I = sum_i c_i z(p_i) z(p_i)' + lambda I
//	mu~_t(x)      = z(x)' V_t^{-1} Z_t' y_t = z(x)' V_t^{-1} sum_i ysum_i z(p_i)
//	sigma~_t^2(x) = (k(x,x) - ||z(x)||^2)/lambda + z(x)' V_t^{-1} z(x)   (never z'z for k(x,x), P2)
//	u~_t(x)       = mu~_t(x) + beta~_t sigma~_t(x)
//	beta~_t       = 2 xi sqrt(alpha max(log(kappa^2 t), 1) sum_s sigma~_t^2(x~_s) + log(1/delta))
//	                + (1 + 1/sqrt(1-eps)) sqrt(lambda) F,   alpha = (1+eps)/(1-eps)
//
// and after pulling x~_{t+1}, S_{t+1} is rebuilt from scratch: every pulled
// instance x~_i (i <= t+1) enters with probability min(1, qbar sigma~_t^2(x~_i)).
//
// Choices made (tags as in the spec):
//   - [SUGGEST P5] The state keeps the distinct pulled points p_i with counts
//     c_i and reward sums ysum_i (identical features = one point), not the
//     pull list. Resampling the c_i instances of p_i independently includes p_i
//     at least once with probability 1 - (1 - p~_i)^{c_i}; one Bernoulli draw
//     with that probability gives the same dictionary as a set (duplicates add
//     nothing to the span, P4), with O(#distinct) draws per step.
//   - [SUGGEST S5] Stable inverse root: z(x) = L_S^{-1} k_S(x) with L_S the
//     Cholesky factor of K_S built point by point (in slot order), a point
//     whose residual k(s,s) - ||l||^2 is below 1e-9 k(s,s) (numerically in the
//     span of the earlier ones) being skipped. This is the pseudo-inverse root
//     on the numerically independent part of S, up to a rotation that leaves
//     mu~ and sigma~ unchanged (§8.2 [DERIVED]); Size() reports the rank kept.
//   - [SUGGEST S8] Incremental updates ("epochs"): the resampled S_{t+1} very
//     often equals S_t as a set (every point whose inclusion probability is 1
//     stays). Then the embedding is unchanged and the pull is a rank-one
//     update V += z z': u = V^{-1} z, h = z'u, e = y - mu~(x), and for every
//     query point q: z_q'V^{-1}z_q -= (u'z_q)^2/(1+h), mu~(q) += (u'z_q) e/(1+h)
//     (Sherman-Morrison), with the Cholesky factor of V updated in O(m^2).
//     A step costs O((A + U) m + m^2) instead of the paper's
//     O((A + U) m^2 + m^3) (U = distinct pulled points, m = |S|). The
//     posterior is rebuilt from scratch when S changes, when a new distinct
//     arm is pulled, and every max(64, m) pulls (bounding rounding drift).
//     The pulls since the last rebuild are part of the state and a restored
//     learner replays them with the same code, so it makes bit-identical
//     choices; a new arm set in Choose is likewise embedded with the rebuild's
//     factor and brought up to date by replaying the same updates.
//   - [SUGGEST S6] If every draw fails, the pulled point with the largest
//     p~ (lowest slot on ties) is kept, so the dictionary is never empty.
//   - [SUGGEST S7] log(kappa^2 t) is clamped to >= 1; kappa^2 = max k(p,p)
//     over the pulled points. `eps` (default 0.5, the paper's alpha = 3) is a
//     parameter because beta~_t needs it; the constant `beta` param overrides
//     the radius: UCB = mu + beta Std.
//   - [RECON] Std (Decision and Prediction) is in reward units,
//     sqrt(lambda sigma~^2) (the GP posterior std when lambda = xi^2), so the
//     theoretical UCB is mu + (beta~_t/sqrt(lambda)) Std.
//   - Exact UCB ties (all arms at t = 0) are broken uniformly at random with
//     the PRNG, which is the paper's "pick x~_1 uniformly at random".
//   - Caps: `max_budget` bounds |S| (if more points are drawn, the ones with
//     the largest inclusion probability are kept, lowest slot on ties);
//     `max_history` bounds the distinct pulled points: at the cap a new
//     distinct arm replaces the least-pulled stored point (lowest slot on
//     ties) and that point's observations are forgotten.
//   - Numerical guard: a rebuild is computed into a second buffer and swapped
//     in only if finite; an incremental step is checked before it is applied
//     and, should the result still be non-finite, the posterior is rebuilt
//     from the unchanged state. Counts, S and the PRNG roll back either way.
package models

import (
	"fmt"
	"math"
	"slices"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

const (
	bkbStateVersion = 1
	// bkbPivotTol is the relative residual below which an inducing point is
	// treated as lying in the span of the earlier ones.
	bkbPivotTol = 1e-9
	// bkbMinEpoch is the least number of incremental pulls between rebuilds.
	bkbMinEpoch = 64
)

func init() {
	Register(Algorithm{
		Name:    "bkb",
		Losses:  []string{"square"},
		Summary: "BKB budgeted kernelized bandit (GP-UCB on a resampled Nystrom dictionary)",
		New:     newBKB,
	})
}

// bkbPost is the approximate posterior derived from the dynamic state: the
// rebuild ("base") at the start of the epoch plus the epoch's rank-one updates.
type bkbPost struct {
	sel []int      // slots of the inducing points kept in the embedding
	ls  linalg.Tri // Cholesky factor of K_sel
	zp  []float64  // U x m embeddings of the pulled points
	v   linalg.Sym // V at the rebuild
	lv0 linalg.Tri // Cholesky factor of V at the rebuild
	w0  []float64  // V^{-1} r at the rebuild
	lv  linalg.Tri // Cholesky factor of the current V
	// Per pulled point: residual term (k - ||z||^2)/lambda (fixed in an
	// epoch), current z'V^{-1}z and current mean.
	res, q, mu []float64
	// Per epoch update k: u_k = V_{k-1}^{-1} z (row k of upd), 1/(1+h_k), e_k.
	upd    []float64
	ug, ue []float64
	kappa2 float64
}

// BKB is the budgeted kernelized bandit learner.
type BKB struct {
	kern       Kernel
	dim        int
	bp         banditParams
	qbar, eps  float64
	maxBudget  int
	maxHistory int
	rng        Rand

	// Dynamic state (serialized). The counts and sums are those of the last
	// rebuild; the pulls since then are in logSlot/logY.
	t       int
	pts     []float64 // U x dim distinct pulled points, row-major
	cnt0    []int
	ysum0   []float64
	dict    []int // S_t: slots, increasing
	logSlot []int
	logY    []float64

	// Derived.
	cur, spare *bkbPost
	cnt        []int     // current counts (cnt0 + log)
	ysum       []float64 // current reward sums (ysum0 + log, added in log order)
	sumSig2    float64 // sum_s sigma~_t^2(x~_s)
	epoch      uint64  // bumped at every rebuild (Choose memo key)

	// Choose memo: the arm set embedded with cur's factor at epoch armEpoch,
	// brought up to date through update armApplied.
	arms       []float64
	nArms      int
	armEpoch   uint64
	armOK      bool
	armApplied int
	za         []float64 // A x m
	ares, aq   []float64
	amu        []float64

	// Scratch.
	kb, zb, ub []float64
	newDict    []int
	incl       []float64
	saveCnt    []int
	saveSum    []float64
	saveDict   []int
	savePt     []float64
}

func newBKB(s *Setup) (Learner, error) {
	b := &BKB{kern: s.Kernel, dim: s.Dim, cur: &bkbPost{}, spare: &bkbPost{}}
	b.bp = readBanditParams(s.Params)
	b.qbar = s.Params.Float("qbar", 4, 1, 1e9)
	b.eps = s.Params.Float("eps", 0.5, 1e-6, 1-1e-6)
	b.maxBudget = s.Params.Int("max_budget", 256, 1, 4096)
	b.maxHistory = s.Params.Int("max_history", 4096, 1, 1<<16)
	b.rng.Seed(s.Seed)
	if !b.rebuild(b.cur) {
		return nil, fmt.Errorf("bkb: empty posterior: %w", ErrNumerical)
	}
	return b, nil
}

// Size is the dimension of the embedding (inducing points kept).
func (b *BKB) Size() int { return len(b.cur.sel) }

// point returns the features of pulled point i.
func (b *BKB) point(i int) []float64 { return b.pts[i*b.dim : (i+1)*b.dim : (i+1)*b.dim] }

func (b *BKB) scratch(m int) {
	b.kb = growFloats(b.kb, m)
	b.zb = growFloats(b.zb, m)
	b.ub = growFloats(b.ub, m)
}

// rebuild computes into p the posterior of the rebuild state (pts, cnt0,
// ysum0, dict) and replays the logged pulls. It reports false if a number
// came out non-finite. Pure function of the dynamic state.
func (b *BKB) rebuild(p *bkbPost) bool {
	lambda := b.bp.lambda
	u := len(b.cnt0)
	// Thresholded Cholesky of K_S (stable inverse root).
	p.sel = p.sel[:0]
	p.ls.Reset()
	p.ls.Reserve(len(b.dict))
	b.scratch(len(b.dict) + 1)
	for _, s := range b.dict {
		xs := b.point(s)
		m := len(p.sel)
		for k, q := range p.sel {
			b.kb[k] = b.kern.Eval(b.point(q), xs)
		}
		l := b.zb[:m]
		p.ls.SolveLower(l, b.kb[:m])
		kss := b.kern.Diag(xs)
		if res := kss - linalg.Dot(l, l); res > bkbPivotTol*kss {
			p.ls.Append(l, math.Sqrt(res))
			p.sel = append(p.sel, s)
		}
	}
	m := len(p.sel)
	// Embeddings of the pulled points, V and r = sum ysum_i z_i (in w0).
	p.zp = growFloats(p.zp, u*m)
	p.v.Reset(m, lambda)
	p.w0 = growFloats(p.w0, m)
	clear(p.w0)
	p.kappa2 = 0
	for i := 0; i < u; i++ {
		z := p.zp[i*m : (i+1)*m : (i+1)*m]
		b.embed(p, z, b.point(i))
		p.v.Rank1(float64(b.cnt0[i]), z)
		linalg.Axpy(b.ysum0[i], z, p.w0)
		p.kappa2 = math.Max(p.kappa2, b.kern.Diag(b.point(i)))
	}
	if !linalg.CholeskySym(&p.lv0, &p.v) {
		return false
	}
	p.lv0.SolveLower(p.w0, p.w0)
	p.lv0.SolveUpper(p.w0, p.w0)
	p.res = growFloats(p.res, u)
	p.q = growFloats(p.q, u)
	p.mu = growFloats(p.mu, u)
	for i := 0; i < u; i++ {
		p.res[i], p.q[i], p.mu[i] = b.baseValues(p, p.zp[i*m:(i+1)*m], b.kern.Diag(b.point(i)))
	}
	p.lv.Reset()
	p.lv.Reserve(m)
	p.lv.N, p.lv.Data = m, append(p.lv.Data, p.lv0.Data...)
	// Replay the pulls since the rebuild.
	b.currentSums()
	p.upd, p.ug, p.ue = p.upd[:0], p.ug[:0], p.ue[:0]
	for k, j := range b.logSlot {
		if !b.stepUpdate(p, j, b.logY[k]) {
			return false
		}
	}
	if !linalg.AllFinite(p.q) || !linalg.AllFinite(p.mu) || !linalg.AllFinite(p.w0) {
		return false
	}
	b.sumSig2 = b.sumVariances(p)
	return !math.IsInf(b.sumSig2, 0) && !math.IsNaN(b.sumSig2)
}

// currentSums sets the current counts and reward sums: the rebuild's plus
// the logged pulls, added in log order.
func (b *BKB) currentSums() {
	b.cnt = append(b.cnt[:0], b.cnt0...)
	b.ysum = append(b.ysum[:0], b.ysum0...)
	for k, j := range b.logSlot {
		b.cnt[j]++
		b.ysum[j] += b.logY[k]
	}
}

// embed writes z(x) = L_S^{-1} k_sel(x) into z (len m).
func (b *BKB) embed(p *bkbPost, z, x []float64) {
	m := len(p.sel)
	kb := b.kb[:m]
	for k, q := range p.sel {
		kb[k] = b.kern.Eval(b.point(q), x)
	}
	p.ls.SolveLower(z, kb)
}

// baseValues returns, at the rebuild, the residual term, z'V^{-1}z and the
// mean for the embedding z of a point with k(x,x) = kxx (b.ub is scratch).
func (b *BKB) baseValues(p *bkbPost, z []float64, kxx float64) (res, q, mean float64) {
	u := b.ub[:len(z)]
	p.lv0.SolveLower(u, z)
	return math.Max(kxx-linalg.Dot(z, z), 0) / b.bp.lambda, linalg.Dot(u, u), linalg.Dot(z, p.w0)
}

// applyUpdate folds rank-one update (u, g = 1/(1+h), e) into the values of
// the query points whose embeddings are the rows of zs. Shared by the pulled
// points and the arm memo so that both see identical numbers.
func applyUpdate(u []float64, g, e float64, zs, q, mu []float64) {
	m := len(u)
	for i := range q {
		d := linalg.Dot(u, zs[i*m:(i+1)*m])
		q[i] -= d * d * g
		mu[i] += d * e * g
	}
}

// stepUpdate appends the rank-one update of one pull of slot j with reward y
// and applies it to the pulled points and the current factor. It reports
// false, having changed nothing, if the update is not finite.
func (b *BKB) stepUpdate(p *bkbPost, j int, y float64) bool {
	m := len(p.sel)
	z := p.zp[j*m : (j+1)*m]
	k := len(p.ug)
	p.upd = growFloats(p.upd, (k+1)*m)
	u := p.upd[k*m : (k+1)*m]
	p.lv.SolveLower(u, z)
	p.lv.SolveUpper(u, u)
	g := 1 / (1 + linalg.Dot(z, u))
	e := y - p.mu[j]
	if !linalg.AllFinite(u) || math.IsNaN(g) || math.IsInf(g, 0) || math.IsNaN(e) || math.IsInf(e, 0) {
		p.upd = p.upd[:k*m]
		return false
	}
	p.ug = append(p.ug, g)
	p.ue = append(p.ue, e)
	applyUpdate(u, g, e, p.zp[:len(p.q)*m], p.q, p.mu)
	b.scratch(m)
	copy(b.zb, z)
	return p.lv.Rank1Update(b.zb[:m])
}

// sumVariances is sum_i c_i sigma~^2(p_i) over the pulled points.
func (b *BKB) sumVariances(p *bkbPost) float64 {
	s := 0.0
	for i, c := range b.cnt {
		s += float64(c) * (p.res[i] + math.Max(p.q[i], 0))
	}
	return s
}

// multiplier is the factor of Std (reward units) in the UCB.
func (b *BKB) multiplier() float64 {
	if b.bp.fixedBeta {
		return b.bp.beta
	}
	alpha := (1 + b.eps) / (1 - b.eps)
	logt := 1.0
	if b.t > 0 {
		logt = math.Max(math.Log(b.cur.kappa2*float64(b.t)), 1)
	}
	radius := 2*b.bp.xi*math.Sqrt(alpha*logt*b.sumSig2+math.Log(1/b.bp.delta)) +
		(1+1/math.Sqrt(1-b.eps))*math.Sqrt(b.bp.lambda)*b.bp.F
	return radius / math.Sqrt(b.bp.lambda)
}

// syncArms makes the memo hold the current posterior at arms.
func (b *BKB) syncArms(arms [][]float64) {
	n, d, p := len(arms), b.dim, b.cur
	m := len(p.sel)
	same := b.armOK && b.armEpoch == b.epoch && b.nArms == n
	for j := 0; same && j < n; j++ {
		same = slices.Equal(b.arms[j*d:(j+1)*d], arms[j])
	}
	if !same {
		b.arms = growFloats(b.arms, n*d)
		b.za = growFloats(b.za, n*m)
		b.ares = growFloats(b.ares, n)
		b.aq = growFloats(b.aq, n)
		b.amu = growFloats(b.amu, n)
		b.scratch(m)
		for j, a := range arms {
			if len(a) != d {
				panic(fmt.Sprintf("bkb: arm %d has dimension %d, want %d", j, len(a), d))
			}
			copy(b.arms[j*d:], a)
			z := b.za[j*m : (j+1)*m]
			b.embed(p, z, a)
			b.ares[j], b.aq[j], b.amu[j] = b.baseValues(p, z, b.kern.Diag(a))
		}
		b.nArms, b.armEpoch, b.armOK, b.armApplied = n, b.epoch, true, 0
	}
	for k := b.armApplied; k < len(p.ug); k++ {
		applyUpdate(p.upd[k*m:(k+1)*m], p.ug[k], p.ue[k], b.za[:n*m], b.aq[:n], b.amu[:n])
	}
	b.armApplied = len(p.ug)
}

// Choose returns the arm with the largest approximate UCB.
func (b *BKB) Choose(arms [][]float64) Decision {
	if len(arms) == 0 {
		panic("bkb: Choose with no arms")
	}
	b.syncArms(arms)
	mult := b.multiplier()
	sl := math.Sqrt(b.bp.lambda)
	best, ties := -1, 0
	var bestU, bestS float64
	for j := range arms {
		s := sl * math.Sqrt(b.ares[j]+math.Max(b.aq[j], 0))
		u := b.amu[j] + mult*s
		switch {
		case best < 0 || u > bestU:
			best, bestU, bestS, ties = j, u, s, 1
		case u == bestU:
			ties++
			if b.rng.Intn(ties) == 0 {
				best, bestS = j, s
			}
		}
	}
	return Decision{Arm: best, Mean: b.amu[best], Std: bestS, UCB: bestU}
}

// posterior returns mu~(x) and sigma~^2(x), computed exactly as Choose does
// (rebuild values plus the epoch's updates). O(m (m + d) + k m).
func (b *BKB) posterior(x []float64) (mean, s2 float64) {
	p := b.cur
	m := len(p.sel)
	b.scratch(m)
	z := b.zb[:m]
	b.embed(p, z, x)
	res, q, mu := b.baseValues(p, z, b.kern.Diag(x))
	qs, mus := [1]float64{q}, [1]float64{mu}
	for k := range p.ug {
		applyUpdate(p.upd[k*m:(k+1)*m], p.ug[k], p.ue[k], z, qs[:], mus[:])
	}
	return mus[0], res + math.Max(qs[0], 0)
}

// Predict returns the approximate posterior mean and std (reward units) of f(x).
func (b *BKB) Predict(x []float64) Prediction {
	if len(x) != b.dim {
		panic(fmt.Sprintf("bkb: x has dimension %d, want %d", len(x), b.dim))
	}
	mean, s2 := b.posterior(x)
	return Prediction{Value: mean, Std: math.Sqrt(b.bp.lambda * s2), Choice: -1, Prob: 1}
}

// Update is Observe (the Learner view of a bandit: y is the reward of x).
func (b *BKB) Update(x []float64, _ Prediction, y float64) error { return b.Observe(x, y) }

// slotOf returns the slot of x among the pulled points, or -1.
func (b *BKB) slotOf(x []float64) int {
	for i := range b.cnt0 {
		if slices.Equal(b.point(i), x) {
			return i
		}
	}
	return -1
}

// Observe records the reward of pulling x: it resamples the dictionary with
// the current variances, then updates the posterior (incrementally if the
// dictionary and the set of pulled points did not change).
func (b *BKB) Observe(x []float64, reward float64) error {
	if len(x) != b.dim {
		panic(fmt.Sprintf("bkb: x has dimension %d, want %d", len(x), b.dim))
	}
	if !linalg.AllFinite(x) || math.IsNaN(reward) || math.IsInf(reward, 0) {
		return fmt.Errorf("bkb: non-finite input: %w", ErrNumerical)
	}
	slot := b.slotOf(x)
	fresh := slot < 0
	var s2x float64
	if fresh {
		_, s2x = b.posterior(x)
	}
	rngSave := b.rng.State()
	slot = b.resample(slot, fresh, s2x)
	p := b.cur
	if !fresh && math.IsInf(b.ysum[slot]+reward, 0) {
		b.rng.SetState(rngSave)
		return fmt.Errorf("bkb: reward sum overflows: %w", ErrNumerical)
	}
	if !fresh && slices.Equal(b.newDict, b.dict) && len(b.logSlot) < max(bkbMinEpoch, len(p.sel)) {
		// Incremental step.
		b.cnt[slot]++
		b.ysum[slot] += reward
		b.logSlot = append(b.logSlot, slot)
		b.logY = append(b.logY, reward)
		if !b.stepUpdate(p, slot, reward) || !linalg.AllFinite(p.q) || !linalg.AllFinite(p.mu) {
			b.logSlot = b.logSlot[:len(b.logSlot)-1]
			b.logY = b.logY[:len(b.logY)-1]
			b.rng.SetState(rngSave)
			b.rebuild(p) // the unchanged state rebuilt: the posterior as before
			b.epoch++
			return fmt.Errorf("bkb: non-finite update: %w", ErrNumerical)
		}
		b.sumSig2 = b.sumVariances(p)
		b.t++
		return nil
	}
	// Rebuild: fold the log into the rebuild counts, add this pull, take S_{t+1}.
	b.saveCnt = append(b.saveCnt[:0], b.cnt0...)
	b.saveSum = append(b.saveSum[:0], b.ysum0...)
	b.saveDict = append(b.saveDict[:0], b.dict...)
	u := len(b.cnt0)
	copy(b.cnt0, b.cnt) // fold the log (same additions, same order)
	copy(b.ysum0, b.ysum)
	evicted := false
	switch {
	case !fresh:
		b.cnt0[slot]++
		b.ysum0[slot] += reward
	case u < b.maxHistory:
		b.pts = append(b.pts, x...)
		b.cnt0 = append(b.cnt0, 1)
		b.ysum0 = append(b.ysum0, reward)
	default:
		evicted = true
		b.savePt = append(b.savePt[:0], b.point(slot)...)
		copy(b.point(slot), x)
		b.cnt0[slot], b.ysum0[slot] = 1, reward
	}
	b.dict = append(b.dict[:0], b.newDict...)
	saveLogN := len(b.logSlot)
	b.logSlot, b.logY = b.logSlot[:0], b.logY[:0]
	if !linalg.AllFinite(b.ysum0) || !b.rebuild(b.spare) {
		if evicted {
			copy(b.point(slot), b.savePt)
		}
		b.pts = b.pts[:u*b.dim]
		b.cnt0 = append(b.cnt0[:0], b.saveCnt...)
		b.ysum0 = append(b.ysum0[:0], b.saveSum...)
		b.dict = append(b.dict[:0], b.saveDict...)
		b.logSlot, b.logY = b.logSlot[:saveLogN], b.logY[:saveLogN]
		b.rng.SetState(rngSave)
		b.currentSums()
		b.sumSig2 = b.sumVariances(b.cur)
		return fmt.Errorf("bkb: non-finite posterior: %w", ErrNumerical)
	}
	b.cur, b.spare = b.spare, b.cur
	b.epoch++
	b.t++
	return nil
}

// resample draws S_{t+1} into b.newDict from the pulled points with the
// variances of the current posterior (sec. 3.1: sigma_{t+1} approximated by
// sigma~_t) and the counts including the pull of slot (if fresh, a new point
// appended or replacing the least-pulled one, with variance s2x). It returns
// the slot the pulled arm occupies.
func (b *BKB) resample(slot int, fresh bool, s2x float64) int {
	p := b.cur
	u := len(b.cnt)
	newSlot := -1
	if fresh {
		if u < b.maxHistory {
			newSlot = u
			u++
		} else {
			newSlot = 0
			for i, c := range b.cnt {
				if c < b.cnt[newSlot] {
					newSlot = i
				}
			}
		}
	}
	b.newDict = b.newDict[:0]
	b.incl = growFloats(b.incl, u)
	bestP, bestSlot := -1.0, 0
	for i := 0; i < u; i++ {
		var s2 float64
		c := 1
		if i == newSlot {
			s2 = s2x
		} else {
			s2 = p.res[i] + math.Max(p.q[i], 0)
			c = b.cnt[i]
			if i == slot {
				c++
			}
		}
		pr := math.Min(1, b.qbar*s2)
		if pr > bestP {
			bestP, bestSlot = pr, i
		}
		// P(at least one of the c instances is drawn) = 1 - (1-p)^c.
		pi := 1.0
		if pr < 1 {
			pi = -math.Expm1(float64(c) * math.Log1p(-pr))
		}
		b.incl[i] = pi
		if pi >= 1 || (pi > 0 && b.rng.Float64() < pi) {
			b.newDict = append(b.newDict, i)
		}
	}
	if len(b.newDict) == 0 {
		b.newDict = append(b.newDict, bestSlot)
	}
	if len(b.newDict) > b.maxBudget {
		incl := b.incl
		slices.SortFunc(b.newDict, func(i, j int) int {
			switch {
			case incl[i] > incl[j]:
				return -1
			case incl[i] < incl[j]:
				return 1
			}
			return i - j
		})
		b.newDict = b.newDict[:b.maxBudget]
		slices.Sort(b.newDict)
	}
	if fresh {
		return newSlot
	}
	return slot
}

// MarshalBinary writes the pulled points with the counts and sums of the
// last rebuild, the dictionary, the pulls since the rebuild, t and the PRNG;
// the posterior is recomputed from them on restore (bit-identical).
func (b *BKB) MarshalBinary() ([]byte, error) {
	u := len(b.cnt0)
	w := NewStateWriter(make([]byte, 0, 64+8*(u*(b.dim+2)+len(b.dict)+2*len(b.logY))), "bkb", bkbStateVersion)
	w.Int(b.dim)
	w.Int(b.t)
	w.Floats(b.pts)
	w.Ints(b.cnt0)
	w.Floats(b.ysum0)
	w.Ints(b.dict)
	w.Ints(b.logSlot)
	w.Floats(b.logY)
	w.Rand(&b.rng)
	return w.Finish(), nil
}

// UnmarshalBinary restores a state written by MarshalBinary for the same spec.
func (b *BKB) UnmarshalBinary(blob []byte) error {
	r, _, err := NewStateReader(blob, "bkb", bkbStateVersion)
	if err != nil {
		return err
	}
	dim := r.Int()
	r.Check(dim == b.dim, "dimension differs from the spec")
	t := r.Int()
	pts := r.Floats(nil)
	cnt0 := r.Ints(nil)
	ysum0 := r.Floats(nil)
	dict := r.Ints(nil)
	logSlot := r.Ints(nil)
	logY := r.Floats(nil)
	var rng Rand
	r.Rand(&rng)
	if err := r.Err(); err != nil {
		return err
	}
	u := len(cnt0)
	total := len(logSlot)
	ok := u <= b.maxHistory && len(pts) == u*dim && len(ysum0) == u && len(dict) <= b.maxBudget &&
		len(logY) == len(logSlot) && linalg.AllFinite(pts) && linalg.AllFinite(ysum0) &&
		linalg.AllFinite(logY) && (u == 0) == (len(dict) == 0)
	for i := 0; ok && i < u; i++ {
		ok = cnt0[i] >= 1
		total += cnt0[i]
	}
	for k := 0; ok && k < len(dict); k++ {
		ok = dict[k] >= 0 && dict[k] < u && (k == 0 || dict[k] > dict[k-1])
	}
	for _, j := range logSlot {
		ok = ok && j >= 0 && j < u
	}
	if !ok || t < total {
		return fmt.Errorf("%w: bkb: inconsistent shapes or counts", ErrState)
	}
	// Rebuild on a copy so that a failure leaves b untouched.
	nb := *b
	nb.t, nb.pts, nb.cnt0, nb.ysum0, nb.dict, nb.logSlot, nb.logY, nb.rng = t, pts, cnt0, ysum0, dict, logSlot, logY, rng
	nb.cur, nb.spare, nb.cnt = &bkbPost{}, &bkbPost{}, nil
	nb.kb, nb.zb, nb.ub = nil, nil, nil
	if !nb.rebuild(nb.cur) {
		return fmt.Errorf("%w: bkb: restored posterior is not finite", ErrState)
	}
	nb.epoch = b.epoch + 1
	nb.armOK = false
	*b = nb
	return nil
}
