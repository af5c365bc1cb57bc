package linalg

import "math"

// A Jacobi eigensolver for the small dense symmetric problems that
// incremental sketching learners run in their update rounds (FORKS' TISVD
// core matrix, (k+c) x (k+c)). It works in caller-owned buffers (no
// allocation), is accurate to working precision (Jacobi rotations are
// backward stable) and deterministic. It costs O(n^3) per sweep, so it suits
// n up to a few hundred; bigger one-off decompositions should use gonum.

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
