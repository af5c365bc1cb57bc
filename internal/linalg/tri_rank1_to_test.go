package linalg

import (
	"math"
	"testing"
)

// TestRank1UpdateToMatchesRank1Update: the out-of-place update equals the
// in-place one up to rounding, leaves the source alone, and L L' = L0 L0' + x x'.
func TestRank1UpdateToMatchesRank1Update(t *testing.T) {
	seed := uint64(99)
	next := func() float64 {
		seed = seed*6364136223846793005 + 1442695040888963407
		return float64(seed>>11)/float64(1<<53) - 0.5
	}
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 17, 40} {
		var l Tri
		for i := 0; i < n; i++ {
			row := make([]float64, i)
			for k := range row {
				row[k] = next()
			}
			l.Append(row, 2+next())
		}
		src := append([]float64(nil), l.Data...)
		x := make([]float64, n)
		for i := range x {
			x[i] = next()
		}
		x1, x2 := append([]float64(nil), x...), append([]float64(nil), x...)
		var out Tri
		if !l.Rank1UpdateTo(&out, x1, make([]float64, 2*n)) {
			t.Fatal("update failed")
		}
		for i := range src {
			if src[i] != l.Data[i] {
				t.Fatal("source changed")
			}
		}
		in := Tri{N: n, Data: append([]float64(nil), src...)}
		in.Rank1Update(x2)
		for i := range in.Data {
			if math.Abs(in.Data[i]-out.Data[i]) > 1e-13 {
				t.Fatalf("n=%d element %d: %v vs %v", n, i, out.Data[i], in.Data[i])
			}
		}
		// L L' == L0 L0' + x x'
		for i := 0; i < n; i++ {
			for k := 0; k <= i; k++ {
				want := x[i] * x[k]
				got := 0.0
				for j := 0; j <= k; j++ {
					want += src[i*(i+1)/2+j] * src[k*(k+1)/2+j]
					got += out.At(i, j) * out.At(k, j)
				}
				if math.Abs(got-want) > 1e-12 {
					t.Fatalf("n=%d (%d,%d): LL' %v want %v", n, i, k, got, want)
				}
			}
		}
	}
	var empty, out Tri
	if !empty.Rank1UpdateTo(&out, nil, nil) || out.N != 0 {
		t.Fatal("empty update")
	}
}

func BenchmarkTriRank1(b *testing.B) {
	const n = 256
	var l Tri
	for i := 0; i < n; i++ {
		row := make([]float64, i)
		for k := range row {
			row[k] = 0.01
		}
		l.Append(row, 3)
	}
	x, w := make([]float64, n), make([]float64, n)
	for i := range x {
		x[i] = 0.1
	}
	var dst Tri
	work := make([]float64, 2*n)
	b.Run("CopyRank1Update/n=256", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			dst.Data = append(dst.Data[:0], l.Data...)
			dst.N = l.N
			copy(w, x)
			dst.Rank1Update(w)
		}
	})
	b.Run("Rank1UpdateTo/n=256", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			copy(w, x)
			l.Rank1UpdateTo(&dst, w, work)
		}
	})
}
