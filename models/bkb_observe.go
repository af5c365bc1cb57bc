package models

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

// bkbMaxReward bounds |reward|: with lambda >= 1e-12 every intermediate of a
// step stays finite, so Observe validates up front and never has to roll a
// half-applied update back.
const bkbMaxReward = 1e100

// Observe records the reward of pulling x (sec. 3.1): S_{t+1} is resampled
// with the variances of the posterior at t, then the pull enters the
// posterior. O(m^2), plus O(U (m + d)) when a point joins S.
func (b *BKB) Observe(x []float64, reward float64) error {
	if len(x) != b.dim { // input.go: an error, never a panic
		return fmt.Errorf("bkb: len(x) = %d, want dim = %d: %w", len(x), b.dim, ErrDim)
	}
	if checkInput(x, b.dim) != nil || math.IsNaN(reward) || math.IsInf(reward, 0) { // input.go: also an overflowing ||x||^2
		return fmt.Errorf("bkb: non-finite input: %w", ErrNumerical)
	}
	slot := b.slotOf(x)
	if math.Abs(reward) > bkbMaxReward || (slot >= 0 && math.Abs(b.ysum[slot]+reward) > bkbMaxReward*float64(b.cnt[slot]+1)) {
		return fmt.Errorf("bkb: |reward| above %g: %w", bkbMaxReward, ErrNumerical)
	}
	b.kernelCache()
	// Resampling (coupled): the pulled arm's p under the posterior at t, one
	// uniform per pull, the members' p from their maintained variances.
	px := math.Min(1, b.qbar*b.variance(x))
	u := b.rng.Float64()
	if slot >= 0 {
		b.umin[slot] = math.Min(b.umin[slot], u)
	}
	inS := slot >= 0 && b.member(slot) >= 0
	ux := math.Min(u, b.uminOf(slot))
	join := !inS && ux <= b.rho*px
	b.resampleMembers()
	if join && b.ls.N-len(b.leave) >= b.maxBudget {
		join = b.shrink(ux / px)
	}
	for i := len(b.leave) - 1; i >= 0; i-- { // descending positions
		b.removeMember(b.leave[i])
	}
	if slot < 0 {
		slot = b.store(x)
		b.umin[slot] = u
	}
	if b.ls.N == 0 {
		join = true // S is never empty after a pull (sec. 3.1)
	}
	if join && b.member(slot) < 0 {
		b.addMember(slot)
	}
	b.pull(slot, reward)
	b.t++
	if b.t%b.refresh == 0 {
		b.refreshMembers()
		if b.armOK {
			b.memoValues() // S unchanged: the embeddings stay, the values are recomputed
		}
	}
	return nil
}

// variance is sigma~_t^2(x): from the arm memo when x is one of its arms
// (the usual case: the arm just chosen), else computed. O(A d) or O(m^2).
func (b *BKB) variance(x []float64) float64 {
	if b.armOK {
		d := b.dim
		for j := 0; j < b.nArms; j++ {
			if equalPoint(b.arms[j*d:(j+1)*d], x) {
				return b.ares[j] + math.Max(b.aq[j], 0)
			}
		}
	}
	_, s2 := b.posterior(x)
	return s2
}

// uminOf is the smallest uniform of stored arm slot's pulls (1 for a new arm).
func (b *BKB) uminOf(slot int) float64 {
	if slot < 0 {
		return 1
	}
	return b.umin[slot]
}

// member returns the position of slot in S, or -1. O(m).
func (b *BKB) member(slot int) int {
	for k, s := range b.dict {
		if s == slot {
			return k
		}
	}
	return -1
}

// resampleMembers lists in b.leave (ascending) the members whose u exceeds
// rho p, p under the posterior at t; the member with the largest p stays if
// all would leave.
func (b *BKB) resampleMembers() {
	m := b.ls.N
	b.leave = b.leave[:0]
	b.prob = growFloats(b.prob, m)
	best := -1
	for k, s := range b.dict {
		p := math.Min(1, b.qbar*math.Max(b.qs[k], 0)) // members have no residual term
		b.prob[k] = p
		if best < 0 || p > b.prob[best] {
			best = k
		}
		if b.umin[s] > b.rho*p {
			b.leave = append(b.leave, k)
		}
	}
	if m > 0 && len(b.leave) == m {
		b.leave = append(b.leave[:best], b.leave[best+1:]...)
	}
}

