package linalg

import "math"

// Rank1UpdateTo writes into dst the Cholesky factor of L L' + x x', leaving
// L unchanged: the copy and the update are one pass, since the column-wise
// update touches every element exactly once. dst's storage is reused (it
// allocates only when its capacity is short). x is overwritten. It reports
// false, with dst partly written, if a pivot became zero or non-finite; the
// caller then discards dst. Same algorithm as Rank1Update, with the division
// by c replaced by a multiplication by 1/c (results differ by rounding).
// Learners that must not touch their state before an update is accepted
// (Nyström PKAWV's Predict) build the next factor this way.
func (t *Tri) Rank1UpdateTo(dst *Tri, x []float64) bool {
	n := t.N
	need := len(t.Data)
	if cap(dst.Data) < need {
		dst.Data = make([]float64, need, need+need/2)
	}
	dst.Data, dst.N = dst.Data[:need], n
	src, out := t.Data, dst.Data
	x = x[:n]
	for k := 0; k < n; k++ {
		lkk := src[k*(k+1)/2+k]
		r := math.Hypot(lkk, x[k])
		if r == 0 || lkk == 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			return false
		}
		c, invc := r/lkk, lkk/r
		s := x[k] / lkk
		out[k*(k+1)/2+k] = r
		p := (k+1)*(k+2)/2 + k
		for i := k + 1; i < n; i++ {
			v := (src[p] + s*x[i]) * invc
			out[p] = v
			x[i] = c*x[i] - s*v
			p += i + 1
		}
	}
	return true
}
