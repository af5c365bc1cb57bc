package linalg

import "math"

// Jacobi methods for the small dense decompositions that incremental
// sketching learners (FORKS' TISVD) run in their update rounds: a symmetric
// eigensolver for the (k+c) x (k+c) core matrix and a one-sided SVD for the
// thin sketch whose pseudo-inverse defines the feature map. Both work in
// caller-owned buffers (no allocation), are accurate to working precision
// (Jacobi rotations are backward stable), and are deterministic. They cost
// O(n^3) per sweep, so they suit n up to a few hundred; bigger one-off
// decompositions should use gonum.

// jacobiMaxSweeps bounds the sweeps; quadratic convergence makes 6-10 usual.
const jacobiMaxSweeps = 60

// SymEig diagonalises the symmetric n x n matrix a (row-major; destroyed) by
// cyclic Jacobi rotations. On return vals holds the eigenvalues in
// descending order and the columns of vecs (n x n, row-major) the matching
// orthonormal eigenvectors: a = vecs diag(vals) vecs^T. It returns the number
// of sweeps used.
func SymEig(a []float64, n int, vecs, vals []float64) int {
	a = a[:n*n]
	vecs = vecs[:n*n]
	vals = vals[:n]
	for i := range vecs {
		vecs[i] = 0
	}
	for i := 0; i < n; i++ {
		vecs[i*n+i] = 1
	}
	sweeps := 0
	for ; sweeps < jacobiMaxSweeps; sweeps++ {
		off, diag := 0.0, 0.0
		for p := 0; p < n; p++ {
			diag += a[p*n+p] * a[p*n+p]
			for q := p + 1; q < n; q++ {
				off += a[p*n+q] * a[p*n+q]
			}
		}
		if off <= 1e-32*diag || off == 0 {
			break
		}
		for p := 0; p < n; p++ {
			for q := p + 1; q < n; q++ {
				apq := a[p*n+q]
				if apq == 0 {
					continue
				}
				theta := (a[q*n+q] - a[p*n+p]) / (2 * apq)
				t := 1 / (math.Abs(theta) + math.Sqrt(theta*theta+1))
				if theta < 0 {
					t = -t
				}
				c := 1 / math.Sqrt(t*t+1)
				s := t * c
				// A <- J^T A J with J the rotation in the (p, q) plane:
				// columns first, then rows.
				for r := 0; r < n; r++ {
					arp, arq := a[r*n+p], a[r*n+q]
					a[r*n+p] = c*arp - s*arq
					a[r*n+q] = s*arp + c*arq
				}
				for r := 0; r < n; r++ {
					apr, aqr := a[p*n+r], a[q*n+r]
					a[p*n+r] = c*apr - s*aqr
					a[q*n+r] = s*apr + c*aqr
				}
				a[p*n+q], a[q*n+p] = 0, 0
				for r := 0; r < n; r++ {
					vrp, vrq := vecs[r*n+p], vecs[r*n+q]
					vecs[r*n+p] = c*vrp - s*vrq
					vecs[r*n+q] = s*vrp + c*vrq
				}
			}
		}
	}
	for i := 0; i < n; i++ {
		vals[i] = a[i*n+i]
	}
	sortEigDesc(n, vecs, vals)
	return sweeps
}

// sortEigDesc orders vals descending and permutes the columns of vecs
// (n rows, len(vals) columns, row-major) alike: selection sort, no allocation.
func sortEigDesc(n int, vecs, vals []float64) {
	m := len(vals)
	for i := 0; i < m; i++ {
		best := i
		for j := i + 1; j < m; j++ {
			if vals[j] > vals[best] {
				best = j
			}
		}
		if best == i {
			continue
		}
		vals[i], vals[best] = vals[best], vals[i]
		for r := 0; r < n; r++ {
			vecs[r*m+i], vecs[r*m+best] = vecs[r*m+best], vecs[r*m+i]
		}
	}
}

// OneSidedSVD orthogonalises the columns of the m x n matrix a (column-major:
// column j is a[j*m:(j+1)*m]; m >= n; destroyed) by Hestenes' one-sided Jacobi
// rotations. On return column j of a is sig[j] u_j, sig[j] = ||column j|| >= 0
// (unsorted), and the columns of v (n x n, row-major) are the right singular
// vectors: a_in = sum_j sig_j u_j v_j^T. Zero columns stay zero (u_j is then
// undefined and must be skipped by the caller). It returns the sweeps used.
func OneSidedSVD(a []float64, m, n int, v, sig []float64) int {
	a = a[:m*n]
	v = v[:n*n]
	sig = sig[:n]
	for i := range v {
		v[i] = 0
	}
	for i := 0; i < n; i++ {
		v[i*n+i] = 1
	}
	const tol = 1e-15
	sweeps := 0
	for ; sweeps < jacobiMaxSweeps; sweeps++ {
		rotated := false
		for p := 0; p < n; p++ {
			ap := a[p*m : (p+1)*m : (p+1)*m]
			for q := p + 1; q < n; q++ {
				aq := a[q*m : (q+1)*m : (q+1)*m]
				alpha, beta, gamma := Dot(ap, ap), Dot(aq, aq), Dot(ap, aq)
				if gamma == 0 || math.Abs(gamma) <= tol*math.Sqrt(alpha*beta) {
					continue
				}
				rotated = true
				zeta := (beta - alpha) / (2 * gamma)
				t := 1 / (math.Abs(zeta) + math.Sqrt(1+zeta*zeta))
				if zeta < 0 {
					t = -t
				}
				c := 1 / math.Sqrt(1+t*t)
				s := c * t
				for i := range ap {
					x, y := ap[i], aq[i]
					ap[i] = c*x - s*y
					aq[i] = s*x + c*y
				}
				for r := 0; r < n; r++ {
					x, y := v[r*n+p], v[r*n+q]
					v[r*n+p] = c*x - s*y
					v[r*n+q] = s*x + c*y
				}
			}
		}
		if !rotated {
			break
		}
	}
	for j := 0; j < n; j++ {
		col := a[j*m : (j+1)*m]
		sig[j] = math.Sqrt(Dot(col, col))
	}
	return sweeps
}
