package linalg

import (
	"math"
	"testing"
)

func TestCosSinScaledMatchesMath(t *testing.T) {
	var u []float64
	for i := -20000; i <= 20000; i++ {
		u = append(u, float64(i)*0.0137)
	}
	u = append(u, 0, math.Copysign(0, -1), math.Pi/4, math.Pi/2, math.Pi, 1e5+0.3, -7e5, 2e6, -3e7, 1e300, math.Inf(1), math.NaN())
	for _, s := range []float64{1, 4, 0.125} {
		dst := make([]float64, 2*len(u))
		CosSinScaled(dst, u, s, 0.5)
		for j, v := range u {
			sn, cs := math.Sincos(s * v)
			gotC, gotS := dst[2*j], dst[2*j+1]
			if math.IsNaN(sn) {
				if !math.IsNaN(gotS) || !math.IsNaN(gotC) {
					t.Fatalf("arg %v: want NaN, got %v %v", s*v, gotC, gotS)
				}
				continue
			}
			if math.Abs(gotC-0.5*cs) > 5e-16 || math.Abs(gotS-0.5*sn) > 5e-16 { // a few ulps of the unscaled value
				t.Fatalf("arg %v: cos %v want %v, sin %v want %v", s*v, gotC, 0.5*cs, gotS, 0.5*sn)
			}
		}
	}
}

func BenchmarkCosSinScaled(b *testing.B) {
	u := make([]float64, 400)
	for i := range u {
		u[i] = float64(i%97)*0.37 - 17
	}
	dst := make([]float64, 800)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			CosSinScaled(dst, u, 1.7, 0.05)
		}
	})
	b.Run("math.Sincos", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for j, v := range u {
				s, c := math.Sincos(1.7 * v)
				dst[2*j], dst[2*j+1] = 0.05*c, 0.05*s
			}
		}
	})
}