// shrink is called when the pulled arm, whose ratio u/p is rc, would join a
// full S. Raising the bar uniformly keeps S a leverage sample (as a smaller
// qbar would draw it) rather than the points of largest variance, which
// would leave the well-explored region near the best arms without inducing
// points: of the staying members and the arm, the one with the largest
// ratio u/p stays out, and rho (the factor of every p) drops to the largest
// ratio kept. It reports whether the arm joins.
func (b *BKB) shrink(rc float64) bool {
	worst, wr, next := -1, rc, 0.0 // -1 is the arm
	for k, s := range b.dict {
		if slices.Contains(b.leave, k) {
			continue
		}
		r := math.Inf(1)
		if b.prob[k] > 0 {
			r = b.umin[s] / b.prob[k]
		}
		if r > wr {
			next = wr
			worst, wr = k, r
		} else {
			next = math.Max(next, r)
		}
	}
	b.rho = math.Min(b.rho, next)
	if worst < 0 {
		return false
	}
	i, _ := slices.BinarySearch(b.leave, worst)
	b.leave = slices.Insert(b.leave, i, worst)
	return true
}

// store puts the new arm x into a slot: appended, or at the cap replacing the
// stored arm outside S pulled least recently (inside S if all are members),
// whose observations leave the posterior. It returns the slot.
func (b *BKB) store(x []float64) int {
	u := len(b.cnt)
	if u < b.maxHistory {
		b.pts = append(b.pts, x...)
		b.cnt = append(b.cnt, 0)
		b.ysum = append(b.ysum, 0)
		b.umin = append(b.umin, 1)
		b.last = append(b.last, b.t)
		b.lruPrev = append(b.lruPrev, -1)
		b.lruNext = append(b.lruNext, -1)
		b.lruPush(u)
		b.index.insert(x, u)
		b.ksu = growFloats(b.ksu, (u+1)*b.ksuStride)
		b.kernelRow(u)
		return u
	}
	victim := b.evictionVictim()
	if k := b.member(victim); k >= 0 {
		b.removeMember(k)
	}
	b.forget(victim)
	b.index.remove(b.point(victim), victim)
	copy(b.point(victim), x)
	b.cnt[victim], b.ysum[victim], b.umin[victim], b.last[victim] = 0, 0, 1, b.t
	b.lruRemove(victim)
	b.lruPush(victim)
	b.index.insert(x, victim)
	b.kernelRow(victim)
	return victim
}

// evictionVictim returns the stored arm outside S pulled least recently
// (smallest (last pull, slot)), or the least recent of all if every stored
// arm is in S: the first non-member of the eviction list, past at most m
// members. O(m).
func (b *BKB) evictionVictim() int {
	u := len(b.cnt)
	if cap(b.mark) < u {
		b.mark = make([]bool, u) // all false between calls
	}
	mark := b.mark[:u]
	for _, s := range b.dict {
		mark[s] = true
	}
	victim := b.lruHead
	for i := b.lruHead; i >= 0; i = b.lruNext[i] {
		if !mark[i] {
			victim = i
			break
		}
	}
	for _, s := range b.dict {
		mark[s] = false
	}
	return victim
}

// lruRemove unlinks stored arm j from the eviction list.
func (b *BKB) lruRemove(j int) {
	p, n := b.lruPrev[j], b.lruNext[j]
	if p >= 0 {
		b.lruNext[p] = n
	} else {
		b.lruHead = n
	}
	if n >= 0 {
		b.lruPrev[n] = p
	} else {
		b.lruTail = p
	}
}

// lruPush links stored arm j (unlinked) at the end of the eviction list, the
// place of an arm whose last pull is this round (every other last pull is
// earlier).
func (b *BKB) lruPush(j int) {
	b.lruPrev[j], b.lruNext[j] = b.lruTail, -1
	if b.lruTail >= 0 {
		b.lruNext[b.lruTail] = j
	} else {
		b.lruHead = j
	}
	b.lruTail = j
}

// rebuildLRU links the stored arms by (last pull, slot) (a restored state).
func (b *BKB) rebuildLRU() {
	u := len(b.cnt)
	order := make([]int, u)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		return cmp.Or(cmp.Compare(b.last[i], b.last[j]), cmp.Compare(i, j))
	})
	b.lruPrev, b.lruNext = growInts(b.lruPrev, u), growInts(b.lruNext, u) // every entry is pushed below
	b.lruHead, b.lruTail = -1, -1
	for _, i := range order {
		b.lruPush(i)
	}
}

