// BKB: Budgeted Kernelized Bandit, GP-UCB on a Nystrom embedding whose
// inducing points are resampled at every step by ridge-leverage-score
// sampling of the pulled arms.
//
// Paper: Calandriello, Carratino, Lazaric, Valko, Rosasco, "Gaussian process
// optimization with adaptive sketching: scalable and no regret" (COLT 2019),
// sec. 3.1 eq. (4) (approximate posterior), sec. 3.1/App. C.1 (resampling),
// sec. 3.2 (counts instead of the pull list), Theorem 2/App. D.1 (beta~_t).
// Notes: docs/bandits.md (Algorithm 1 [RECON]),
//  pitfalls P2-P5 and suggestions S1, S5-S8, S11.
//
// Per step, with S_t the inducing points, z(x) = (K_S^{1/2})^+ k_S(x) and the
// pulled arms x~_1..x~_t (eq. 4 and its [DERIVED] variance form):
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
//     mu~ and sigma~ unchanged ([DERIVED]); Size() reports the rank kept.
//   - [SUGGEST S8] Incremental updates ("epochs"): the resampled S_{t+1} very
//     often equals S_t as a set (every point whose inclusion probability is 1
//     stays). Then the embedding is unchanged and the pull is a rank-one
//     update V += z z': u = V^{-1} z, h = z'u, e = y - mu~(x), and for every
//     query point q: z_q'V^{-1}z_q -= (u'z_q)^2/(1+h), mu~(q) += (u'z_q) e/(1+h)
//     (Sherman-Morrison), with an explicit V^{-1} updated in O(m^2) (V >=
//     lambda I, and the epoch is short, so the explicit inverse is safe; it
//     is recomputed from a Cholesky factor at every rebuild).
//     A new distinct arm that joins S (the usual case: its variance is
//     large) appends one embedding coordinate: bordered updates of L_S and of
//     V^{-1} (bordered inverse), and for every query the Schur-complement update
//     q += (zeta - beta'z)^2/s, mu~ += (zeta - beta'z) tau (beta = V^{-1}b).
//     A step costs O((A + U) m + m^2) instead of the paper's
//     O((A + U) m^2 + m^3) (U = distinct pulled points, m = |S|). The
//     posterior is rebuilt from scratch when S changes otherwise, when a new
//     arm replaces a stored one (max_history), after 32 added inducing
//     points, and every `refresh` pulls (default 128; bounds rounding drift
//     and the replay cost of a new arm set).
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
	// bkbAddSlack is how many inducing points an epoch may add before a
	// rebuild (the row stride of the embeddings is m + bkbAddSlack).
	bkbAddSlack = 32
	// bkbDefaultRefresh is the default of params.refresh.
	bkbDefaultRefresh = 128
)

func init() {
	Register(Algorithm{
		Name:    "bkb",
		Losses:  []string{"square"},
		Summary: "BKB budgeted kernelized bandit (GP-UCB on a resampled Nystrom dictionary)",
		New:     newBKB,
	})
}

// bkbOp is one incremental change of an epoch, replayed in order on every
// set of query points (pulled points, the arm memo, Predict).
type bkbOp struct {
	add  bool
	slot int // add: the new inducing point
	m    int // embedding dimension before the op
	off  int // offset of the op's vectors in bkbPost.vec
	// pull: u = V^{-1} z at off, g = 1/(1+z'u), e = y - mu~(x).
	g, e float64
	// add: l = L_S^{-1} k_S(x_s) at off, beta = V^{-1} b at off+m, the new
	// pivots lnn (of K_S) and sch (Schur complement of V), tau.
	lnn, sch, tau float64
}

// bkbPost is the approximate posterior derived from the dynamic state: the
// rebuild at the start of the epoch plus the epoch's incremental ops.
type bkbPost struct {
	sel    []int      // slots of the inducing points kept in the embedding
	ls     linalg.Tri // Cholesky factor of K_sel
	stride int        // row stride of the embeddings: m at the rebuild + adds allowed
	cap    int        // pulls allowed before the next rebuild
	zp     []float64  // U x stride embeddings of the pulled points
	v      linalg.Sym // V at the rebuild
	lv0    linalg.Tri // Cholesky factor of V at the rebuild
	w0     []float64  // V^{-1} r at the rebuild
	vinv   linalg.Sym // current V^{-1}, Sherman-Morrison / bordered updates
	w      []float64  // current V^{-1} r
	// Per pulled point: residual term (k - ||z||^2)/lambda, z'V^{-1}z and mean.
	res, q, mu []float64
	ops        []bkbOp
	vec        []float64
	kappa2     float64
}

