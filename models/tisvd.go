package models

import (
	"fmt"
	"math"

	"github.com/kernelstream/kernelstream/internal/linalg"
	"gonum.org/v1/gonum/mat"
)

const (
	tisvdDropTol  = 1e-10 // relative residual below which a direction of X lies in span(V, P)
	tisvdOrthoTol = 1e-9  // ||V^T V - I||_F that triggers re-orthonormalisation
)

// tisvd keeps the rank-k eigen-factors of an n x n symmetric matrix by the
// Truncated Incremental SVD of [Wen et al. 2024, Alg. 2, App. B.2, eq. 6-9],
// in its symmetric form [SUGGEST].
//
// FORKS applies it to M = Phi_pp, which is symmetric, with a symmetric update
// Delta_1 Delta_2^T = X G X^T (X = [s_p, a], G = [[kappa, 1], [1, 0]], eq. 12).
// With U = V and P = Q, Algorithm 2 becomes:
//
//	lines 1-3:  Y = (I - V V^T) X,  P = orthonormal basis of col(Y)
//	lines 4-5:  R = P^T (I - V V^T) X = P^T X
//	line 6:     H = [Lambda 0; 0 0] + [V^T X; R] G [V^T X; R]^T        (eq. 8)
//	line 7:     H = W Omega W^T, keep the k largest eigenvalues
//	lines 9-11: V <- [V P] W_k, Lambda <- Omega_k                        (eq. 9)
//
// which keeps M ~ V Lambda V^T with V orthonormal (s_p x k). Choices:
//   - [SUGGEST] P comes from Gram-Schmidt with a second pass against V and P
//     ("twice is enough") and drops directions whose residual norm is below
//     1e-10 ||X_j||, so Delta's true rank (<= 2) is used. The authors' code
//     [CODE] takes a fixed 3 columns, whose third is not orthogonal to V:
//     [V P] is then not orthonormal and eq. 7 no longer holds.
//   - [SUGGEST] The eigenvalues kept are the k largest (algebraic), so a
//     sketch that lost PSD-ness under the authors' psi keeps its dominant
//     positive directions; the feature map clamps negatives to 0.
//   - [SUGGEST] Orthogonality safeguard: after every update ||V^T V - I||_F is
//     measured (O(s_p k^2), the cost of eq. 9 itself) and above 1e-9 V is
//     re-orthonormalised without Phi_pp: V = QR (modified Gram-Schmidt),
//     R Lambda R^T = W Omega W^T, V <- Q W, Lambda <- Omega. This is exact for
//     the current rank-k approximation.
//   - [RECON] The cost per update is O(s_p k (k+c) + (k+c)^3), the paper's
//     Remark 1 read for c update columns. The small eigenproblem uses
//     linalg.SymEig (Jacobi), so an update allocates nothing.
//
// Updates write into V/Lambda "next" buffers; commit swaps them in, so a
// caller can drop an update whose result is not finite (numerical guard).
type tisvd struct {
	n, k, c int       // rows, rank, max update columns
	V       []float64 // n x k row-major, orthonormal columns
	lam     []float64 // k, descending

	vNext, lamNext []float64

	// scratch
	cx   []float64 // k x c: V^T X
	p    []float64 // c x n: basis of the residual, row l is p_l
	l    []float64 // (k+c) x c: [V^T X; R]
	h    []float64 // (k+c)^2
	w    []float64 // (k+c)^2
	om   []float64 // k+c
	gram []float64 // k x k

	reorths int // re-orthonormalisations done (diagnostics, not state)
}

func newTISVD(n, k, c int) *tisvd {
	m := k + c
	return &tisvd{
		n: n, k: k, c: c,
		V: make([]float64, n*k), lam: make([]float64, k),
		vNext: make([]float64, n*k), lamNext: make([]float64, k),
		cx: make([]float64, k*c), p: make([]float64, c*n),
		l: make([]float64, m*c), h: make([]float64, m*m), w: make([]float64, m*m), om: make([]float64, m),
		gram: make([]float64, k*k),
	}
}

