package linalg

import "math"

// Rank1UpdateTo writes into dst the Cholesky factor of L L' + x x', leaving
// L unchanged, so that a learner can build its next factor in scratch and
// swap it in only once the update is accepted (Nyström PKAWV's Predict). The
// copy and the update are one pass. dst's storage is reused (it allocates only
// when its capacity is short). x is overwritten; work must have length >= 2n.
// It reports false, with dst partly written, if a pivot became zero or
// non-finite; the caller then discards dst.
//
// Same rotations as Rank1Update (which goes column by column), applied row by
// row so that the packed rows are read and written sequentially, four rows at
// a time so that four independent dependency chains keep the FPU busy; the
// division by c is a multiplication by 1/c. Results differ from Rank1Update
// by rounding only.
func (t *Tri) Rank1UpdateTo(dst *Tri, x, work []float64) bool {
	n := t.N
	need := len(t.Data)
	if cap(dst.Data) < need {
		dst.Data = make([]float64, need, need+need/2)
	}
	dst.Data, dst.N = dst.Data[:need], n
	src, out := t.Data, dst.Data
	x = x[:n]
	cs, ic := work[:n:n], work[n:2*n:2*n] // c_k and 1/c_k; x[k] becomes s_k once row k is done
	// finish completes row i from column k0 on (x[i] already rotated by
	// columns < k0) and its diagonal.
	finish := func(i, k0 int) bool {
		o := i * (i + 1) / 2
		xi := x[i]
		for k := k0; k < i; k++ {
			v := (src[o+k] + x[k]*xi) * ic[k]
			out[o+k] = v
			xi = cs[k]*xi - x[k]*v
		}
		lii := src[o+i]
		r := math.Hypot(lii, xi)
		if r == 0 || lii == 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			return false
		}
		out[o+i] = r
		cs[i], ic[i], x[i] = r/lii, lii/r, xi/lii
		return true
	}
	i := 0
	for ; i+3 < n; i += 4 {
		o0 := i * (i + 1) / 2
		o1 := o0 + i + 1
		o2 := o1 + i + 2
		o3 := o2 + i + 3
		x0, x1, x2, x3 := x[i], x[i+1], x[i+2], x[i+3]
		for k := 0; k < i; k++ {
			s, c, inv := x[k], cs[k], ic[k]
			v0 := (src[o0+k] + s*x0) * inv
			v1 := (src[o1+k] + s*x1) * inv
			v2 := (src[o2+k] + s*x2) * inv
			v3 := (src[o3+k] + s*x3) * inv
			out[o0+k], out[o1+k], out[o2+k], out[o3+k] = v0, v1, v2, v3
			x0 = c*x0 - s*v0
			x1 = c*x1 - s*v1
			x2 = c*x2 - s*v2
			x3 = c*x3 - s*v3
		}
		x[i], x[i+1], x[i+2], x[i+3] = x0, x1, x2, x3
		for j := i; j < i+4; j++ {
			if !finish(j, i) {
				return false
			}
		}
	}
	for ; i < n; i++ {
		if !finish(i, 0) {
			return false
		}
	}
	return true
}
