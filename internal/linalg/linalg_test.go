package linalg

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// Tests of the packed Tri and Sym kernels and the vector helpers against
// gonum's dense implementations.

const ltTol = 1e-11

func ltRand(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = 2*r.Float64() - 1
	}
	return v
}

// ltSPD returns a random well-conditioned SPD matrix, its packed lower
// Cholesky factor built row by row with Append, and the gonum copy.
func ltSPD(t *testing.T, r *rand.Rand, n int) (*Tri, *mat.SymDense) {
	t.Helper()
	b := mat.NewDense(n, n, ltRand(r, n*n))
	var a mat.SymDense
	a.SymOuterK(1, b)
	for i := 0; i < n; i++ {
		a.SetSym(i, i, a.At(i, i)+float64(n))
	}
	var ch mat.Cholesky
	if !ch.Factorize(&a) {
		t.Fatal("gonum Cholesky failed")
	}
	var l mat.TriDense
	ch.LTo(&l)
	var tri Tri
	tri.Reserve(n)
	for i := 0; i < n; i++ {
		row := make([]float64, i)
		for k := 0; k < i; k++ {
			row[k] = l.At(i, k)
		}
		tri.Append(row, l.At(i, i))
	}
	return &tri, &a
}

func ltDense(t *Tri) *mat.Dense {
	d := mat.NewDense(max(t.N, 1), max(t.N, 1), nil)
	for i := 0; i < t.N; i++ {
		for k := 0; k <= i; k++ {
			d.Set(i, k, t.At(i, k))
		}
	}
	return d
}

func ltMaxDiff(a, b []float64) float64 {
	m := 0.0
	for i := range a {
		m = math.Max(m, math.Abs(a[i]-b[i]))
	}
	return m
}

func TestVecHelpers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 5, 8} {
		x, y := ltRand(r, n), ltRand(r, n)
		dot, sq := 0.0, 0.0
		for i := range x {
			dot += x[i] * y[i]
			sq += (x[i] - y[i]) * (x[i] - y[i])
		}
		if math.Abs(Dot(x, y)-dot) > ltTol || math.Abs(SqDist(x, y)-sq) > ltTol {
			t.Fatalf("n=%d: Dot %v vs %v, SqDist %v vs %v", n, Dot(x, y), dot, SqDist(x, y), sq)
		}
		z := append([]float64(nil), y...)
		Axpy(0.5, x, z)
		Scale(2, z)
		for i := range z {
			if math.Abs(z[i]-2*(y[i]+0.5*x[i])) > ltTol {
				t.Fatalf("Axpy/Scale at %d", i)
			}
		}
	}
	if !AllFinite([]float64{1, -2, 0}) || AllFinite([]float64{1, math.NaN()}) || AllFinite([]float64{math.Inf(-1)}) {
		t.Fatal("AllFinite")
	}
}

func TestTriSolvesAndMulVecMatchGonum(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 7, 30} {
		tri, _ := ltSPD(t, r, n)
		L := ltDense(tri)
		b := ltRand(r, n)
		bv := mat.NewVecDense(n, append([]float64(nil), b...))

		var want mat.VecDense
		if err := want.SolveVec(L, bv); err != nil {
			t.Fatal(err)
		}
		x := make([]float64, n)
		tri.SolveLower(x, b)
		if d := ltMaxDiff(x, want.RawVector().Data); d > ltTol {
			t.Fatalf("n=%d SolveLower diff %g", n, d)
		}
		if err := want.SolveVec(L.T(), bv); err != nil {
			t.Fatal(err)
		}
		tri.SolveUpper(x, b)
		if d := ltMaxDiff(x, want.RawVector().Data); d > ltTol {
			t.Fatalf("n=%d SolveUpper diff %g", n, d)
		}
		// aliasing x == b is allowed
		y := append([]float64(nil), b...)
		tri.SolveLower(y, y)
		tri.SolveUpper(y, y)
		var both mat.VecDense
		both.SolveVec(L, bv)
		both.SolveVec(L.T(), &both)
		if d := ltMaxDiff(y, both.RawVector().Data); d > ltTol {
			t.Fatalf("n=%d aliased solves diff %g", n, d)
		}
		want.MulVec(L, bv)
		tri.MulVec(x, b)
		if d := ltMaxDiff(x, want.RawVector().Data); d > ltTol {
			t.Fatalf("n=%d MulVec diff %g", n, d)
		}
	}
}