// initFrom sets V, Lambda to the k largest eigenpairs of the symmetric n x n
// matrix a (row-major): the full decomposition FORKS runs once, when the
// sketch is built (Algorithm 1 line 8). It uses gonum (one-off, allocates).
func (t *tisvd) initFrom(a []float64) error {
	var es mat.EigenSym
	if ok := es.Factorize(mat.NewSymDense(t.n, append([]float64(nil), a...)), true); !ok {
		return fmt.Errorf("%w: tisvd: eigendecomposition of the initial sketch failed", ErrNumerical)
	}
	vals := es.Values(nil) // ascending
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	for i := 0; i < t.k; i++ {
		src := t.n - 1 - i
		t.lam[i] = vals[src]
		for r := 0; r < t.n; r++ {
			t.V[r*t.k+i] = vecs.At(r, src)
		}
	}
	if !linalg.AllFinite(t.V) || !linalg.AllFinite(t.lam) {
		return fmt.Errorf("%w: tisvd: initial sketch has non-finite eigenpairs", ErrNumerical)
	}
	return nil
}

// update computes the rank-k factors of V Lambda V^T + X G X^T into the next
// buffers. x holds the m <= c columns of X (column j is x[j*n:(j+1)*n]) and g
// the symmetric m x m matrix G, row-major. It reports whether the result is
// finite; commit makes it current.
func (t *tisvd) update(x []float64, m int, g []float64) bool {
	n, k := t.n, t.k
	// C = V^T X, skipping zero entries of X (FORKS' s_p column is +-e_h).
	cx := t.cx[:k*m]
	for i := range cx {
		cx[i] = 0
	}
	for r := 0; r < n; r++ {
		vr := t.V[r*k : (r+1)*k : (r+1)*k]
		for j := 0; j < m; j++ {
			if xr := x[j*n+r]; xr != 0 {
				for i, v := range vr {
					cx[i*m+j] += v * xr
				}
			}
		}
	}
	// Lines 1-3: P = orthonormal basis of (I - V V^T) X, two passes.
	kept := 0
	for j := 0; j < m; j++ {
		xj := x[j*n : (j+1)*n : (j+1)*n]
		pj := t.p[kept*n : (kept+1)*n : (kept+1)*n]
		copy(pj, xj)
		for pass := 0; pass < 2; pass++ {
			for i := 0; i < k; i++ {
				// d = v_i . pj with v_i the strided column i of V.
				d := 0.0
				for r := 0; r < n; r++ {
					d += t.V[r*k+i] * pj[r]
				}
				if d != 0 {
					for r := 0; r < n; r++ {
						pj[r] -= d * t.V[r*k+i]
					}
				}
			}
			for l := 0; l < kept; l++ {
				pl := t.p[l*n : (l+1)*n]
				linalg.Axpy(-linalg.Dot(pl, pj), pl, pj)
			}
		}
		nrm := math.Sqrt(linalg.Dot(pj, pj))
		if nrm > tisvdDropTol*math.Sqrt(linalg.Dot(xj, xj)) && nrm > 0 {
			linalg.Scale(1/nrm, pj)
			kept++
		}
	}
	// Lines 4-6: R = P^T X, L = [C; R], H = diag(Lambda, 0) + L G L^T.
	kc := k + kept
	l := t.l[:kc*m]
	copy(l, cx)
	for a := 0; a < kept; a++ {
		pa := t.p[a*n : (a+1)*n]
		for j := 0; j < m; j++ {
			l[(k+a)*m+j] = linalg.Dot(pa, x[j*n:(j+1)*n])
		}
	}
	h := t.h[:kc*kc]
	for a := 0; a < kc; a++ {
		la := l[a*m : (a+1)*m]
		for b := a; b < kc; b++ {
			lb := l[b*m : (b+1)*m]
			s := 0.0
			for i := 0; i < m; i++ {
				gi := g[i*m : (i+1)*m]
				for j := 0; j < m; j++ {
					s += la[i] * gi[j] * lb[j]
				}
			}
			if a == b && a < k {
				s += t.lam[a]
			}
			h[a*kc+b], h[b*kc+a] = s, s
		}
	}
	// Line 7: eigen-decomposition of H, descending.
	w := t.w[:kc*kc]
	om := t.om[:kc]
	linalg.SymEig(h, kc, w, om)
	// Lines 9-11: V <- [V P] W_k, Lambda <- Omega_k.
	for r := 0; r < n; r++ {
		dst := t.vNext[r*k : (r+1)*k : (r+1)*k]
		for i := range dst {
			dst[i] = 0
		}
		vr := t.V[r*k : (r+1)*k]
		for a, va := range vr {
			if va != 0 {
				linalg.Axpy(va, w[a*kc:a*kc+k], dst)
			}
		}
		for a := 0; a < kept; a++ {
			if pa := t.p[a*n+r]; pa != 0 {
				linalg.Axpy(pa, w[(k+a)*kc:(k+a)*kc+k], dst)
			}
		}
	}
	copy(t.lamNext, om[:k])
	t.reorthonormalize()
	return linalg.AllFinite(t.vNext) && linalg.AllFinite(t.lamNext)
}