// forget removes stored arm i's observations from the posterior: V -= c z z'
// (Cholesky downdate), r -= ysum z, and the members' variances grow by the
// Sherman-Morrison term.
func (b *BKB) forget(i int) {
	c := float64(b.cnt[i])
	b.armOK = false
	b.sumK -= c * b.kernel.Diag(b.point(i))
	m := b.ls.N
	if m == 0 || c == 0 {
		return
	}
	z, u := b.storedSolve(i)
	den := 1 - c*linalg.Dot(z, u)
	linalg.Axpy(-b.ysum[i], z, b.r[:m])
	xs := b.vb[:m]
	for k := range xs {
		xs[k] = math.Sqrt(c) * z[k]
	}
	if !(den > 1e-12) || !b.lv.Rank1Downdate(xs, b.xb) {
		b.rebuildPosterior(i) // rounding made V - c z z' look indefinite
		return
	}
	for k := 0; k < m; k++ {
		d := linalg.Dot(b.memberZ(k), u[:k+1])
		b.qs[k] += c * d * d / den
	}
	b.trVinv += c * linalg.Dot(u, u) / den
	b.solveW()
}

// storedSolve returns the embedding z of stored arm i and u = V^{-1} z (in
// scratch b.zb, b.ub).
func (b *BKB) storedSolve(i int) (z, u []float64) {
	m := b.ls.N
	b.scratch(m)
	z, u = b.zb[:m], b.ub[:m]
	b.embedStored(z, i)
	b.lv.SolveLower(u, z)
	b.lv.SolveUpper(u, u)
	return z, u
}

// rebuildPosterior recomputes L_V, r and the members' variances from the
// stored arms (all but skip), for the rare step whose incremental form lost
// positive definiteness to rounding. O(U (m d + m^2) + m^3).
func (b *BKB) rebuildPosterior(skip int) {
	m := b.ls.N
	b.scratch(m)
	var v linalg.Sym
	v.Reset(m, b.bp.lambda)
	b.r = growFloats(b.r, m)
	clear(b.r)
	z := b.zb[:m]
	for i, c := range b.cnt {
		if i == skip || c == 0 {
			continue
		}
		b.embedStored(z, i)
		v.Rank1(float64(c), z)
		linalg.Axpy(b.ysum[i], z, b.r)
	}
	b.lv.Reset()
	linalg.CholeskySym(&b.lv, &v) // V >= lambda I: positive definite
	b.refreshMembers()
	b.solveW()
}

// pull adds one observation of stored arm j: V += z z' (rank-one Cholesky
// update), r += y z, and the members' and memo arms' variances and means by
// Sherman-Morrison (O(m^2 + A m)).
func (b *BKB) pull(j int, y float64) {
	x := b.point(j)
	kxx := b.kernel.Diag(x)
	b.cnt[j]++
	b.ysum[j] += y
	b.last[j] = b.t
	if j != b.lruTail {
		b.lruRemove(j)
		b.lruPush(j)
	}
	b.sumK += kxx
	b.kappa2 = math.Max(b.kappa2, kxx)
	m := b.ls.N
	if m == 0 {
		return
	}
	z, u := b.storedSolve(j)
	g := 1 / (1 + linalg.Dot(z, u))
	e := y - linalg.Dot(z, b.w[:m])
	for k := 0; k < m; k++ {
		d := linalg.Dot(b.memberZ(k), u[:k+1])
		b.qs[k] -= d * d * g
	}
	if b.armOK {
		for a := 0; a < b.nArms; a++ {
			d := dot4(u, b.za[a*m:(a+1)*m])
			b.aq[a] -= d * d * g
			b.amu[a] += d * e * g
		}
	}
	b.trVinv -= g * linalg.Dot(u, u)
	copy(b.vb[:m], z)
	b.lv.Rank1Update(b.vb[:m])
	linalg.Axpy(y, z, b.r[:m])
	b.solveW()
}

