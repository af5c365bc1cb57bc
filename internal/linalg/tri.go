package linalg

import "math"

// Tri is an n x n lower-triangular matrix packed by rows: element (i, k),
// k <= i, is Data[i(i+1)/2 + k]. Appending a row is an append, which is how
// Cholesky factors of growing dictionaries grow (a [SUGGEST] choice for the dictionaries of Li & Liao, ICML 2023; docs/regression.md).
type Tri struct {
	N    int
	Data []float64
}

// Row returns row i (length i+1).
func (t *Tri) Row(i int) []float64 { o := i * (i + 1) / 2; return t.Data[o : o+i+1 : o+i+1] }

// At returns element (i, k) for k <= i.
func (t *Tri) At(i, k int) float64 { return t.Data[i*(i+1)/2+k] }

// Append adds the row [l', d] (len(l) == N), growing N by one. It allocates
// only when Data's capacity is exhausted; Reserve avoids that.
func (t *Tri) Append(l []float64, d float64) {
	if len(l) < t.N {
		badLength("Tri.Append", "l", len(l), t.N)
	}
	t.Data = append(t.Data, l[:t.N]...)
	t.Data = append(t.Data, d)
	t.N++
}

// Reserve makes room for n rows without reallocation.
func (t *Tri) Reserve(n int) {
	need := n * (n + 1) / 2
	if cap(t.Data) < need {
		d := make([]float64, len(t.Data), need)
		copy(d, t.Data)
		t.Data = d
	}
}

// Reset empties the matrix, keeping its storage.
func (t *Tri) Reset() { t.N, t.Data = 0, t.Data[:0] }

// SolveLower solves L x = b by forward substitution into x (x may alias b). O(n^2).
func (t *Tri) SolveLower(x, b []float64) {
	if len(x) < t.N || len(b) < t.N {
		badLength("Tri.SolveLower", "x or b", min(len(x), len(b)), t.N)
	}
	x = x[:t.N]
	copy(x, b[:t.N])
	for i := 0; i < t.N; i++ {
		r := t.Row(i)
		s := x[i] - Dot(r[:i], x[:i])
		x[i] = s / r[i]
	}
}

// SolveUpper solves L' x = b by back substitution into x (x may alias b). O(n^2).
func (t *Tri) SolveUpper(x, b []float64) {
	if len(x) < t.N || len(b) < t.N {
		badLength("Tri.SolveUpper", "x or b", min(len(x), len(b)), t.N)
	}
	x = x[:t.N]
	copy(x, b[:t.N])
	for i := t.N - 1; i >= 0; i-- {
		r := t.Row(i)
		x[i] /= r[i]
		Axpy(-x[i], r[:i], x[:i])
	}
}

// MulVec sets dst = L x. O(n^2).
func (t *Tri) MulVec(dst, x []float64) {
	if len(x) < t.N || len(dst) < t.N {
		badLength("Tri.MulVec", "dst or x", min(len(x), len(dst)), t.N)
	}
	for i := 0; i < t.N; i++ {
		dst[i] = Dot(t.Row(i), x[:i+1])
	}
}

// Rank1Update turns L into the Cholesky factor of L L' + x x', in O(n^2) by
// the classic column sweep, with one division per column (each column is
// scaled by the precomputed 1/c) and the packed index advanced incrementally.
// NONS-ALD runs it on the factor of its ONS matrix A every round. x is overwritten.
//
// It reports false, with L partly updated, only if a pivot is or becomes zero
// or non-finite; callers that must not corrupt state validate x first (for a
// finite x and a finite positive-diagonal L it cannot fail unless the squared
// norms overflow).
func (t *Tri) Rank1Update(x []float64) bool {
	n := t.N
	if len(x) < n {
		badLength("Tri.Rank1Update", "x", len(x), n)
	}
	d := t.Data
	x = x[:n]
	for k := 0; k < n; k++ {
		pk := k*(k+1)/2 + k
		lkk := d[pk]
		xk := x[k]
		r := math.Sqrt(lkk*lkk + xk*xk)
		if !(r > 0) || math.IsInf(r, 0) || !(lkk > 0) {
			return false
		}
		c, s, ic := r/lkk, xk/lkk, lkk/r
		d[pk] = r
		p := pk + k + 1 // element (k+1, k)
		for i := k + 1; i < n; i++ {
			v := (d[p] + s*x[i]) * ic
			d[p] = v
			x[i] = c*x[i] - s*v
			p += i + 1
		}
	}
	return true
}
