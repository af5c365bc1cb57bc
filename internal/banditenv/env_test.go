package banditenv

import (
	"math"
	"reflect"
	"testing"

	"github.com/kernelstream/kernelstream/models"
)

func TestEnvDrawsAnRKHSFunctionOfTheGivenNorm(t *testing.T) {
	k := models.NewGaussian(0.8)
	for _, norm := range []float64{0.5, 1, 3} {
		e, err := New(k, Config{Arms: 40, Dim: 4, Centers: 12, Norm: norm, Noise: 0.2}, 9)
		if err != nil {
			t.Fatal(err)
		}
		n2 := 0.0
		for i := range e.centers {
			for j := range e.centers {
				n2 += e.coef[i] * e.coef[j] * k.Eval(e.centers[i], e.centers[j])
			}
		}
		if math.Abs(math.Sqrt(n2)-norm) > 1e-12*norm {
			t.Fatalf("||f||_H = %v, want %v", math.Sqrt(n2), norm)
		}
		best := math.Inf(-1)
		for a, x := range e.Arms() {
			if len(x) != 4 {
				t.Fatalf("arm %d has dimension %d", a, len(x))
			}
			for _, v := range x {
				if v < -1 || v > 1 {
					t.Fatalf("arm %d outside [-1,1]^d: %v", a, x)
				}
			}
			f := 0.0
			for i, z := range e.centers {
				f += e.coef[i] * k.Eval(z, x)
			}
			if math.Abs(f-e.Mean(a)) > 1e-12 || math.Abs(f) > norm+1e-12 { // |f(x)| <= ||f|| sqrt(k(x,x))
				t.Fatalf("arm %d: mean %v, f %v", a, e.Mean(a), f)
			}
			best = math.Max(best, f)
			if e.Regret(a) < 0 {
				t.Fatalf("negative regret")
			}
		}
		if best != e.Best() {
			t.Fatalf("Best %v, max mean %v", e.Best(), best)
		}
	}
}

func TestEnvDeterministicAndNoisy(t *testing.T) {
	k := models.NewGaussian(1)
	a, _ := New(k, Config{Arms: 10, Dim: 3}, 5)
	b, _ := New(k, Config{Arms: 10, Dim: 3}, 5)
	c, _ := New(k, Config{Arms: 10, Dim: 3}, 6)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different environments")
	}
	if reflect.DeepEqual(a.Arms(), c.Arms()) {
		t.Fatal("different seeds, same arms")
	}
	r := models.NewRand(1)
	const n = 20000
	s, s2 := 0.0, 0.0
	for i := 0; i < n; i++ {
		y := a.Reward(3, r) - a.Mean(3)
		s += y
		s2 += y * y
	}
	if m, sd := s/n, math.Sqrt(s2/n); math.Abs(m) > 4*DefaultNoise/math.Sqrt(n) || math.Abs(sd-DefaultNoise) > 0.05*DefaultNoise {
		t.Fatalf("noise mean %v std %v, want 0 and %v", m, sd, DefaultNoise)
	}
}

func TestParse(t *testing.T) {
	c, err := Parse("gp:noise=0.3,norm=2,centers=7")
	if err != nil || c.Noise != 0.3 || c.Norm != 2 || c.Centers != 7 {
		t.Fatalf("%+v %v", c, err)
	}
	if c, err := Parse("gp"); err != nil || c != (Config{}) {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []string{"", "linear", "gp:noise", "gp:noise=-1", "gp:centers=0", "gp:norm=inf", "gp:x=1"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if _, err := New(models.NewGaussian(1), Config{Arms: 0, Dim: 2}, 1); err == nil {
		t.Error("zero arms accepted")
	}
}

func TestFreshRedrawKeepsTheRewardFunction(t *testing.T) {
	k := models.NewGaussian(1)
	c, err := Parse("gp:fresh=1")
	if err != nil || !c.Fresh {
		t.Fatalf("Parse(gp:fresh=1) = %+v, %v", c, err)
	}
	if _, err := Parse("gp:fresh=2"); err == nil {
		t.Fatal("fresh=2 accepted")
	}
	c.Arms, c.Dim = 7, 3
	e, err := New(k, c, 4)
	if err != nil {
		t.Fatal(err)
	}
	first := make([][]float64, 0, 7)
	for _, x := range e.Arms() {
		first = append(first, append([]float64(nil), x...))
	}
	e.Redraw()
	if reflect.DeepEqual(first, e.Arms()) {
		t.Fatal("Redraw left the arms unchanged")
	}
	best, sum := math.Inf(-1), 0.0
	for a, x := range e.Arms() {
		f := 0.0
		for i, z := range e.centers {
			f += e.coef[i] * k.Eval(z, x)
		}
		if math.Abs(f-e.Mean(a)) > 1e-12 {
			t.Fatalf("arm %d: Mean %v, f(x) %v", a, e.Mean(a), f)
		}
		best, sum = math.Max(best, f), sum+f
	}
	if want := best - sum/7; math.Abs(e.RandomRegret()-want) > 1e-12 {
		t.Fatalf("RandomRegret %v, want %v", e.RandomRegret(), want)
	}
}
