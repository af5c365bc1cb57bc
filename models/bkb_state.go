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
// non-positive pivots) is refused with ErrState and b is unchanged: the
// state is decoded into a copy of b whose buffers are all its own.
func (b *BKB) UnmarshalBinary(blob []byte) error {
	nb := *b
	nb.dropBuffers()
	if err := nb.restore(blob); err != nil {
		return err
	}
	*b = nb
	return nil
}

// Reload is UnmarshalBinary into b's own buffers (Reloader): the state
// holds everything newBKB derives from the key (the PRNG), and every
// buffer restore writes into is overwritten or cut to what it reads. A
// refused blob leaves b unusable.
func (b *BKB) Reload(blob []byte) error { return b.restore(blob) }

// dropBuffers forgets every slice and map b shares with the learner it was
// copied from, so that restore allocates its own.
func (b *BKB) dropBuffers() {
	b.pts, b.cnt, b.ysum, b.umin, b.last, b.dict = nil, nil, nil, nil, nil, nil
	b.ls, b.lv, b.r, b.qs = linalg.Tri{}, linalg.Tri{}, nil, nil
	b.arms, b.aq, b.amu = nil, nil, nil
	b.index = slotIndex{}
	b.lruPrev, b.lruNext, b.mark, b.leave = nil, nil, nil, nil
	b.kb, b.zb, b.ub, b.vb, b.xb, b.rot, b.work, b.w, b.za, b.ares, b.prob = nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil
}

// restore decodes blob into b, reusing b's buffers (none, after
// dropBuffers). Every field a step reads is set from the blob or derived
// from it; scratch keeps only its capacity.
func (b *BKB) restore(blob []byte) error {
	r, _, err := NewStateReader(blob, "bkb", bkbStateVersion)
	if err != nil {
		return err
	}
	dim := r.Int()
	r.Check(dim == b.dim, "dimension differs from the spec")
	b.t = r.Int()
	b.pts = r.Floats(b.pts[:0])
	b.cnt = r.Ints(b.cnt[:0])
	b.ysum = r.Floats(b.ysum[:0])
	b.umin = r.Floats(b.umin[:0])
	b.last = r.Ints(b.last[:0])
	b.dict = r.Ints(b.dict[:0])
	b.ls = linalg.Tri{Data: r.Floats(b.ls.Data[:0])}
	b.lv = linalg.Tri{Data: r.Floats(b.lv.Data[:0])}
	b.r = r.Floats(b.r[:0])
	b.qs = r.Floats(b.qs[:0])
	b.trVinv = r.Float()
	b.sumK = r.Float()
	b.kappa2 = r.Float()
	b.rho = r.Float()
	b.lastArms = r.Uint()
	b.armOK = r.Bool()
	b.nArms = 0
	if b.armOK {
		b.arms = r.Floats(b.arms[:0])
		b.aq = r.Floats(b.aq[:0])
		b.amu = r.Floats(b.amu[:0])
		b.nArms = len(b.aq)
	}
	r.Rand(&b.rng)
	if err := r.Err(); err != nil {
		return err
	}
	if err := b.checkShapes(); err != nil {
		return fmt.Errorf("%w: bkb: %v", ErrState, err)
	}
	if b.index.m == nil {
		b.index.reset()
	} else {
		clear(b.index.m)
	}
	for i := range b.cnt {
		if b.slotOf(b.point(i)) >= 0 {
			return fmt.Errorf("%w: bkb: stored arm %d is stored twice", ErrState, i)
		}
		b.index.insert(b.point(i), i)
	}
	b.rebuildLRU()
	b.ksu, b.ksuStride, b.ksuOK = nil, 0, false // built by the first Observe (kernelCache)
	b.solveW()
	if b.armOK {
		b.embedArms()
	}
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