// bkb is the budgeted kernelized bandit learner (algorithm "bkb").
type bkb struct {
	kern       Kernel
	dim        int
	bp         banditParams
	qbar, eps  float64
	maxBudget  int
	maxHistory int
	refresh    int
	rng        Rand

	// Dynamic state (serialized): the first len(cnt0) points with the counts,
	// sums and dictionary of the last rebuild, then the pulls since (a pull
	// of slot == number of points so far appends a new point; logAdd says
	// whether it joined S).
	t       int
	pts     []float64 // U x dim distinct pulled points, row-major
	cnt0    []int
	ysum0   []float64
	dict0   []int
	logSlot []int
	logY    []float64
	logAdd  []bool

	// Derived.
	cur, spare *bkbPost
	dict       []int     // current S (dict0 plus the points added since)
	cnt        []int     // current counts
	ysum       []float64 // current reward sums (added in log order)
	sumSig2    float64   // sum_s sigma~_t^2(x~_s)
	epoch      uint64    // bumped at every rebuild (Choose memo key)

	// Choose memo: the arm set embedded with cur's rebuild factor at epoch
	// armEpoch, brought up to date through op armApplied.
	arms          []float64
	nArms         int
	armEpoch      uint64
	armOK         bool
	armApplied    int
	za            []float64 // A x stride
	ares, aq, amu []float64

	// Scratch.
	kb, zb, ub, bb []float64
	newDict        []int
	incl           []float64
	saveCnt        []int
	saveSum        []float64
	saveDict       []int
	savePt         []float64
}

func newBKB(s *Setup) (Learner, error) {
	b := &bkb{kern: s.Kernel, dim: s.Dim, cur: &bkbPost{}, spare: &bkbPost{}}
	b.bp = readBanditParams(s.Params)
	b.qbar = s.Params.Float("qbar", 16, 1, 1e9)
	b.eps = s.Params.Float("eps", 0.5, 1e-6, 1-1e-6)
	b.maxBudget = s.Params.Int("max_budget", 256, 1, 4096)
	b.maxHistory = s.Params.Int("max_history", 4096, 1, 1<<16)
	b.refresh = s.Params.Int("refresh", bkbDefaultRefresh, 1, 1<<16)
	b.rng.Seed(s.Seed)
	if !b.rebuild(b.cur) {
		return nil, fmt.Errorf("bkb: empty posterior: %w", ErrNumerical)
	}
	return b, nil
}

// Size is the dimension of the embedding (inducing points kept).
func (b *bkb) Size() int { return len(b.cur.sel) }

// point returns the features of pulled point i.
func (b *bkb) point(i int) []float64 { return b.pts[i*b.dim : (i+1)*b.dim : (i+1)*b.dim] }

func (b *bkb) scratch(m int) {
	b.kb = growFloats(b.kb, m)
	b.zb = growFloats(b.zb, m)
	b.ub = growFloats(b.ub, m)
	b.bb = growFloats(b.bb, m)
}