func TestTriRank1UpdateMatchesGonum(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 3, 12, 40} {
		tri, a := ltSPD(t, r, n)
		for rep := 0; rep < 5; rep++ {
			x := ltRand(r, n)
			Scale(3, x)
			a.SymRankOne(a, 1, mat.NewVecDense(n, append([]float64(nil), x...)))
			if !tri.Rank1Update(x) {
				t.Fatalf("n=%d: Rank1Update failed", n)
			}
		}
		var ch mat.Cholesky
		ch.Factorize(a)
		var l mat.TriDense
		ch.LTo(&l)
		got := ltDense(tri)
		for i := 0; i < n; i++ {
			for k := 0; k <= i; k++ {
				if d := math.Abs(got.At(i, k) - l.At(i, k)); d > 1e-10 {
					t.Fatalf("n=%d L[%d,%d] off by %g", n, i, k, d)
				}
			}
		}
	}
	// A non-finite input is reported, not silently absorbed.
	tri, _ := ltSPD(t, r, 3)
	if tri.Rank1Update([]float64{math.Inf(1), 0, 0}) {
		t.Fatal("Rank1Update accepted Inf")
	}
}

func TestTriResetReserveAppend(t *testing.T) {
	var tri Tri
	tri.Reserve(4)
	c := cap(tri.Data)
	tri.Append(nil, 2)
	tri.Append([]float64{1}, 3)
	tri.Append([]float64{4, 5}, 6)
	if tri.N != 3 || tri.At(2, 1) != 5 || tri.Row(1)[0] != 1 || cap(tri.Data) != c {
		t.Fatalf("append/reserve: %+v", tri)
	}
	tri.Reset()
	if tri.N != 0 || len(tri.Data) != 0 || cap(tri.Data) != c {
		t.Fatal("Reset")
	}
}

func TestSymOpsMatchGonum(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 4, 25} {
		var s Sym
		s.Reset(n, 2.5)
		g := mat.NewSymDense(n, nil)
		for i := 0; i < n; i++ {
			g.SetSym(i, i, 2.5)
		}
		for i := 0; i < n; i++ {
			for k := 0; k < i; k++ {
				v := r.Float64() - 0.5
				s.Set(k, i, v) // either index order addresses the same element
				g.SetSym(i, k, v)
			}
		}
		// grow by one: blockdiag(S, 7) then a full last row
		s.AppendDiag(7)
		g2 := mat.NewSymDense(n+1, nil)
		for i := 0; i < n; i++ {
			for k := 0; k <= i; k++ {
				g2.SetSym(i, k, g.At(i, k))
			}
		}
		g2.SetSym(n, n, 7)
		if s.N != n+1 || s.At(n, n) != 7 || s.At(n, 0) != 0 {
			t.Fatalf("AppendDiag: N=%d", s.N)
		}
		n++
		v := ltRand(r, n)
		s.Rank1(-0.3, v)
		g2.SymRankOne(g2, -0.3, mat.NewVecDense(n, v))
		for i := 0; i < n; i++ {
			for k := 0; k < n; k++ {
				if d := math.Abs(s.At(i, k) - g2.At(i, k)); d > ltTol {
					t.Fatalf("n=%d Rank1 [%d,%d] off by %g", n, i, k, d)
				}
			}
		}
		x := ltRand(r, n)
		dst := make([]float64, n)
		s.MulVec(dst, x)
		var want mat.VecDense
		want.MulVec(g2, mat.NewVecDense(n, x))
		if d := ltMaxDiff(dst, want.RawVector().Data); d > ltTol {
			t.Fatalf("n=%d MulVec diff %g", n, d)
		}
		if q, w := s.Quad(x), mat.Inner(mat.NewVecDense(n, x), g2, mat.NewVecDense(n, x)); math.Abs(q-w) > ltTol {
			t.Fatalf("n=%d Quad %v vs %v", n, q, w)
		}
		data := s.Data
		s.Reset(n-1, 1)
		if &s.Data[0] != &data[0] || s.At(0, 0) != 1 || (n > 2 && s.At(1, 0) != 0) {
			t.Fatal("Reset must reuse storage and zero it")
		}
	}
}