// addMember makes stored arm j an inducing point: L_S gains the row
// [l', l_nn] (l = z(x_j)), every stored arm gains the coordinate
// zeta_i = (k(x_j, p_i) - l'z_i)/l_nn, and L_V is bordered with
// b = sum_i c_i zeta_i z_i, d = lambda + sum_i c_i zeta_i^2: O(U (m + d)),
// one kernel evaluation per stored arm, the rest from the kernel cache. A
// point numerically in the span of S does not join.
func (b *BKB) addMember(j int) {
	x := b.point(j)
	m := b.ls.N
	b.scratch(m)
	l := b.zb[:m]
	b.embedStored(l, j)
	kxx := b.kernel.Diag(x)
	lss := kxx - linalg.Dot(l, l)
	if !(lss > bkbPivotTol*kxx) {
		return
	}
	lnn := math.Sqrt(lss)
	b.kernelRoom(m + 1)
	// zeta_i = (k(x, p_i) - v'k_S(p_i))/lnn with v = L_S^{-T} l, and
	// sum_i c_i zeta_i z_i = L_S^{-1} sum_i c_i zeta_i k_S(p_i); the k_S(p_i)
	// are the kernel cache's rows, which gain k(x, p_i).
	v := b.vb[:m]
	b.ls.SolveUpper(v, l)
	gk := b.ub[:m]
	clear(gk)
	dd, rho := b.bp.lambda, 0.0
	st := b.ksuStride
	for i, c := range b.cnt {
		row := b.ksu[i*st : i*st+m+1]
		kx := b.kernel.Eval(x, b.point(i))
		row[m] = kx
		if c == 0 {
			continue
		}
		zeta := (kx - linalg.Dot(v, row[:m])) / lnn
		cf := float64(c)
		linalg.Axpy(cf*zeta, row[:m], gk)
		dd += cf * zeta * zeta
		rho += b.ysum[i] * zeta
	}
	bv := gk
	b.ls.SolveLower(bv, gk) // b = L_S^{-1} gk
	h := b.xb[:m]
	b.lv.SolveLower(h, bv)
	sch := dd - linalg.Dot(h, h)
	if !(sch > 0) || math.IsInf(sch, 0) {
		return // rounding: the new direction carries nothing measurable
	}
	beta := bv
	b.lv.SolveUpper(beta, h) // V^{-1} b
	for k := 0; k < m; k++ {
		d := linalg.Dot(b.memberZ(k), beta[:k+1])
		b.qs[k] += d * d / sch
	}
	b.trVinv += (linalg.Dot(beta, beta) + 1) / sch
	b.lv.Append(h, math.Sqrt(sch))
	b.r = append(b.r[:m], rho)
	b.ls.Append(l, lnn)
	b.dict = append(b.dict, j)
	b.scratch(m + 1)
	u := b.ub[:m+1]
	b.qs = append(b.qs[:m], b.quad(b.memberZ(m), u))
	b.armOK = false
	b.solveW()
}

// removeMember deletes the k-th member of S: its row of L_S goes (Givens
// rotations re-triangularize the rows below), the same rotations turn the
// coordinates of V and r, and the dropped coordinate leaves them; this is
// exactly the posterior with the smaller S. The members' variances follow
// from the Schur complement of V^{-1} (the remaining members have no
// component along the dropped direction): with [l', l_nn] the dropped row of
// the rotated L_V and v = L_V'^{-1} l under the new factor,
// q_j -= (z_j'v)^2/l_nn^2 and tr(V^{-1}) -= (1 + ||v||^2)/l_nn^2. O(m^2).
func (b *BKB) removeMember(k int) {
	m := b.ls.N
	b.rot = growFloats(b.rot, 2*m)
	b.work = growFloats(b.work, m*m)
	b.scratch(m)
	last := b.xb[:m]
	b.ls.DeleteRow(k, b.rot, b.work)
	b.lv.RotateDrop(k, b.rot, b.work, last)
	b.r = linalg.RotateVec(k, b.rot, b.r[:m])
	b.dict = append(b.dict[:k], b.dict[k+1:]...)
	b.qs = append(b.qs[:k], b.qs[k+1:m]...)
	st := b.ksuStride
	for i := range b.cnt {
		row := b.ksu[i*st : i*st+m]
		copy(row[k:], row[k+1:])
	}
	lnn2 := last[m-1] * last[m-1]
	v := b.vb[:m-1]
	b.lv.SolveUpper(v, last[:m-1])
	for j := 0; j < m-1; j++ {
		d := linalg.Dot(b.memberZ(j), v[:j+1])
		b.qs[j] -= d * d / lnn2
	}
	b.trVinv -= (1 + linalg.Dot(v, v)) / lnn2 // the dropped diagonal of V^{-1} too
	b.armOK = false
	b.solveW()
}
