package models

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestTaylorFeatureCount(t *testing.T) {
	// Spec /: r = C(M+d, M).
	cases := []struct{ d, m, r int }{
		{5, 2, 21}, {5, 3, 56}, {5, 4, 126},
		{8, 2, 45}, {8, 3, 165}, {8, 4, 495},
		{9, 3, 220}, {18, 2, 190}, {18, 3, 1330}, {18, 4, 7315},
		{22, 2, 276}, {1, 0, 1}, {3, 1, 4},
	}
	for _, c := range cases {
		r, err := TaylorFeatureCount(c.d, c.m)
		if err != nil || r != c.r {
			t.Errorf("d=%d M=%d: r=%d err=%v, want %d", c.d, c.m, r, err, c.r)
			continue
		}
		tab := buildTaylorTable(c.d, c.m)
		if tab.r() != c.r {
			t.Errorf("d=%d M=%d: table has %d features, want %d", c.d, c.m, tab.r(), c.r)
		}
	}
	for _, c := range []struct{ d, m int }{{68, 4}, {22, 4}, {200, 2}} {
		_, err := TaylorFeatureCount(c.d, c.m)
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "exceeds the bound") {
			t.Errorf("d=%d M=%d: err = %v, want a spec error about the bound", c.d, c.m, err)
		}
	}
	if _, err := TaylorFeatureCount(68, 4); !strings.Contains(err.Error(), "1028790") {
		t.Errorf("error should name r: %v", err)
	}
}

// TestTaylorFeaturesKernel checks Lemma 12 (the inner product is exactly the
// order-M Taylor truncation of the Gaussian kernel) and Lemma 13 (its
// distance to the kernel is at most (R/sigma)^{2M+2}/(M+1)!), and that the
// error vanishes as M grows.
func TestTaylorFeaturesKernel(t *testing.T) {
	rng := NewRand(7)
	for _, d := range []int{1, 3, 8} {
		for _, sigma := range []float64{0.7, 1, 2} {
			for _, radius := range []float64{0.5, 1} {
				prevErr, firstErr := math.Inf(1), 0.0
				var xs, vs [][]float64
				for trial := 0; trial < 20; trial++ {
					xs, vs = append(xs, pkBall(rng, d, radius)), append(vs, pkBall(rng, d, radius))
				}
				for _, m := range []int{1, 2, 4, 6, 10} {
					if _, err := TaylorFeatureCount(d, m); err != nil {
						continue
					}
					tab := buildTaylorTable(d, m)
					phiX, phiV := make([]float64, tab.r()), make([]float64, tab.r())
					sc := make([]float64, d)
					g := NewGaussian(sigma)
					worst := 0.0
					for trial := 0; trial < 20; trial++ {
						x, v := xs[trial], vs[trial]
						tab.features(phiX, sc, x, 1/sigma)
						tab.features(phiV, sc, v, 1/sigma)
						got := dotSlow(phiX, phiV)
						// Truncated Taylor series of the kernel (Lemma 12).
						s2 := sigma * sigma
						xv := dotSlow(x, v) / s2
						trunc, term := 0.0, 1.0
						for j := 0; j <= m; j++ {
							if j > 0 {
								term *= xv / float64(j)
							}
							trunc += term
						}
						trunc *= math.Exp(-(dotSlow(x, x) + dotSlow(v, v)) / (2 * s2))
						if math.Abs(got-trunc) > 1e-13 {
							t.Fatalf("d=%d M=%d sigma=%v: <phi,phi'>=%v, truncated series %v", d, m, sigma, got, trunc)
						}
						e := math.Abs(g.Eval(x, v) - got)
						bound := math.Pow(radius/sigma, float64(2*m+2)) / math.Gamma(float64(m+2))
						if e > bound+1e-15 {
							t.Fatalf("d=%d M=%d sigma=%v R=%v: error %g above Lemma 13 bound %g", d, m, sigma, radius, e, bound)
						}
						worst = math.Max(worst, e)
					}
					if worst > prevErr*1.0001+1e-16 {
						t.Errorf("d=%d sigma=%v R=%v: worst error grew from %g to %g at M=%d", d, sigma, radius, prevErr, worst, m)
					}
					if firstErr == 0 {
						firstErr = worst
					}
					prevErr = worst
				}
				if !(prevErr < firstErr/100) {
					t.Errorf("d=%d sigma=%v R=%v: error %g at the largest M is not 100x below %g at M=1", d, sigma, radius, prevErr, firstErr)
				}
			}
		}
	}
}

func dotSlow(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// pkBall draws a point with norm at most radius.
func pkBall(r *Rand, d int, radius float64) []float64 {
	x := make([]float64, d)
	n := 0.0
	for i := range x {
		x[i] = r.Norm()
		n += x[i] * x[i]
	}
	s := radius * math.Pow(r.Float64(), 1/float64(d)) / math.Sqrt(n)
	for i := range x {
		x[i] *= s
	}
	return x
}
