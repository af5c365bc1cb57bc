package linalg

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestSymEigMatchesGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 5, 12, 30} {
		a := make([]float64, n*n)
		for i := 0; i < n; i++ {
			for j := i; j < n; j++ {
				v := rng.NormFloat64()
				a[i*n+j], a[j*n+i] = v, v
			}
		}
		orig := append([]float64(nil), a...)
		vecs := make([]float64, n*n)
		vals := make([]float64, n)
		SymEig(a, n, vecs, vals)
		var es mat.EigenSym
		if !es.Factorize(mat.NewSymDense(n, append([]float64(nil), orig...)), false) {
			t.Fatal("gonum failed")
		}
		want := es.Values(nil)
		sort.Sort(sort.Reverse(sort.Float64Slice(want)))
		for i := range want {
			if math.Abs(vals[i]-want[i]) > 1e-10*(1+math.Abs(want[0])) {
				t.Fatalf("n=%d: eigenvalue %d = %v, gonum %v", n, i, vals[i], want[i])
			}
		}
		// A v_i = lambda_i v_i and V^T V = I.
		for i := 0; i < n; i++ {
			for r := 0; r < n; r++ {
				s := 0.0
				for c := 0; c < n; c++ {
					s += orig[r*n+c] * vecs[c*n+i]
				}
				if math.Abs(s-vals[i]*vecs[r*n+i]) > 1e-9 {
					t.Fatalf("n=%d: residual of pair %d row %d: %v", n, i, r, s-vals[i]*vecs[r*n+i])
				}
			}
			for j := 0; j < n; j++ {
				s := 0.0
				for r := 0; r < n; r++ {
					s += vecs[r*n+i] * vecs[r*n+j]
				}
				want := 0.0
				if i == j {
					want = 1
				}
				if math.Abs(s-want) > 1e-12 {
					t.Fatalf("n=%d: V^T V[%d,%d] = %v", n, i, j, s)
				}
			}
		}
	}
}
