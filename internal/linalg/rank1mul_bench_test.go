package linalg

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkRank1Update compares Rank1Update with Rank1UpdateMul (one division
// per column) at NONS-ALD's dictionary sizes. Each iteration adds a small x x'
// (the factor grows slowly, as A does under ONS updates).
//
//	go test ./internal/linalg -run '^$' -bench Rank1Update -benchmem
func BenchmarkRank1Update(b *testing.B) {
	for _, n := range []int{16, 29, 64, 256} {
		r := rand.New(rand.NewPCG(1, uint64(n)))
		var base Tri
		for i := 0; i < n; i++ {
			row := make([]float64, i)
			for k := range row {
				row[k] = 0.01 * (r.Float64() - 0.5)
			}
			base.Append(row, 1)
		}
		xs := make([][]float64, 64)
		for i := range xs {
			xs[i] = make([]float64, n)
			for k := range xs[i] {
				xs[i][k] = 0.01 * (2*r.Float64() - 1)
			}
		}
		x := make([]float64, n)
		for _, variant := range []string{"columns", "mul"} {
			name := fmt.Sprintf("%s/n=%d", variant, n)
			b.Run(name, func(b *testing.B) {
				t := Tri{N: base.N, Data: append([]float64(nil), base.Data...)}
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					copy(x, xs[i&63])
					switch variant {
					case "mul":
						t.Rank1UpdateMul(x)
					default:
						t.Rank1Update(x)
					}
				}
			})
		}
	}
}
