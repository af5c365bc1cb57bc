package linalg

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestCholeskySymMatchesGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 5, 17} {
		b := mat.NewDense(n, n, nil)
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				b.Set(i, j, rng.NormFloat64())
			}
		}
		var a mat.SymDense
		a.SymOuterK(1, b)
		var s Sym
		s.Reset(n, 0)
		for i := 0; i < n; i++ {
			a.SetSym(i, i, a.At(i, i)+0.1)
			for k := 0; k <= i; k++ {
				s.Set(i, k, a.At(i, k))
			}
		}
		var ch mat.Cholesky
		if !ch.Factorize(&a) {
			t.Fatal("gonum factorize failed")
		}
		var lg mat.TriDense
		ch.LTo(&lg)
		var l Tri
		if !CholeskySym(&l, &s) {
			t.Fatalf("n=%d: CholeskySym failed", n)
		}
		for i := 0; i < n; i++ {
			for k := 0; k <= i; k++ {
				if d := math.Abs(l.At(i, k) - lg.At(i, k)); d > 1e-10 {
					t.Fatalf("n=%d L[%d,%d] differs by %g", n, i, k, d)
				}
			}
		}
	}
}

func TestCholeskySymRejectsIndefinite(t *testing.T) {
	var s Sym
	s.Reset(2, 1)
	s.Set(1, 0, 2) // [[1,2],[2,1]] has eigenvalue -1
	var l Tri
	if CholeskySym(&l, &s) {
		t.Fatal("indefinite matrix factorized")
	}
	s.Set(1, 1, math.NaN())
	if CholeskySym(&l, &s) {
		t.Fatal("NaN matrix factorized")
	}
}
