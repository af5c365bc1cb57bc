package linalg

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// Sized benchmarks of the per-record kernels:
//
//	go test ./internal/linalg -run '^$' -bench . -benchmem
func BenchmarkSym(b *testing.B) {
	for _, n := range []int{16, 64, 256, 455} {
		r := rand.New(rand.NewPCG(1, uint64(n)))
		var s Sym
		s.Reset(n, 1)
		x, dst := make([]float64, n), make([]float64, n)
		for i := range x {
			x[i] = r.Float64() - 0.5
		}
		b.Run(fmt.Sprintf("MulVec/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				s.MulVec(dst, x)
			}
		})
		b.Run(fmt.Sprintf("Rank1/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				s.Rank1(1e-9, x)
			}
		})
	}
}

func BenchmarkTriRank1Update(b *testing.B) {
	for _, n := range []int{16, 64, 256} {
		r := rand.New(rand.NewPCG(2, uint64(n)))
		var t Tri
		for i := 0; i < n; i++ {
			row := make([]float64, i)
			for k := range row {
				row[k] = 0.01 * (r.Float64() - 0.5)
			}
			t.Append(row, 1)
		}
		x := make([]float64, n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				for k := range x {
					x[k] = 1e-3 * float64((i+k)%7-3)
				}
				t.Rank1Update(x)
			}
		})
	}
}

// BenchmarkTriSolve: forward and back substitution with a well-conditioned
// factor, the ALD residual and projection of aogd-ald and nons-ald.
func BenchmarkTriSolve(b *testing.B) {
	for _, n := range []int{16, 64, 256} {
		r := rand.New(rand.NewPCG(3, uint64(n)))
		var t Tri
		row := make([]float64, n)
		for i := 0; i < n; i++ {
			for k := range row[:i] {
				row[k] = 0.1 * (r.Float64() - 0.5)
			}
			t.Append(row, 1+r.Float64())
		}
		rhs, x := make([]float64, n), make([]float64, n)
		for i := range rhs {
			rhs[i] = r.Float64() - 0.5
		}
		b.Run(fmt.Sprintf("Lower/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				t.SolveLower(x, rhs)
			}
		})
		b.Run(fmt.Sprintf("Upper/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				t.SolveUpper(x, rhs)
			}
		})
	}
}
