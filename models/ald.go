package models

import (
	"math"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

// The approximate-linear-dependence (ALD) dictionary of AOGD-ALD and
// NONS-ALD [Li & Liao 2023, Sec. 3, eq. 4-5]. With S = {s_1..s_j} the
// dictionary, kS(x) = (k(s_1,x), .., k(s_j,x))' and K_S its Gram matrix,
//
//	beta*_t = K_S^{-1} kS(x_t),  alpha_t = k(x_t,x_t) - kS(x_t)' K_S^{-1} kS(x_t)
//
// and the test "ALD holds" is alpha_t <= alpha. The dictionary keeps the
// Cholesky factor K_S = L L' [SUGGEST], so with l = L^{-1} kS(x) the
// residual is alpha_t = k(x,x) - l'l, adding a point appends the row
// [l', sqrt(alpha_t)] to L (O(j), no refactorisation), and l is also
// NONS-ALD's Nystrom feature vector in the Cholesky basis.

// aldAddFloor: a point is never added with a Cholesky pivot^2 below it (the
// pivot sqrt(alpha_t) would be rounding noise).
const aldAddFloor = 1e-10

// aldDictionary is a dictionary S (row-major, j x dim) with the Cholesky
// factor L of its Gram matrix, K_S = L L'.
type aldDictionary struct {
	dim int
	x   []float64 // j x dim
	L   linalg.Tri
}

func (s *aldDictionary) size() int { return s.L.N }

// residual writes kv = kS(x) and l = L^{-1} kv (both of length size()) and
// returns alpha_t = k(x,x) - l'l, clamped at 0, and k(x,x).
func (s *aldDictionary) residual(kernel Kernel, x, kv, l []float64) (alphaT, kxx float64) {
	KernelVector(kernel, kv, s.x, x)
	s.L.SolveLower(l, kv)
	kxx = kernel.Diag(x)
	return math.Max(kxx-linalg.Dot(l, l), 0), kxx
}

// add appends x with the Cholesky row [l', pivot].
func (s *aldDictionary) add(x, l []float64, pivot float64) {
	s.x = append(s.x, x...)
	s.L.Append(l, pivot)
}

// valid reports whether the decoded shapes and values are consistent.
func (s *aldDictionary) valid() bool {
	j := s.L.N
	if len(s.x) != j*s.dim || len(s.L.Data) != j*(j+1)/2 || !linalg.AllFinite(s.x) || !linalg.AllFinite(s.L.Data) {
		return false
	}
	for i := 0; i < j; i++ {
		if !(s.L.At(i, i) > 0) {
			return false
		}
	}
	return true
}
