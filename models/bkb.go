package models

import (
	"fmt"
	"math"
	"slices"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

const (
	bkbStateVersion = 2
	// bkbPivotTol is the relative residual below which a point is treated as
	// lying in the span of S.
	bkbPivotTol = 1e-9
)

// Defaults of bkb (docs/bandits.md: chosen on the fresh-candidate and the
// fixed-arm environments).
const (
	bkbDefaultQbar = 2
	// With fresh candidates m grows with the effective dimension of the
	// pulls (73-146 at 1000 rounds, 129-255 at 5000 under a cap of 256) and a
	// round costs O(A m²): at 128 the cap is reached within about 2500
	// rounds and the time per round stays flat after it, at the price of a
	// regret floor about 3x that of 256 (0.011 against 0.0037 per round
	// after 10,000 rounds; docs/bandits.md, "The dictionary cap").
	bkbDefaultMaxBudget  = 128
	bkbDefaultMaxHistory = 16384
	bkbDefaultRefresh    = 128
)

func init() {
	Register(Algorithm{
		Name:    "bkb",
		Losses:  []string{"square"},
		Summary: "BKB budgeted kernelized bandit (GP-UCB on a resampled Nystrom dictionary)",
		New:     newBKB,
	})
}

// BKB is the budgeted kernelized bandit (algorithm "bkb"): GP-UCB on a
// Nystrom embedding whose inducing points are resampled at every step by
// ridge-leverage-score sampling of the pulled arms, from D. Calandriello,
// L. Carratino, A. Lazaric, M. Valko and L. Rosasco, "Gaussian process
// optimization with adaptive sketching: scalable and no regret", COLT 2019
// [Calandriello et al. 2019, Sec. 3.1, eq. 4 (the approximate posterior);
// Sec. 3.1 and App. C.1 (resampling); Sec. 3.2 (counts instead of the pull
// list); Thm. 2 and App. D.1 (beta~_t)]. Notes and measurements:
// docs/bandits.md.
//
// [RECON] The text of the paper this was built from lost the box of
// Algorithm 1 but for its last lines; the loop is rebuilt from the prose of
// Sec. 3.1 (initialisation, resampling with p~_{t+1,i} = qbar
// sigma~_t^2(x~_i), the loop over the pulled arms).
//
// Per step, with S_t the inducing points, z(x) = (K_S^{1/2})^+ k_S(x) and the
// pulled arms x~_1..x~_t (eq. 4 and its variance form):
//
//	V_t           = sum_i c_i z(p_i) z(p_i)' + lambda I
//	mu~_t(x)      = z(x)' V_t^{-1} sum_i ysum_i z(p_i)
//	sigma~_t^2(x) = (k(x,x) - ||z(x)||^2)/lambda + z(x)' V_t^{-1} z(x)   (never z'z for k(x,x))
//	u~_t(x)       = mu~_t(x) + beta sqrt(lambda sigma~_t^2(x))           (default: constant beta)
//	beta~_t       = 2 xi sqrt(alpha max(log(kappa^2 t), 1) sum_s sigma~_t^2(x~_s) + log(1/delta))
//	                + (1 + 1/sqrt(1-eps)) sqrt(lambda) F,   alpha = (1+eps)/(1-eps)   (radius "theory")
//
// and after pulling x~_{t+1}, every pulled instance enters S_{t+1} with
// probability p = min(1, qbar sigma~_t^2(x~_i)).
//
// Choices:
//   - [SUGGEST] Coupled resampling. Each pull draws one uniform u; a point
//     keeps the smallest u of its pulls (u_i) and belongs to S_{t+1} iff
//     u_i <= p_i(t). Per point and round this is the paper's inclusion
//     probability, 1 - (1 - p)^c for c pulls (P5: counts, not the pull list),
//     but the draws are shared across rounds, the coupling of the sequential
//     samplers (Calandriello, Lazaric, Valko, "Distributed adaptive sampling
//     for kernel matrix approximation", AISTATS 2017, sec. 3): as the
//     posterior variances shrink, S only loses points, and a point that left
//     is reconsidered only when it is pulled again. The round's work is the
//     members of S and the pulled arm, not every arm ever pulled, and S
//     changes in few rounds.
//   - Incremental posterior in the embedding: the state holds L_S (Cholesky
//     factor of K_S, z(x) = L_S^{-1} k_S(x), rotation-equivalent to the
//     pseudo-inverse root), L_V (Cholesky factor of V), r = sum_i ysum_i z_i
//     and, per member of S, z_s'V^{-1}z_s. A pull is a rank-one update of L_V
//     (O(m^2)); a point joining S borders L_S and L_V (its new coordinate
//     for the stored points costs one kernel evaluation per stored arm and
//     O(U m) from a kernel cache of k_S(p_i), the only step that touches
//     old arms); a point leaving S deletes its row of
//     L_S with Givens rotations and rotates L_V and r the same way, dropping
//     one coordinate (O(m^2), exactly the Nystrom posterior of the smaller
//     S). A step costs O(A m^2) for Choose over A arms and O(m^2) for Observe,
//     plus O(U (m + d)) in the rounds where a point joins S.
//   - Stable inverse root: a point whose residual k(s,s) - ||l||^2 is below
//     1e-9 k(s,s) (numerically in the span of S) does not join; Size() is m.
//   - If every member would leave, the one with the largest p stays, so S is
//     never empty after the first pull (the paper's S is never empty).
//   - kappa^2 = max k(p,p) over the pulls; log(kappa^2 t) is clamped to >= 1.
//     sum_s sigma~_t^2(x~_s) is computed in O(m) from traces:
//     (sum_i c_i k(p_i,p_i) - tr(V - lambda I))/lambda + m - lambda tr(V^{-1}).
//   - Std (Decision and Prediction) is in reward units, sqrt(lambda sigma~^2)
//     (the GP posterior std when lambda = xi^2); with the theoretical radius
//     UCB = mu + (beta~_t/sqrt(lambda)) Std, with the constant one
//     UCB = mu + beta Std.
//   - Exact UCB ties (all arms at t = 0) are broken uniformly at random with
//     the PRNG, which is the paper's "pick x~_1 uniformly at random".
//   - Caps: `max_budget` bounds |S|: when an arm would join a full S, the
//     bar u_i <= rho p_i rises for every point (rho, 1 at first, drops to
//     the largest u/p kept), so S stays a leverage sample, as with a smaller
//     qbar, and one point stays out; `max_history`
//     bounds the stored arms: at the cap a new distinct arm replaces the
//     stored arm outside S pulled least recently, whose observations leave
//     the posterior (a rank-one downdate); a list of the stored arms by last
//     pull finds that arm past at most m members (O(m), not a scan of U).
//   - Determinism: the whole posterior is state, and so is the memo of an arm
//     set chosen from twice in a row (its z'V^{-1}z and means, updated per
//     pull in O(A m)), so a restored learner makes bit-identical choices;
//     fresh candidates leave only a hash. Every `refresh` pulls the
//     per-member variances and the memo are recomputed from L_V, which bounds
//     the rounding of the incremental updates.
//
// Cost: Choose O(A m (m + d)) on a new arm set of A arms, O(A) on the memo's;
// Observe O(m^2), plus O(U (m + d)) in the rounds where a point joins S; m =
// |S| (Size), U the stored arms. State about 8 (U (d + 4) + m^2) bytes.
//
// Parameters and their defaults (the radius's are GPUCB's, bandit.go):
//   - lambda: the ridge (1), in [1e-12, 1e12]; xi, the noise's sub-Gaussian
//     constant (0.5); delta (0.1); F, the bound on ||f||_H (1).
//   - radius: "constant" (UCB = mean + beta Std) or "theory" (beta~_t above)
//     ("constant"); beta: the constant radius (0.5).
//   - qbar: the oversampling of the resampling (2), in [1, 1e9].
//   - eps: the accuracy in alpha = (1+eps)/(1-eps) of beta~_t (0.5).
//   - max_budget: the cap on |S| (128), in [1, 4096].
//   - max_history: the cap on stored arms (16384), in [1, 65536].
//   - refresh: pulls between exact recomputations of the members' variances
//     (128), in [1, 65536].
//   - kernel.sigma (1).
//
// Loss: square (the reward's).
type BKB struct {
	kernel     Kernel
	dim        int
	bp         banditParams
	qbar, eps  float64
	maxBudget  int
	maxHistory int
	refresh    int
	rng        Rand

	// State (serialized).
	t      int
	pts    []float64 // U x dim stored arms, row-major
	cnt    []int     // pulls per stored arm
	ysum   []float64 // reward sums
	umin   []float64 // smallest uniform of the arm's pulls (coupled resampling)
	last   []int     // round of the last pull (eviction order)
	dict   []int     // slots of S, in embedding order
	ls     linalg.Tri
	lv     linalg.Tri
	r      []float64 // sum_i ysum_i z_i
	qs     []float64 // z_s'V^{-1}z_s per member of S
	trVinv float64   // tr(V^{-1})
	sumK   float64   // sum_i c_i k(p_i, p_i)
	kappa2 float64
	rho    float64 // factor of every p, below 1 once max_budget has bound
	// Arm memo. lastArms is a hash of the last arm set chosen from; an arm
	// set chosen from twice in a row becomes the memo (armOK): its values
	// are then updated per pull and are state, valid while S is unchanged.
	// Fresh candidates every request never become a memo, so the state does
	// not carry them.
	lastArms uint64
	armOK    bool
	nArms    int
	arms     []float64 // the arms of the last Choose (state only when armOK)
	aq, amu  []float64 // their z'V^{-1}z and means (state only when armOK)
	za, ares []float64 // derived: their embeddings and residual terms

	// Derived.
	ksu       []float64 // kernel cache: row i (stride ksuStride) is k_S(p_i)
	ksuStride int
	ksuOK     bool      // ksu is built (kernelCache); a restored learner builds it at its first Observe
	w         []float64 // V^{-1} r
	index     slotIndex
	prob      []float64 // per member of S: p of the last resampling (shrink reads it)
	// Eviction order: the stored arms in a doubly linked list by (last pull,
	// slot), least recent first (head), so that at the max_history cap the
	// victim is found past at most m members instead of by a scan of all U
	// arms every round.
	lruPrev, lruNext []int
	lruHead, lruTail int

	// Scratch.
	kb, zb, ub, vb, xb []float64
	rot, work          []float64
	leave              []int
	mark               []bool
}

func newBKB(s *Setup) (Learner, error) {
	b := &BKB{kernel: s.Kernel, dim: s.Dim, rho: 1, ksuOK: true}
	b.bp = readBanditParams(s.Params)
	b.qbar = s.Params.Float("qbar", bkbDefaultQbar, 1, 1e9)
	b.eps = s.Params.Float("eps", 0.5, 1e-6, 1-1e-6)
	b.maxBudget = s.Params.Int("max_budget", bkbDefaultMaxBudget, 1, 4096)
	b.maxHistory = s.Params.Int("max_history", bkbDefaultMaxHistory, 1, 1<<16)
	b.refresh = s.Params.Int("refresh", bkbDefaultRefresh, 1, 1<<16)
	b.rng.Seed(s.Seed)
	b.index.reset()
	b.lruHead, b.lruTail = -1, -1
	return b, nil
}

// Size is the dimension of the embedding, m = |S|.
func (b *BKB) Size() int { return b.ls.N }

// point returns the features of stored arm i.
func (b *BKB) point(i int) []float64 { return b.pts[i*b.dim : (i+1)*b.dim : (i+1)*b.dim] }

// slotOf returns the slot of x among the stored arms, or -1.
func (b *BKB) slotOf(x []float64) int { return b.index.find(x, b.point) }

func (b *BKB) scratch(m int) {
	b.kb = growFloats(b.kb, m+1)
	b.zb = growFloats(b.zb, m+1)
	b.ub = growFloats(b.ub, m+1)
	b.vb = growFloats(b.vb, m+1)
	b.xb = growFloats(b.xb, 2*(m+1))
}

// embed writes z(x) = L_S^{-1} k_S(x) into z (len m) and returns the
// residual term (k(x,x) - ||z||^2)/lambda.
func (b *BKB) embed(z, x []float64) float64 {
	m := b.ls.N
	kb := b.kernelVector(b.kb[:m], x)
	solveLower4(&b.ls, z[:m], kb)
	return math.Max(b.kernel.Diag(x)-linalg.Dot(z[:m], z[:m]), 0) / b.bp.lambda
}

// embedStored is embed for stored arm i, from the kernel cache.
func (b *BKB) embedStored(z []float64, i int) {
	m := b.ls.N
	solveLower4(&b.ls, z[:m], b.ksu[i*b.ksuStride:i*b.ksuStride+m])
}

// solveLower4 solves L x = y by forward substitution (x may alias y), like
// linalg.Tri.SolveLower but with the four-accumulator dot4: the solves of
// the arms' embeddings and variances are most of a bandit round.
func solveLower4(t *linalg.Tri, x, y []float64) {
	n := t.N
	x = x[:n]
	copy(x, y[:n])
	for i := 0; i < n; i++ {
		r := t.Row(i)
		x[i] = (x[i] - dot4(r[:i], x[:i])) / r[i]
	}
}

// solveLower4x2 is solveLower4 for two systems with the same L at once.
// Each is solved with exactly solveLower4's operations, in the same order,
// so with the same bits; but a forward substitution is a chain of
// dependent additions and divisions, which on its own leaves most of the
// CPU's floating-point units idle, and two independent chains side by side
// fill them (armValues2). Its inner loop is dot4 written out for the two
// right-hand sides at once: a dot4 call per row and system would put the
// two chains back one after the other.
func solveLower4x2(t *linalg.Tri, x1, y1, x2, y2 []float64) {
	n := t.N
	x1, x2 = x1[:n], x2[:n]
	copy(x1, y1[:n])
	copy(x2, y2[:n])
	for i := 0; i < n; i++ {
		r := t.Row(i)
		rr, a, c := r[:i], x1[:i], x2[:i]
		var s0, s1, s2, s3, u0, u1, u2, u3 float64
		k := 0
		for ; k+3 < len(rr); k += 4 {
			s0 += rr[k] * a[k]
			s1 += rr[k+1] * a[k+1]
			s2 += rr[k+2] * a[k+2]
			s3 += rr[k+3] * a[k+3]
			u0 += rr[k] * c[k]
			u1 += rr[k+1] * c[k+1]
			u2 += rr[k+2] * c[k+2]
			u3 += rr[k+3] * c[k+3]
		}
		for ; k < len(rr); k++ {
			s0 += rr[k] * a[k]
			u0 += rr[k] * c[k]
		}
		x1[i] = (x1[i] - ((s0 + s1) + (s2 + s3))) / r[i]
		x2[i] = (x2[i] - ((u0 + u1) + (u2 + u3))) / r[i]
	}
}

// armValues2 returns Choose's posterior mean and variance term of two new
// arms, each computed with the operations of embed, quad and Choose's own
// (the same bits as one at a time), the two arms' triangular solves
// interleaved (solveLower4x2). Scratch: kb, zb, ub for x1; vb and xb's two
// halves for x2 (Observe's scratch, free during Choose).
func (b *BKB) armValues2(x1, x2 []float64) (mu1, s1, mu2, s2 float64) {
	m := b.ls.N // = b.lv.N
	k1, k2 := b.kernelVector(b.kb[:m], x1), b.kernelVector(b.vb[:m], x2)
	z1, z2 := b.zb[:m], b.xb[:m]
	solveLower4x2(&b.ls, z1, k1, z2, k2)
	res1 := math.Max(b.kernel.Diag(x1)-linalg.Dot(z1, z1), 0) / b.bp.lambda
	res2 := math.Max(b.kernel.Diag(x2)-linalg.Dot(z2, z2), 0) / b.bp.lambda
	u1, u2 := b.ub[:m], b.xb[m+1:2*m+1]
	solveLower4x2(&b.lv, u1, z1, u2, z2)
	mu1, s1 = linalg.Dot(z1, b.w[:m]), res1+math.Max(dot4(u1, u1), 0)
	mu2, s2 = linalg.Dot(z2, b.w[:m]), res2+math.Max(dot4(u2, u2), 0)
	return mu1, s1, mu2, s2
}

// kernelVector writes k_S(x) = (k(s, x) for s in S, in S's order) into dst
// (len m) and returns it.
//
// The Gaussian kernel (the default) is evaluated here, not through the
// interface: the same expression as Gaussian.Eval, so the same bits, without
// a call per pair (A m of them per Choose; Eval does not inline, and
// calling it on the concrete type measured 44.8 against 42.3 µs in
// BenchmarkBKBChoose m=16/A=100).
func (b *BKB) kernelVector(dst, x []float64) []float64 {
	if g, ok := b.kernel.(*Gaussian); ok {
		for k, s := range b.dict {
			dst[k] = math.Exp(-g.gamma * linalg.SqDist(b.point(s), x))
		}
		return dst
	}
	for k, s := range b.dict {
		dst[k] = b.kernel.Eval(b.point(s), x)
	}
	return dst
}

// kernelRow fills the cache row of stored arm i with k_S(p_i).
func (b *BKB) kernelRow(i int) {
	b.kernelVector(b.ksu[i*b.ksuStride:i*b.ksuStride+b.ls.N], b.point(i))
}

// kernelCache builds the kernel cache of a restored learner: Observe's
// updates read it, Choose and Predict do not, so a restored copy that only
// answers them (a scoring request's, docs/bandits.md) skips its U m kernel
// evaluations, about 2 ms at 500 stored arms and m = 128. The cache is a
// function of the stored arms and S, which only Observe changes, so it is
// the same whenever it is built.
func (b *BKB) kernelCache() {
	if b.ksuOK {
		return
	}
	b.kernelRoom(len(b.dict))
	b.ksu = growFloats(b.ksu, len(b.cnt)*b.ksuStride)
	for i := range b.cnt {
		b.kernelRow(i)
	}
	b.ksuOK = true
}

// kernelRoom makes the cache's stride hold m columns (re-laid out with
// slack when it grows, so that growing S is amortized O(U) per point).
func (b *BKB) kernelRoom(m int) {
	if m <= b.ksuStride {
		return
	}
	st := min(max(2*m, 8), max(b.maxBudget, m))
	u, old := len(b.cnt), b.ksuStride
	nk := make([]float64, max(u, 1)*st, max(u, 16)*st)
	for i := 0; i < u; i++ {
		copy(nk[i*st:i*st+old], b.ksu[i*old:i*old+old])
	}
	b.ksu, b.ksuStride = nk, st
}

// quad returns z'V^{-1}z (u is scratch of len m).
func (b *BKB) quad(z, u []float64) float64 {
	m := b.lv.N
	solveLower4(&b.lv, u[:m], z[:m])
	return dot4(u[:m], u[:m])
}

// posterior returns mu~(x) and sigma~^2(x). O(m (m + d)).
func (b *BKB) posterior(x []float64) (mean, s2 float64) {
	m := b.ls.N
	b.scratch(m)
	z := b.zb[:m]
	res := b.embed(z, x)
	return linalg.Dot(z, b.w[:m]), res + b.quad(z, b.ub)
}

// solveW recomputes w = V^{-1} r.
func (b *BKB) solveW() {
	m := b.lv.N
	b.w = growFloats(b.w, m)
	b.lv.SolveLower(b.w, b.r[:m])
	b.lv.SolveUpper(b.w, b.w)
}

// memberZ returns the embedding of the k-th member of S: row k of L_S
// (K_S = L_S L_S', so L_S^{-1} k_S(s_k) is that row, zero beyond k).
func (b *BKB) memberZ(k int) []float64 { return b.ls.Row(k) }

// refreshMembers recomputes z_s'V^{-1}z_s for every member and tr(V^{-1}).
// O(m^3).
func (b *BKB) refreshMembers() {
	m := b.ls.N
	b.scratch(m)
	b.qs = growFloats(b.qs, m)
	u := b.ub[:m]
	for k := 0; k < m; k++ {
		clear(u)
		copy(u, b.memberZ(k))
		b.lv.SolveLower(u, u)
		b.qs[k] = linalg.Dot(u, u)
	}
	// tr(V^{-1}) = ||L_V^{-1}||_F^2, column by column.
	tr := 0.0
	for k := 0; k < m; k++ {
		clear(u)
		u[k] = 1
		b.lv.SolveLower(u, u)
		tr += linalg.Dot(u[k:], u[k:])
	}
	b.trVinv = tr
}

// multiplier is the factor of Std (reward units) in the UCB.
func (b *BKB) multiplier() float64 {
	if !b.bp.theory {
		return b.bp.beta
	}
	alpha := (1 + b.eps) / (1 - b.eps)
	logt := 1.0
	if b.t > 0 {
		logt = math.Max(math.Log(b.kappa2*float64(b.t)), 1)
	}
	radius := 2*b.bp.xi*math.Sqrt(alpha*logt*b.sumVariances()+math.Log(1/b.bp.delta)) +
		(1+1/math.Sqrt(1-b.eps))*math.Sqrt(b.bp.lambda)*b.bp.F
	return radius / math.Sqrt(b.bp.lambda)
}

// sumVariances is sum_i c_i sigma~^2(p_i) over the stored arms, from traces
// (V - lambda I = sum_i c_i z_i z_i').
func (b *BKB) sumVariances() float64 {
	lambda := b.bp.lambda
	m := float64(b.lv.N)
	trV := linalg.Dot(b.lv.Data, b.lv.Data)
	return math.Max(b.sumK-(trV-lambda*m), 0)/lambda + math.Max(m-lambda*b.trVinv, 0)
}

// syncArms reports whether the arm memo holds the posterior at arms (aq,
// amu and ares): it does when arms is its set, and it becomes arms' when
// the previous Choose had the same set (the values are then computed and
// kept). A set seen once is not copied or kept: Choose computes its values
// arm by arm, so fresh candidates cost the learner no memory.
func (b *BKB) syncArms(arms [][]float64) bool {
	n, d := len(arms), b.dim
	for j, a := range arms {
		if len(a) != d {
			panic(fmt.Sprintf("bkb: arm %d has dimension %d, want %d", j, len(a), d))
		}
	}
	same := b.armOK && b.nArms == n
	for j := 0; same && j < n; j++ {
		same = slices.Equal(b.arms[j*d:(j+1)*d], arms[j])
	}
	if same {
		return true
	}
	h := hashArms(arms)
	repeated := h == b.lastArms
	b.lastArms, b.armOK, b.nArms = h, false, 0
	if !repeated {
		return false
	}
	b.arms = growFloats(b.arms, n*d)
	b.aq = growFloats(b.aq, n)
	b.amu = growFloats(b.amu, n)
	for j, a := range arms {
		copy(b.arms[j*d:], a)
	}
	b.nArms, b.armOK = n, true
	b.embedArms()
	b.memoValues()
	return true
}

// hashArms hashes an arm set (its size, then every feature's bits, -0 as
// +0). A collision only decides whether a set becomes the memo: the memo
// itself is matched by comparing the arms.
func hashArms(arms [][]float64) uint64 {
	h := uint64(14695981039346656037) ^ uint64(len(arms))
	for _, a := range arms {
		h = h*1099511628211 ^ hashPoint(a)
	}
	return h
}

// memoValues computes the memo arms' z'V^{-1}z and means from their
// embeddings. O(A m^2).
func (b *BKB) memoValues() {
	m := b.ls.N
	b.scratch(m)
	for j := 0; j < b.nArms; j++ {
		z := b.za[j*m : (j+1)*m]
		b.aq[j] = b.quad(z, b.ub)
		b.amu[j] = linalg.Dot(z, b.w[:m])
	}
}

// embedArms computes the memo arms' embeddings and residual terms (a pure
// function of L_S and the arms, so a restored memo gets the same bits).
func (b *BKB) embedArms() {
	n, d, m := b.nArms, b.dim, b.ls.N
	b.za = growFloats(b.za, n*m)
	b.ares = growFloats(b.ares, n)
	b.scratch(m)
	for j := 0; j < n; j++ {
		b.ares[j] = b.embed(b.za[j*m:(j+1)*m], b.arms[j*d:(j+1)*d])
	}
}

// Choose returns the arm with the largest approximate UCB. O(A m (m + d)) on
// a new arm set, O(A) on the memo's.
func (b *BKB) Choose(arms [][]float64) Decision {
	if len(arms) == 0 {
		panic("bkb: Choose with no arms")
	}
	memo := b.syncArms(arms)
	mult := b.multiplier()
	sl := math.Sqrt(b.bp.lambda)
	m := b.ls.N
	b.scratch(m)
	best, ties := -1, 0
	var bestU, bestS, bestMu float64
	var nextMu, nextS2 float64 // arm j+1's, when computed with arm j's (armValues2)
	paired := false
	for j, a := range arms {
		var mu, s2 float64
		switch {
		case memo:
			mu, s2 = b.amu[j], b.ares[j]+math.Max(b.aq[j], 0)
		case paired: // computed with the previous arm
			mu, s2, paired = nextMu, nextS2, false
		case j+1 < len(arms):
			mu, s2, nextMu, nextS2 = b.armValues2(a, arms[j+1])
			paired = true
		default: // the memo's values, computed as embedArms and memoValues do
			res := b.embed(b.zb[:m], a)
			mu, s2 = linalg.Dot(b.zb[:m], b.w[:m]), res+math.Max(b.quad(b.zb, b.ub), 0)
		}
		s := sl * math.Sqrt(s2)
		u := mu + mult*s
		switch {
		case best < 0 || u > bestU:
			best, bestU, bestS, bestMu, ties = j, u, s, mu, 1
		case u == bestU:
			ties++
			if b.rng.Intn(ties) == 0 {
				best, bestS, bestMu = j, s, mu
			}
		}
	}
	return Decision{Arm: best, Mean: bestMu, Std: bestS, UCB: bestU}
}

// Predict returns the approximate posterior mean and std (reward units) of f(x).
func (b *BKB) Predict(x []float64) Prediction {
	if err := checkInput(x, b.dim); err != nil { // input.go: flagged, never a panic
		return invalidPrediction(err)
	}
	mean, s2 := b.posterior(x)
	return finitePrediction(Prediction{Value: mean, Std: math.Sqrt(b.bp.lambda * s2), Choice: -1, Prob: 1})
}

// Update is Observe (the Learner view of a bandit: y is the reward of x).
func (b *BKB) Update(x []float64, _ Prediction, y float64) error { return b.Observe(x, y) }

// dot4 is x.y with four accumulators (the per-arm inner product of the
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