// orthoError is ||V^T V - I||_F for the n x k matrix v.
func (t *tisvd) orthoError(v []float64) float64 {
	n, k := t.n, t.k
	gram := t.gram
	for i := range gram {
		gram[i] = 0
	}
	for r := 0; r < n; r++ {
		vr := v[r*k : (r+1)*k]
		for i, vi := range vr {
			if vi != 0 {
				linalg.Axpy(vi, vr[i:], gram[i*k+i:i*k+k])
			}
		}
	}
	e := 0.0
	for i := 0; i < k; i++ {
		d := gram[i*k+i] - 1
		e += d * d
		for j := i + 1; j < k; j++ {
			e += 2 * gram[i*k+j] * gram[i*k+j]
		}
	}
	return math.Sqrt(e)
}

// reorthonormalize is the safeguard on the next buffer: when V has
// drifted from orthonormality, V = Q R (modified Gram-Schmidt),
// R Lambda R^T = W Omega W^T, V <- Q W, Lambda <- Omega. The represented
// matrix V Lambda V^T is unchanged.
func (t *tisvd) reorthonormalize() {
	if e := t.orthoError(t.vNext); !(e > tisvdOrthoTol) { // also false for NaN: the guard rejects it
		return
	}
	t.reorths++
	n, k := t.n, t.k
	v := t.vNext
	rm := t.gram // k x k upper-triangular R
	for i := range rm {
		rm[i] = 0
	}
	for j := 0; j < k; j++ {
		for pass := 0; pass < 2; pass++ {
			for i := 0; i < j; i++ {
				d := 0.0
				for r := 0; r < n; r++ {
					d += v[r*k+i] * v[r*k+j]
				}
				rm[i*k+j] += d
				for r := 0; r < n; r++ {
					v[r*k+j] -= d * v[r*k+i]
				}
			}
		}
		nrm := 0.0
		for r := 0; r < n; r++ {
			nrm += v[r*k+j] * v[r*k+j]
		}
		nrm = math.Sqrt(nrm)
		rm[j*k+j] = nrm
		if nrm > 0 {
			for r := 0; r < n; r++ {
				v[r*k+j] /= nrm
			}
		}
	}
	// H = R diag(lam) R^T (k x k), reuse t.h.
	h := t.h[:k*k]
	for a := 0; a < k; a++ {
		for b := a; b < k; b++ {
			s := 0.0
			for i := b; i < k; i++ { // R upper-triangular: rows a, b nonzero from their index on
				s += rm[a*k+i] * t.lamNext[i] * rm[b*k+i]
			}
			h[a*k+b], h[b*k+a] = s, s
		}
	}
	w := t.w[:k*k]
	linalg.SymEig(h, k, w, t.lamNext)
	// V <- Q W, one row at a time through a k-vector of scratch.
	tmp := t.om[:k]
	for r := 0; r < n; r++ {
		vr := v[r*k : (r+1)*k]
		for i := range tmp {
			tmp[i] = 0
		}
		for a, va := range vr {
			if va != 0 {
				linalg.Axpy(va, w[a*k:(a+1)*k], tmp)
			}
		}
		copy(vr, tmp)
	}
}

// commit makes the last update current.
func (t *tisvd) commit() {
	t.V, t.vNext = t.vNext, t.V
	t.lam, t.lamNext = t.lamNext, t.lam
}
