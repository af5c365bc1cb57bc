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

func TestOneSidedSVDMatchesGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sh := range [][2]int{{1, 1}, {5, 3}, {40, 8}, {100, 20}} {
		m, n := sh[0], sh[1]
		a := make([]float64, m*n) // column-major
		for i := range a {
			a[i] = rng.NormFloat64()
		}
		// Make the last column a copy of the first: rank deficiency.
		if n > 2 {
			copy(a[(n-1)*m:], a[:m])
		}
		dense := mat.NewDense(m, n, nil)
		for j := 0; j < n; j++ {
			for i := 0; i < m; i++ {
				dense.Set(i, j, a[j*m+i])
			}
		}
		v := make([]float64, n*n)
		sig := make([]float64, n)
		OneSidedSVD(a, m, n, v, sig)
		var svd mat.SVD
		if !svd.Factorize(dense, mat.SVDThin) {
			t.Fatal("gonum failed")
		}
		want := svd.Values(nil)
		got := append([]float64(nil), sig...)
		sort.Sort(sort.Reverse(sort.Float64Slice(got)))
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-10*want[0] {
				t.Fatalf("%dx%d: sigma %d = %v, gonum %v", m, n, i, got[i], want[i])
			}
		}
		// Reconstruction: sum_j a_j v_j^T == input.
		for i := 0; i < m; i++ {
			for c := 0; c < n; c++ {
				s := 0.0
				for j := 0; j < n; j++ {
					s += a[j*m+i] * v[c*n+j]
				}
				if math.Abs(s-dense.At(i, c)) > 1e-10*want[0] {
					t.Fatalf("%dx%d: reconstruction (%d,%d) off by %v", m, n, i, c, s-dense.At(i, c))
				}
			}
		}
	}
}
