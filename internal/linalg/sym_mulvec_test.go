package linalg

import (
	"math"
	"testing"
)

func TestSymMulVecFastMatchesMulVec(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4, 5, 7, 8, 13, 64, 101} {
		var s Sym
		s.Reset(n, 0)
		x := make([]float64, n)
		seed := uint64(n + 1)
		next := func() float64 {
			seed = seed*6364136223846793005 + 1442695040888963407
			return float64(seed>>11)/float64(1<<53) - 0.5
		}
		for i := range s.Data {
			s.Data[i] = next()
		}
		for i := range x {
			x[i] = next()
		}
		want, got := make([]float64, n), make([]float64, n)
		s.MulVec(want, x)
		s.MulVecFast(got, x)
		for i := range want {
			if math.Abs(want[i]-got[i]) > 1e-12*(1+math.Abs(want[i])) {
				t.Fatalf("n=%d i=%d: MulVecFast %v, MulVec %v", n, i, got[i], want[i])
			}
		}
	}
}

func BenchmarkSymMulVec(b *testing.B) {
	const n = 455
	var s Sym
	s.Reset(n, 1)
	x, dst := make([]float64, n), make([]float64, n)
	for i := range x {
		x[i] = float64(i%7) - 3
	}
	b.Run("MulVec/n=455", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s.MulVec(dst, x)
		}
	})
	b.Run("MulVecFast/n=455", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s.MulVecFast(dst, x)
		}
	})
}

func TestSymRank1FastIsRank1(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 5, 9, 33} {
		var a, b Sym
		a.Reset(n, 1)
		b.Reset(n, 1)
		v := make([]float64, n)
		for i := range v {
			v[i] = math.Sin(float64(3*i + 1))
		}
		for rep := 0; rep < 3; rep++ {
			a.Rank1(-0.37, v)
			b.Rank1Fast(-0.37, v)
		}
		for i := range a.Data {
			if math.Float64bits(a.Data[i]) != math.Float64bits(b.Data[i]) {
				t.Fatalf("n=%d element %d: %v vs %v", n, i, b.Data[i], a.Data[i])
			}
		}
	}
}

func BenchmarkSymRank1(b *testing.B) {
	const n = 455
	var s Sym
	s.Reset(n, 1)
	v := make([]float64, n)
	for i := range v {
		v[i] = 1e-3 * float64(i%7)
	}
	b.Run("Rank1/n=455", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s.Rank1(1e-9, v)
		}
	})
	b.Run("Rank1Fast/n=455", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s.Rank1Fast(1e-9, v)
		}
	})
}
