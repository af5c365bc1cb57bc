package linalg

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// The basic least-squares solution from the pivoted Cholesky factor of
// A^T A gives the same fitted values A X as the pseudo-inverse solution,
// with full column rank and with duplicated (dependent) columns.
func TestPivotedCholeskyLeastSquares(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []struct {
		m, n, dup int
	}{{30, 8, 0}, {30, 8, 3}, {100, 20, 5}, {5, 1, 0}} {
		a := mat.NewDense(tc.m, tc.n, nil)
		for i := 0; i < tc.m; i++ {
			for j := 0; j < tc.n; j++ {
				a.Set(i, j, rng.NormFloat64())
			}
		}
		for d := 0; d < tc.dup; d++ { // column n-1-d := column d
			for i := 0; i < tc.m; i++ {
				a.Set(i, tc.n-1-d, a.At(i, d))
			}
		}
		const k = 4
		b := mat.NewDense(tc.m, k, nil)
		for i := 0; i < tc.m; i++ {
			for j := 0; j < k; j++ {
				b.Set(i, j, rng.NormFloat64())
			}
		}
		var g, atb mat.Dense
		g.Mul(a.T(), a)
		atb.Mul(a.T(), b)
		gs := make([]float64, tc.n*tc.n)
		for i := 0; i < tc.n; i++ {
			for j := 0; j < tc.n; j++ {
				gs[i*tc.n+j] = g.At(i, j)
			}
		}
		x := make([]float64, tc.n*k)
		for i := 0; i < tc.n; i++ {
			for j := 0; j < k; j++ {
				x[i*k+j] = atb.At(i, j)
			}
		}
		piv := make([]int, tc.n)
		r := PivotedCholesky(gs, tc.n, 1e-12, piv)
		if r != tc.n-tc.dup {
			t.Fatalf("%+v: rank %d, want %d", tc, r, tc.n-tc.dup)
		}
		PivotedCholeskySolve(gs, tc.n, r, piv, x, k, make([]float64, tc.n*k))
		// Oracle: fitted values of the pseudo-inverse solution.
		var svd mat.SVD
		if !svd.Factorize(a, mat.SVDThin) {
			t.Fatal("svd")
		}
		var xp mat.Dense
		svd.SolveTo(&xp, b, r)
		var fitP, fitX mat.Dense
		fitP.Mul(a, &xp)
		fitX.Mul(a, mat.NewDense(tc.n, k, x))
		for i := 0; i < tc.m; i++ {
			for j := 0; j < k; j++ {
				if d := math.Abs(fitP.At(i, j) - fitX.At(i, j)); d > 1e-9 {
					t.Fatalf("%+v: fitted value (%d,%d) differs by %v", tc, i, j, d)
				}
			}
		}
	}
}
