package linalg

import (
	"strings"
	"testing"
)

// Shape errors panic with a message naming the function and the lengths.
func TestShapeErrorsPanicClearly(t *testing.T) {
	sym := &Sym{}
	sym.Reset(3, 1)
	tri := &Tri{}
	tri.Append(nil, 1)
	tri.Append([]float64{0}, 1)
	short, three := make([]float64, 1), make([]float64, 3)
	for _, tc := range []struct {
		name string
		call func()
	}{
		{"Dot", func() { Dot(three, short) }},
		{"Dot", func() { Dot(short, three) }},
		{"SqDist", func() { SqDist(three, short) }},
		{"Axpy", func() { Axpy(1, three, short) }},
		{"Sym.MulVec", func() { sym.MulVec(three, short) }},
		{"Sym.MulVec", func() { sym.MulVec(short, three) }},
		{"Sym.Rank1", func() { sym.Rank1(1, short) }},
		{"Sym.Quad", func() { sym.Quad(short) }},
		{"Tri.Append", func() { tri.Append(short, 1) }},
		{"Tri.SolveLower", func() { tri.SolveLower(short, three) }},
		{"Tri.SolveUpper", func() { tri.SolveUpper(three, short) }},
		{"Tri.MulVec", func() { tri.MulVec(short, three) }},
		{"Tri.Rank1Update", func() { tri.Rank1Update(short) }},
	} {
		msg := func() (msg string) {
			defer func() {
				if r := recover(); r != nil {
					msg, _ = r.(string)
				}
			}()
			tc.call()
			return ""
		}()
		if !strings.HasPrefix(msg, "linalg: "+tc.name+": len(") {
			t.Errorf("%s: panic %q, want a linalg shape message", tc.name, msg)
		}
	}
}

// A failed factorization leaves no partial factor behind.
func TestCholeskyFailureLeavesDstEmpty(t *testing.T) {
	a := &Sym{}
	a.Reset(3, 1)
	a.Set(2, 2, -1) // not positive definite at the last pivot
	dst := &Tri{}
	if CholeskySym(dst, a) {
		t.Fatal("factorized an indefinite matrix")
	}
	if dst.N != 0 || len(dst.Data) != 0 {
		t.Fatalf("partial factor left: N=%d len=%d", dst.N, len(dst.Data))
	}
	a.Set(2, 2, 1)
	if !CholeskySym(dst, a) || dst.N != 3 {
		t.Fatalf("dst not reusable after a failure: N=%d", dst.N)
	}
}
