package linalg

import "math"

// PivotedCholesky factors the symmetric positive semi-definite n x n matrix a
// (row-major, full storage; destroyed) as P^T a P = L L^T with diagonal
// pivoting, stopping when the largest remaining Schur-complement diagonal is
// at most tol times the largest diagonal of a. It returns the rank r: the
// first r columns of L (lower triangle of a's leading r x r block after
// symmetric permutation, and below it) are valid, and piv[i] is the original
// index of pivot i. Columns beyond r are numerically dependent on the chosen
// ones. O(n^3/3); no allocation.
func PivotedCholesky(a []float64, n int, tol float64, piv []int) int {
	a = a[:n*n]
	piv = piv[:n]
	for i := range piv {
		piv[i] = i
	}
	d0 := 0.0
	for i := 0; i < n; i++ {
		d0 = math.Max(d0, a[i*n+i])
	}
	if !(d0 > 0) {
		return 0
	}
	for j := 0; j < n; j++ {
		p := j
		for i := j + 1; i < n; i++ {
			if a[i*n+i] > a[p*n+p] {
				p = i
			}
		}
		if !(a[p*n+p] > tol*d0) {
			return j
		}
		if p != j {
			// Symmetric swap of rows and columns j and p.
			for c := 0; c < n; c++ {
				a[j*n+c], a[p*n+c] = a[p*n+c], a[j*n+c]
			}
			for r := 0; r < n; r++ {
				a[r*n+j], a[r*n+p] = a[r*n+p], a[r*n+j]
			}
			piv[j], piv[p] = piv[p], piv[j]
		}
		ljj := math.Sqrt(a[j*n+j])
		a[j*n+j] = ljj
		for i := j + 1; i < n; i++ {
			a[i*n+j] /= ljj
		}
		// Trailing update, both triangles kept so the next swap stays simple.
		for i := j + 1; i < n; i++ {
			lij := a[i*n+j]
			if lij == 0 {
				continue
			}
			for m := j + 1; m <= i; m++ {
				a[i*n+m] -= lij * a[m*n+j]
			}
		}
		for i := j + 1; i < n; i++ {
			for m := i + 1; m < n; m++ {
				a[i*n+m] = a[m*n+i]
			}
		}
	}
	return n
}

// PivotedCholeskySolve solves the normal equations G X = B for the first r
// pivots of a PivotedCholesky factor l (n x n, row-major) and sets the rows of
// the other (dependent) unknowns to 0: the basic least-squares solution. b is
// n x m row-major in the ORIGINAL order and is overwritten by X.
// tmp must hold n*m floats.
func PivotedCholeskySolve(l []float64, n, r int, piv []int, b []float64, m int, tmp []float64) {
	y := tmp[:n*m]
	for i := 0; i < r; i++ {
		copy(y[i*m:(i+1)*m], b[piv[i]*m:(piv[i]+1)*m])
	}
	// L Y = B_P (forward), then L^T X = Y (backward), on the leading r x r block.
	for i := 0; i < r; i++ {
		yi := y[i*m : (i+1)*m]
		for c := 0; c < i; c++ {
			if lic := l[i*n+c]; lic != 0 {
				Axpy(-lic, y[c*m:(c+1)*m], yi)
			}
		}
		Scale(1/l[i*n+i], yi)
	}
	for i := r - 1; i >= 0; i-- {
		yi := y[i*m : (i+1)*m]
		for c := i + 1; c < r; c++ {
			if lci := l[c*n+i]; lci != 0 {
				Axpy(-lci, y[c*m:(c+1)*m], yi)
			}
		}
		Scale(1/l[i*n+i], yi)
	}
	for i := range b[:n*m] {
		b[i] = 0
	}
	for i := 0; i < r; i++ {
		copy(b[piv[i]*m:(piv[i]+1)*m], y[i*m:(i+1)*m])
	}
}
