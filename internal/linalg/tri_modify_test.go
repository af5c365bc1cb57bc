package linalg

import (
	"math"
	"math/rand/v2"
	"testing"
)

// spdFactor returns the packed Cholesky factor of a random SPD n x n matrix
// and the matrix itself (dense, row-major).
func spdFactor(t *testing.T, r *rand.Rand, n int) (*Tri, []float64) {
	t.Helper()
	m := n + 3
	g := make([]float64, n*m)
	for i := range g {
		g[i] = r.NormFloat64()
	}
	a := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			a[i*n+j] = Dot(g[i*m:(i+1)*m], g[j*m:(j+1)*m])
		}
		a[i*n+i] += 0.1
	}
	var s Sym
	s.Reset(n, 0)
	for i := 0; i < n; i++ {
		for j := 0; j <= i; j++ {
			s.Set(i, j, a[i*n+j])
		}
	}
	var l Tri
	if !CholeskySym(&l, &s) {
		t.Fatal("random SPD matrix not factored")
	}
	return &l, a
}

// product returns L L' densely.
func product(l *Tri) []float64 {
	n := l.N
	out := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			k := min(i, j)
			out[i*n+j] = Dot(l.Row(i)[:k+1], l.Row(j)[:k+1])
		}
	}
	return out
}

func TestTriDeleteRowAndRotateDrop(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 5, 9} {
		for k := 0; k < n; k++ {
			l, a := spdFactor(t, r, n)
			lv, v := spdFactor(t, r, n)
			cs := make([]float64, 2*n)
			l.DeleteRow(k, cs, make([]float64, n*n))
			// The factor of K without row and column k.
			var want []float64
			for i := 0; i < n; i++ {
				for j := 0; j < n; j++ {
					if i != k && j != k {
						want = append(want, a[i*n+j])
					}
				}
			}
			if l.N != n-1 || ltMaxDiff(product(l), want) > 1e-9 {
				t.Fatalf("n %d k %d: DeleteRow is not the factor of the reduced matrix", n, k)
			}
			for i := 0; i < l.N; i++ {
				if l.At(i, i) < 0 {
					t.Fatalf("n %d k %d: negative pivot", n, k)
				}
			}
			// G' V G without the last coordinate, densely.
			g := make([]float64, n*n) // G = product of the column rotations
			for i := 0; i < n; i++ {
				g[i*n+i] = 1
			}
			for i := k; i < n-1; i++ {
				c, s := cs[2*(i-k)], cs[2*(i-k)+1]
				for row := 0; row < n; row++ {
					x, y := g[row*n+i], g[row*n+i+1]
					g[row*n+i], g[row*n+i+1] = c*x+s*y, -s*x+c*y
				}
			}
			gvg := make([]float64, 0, (n-1)*(n-1))
			for i := 0; i < n-1; i++ {
				for j := 0; j < n-1; j++ {
					s := 0.0
					for p := 0; p < n; p++ {
						for q := 0; q < n; q++ {
							s += g[p*n+i] * v[p*n+q] * g[q*n+j]
						}
					}
					gvg = append(gvg, s)
				}
			}
			last := make([]float64, n)
			lv.RotateDrop(k, cs, make([]float64, n*n), last)
			if d := math.Abs(Dot(last, last) - gvg2(g, v, n)); d > 1e-9 {
				t.Fatalf("n %d k %d: dropped row has squared norm off by %g", n, k, d)
			}
			if lv.N != n-1 || ltMaxDiff(product(lv), gvg) > 1e-9 {
				t.Fatalf("n %d k %d: RotateDrop is not the factor of G'VG without the last coordinate", n, k)
			}
			x := make([]float64, n)
			for i := range x {
				x[i] = r.NormFloat64()
			}
			gx := make([]float64, n)
			for i := 0; i < n; i++ {
				for p := 0; p < n; p++ {
					gx[i] += g[p*n+i] * x[p]
				}
			}
			if got := RotateVec(k, cs, x); ltMaxDiff(got, gx[:n-1]) > 1e-12 {
				t.Fatalf("n %d k %d: RotateVec %v, want %v", n, k, got, gx[:n-1])
			}
		}
	}
}

func TestTriRank1Downdate(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 3, 8} {
		l, a := spdFactor(t, r, n)
		x := make([]float64, n)
		for i := range x {
			x[i] = 0.2 * r.NormFloat64()
		}
		xc := append([]float64(nil), x...)
		l.Rank1Update(xc) // L L' = A + x x'
		xc = append(xc[:0], x...)
		if !l.Rank1Downdate(xc, make([]float64, 2*n)) {
			t.Fatalf("n %d: downdate refused", n)
		}
		if d := ltMaxDiff(product(l), a); d > 1e-9 {
			t.Fatalf("n %d: downdate off by %g", n, d)
		}
		// Removing more than is there must be refused, L unchanged.
		before := append([]float64(nil), l.Data...)
		big := make([]float64, n)
		big[0] = 10 * math.Sqrt(a[0])
		if l.Rank1Downdate(big, make([]float64, 2*n)) {
			t.Fatalf("n %d: indefinite downdate accepted", n)
		}
		if ltMaxDiff(before, l.Data) != 0 {
			t.Fatalf("n %d: refused downdate changed L", n)
		}
	}
}

// gvg2 is (G'VG)[n-1][n-1], the squared norm of the dropped row.
func gvg2(g, v []float64, n int) float64 {
	s := 0.0
	for p := 0; p < n; p++ {
		for q := 0; q < n; q++ {
			s += g[p*n+n-1] * v[p*n+q] * g[q*n+n-1]
		}
	}
	return s
}
