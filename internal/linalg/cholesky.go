package linalg

import "math"

// CholeskySym sets dst to the lower Cholesky factor L of the symmetric
// positive-definite matrix a (a = L L'), reusing dst's storage. O(n^3/6)
// multiply-adds, no allocation once dst has room. It reports false, leaving
// dst empty (N = 0: never a partial factor that could pass for a whole one),
// when a pivot is not positive and finite (a not numerically positive
// definite); callers that must keep their previous factor pass a scratch dst.
func CholeskySym(dst *Tri, a *Sym) bool {
	n := a.N
	dst.Reset()
	dst.Reserve(n)
	dst.Data = dst.Data[:n*(n+1)/2]
	for i := 0; i < n; i++ {
		ri := dst.Data[i*(i+1)/2 : i*(i+1)/2+i+1]
		ai := a.Data[i*(i+1)/2 : i*(i+1)/2+i+1]
		for k := 0; k < i; k++ {
			rk := dst.Data[k*(k+1)/2 : k*(k+1)/2+k+1]
			ri[k] = (ai[k] - Dot(rk[:k], ri[:k])) / rk[k]
		}
		d := ai[i] - Dot(ri[:i], ri[:i])
		if !(d > 0) || math.IsInf(d, 0) {
			dst.Reset()
			return false
		}
		ri[i] = math.Sqrt(d)
	}
	dst.N = n
	return true
}
