package models

import (
	"fmt"
	"math"
	"slices"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

// MarshalBinary writes the whole posterior: the stored arms with their
// counts, sums, uniforms and last pulls, S, the factors L_S and L_V, r, the
// members' variances, the traces, the hash of the last arm set and the arm
// memo if there is one, t and the PRNG. Everything a step reads is here, so a
// restored learner is bit-identical. About 8 (U (d + 4) + m^2) bytes, plus
// 8 A (d + 2) for a memo (a repeated arm set).
func (b *BKB) MarshalBinary() ([]byte, error) { return b.AppendBinary(nil) }

func (b *BKB) AppendBinary(dst []byte) ([]byte, error) {
	u, m := len(b.cnt), b.ls.N
	memo := 0
	if b.armOK {
		memo = b.nArms * (b.dim + 2)
	}
	// The room the state takes (the memo only when it is written: fresh
	// candidates would otherwise reserve 8 A (d + 2) bytes, 14 KB at 100
	// candidates of dimension 16, for nothing).
	w := NewStateWriter(slices.Grow(dst, 96+8*(u*(b.dim+4)+m*(m+4)+memo)), "bkb", bkbStateVersion)
	w.Int(b.dim)
	w.Int(b.t)
	w.Floats(b.pts)
	w.Ints(b.cnt)
	w.Floats(b.ysum)
	w.Floats(b.umin)
	w.Ints(b.last)
	w.Ints(b.dict)
	w.Floats(b.ls.Data)
	w.Floats(b.lv.Data)
	w.Floats(b.r[:m])
	w.Floats(b.qs[:m])
	w.Float(b.trVinv)
	w.Float(b.sumK)
	w.Float(b.kappa2)
	w.Float(b.rho)
	w.Uint(b.lastArms)
	w.Bool(b.armOK)
	if b.armOK {
		w.Floats(b.arms[:b.nArms*b.dim])
		w.Floats(b.aq[:b.nArms])
		w.Floats(b.amu[:b.nArms])
	}
	w.Rand(&b.rng)
	return w.Finish(), nil
}

// UnmarshalBinary restores a state written by MarshalBinary for the same
// spec. A blob that is inconsistent (shapes, counts, S, non-finite or
// non-positive pivots) is refused with ErrState and b is unchanged.
func (b *BKB) UnmarshalBinary(blob []byte) error {
	r, _, err := NewStateReader(blob, "bkb", bkbStateVersion)
	if err != nil {
		return err
	}
	nb := *b
	dim := r.Int()
	r.Check(dim == b.dim, "dimension differs from the spec")
	nb.t = r.Int()
	nb.pts = r.Floats(nil)
	nb.cnt = r.Ints(nil)
	nb.ysum = r.Floats(nil)
	nb.umin = r.Floats(nil)
	nb.last = r.Ints(nil)
	nb.dict = r.Ints(nil)
	nb.ls = linalg.Tri{Data: r.Floats(nil)}
	nb.lv = linalg.Tri{Data: r.Floats(nil)}
	nb.r = r.Floats(nil)
	nb.qs = r.Floats(nil)
	nb.trVinv = r.Float()
	nb.sumK = r.Float()
	nb.kappa2 = r.Float()
	nb.rho = r.Float()
	nb.lastArms = r.Uint()
	nb.armOK = r.Bool()
	nb.arms, nb.aq, nb.amu, nb.nArms = nil, nil, nil, 0
	if nb.armOK {
		nb.arms = r.Floats(nil)
		nb.aq = r.Floats(nil)
		nb.amu = r.Floats(nil)
		nb.nArms = len(nb.aq)
	}
	r.Rand(&nb.rng)
	if err := r.Err(); err != nil {
		return err
	}
	if err := nb.checkShapes(); err != nil {
		return fmt.Errorf("%w: bkb: %v", ErrState, err)
	}
	nb.index = slotIndex{}
	nb.index.reset()
	for i := range nb.cnt {
		if nb.slotOf(nb.point(i)) >= 0 {
			return fmt.Errorf("%w: bkb: stored arm %d is stored twice", ErrState, i)
		}
		nb.index.insert(nb.point(i), i)
	}
	nb.rebuildLRU()
	nb.mark = nil
	nb.kb, nb.zb, nb.ub, nb.vb, nb.xb, nb.rot, nb.work, nb.w, nb.za, nb.ares, nb.prob = nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil
	nb.ksu, nb.ksuStride, nb.ksuOK = nil, 0, false // built by the first Observe (kernelCache)
	nb.solveW()
	if nb.armOK {
		nb.embedArms()
	}
	*b = nb
	return nil
}

// checkShapes validates a decoded state.
func (b *BKB) checkShapes() error {
	u := len(b.cnt)
	if b.dim <= 0 || len(b.pts) != u*b.dim || u > b.maxHistory || len(b.ysum) != u || len(b.umin) != u || len(b.last) != u {
		return fmt.Errorf("stored arms of inconsistent lengths")
	}
	total := 0
	for i, c := range b.cnt {
		if c < 1 || b.last[i] < 0 || b.last[i] >= b.t || !(b.umin[i] >= 0 && b.umin[i] < 1) {
			return fmt.Errorf("stored arm %d: count %d, last pull %d, uniform %v", i, c, b.last[i], b.umin[i])
		}
		total += c
	}
	m := len(b.dict)
	if total > b.t || m > b.maxBudget || (u > 0) != (m > 0) {
		return fmt.Errorf("%d pulls in %d rounds, |S| = %d", total, b.t, m)
	}
	seen := make(map[int]bool, m)
	for _, s := range b.dict {
		if s < 0 || s >= u || seen[s] {
			return fmt.Errorf("dictionary slot %d", s)
		}
		seen[s] = true
	}
	b.ls.N, b.lv.N = m, m
	if len(b.ls.Data) != m*(m+1)/2 || len(b.lv.Data) != m*(m+1)/2 || len(b.r) != m || len(b.qs) != m {
		return fmt.Errorf("posterior of inconsistent size for |S| = %d", m)
	}
	for k := 0; k < m; k++ {
		if !(b.ls.At(k, k) > 0) || !(b.lv.At(k, k) > 0) {
			return fmt.Errorf("pivot %d is not positive", k)
		}
	}
	if b.armOK && (b.nArms == 0 || len(b.arms) != b.nArms*b.dim || len(b.amu) != b.nArms) {
		return fmt.Errorf("arm memo of inconsistent lengths")
	}
	for _, v := range [][]float64{b.pts, b.ysum, b.ls.Data, b.lv.Data, b.r, b.qs, b.arms, b.aq, b.amu, {b.trVinv, b.sumK, b.kappa2}} {
		if !linalg.AllFinite(v) {
			return fmt.Errorf("non-finite value")
		}
	}
	if math.Abs(b.kappa2) > 1e300 || !(b.rho > 0 && b.rho <= 1) {
		return fmt.Errorf("kappa^2 %v, rho %v", b.kappa2, b.rho)
	}
	return nil
}

// slotIndex finds a stored arm by its features in O(d): a map from a hash of
// the feature bits to the slot, open addressing (h, h+1, ...) on the rare
// collision, and a tombstone (-1) for a removed arm only where such a chain
// passes (as rare as a 64-bit collision), so lookups stay right.
type slotIndex struct {
	m map[uint64]int
}

func (ix *slotIndex) reset() { ix.m = make(map[uint64]int) }

func hashPoint(x []float64) uint64 {
	h := uint64(14695981039346656037)
	for _, v := range x {
		if v == 0 {
			v = 0 // -0 and +0 are the same arm
		}
		h ^= math.Float64bits(v)
		h *= 1099511628211
		h ^= h >> 29
	}
	return h
}

// find returns the slot holding x, or -1; point(i) gives a slot's features.
func (ix *slotIndex) find(x []float64, point func(int) []float64) int {
	for h := hashPoint(x); ; h++ {
		s, ok := ix.m[h]
		if !ok {
			return -1
		}
		if s >= 0 && equalPoint(point(s), x) {
			return s
		}
	}
}

func equalPoint(a, b []float64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// insert records slot for x (x not present).
func (ix *slotIndex) insert(x []float64, slot int) {
	h := hashPoint(x)
	for {
		if _, ok := ix.m[h]; !ok {
			ix.m[h] = slot
			return
		}
		h++
	}
}

// remove forgets x (held by slot); point is not consulted.
func (ix *slotIndex) remove(x []float64, slot int) {
	for h := hashPoint(x); ; h++ {
		s, ok := ix.m[h]
		if !ok {
			return
		}
		if s == slot {
			if _, next := ix.m[h+1]; next {
				ix.m[h] = -1 // a chain continues past h
			} else {
				delete(ix.m, h)
			}
			return
		}
	}
}