// rebuild computes into p the posterior of the rebuild state (the first
// len(cnt0) points, cnt0, ysum0, dict0) and replays the logged pulls. It
// reports false if a number came out non-finite. Pure function of the
// dynamic state, so a restored learner gets the same bits.
func (b *bkb) rebuild(p *bkbPost) bool {
	lambda := b.bp.lambda
	u := len(b.cnt0)
	// Thresholded Cholesky of K_S (stable inverse root).
	p.sel = p.sel[:0]
	p.ls.Reset()
	b.scratch(len(b.dict0) + 1)
	for _, s := range b.dict0 {
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
	p.cap = b.refresh
	p.stride = m + bkbAddSlack
	p.ls.Reserve(p.stride)
	b.scratch(p.stride)
	// Embeddings of the pulled points, V and r = sum ysum_i z_i (in w0).
	st := p.stride
	p.zp = growFloats(p.zp, u*st)
	p.v.Reset(m, lambda)
	p.w0 = growFloats(p.w0, m)
	clear(p.w0)
	p.kappa2 = 0
	for i := 0; i < u; i++ {
		z := p.zp[i*st : i*st+m]
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
		p.res[i], p.q[i], p.mu[i] = b.baseValues(p, p.zp[i*st:i*st+m], b.kern.Diag(b.point(i)))
	}
	// Explicit V^{-1} from the factor, column by column (O(m^3), per rebuild).
	if need := p.stride * (p.stride + 1) / 2; cap(p.vinv.Data) < need {
		p.vinv.Data = make([]float64, 0, need)
	}
	p.vinv.Reset(m, 0)
	col := b.zb[:m]
	for k := 0; k < m; k++ {
		clear(col)
		col[k] = 1
		p.lv0.SolveLower(col, col)
		p.lv0.SolveUpper(col, col)
		for i := k; i < m; i++ {
			p.vinv.Set(i, k, col[i])
		}
	}
	p.w = append(p.w[:0], p.w0...)
	p.ops, p.vec = p.ops[:0], p.vec[:0]
	// Replay the pulls since the rebuild.
	b.dict = append(b.dict[:0], b.dict0...)
	b.cnt = append(b.cnt[:0], b.cnt0...)
	b.ysum = append(b.ysum[:0], b.ysum0...)
	for k, j := range b.logSlot {
		if !b.applyPull(p, j, b.logY[k], b.logAdd[k]) {
			return false
		}
	}
	b.sumSig2 = b.sumVariances(p)
	return !math.IsInf(b.sumSig2, 0) && !math.IsNaN(b.sumSig2)
}

// embed writes z(x) = L_S^{-1} k_sel(x) into z (len m).
func (b *bkb) embed(p *bkbPost, z, x []float64) {
	m := len(p.sel)
	kb := b.kb[:m]
	for k, q := range p.sel {
		kb[k] = b.kern.Eval(b.point(q), x)
	}
	p.ls.SolveLower(z, kb)
}

// baseValues returns, at the rebuild, the residual term, z'V^{-1}z and the
// mean for the embedding z of a point with k(x,x) = kxx (b.ub is scratch).
func (b *bkb) baseValues(p *bkbPost, z []float64, kxx float64) (res, q, mean float64) {
	u := b.ub[:len(z)]
	p.lv0.SolveLower(u, z)
	return math.Max(kxx-linalg.Dot(z, z), 0) / b.bp.lambda, linalg.Dot(u, u), linalg.Dot(z, p.w0)
}

// replayOp applies op to the query points whose embeddings are the rows of
// zs (stride st) and whose features are given by x(i). Shared by the arm
// memo and Predict so that both see identical numbers.
func (b *bkb) replayOp(p *bkbPost, op *bkbOp, zs []float64, st int, x func(int) []float64, res, q, mu []float64) {
	m := op.m
	if !op.add {
		u := p.vec[op.off : op.off+m]
		for i := range q {
			d := dot4(u, zs[i*st:i*st+m])
			q[i] -= d * d * op.g
			mu[i] += d * op.e * op.g
		}
		return
	}
	l, beta := p.vec[op.off:op.off+m], p.vec[op.off+m:op.off+2*m]
	xs := b.point(op.slot)
	for i := range q {
		z := zs[i*st : i*st+m+1]
		zeta := (b.kern.Eval(xs, x(i)) - linalg.Dot(l, z[:m])) / op.lnn
		z[m] = zeta
		phi := zeta - linalg.Dot(beta, z[:m])
		q[i] += phi * phi / op.sch
		mu[i] += phi * op.tau
		res[i] -= zeta * zeta / b.bp.lambda
	}
}

// applyPull folds one logged pull (slot j, reward y; a new point if j equals
// the number of points, joining S if add) into the epoch. It reports false if
// a number came out non-finite (p is then garbage: rebuild it).
func (b *bkb) applyPull(p *bkbPost, j int, y float64, add bool) bool {
	if j == len(b.cnt) {
		if !b.appendPoint(p, j, add) {
			return false
		}
	}
	b.cnt[j]++
	b.ysum[j] += y
	m, st := len(p.sel), p.stride
	z := p.zp[j*st : j*st+m]
	off := len(p.vec)
	p.vec = append(p.vec, z...) // room for u
	u := p.vec[off : off+m]
	p.vinv.MulVec(u, z)
	g := 1 / (1 + linalg.Dot(z, u))
	e := y - p.mu[j]
	if !linalg.AllFinite(u) || math.IsNaN(g) || math.IsInf(g, 0) || math.IsNaN(e) || math.IsInf(e, 0) || math.IsInf(b.ysum[j], 0) {
		return false
	}
	op := bkbOp{m: m, off: off, g: g, e: e}
	p.ops = append(p.ops, op)
	for i := range p.q {
		d := dot4(u, p.zp[i*st:i*st+m])
		p.q[i] -= d * d * g
		p.mu[i] += d * e * g
	}
	linalg.Axpy(e*g, u, p.w)
	p.vinv.Rank1(-g, u)
	return linalg.AllFinite(p.q) && linalg.AllFinite(p.mu)
}

// appendPoint adds pulled point j (count 0) to the epoch: its embedding and
// values under the current factor, then, if it joins S and is numerically
// independent of it, the new embedding coordinate (bordered updates of L_S
// and of V^{-1}, and the Schur-complement update of every query).
func (b *bkb) appendPoint(p *bkbPost, j int, add bool) bool {
	lambda := b.bp.lambda
	m, st := len(p.sel), p.stride
	x := b.point(j)
	kxx := b.kern.Diag(x)
	b.cnt = append(b.cnt, 0)
	b.ysum = append(b.ysum, 0)
	p.zp = growFloats(p.zp, (j+1)*st)
	z := p.zp[j*st : j*st+m]
	b.embed(p, z, x)
	p.res = append(p.res, math.Max(kxx-linalg.Dot(z, z), 0)/lambda)
	p.q = append(p.q, p.vinv.Quad(z))
	p.mu = append(p.mu, linalg.Dot(z, p.w))
	p.kappa2 = math.Max(p.kappa2, kxx)
	if !add {
		return true
	}
	b.dict = append(b.dict, j)
	lss := kxx - linalg.Dot(z, z)
	if !(lss > bkbPivotTol*kxx) {
		return true // in the span of S already: no new coordinate
	}
	if m+1 > st {
		panic("bkb: no room for an added inducing point") // Observe checks room
	}
	lnn := math.Sqrt(lss)
	off := len(p.vec)
	p.vec = append(p.vec, z...)              // l = z(x_j) = L_S^{-1} k_S(x_j)
	p.vec = append(p.vec, make0(b.bb, m)...) // room for beta
	l, beta := p.vec[off:off+m], p.vec[off+m:off+2*m]
	// New coordinate of every pulled point, and b, dd, rho of the bordered V.
	bv := b.bb[:m]
	clear(bv)
	dd, rho := lambda, 0.0
	for i := range b.cnt {
		zi := p.zp[i*st : i*st+m+1]
		zeta := (b.kern.Eval(x, b.point(i)) - linalg.Dot(l, zi[:m])) / lnn
		zi[m] = zeta
		c := float64(b.cnt[i])
		linalg.Axpy(c*zeta, zi[:m], bv)
		dd += c * zeta * zeta
		rho += b.ysum[i] * zeta
	}
	p.vinv.MulVec(beta, bv)
	sch := dd - linalg.Dot(bv, beta)
	if !(sch > 0) || math.IsInf(sch, 0) {
		return false
	}
	tau := (rho - linalg.Dot(bv, p.w)) / sch
	for i := range p.q {
		zi := p.zp[i*st : i*st+m+1]
		phi := zi[m] - linalg.Dot(beta, zi[:m])
		p.q[i] += phi * phi / sch
		p.mu[i] += phi * tau
		p.res[i] -= zi[m] * zi[m] / lambda
	}
	linalg.Axpy(-tau, beta, p.w)
	p.w = append(p.w, tau)
	// Bordered inverse: [[V^{-1} + beta beta'/s, -beta/s], [-beta'/s, 1/s]].
	p.vinv.Rank1(1/sch, beta)
	p.vinv.AppendDiag(1 / sch)
	for k, bk := range beta {
		p.vinv.Set(m, k, -bk/sch)
	}
	p.ls.Append(l, lnn)
	p.sel = append(p.sel, j)
	p.ops = append(p.ops, bkbOp{add: true, slot: j, m: m, off: off, lnn: lnn, sch: sch, tau: tau})
	return !math.IsNaN(tau) && !math.IsInf(tau, 0)
}

// dot4 is x.y with four accumulators (the per-query inner product of the
// incremental updates, the hottest loop of a bandit step).
func dot4(x, y []float64) float64 {
	y = y[:len(x)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+3 < len(x); i += 4 {
		s0 += x[i] * y[i]
		s1 += x[i+1] * y[i+1]
		s2 += x[i+2] * y[i+2]
		s3 += x[i+3] * y[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// make0 returns s[:n] zeroed (scratch to append as room).
func make0(s []float64, n int) []float64 {
	s = s[:n]
	clear(s)
	return s
}

// sumVariances is sum_i c_i sigma~^2(p_i) over the pulled points.
func (b *bkb) sumVariances(p *bkbPost) float64 {
	s := 0.0
	for i, c := range b.cnt {
		s += float64(c) * (math.Max(p.res[i], 0) + math.Max(p.q[i], 0))
	}
	return s
}

// multiplier is the factor of Std (reward units) in the UCB.
func (b *bkb) multiplier() float64 {
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
func (b *bkb) syncArms(arms [][]float64) {
	n, d, p := len(arms), b.dim, b.cur
	same := b.armOK && b.armEpoch == b.epoch && b.nArms == n
	for j := 0; same && j < n; j++ {
		same = slices.Equal(b.arms[j*d:(j+1)*d], arms[j])
	}
	st := p.stride
	if !same {
		m := p.lv0.N
		b.arms = growFloats(b.arms, n*d)
		b.za = growFloats(b.za, n*st)
		b.ares = growFloats(b.ares, n)
		b.aq = growFloats(b.aq, n)
		b.amu = growFloats(b.amu, n)
		b.scratch(st)
		for j, a := range arms {
			if len(a) != d {
				panic(fmt.Sprintf("bkb: arm %d has dimension %d, want %d", j, len(a), d))
			}
			copy(b.arms[j*d:], a)
			z := b.za[j*st : j*st+m]
			b.embedBase(p, z, a)
			b.ares[j], b.aq[j], b.amu[j] = b.baseValues(p, z, b.kern.Diag(a))
		}
		b.nArms, b.armEpoch, b.armOK, b.armApplied = n, b.epoch, true, 0
	}
	armX := func(i int) []float64 { return b.arms[i*d : (i+1)*d] }
	for k := b.armApplied; k < len(p.ops); k++ {
		b.replayOp(p, &p.ops[k], b.za[:n*st], st, armX, b.ares[:n], b.aq[:n], b.amu[:n])
	}
	b.armApplied = len(p.ops)
}

// embedBase embeds x with the rebuild's inducing points only (the first
// lv0.N of sel); the epoch's added coordinates come from replaying the ops.
func (b *bkb) embedBase(p *bkbPost, z, x []float64) {
	m0 := p.lv0.N
	kb := b.kb[:m0]
	for k, q := range p.sel[:m0] {
		kb[k] = b.kern.Eval(b.point(q), x)
	}
	ls0 := linalg.Tri{N: m0, Data: p.ls.Data[:m0*(m0+1)/2]}
	ls0.SolveLower(z, kb)
}

// Choose returns the arm with the largest approximate UCB.
func (b *bkb) Choose(arms [][]float64) Decision {
	if len(arms) == 0 {
		panic("bkb: Choose with no arms")
	}
	b.syncArms(arms)
	mult := b.multiplier()
	sl := math.Sqrt(b.bp.lambda)
	best, ties := -1, 0
	var bestU, bestS float64
	for j := range arms {
		s := sl * math.Sqrt(math.Max(b.ares[j], 0)+math.Max(b.aq[j], 0))
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
// (rebuild values plus the epoch's ops). O(m (m + d) + ops m).
func (b *bkb) posterior(x []float64) (mean, s2 float64) {
	p := b.cur
	st := p.stride
	b.scratch(st)
	z := b.zb[:st]
	m0 := p.lv0.N
	b.embedBase(p, z[:m0], x)
	res, q, mu := b.baseValues(p, z[:m0], b.kern.Diag(x))
	rs, qs, mus := [1]float64{res}, [1]float64{q}, [1]float64{mu}
	xf := func(int) []float64 { return x }
	for k := range p.ops {
		b.replayOp(p, &p.ops[k], z, st, xf, rs[:], qs[:], mus[:])
	}
	return mus[0], math.Max(rs[0], 0) + math.Max(qs[0], 0)
}

// Predict returns the approximate posterior mean and std (reward units) of f(x).
func (b *bkb) Predict(x []float64) Prediction {
	if err := checkInput(x, b.dim); err != nil { // input.go: flagged, never a panic
		return invalidPrediction(err)
	}
	mean, s2 := b.posterior(x)
	return finitePrediction(Prediction{Value: mean, Std: math.Sqrt(b.bp.lambda * s2), Choice: -1, Prob: 1})
}

// Update is Observe (the Learner view of a bandit: y is the reward of x).
func (b *bkb) Update(x []float64, _ Prediction, y float64) error { return b.Observe(x, y) }

// slotOf returns the slot of x among the pulled points, or -1.
func (b *bkb) slotOf(x []float64) int {
	for i := range b.cnt {
		if slices.Equal(b.point(i), x) {
			return i
		}
	}
	return -1
}

// Observe records the reward of pulling x: it resamples the dictionary with
// the current variances, then updates the posterior incrementally when the
// new dictionary is the old one (plus, for a new arm, that arm), and
// rebuilds it otherwise.
func (b *bkb) Observe(x []float64, reward float64) error {
	if len(x) != b.dim { // input.go: an error, never a panic
		return fmt.Errorf("bkb: len(x) = %d, want dim = %d: %w", len(x), b.dim, ErrDim)
	}
	if checkInput(x, b.dim) != nil || math.IsNaN(reward) || math.IsInf(reward, 0) { // input.go: also an overflowing ||x||^2
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
	if !fresh && math.IsInf(b.ysum[slot]+reward, 0) {
		b.rng.SetState(rngSave)
		return fmt.Errorf("bkb: reward sum overflows: %w", ErrNumerical)
	}
	p := b.cur
	u := len(b.cnt)
	incremental, add := false, false
	if len(b.logSlot) < p.cap {
		switch {
		case !fresh:
			incremental = slices.Equal(b.newDict, b.dict)
		case slot == u: // appended, no eviction
			nd := len(b.newDict)
			add = nd > 0 && b.newDict[nd-1] == slot
			if add {
				nd--
			}
			incremental = slices.Equal(b.newDict[:nd], b.dict) && (!add || len(p.sel) < p.stride)
		}
	}
	if incremental {
		if fresh {
			b.pts = append(b.pts, x...)
		}
		b.logSlot = append(b.logSlot, slot)
		b.logY = append(b.logY, reward)
		b.logAdd = append(b.logAdd, add)
		if !b.applyPull(p, slot, reward, add) {
			n := len(b.logSlot) - 1
			b.logSlot, b.logY, b.logAdd = b.logSlot[:n], b.logY[:n], b.logAdd[:n]
			b.pts = b.pts[:u*b.dim]
			b.rng.SetState(rngSave)
			b.rebuild(p) // the unchanged state rebuilt: the posterior as before
			b.epoch++
			return fmt.Errorf("bkb: non-finite update: %w", ErrNumerical)
		}
		b.sumSig2 = b.sumVariances(p)
		b.t++
		return nil
	}
	// Rebuild: fold the log into the rebuild state, add this pull, take S_{t+1}.
	b.saveCnt = append(b.saveCnt[:0], b.cnt0...)
	b.saveSum = append(b.saveSum[:0], b.ysum0...)
	b.saveDict = append(b.saveDict[:0], b.dict0...)
	u0 := len(b.cnt0)
	b.cnt0 = append(b.cnt0[:0], b.cnt...) // the log folded: same additions, same order
	b.ysum0 = append(b.ysum0[:0], b.ysum...)
	evicted := false
	switch {
	case !fresh:
		b.cnt0[slot]++
		b.ysum0[slot] += reward
	case slot == u:
		b.pts = append(b.pts, x...)
		b.cnt0 = append(b.cnt0, 1)
		b.ysum0 = append(b.ysum0, reward)
	default:
		evicted = true
		b.savePt = append(b.savePt[:0], b.point(slot)...)
		copy(b.point(slot), x)
		b.cnt0[slot], b.ysum0[slot] = 1, reward
	}
	b.dict0 = append(b.dict0[:0], b.newDict...)
	saveLogN := len(b.logSlot)
	b.logSlot, b.logY, b.logAdd = b.logSlot[:0], b.logY[:0], b.logAdd[:0]
	if !b.rebuild(b.spare) {
		if evicted {
			copy(b.point(slot), b.savePt)
		}
		b.pts = b.pts[:u*b.dim]
		b.cnt0 = append(b.cnt0[:0], b.saveCnt[:u0]...)
		b.ysum0 = append(b.ysum0[:0], b.saveSum[:u0]...)
		b.dict0 = append(b.dict0[:0], b.saveDict...)
		b.logSlot, b.logY, b.logAdd = b.logSlot[:saveLogN], b.logY[:saveLogN], b.logAdd[:saveLogN]
		b.rng.SetState(rngSave)
		b.rebuild(b.cur) // the unchanged state: the posterior as before
		b.epoch++
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
func (b *bkb) resample(slot int, fresh bool, s2x float64) int {
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
			s2 = math.Max(p.res[i], 0) + math.Max(p.q[i], 0)
			c = b.cnt[i]
			if i == slot {
				c++
			}
		}
		pr := math.Min(1, b.qbar*s2)
		if pr > bestP {
			bestP, bestSlot = pr, i
		}
		// P(at least one of the c instances is drawn) = 1 - (1-p)^c; for
		// c p > 40 it rounds to 1 exactly (e^-40 < 2^-53), skip the logs.
		pi := 1.0
		if pr < 1 && float64(c)*pr <= 40 {
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

// MarshalBinary writes the pulled points, the counts, sums and dictionary of
// the last rebuild, the pulls since, t and the PRNG; the posterior is
// recomputed from them on restore (bit-identical).
func (b *bkb) MarshalBinary() ([]byte, error) {
	u := len(b.cnt)
	w := NewStateWriter(make([]byte, 0, 64+8*(u*(b.dim+2)+len(b.dict0)+3*len(b.logY))), "bkb", bkbStateVersion)
	w.Int(b.dim)
	w.Int(b.t)
	w.Floats(b.pts)
	w.Ints(b.cnt0)
	w.Floats(b.ysum0)
	w.Ints(b.dict0)
	w.Ints(b.logSlot)
	w.Floats(b.logY)
	adds := make([]int, len(b.logAdd))
	for i, a := range b.logAdd {
		if a {
			adds[i] = 1
		}
	}
	w.Ints(adds)
	w.Rand(&b.rng)
	return w.Finish(), nil
}

// UnmarshalBinary restores a state written by MarshalBinary for the same spec.
func (b *bkb) UnmarshalBinary(blob []byte) error {
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
	dict0 := r.Ints(nil)
	logSlot := r.Ints(nil)
	logY := r.Floats(nil)
	adds := r.Ints(nil)
	var rng Rand
	r.Rand(&rng)
	if err := r.Err(); err != nil {
		return err
	}
	u0 := len(cnt0)
	total := len(logSlot)
	ok := dim > 0 && len(pts)%dim == 0 && len(pts)/dim <= b.maxHistory && len(ysum0) == u0 &&
		len(dict0) <= b.maxBudget && len(logY) == len(logSlot) && len(adds) == len(logSlot) &&
		linalg.AllFinite(pts) && linalg.AllFinite(ysum0) && linalg.AllFinite(logY) && (u0 == 0) == (len(dict0) == 0)
	for i := 0; ok && i < u0; i++ {
		ok = cnt0[i] >= 1
		total += cnt0[i]
	}
	for k := 0; ok && k < len(dict0); k++ {
		ok = dict0[k] >= 0 && dict0[k] < u0 && (k == 0 || dict0[k] > dict0[k-1])
	}
	logAdd := make([]bool, len(adds))
	u := u0
	for k, j := range logSlot {
		ok = ok && j >= 0 && j <= u && (adds[k] == 0 || (adds[k] == 1 && j == u))
		if j == u {
			u++
		}
		logAdd[k] = adds[k] == 1
	}
	if !ok || t < total || u*dim != len(pts) {
		return fmt.Errorf("%w: bkb: inconsistent shapes or counts", ErrState)
	}
	// Rebuild on a copy so that a failure leaves b untouched.
	nb := *b
	nb.t, nb.pts, nb.cnt0, nb.ysum0, nb.dict0, nb.rng = t, pts, cnt0, ysum0, dict0, rng
	nb.logSlot, nb.logY, nb.logAdd = logSlot, logY, logAdd
	nb.cur, nb.spare = &bkbPost{}, &bkbPost{}
	nb.dict, nb.cnt, nb.ysum = nil, nil, nil
	nb.kb, nb.zb, nb.ub, nb.bb = nil, nil, nil, nil
	if !nb.rebuild(nb.cur) {
		return fmt.Errorf("%w: bkb: restored posterior is not finite", ErrState)
	}
	nb.epoch = b.epoch + 1
	nb.armOK = false
	*b = nb
	return nil
}
