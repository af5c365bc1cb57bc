package linalg

import "math"

// Structural changes of a packed Cholesky factor: deleting a row (a point
// leaves a Nyström dictionary), rotating the coordinates of a factor of a
// Gram matrix accordingly, and removing a rank-one term. Each is O(n^2)
// instead of the O(n^3) refactorization (Golub & Van Loan, "Matrix
// Computations", 4th ed., sec. 6.5.4 (Givens updating of a factorization) and
// sec. 6.5.4's downdating; the downdate follows LINPACK's dchdd).

// DeleteRow removes row k of L (the factor of K = L L') so that L becomes the
// factor of K without row and column k, in the coordinates obtained by the
// column rotations G_k .. G_{n-2} written to cs (2 floats per rotation, c and
// s, len(cs) >= 2(n-1-k)): if z = L^{-1} k_S(x) are the coordinates of x
// before, (G' z)[:n-1] are its coordinates after, and the last rotated
// coordinate is the direction dropped. work must have length >= (n-1-k) n.
// Rows below k are re-triangularized; the diagonal stays non-negative.
func (t *Tri) DeleteRow(k int, cs, work []float64) {
	n := t.N
	if k < 0 || k >= n {
		panic("linalg: Tri.DeleteRow: row out of range")
	}
	rows := n - 1 - k
	if len(cs) < 2*rows {
		badLength("Tri.DeleteRow", "cs", len(cs), 2*rows)
	}
	if len(work) < rows*n {
		badLength("Tri.DeleteRow", "work", len(work), rows*n)
	}
	d := work[:rows*n]
	clear(d)
	for r := 0; r < rows; r++ {
		copy(d[r*n:], t.Row(k+1+r))
	}
	for i := k; i < n-1; i++ {
		r0 := i - k // the row that must lose its entry in column i+1
		a, b := d[r0*n+i], d[r0*n+i+1]
		c, s := 1.0, 0.0
		if h := math.Hypot(a, b); h > 0 {
			c, s = a/h, b/h
		}
		cs[2*r0], cs[2*r0+1] = c, s
		for r := r0; r < rows; r++ {
			x, y := d[r*n+i], d[r*n+i+1]
			d[r*n+i], d[r*n+i+1] = c*x+s*y, -s*x+c*y
		}
		d[r0*n+i+1] = 0
	}
	t.Data = t.Data[:k*(k+1)/2]
	t.N = k
	for r := 0; r < rows; r++ {
		t.Data = append(t.Data, d[r*n:r*n+k+r+1]...)
		t.N++
	}
}

// RotateDrop applies the coordinate rotations of a DeleteRow (cs, starting at
// coordinate k) to L, the factor of a Gram matrix V = L L' in those
// coordinates, and drops the last coordinate: afterwards L L' = (G' V G)
// without its last row and column. If last is not nil (len >= n) it receives
// the dropped row of the rotated factor, from which the caller updates
// quantities of V^{-1} (the inverse of a leading block is a Schur
// complement of the inverse). O(n^2); work must have length >= n*n.
func (t *Tri) RotateDrop(k int, cs, work, last []float64) {
	n := t.N
	if k < 0 || k >= n {
		panic("linalg: Tri.RotateDrop: coordinate out of range")
	}
	if len(work) < n*n {
		badLength("Tri.RotateDrop", "work", len(work), n*n)
	}
	d := work[:n*n]
	clear(d)
	for i := 0; i < n; i++ {
		copy(d[i*n:], t.Row(i))
	}
	for i := k; i < n-1; i++ {
		c, s := cs[2*(i-k)], cs[2*(i-k)+1]
		// G' from the left mixes rows i and i+1 ...
		for col := 0; col <= i+1; col++ {
			x, y := d[i*n+col], d[(i+1)*n+col]
			d[i*n+col], d[(i+1)*n+col] = c*x+s*y, -s*x+c*y
		}
		// ... which fills (i, i+1); a rotation from the right (V unchanged)
		// makes L lower triangular again.
		a, b := d[i*n+i], d[i*n+i+1]
		if h := math.Hypot(a, b); h > 0 {
			c2, s2 := a/h, b/h
			for r := i; r < n; r++ {
				x, y := d[r*n+i], d[r*n+i+1]
				d[r*n+i], d[r*n+i+1] = c2*x+s2*y, -s2*x+c2*y
			}
		}
		d[i*n+i+1] = 0
	}
	// A factor with a negative pivot is still a factor; flip the column so
	// that solves and updates see the usual positive diagonal.
	for j := 0; j < n-1; j++ {
		if d[j*n+j] < 0 {
			for r := j; r < n; r++ {
				d[r*n+j] = -d[r*n+j]
			}
		}
	}
	if last != nil {
		copy(last[:n], d[(n-1)*n:n*n])
	}
	t.Data = t.Data[:0]
	t.N = 0
	for i := 0; i < n-1; i++ {
		t.Data = append(t.Data, d[i*n:i*n+i+1]...)
		t.N++
	}
}

// RotateVec applies the rotations of a DeleteRow (cs, from coordinate k) to
// the coordinates x (len n) and returns x[:n-1] (the last one dropped).
func RotateVec(k int, cs, x []float64) []float64 {
	n := len(x)
	for i := k; i < n-1; i++ {
		c, s := cs[2*(i-k)], cs[2*(i-k)+1]
		a, b := x[i], x[i+1]
		x[i], x[i+1] = c*a+s*b, -s*a+c*b
	}
	return x[:n-1]
}

// Rank1Downdate turns L into the Cholesky factor of L L' - x x' (LINPACK
// dchdd's rotations, for a lower factor). It reports false, leaving L
// unchanged, when L L' - x x' is not numerically positive definite
// (||L^{-1} x|| >= 1 - 1e-12). x is overwritten; work must have length >= 2n.
func (t *Tri) Rank1Downdate(x, work []float64) bool {
	n := t.N
	if len(x) < n {
		badLength("Tri.Rank1Downdate", "x", len(x), n)
	}
	if len(work) < 2*n {
		badLength("Tri.Rank1Downdate", "work", len(work), 2*n)
	}
	p := x[:n]
	t.SolveLower(p, p)
	nrm := Dot(p, p)
	if !(nrm < 1-1e-12) {
		return false
	}
	alpha := math.Sqrt(1 - nrm)
	cc, ss := work[:n:n], work[n:2*n:2*n]
	for i := n - 1; i >= 0; i-- {
		scale := alpha + math.Abs(p[i])
		a, b := alpha/scale, p[i]/scale
		h := math.Sqrt(a*a + b*b)
		cc[i], ss[i] = a/h, b/h
		alpha = scale * h
	}
	for j := 0; j < n; j++ {
		row := t.Row(j)
		xx := 0.0
		for i := j; i >= 0; i-- {
			v := cc[i]*xx + ss[i]*row[i]
			row[i] = cc[i]*row[i] - ss[i]*xx
			xx = v
		}
	}
	return true
}
