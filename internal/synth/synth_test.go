package synth

import (
	"math"
	"testing"
)

func TestDeterministicAndPerKey(t *testing.T) {
	for _, name := range []string{"sines", "bumps", "friedman", "mixed"} {
		a, err := New(name, Options{Keys: 5, Dim: 6, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := New(name, Options{Keys: 5, Dim: 6, Seed: 3})
		c, _ := New(name, Options{Keys: 5, Dim: 6, Seed: 4})
		var ea, eb, ec Example
		seqs := map[string]int{}
		differs := false
		lo, hi := math.Inf(1), math.Inf(-1)
		for i := 0; i < 2000; i++ {
			a.Next(&ea)
			b.Next(&eb)
			c.Next(&ec)
			if ea.ID() != eb.ID() || ea.Y != eb.Y || ea.X[5] != eb.X[5] {
				t.Fatalf("%s: same seed, different example %d", name, i)
			}
			differs = differs || ea.Y != ec.Y
			if ea.Seq != seqs[ea.Key] {
				t.Fatalf("%s: key %s seq %d, want %d", name, ea.Key, ea.Seq, seqs[ea.Key])
			}
			seqs[ea.Key]++
			for _, x := range ea.X {
				if x < -1 || x > 1 {
					t.Fatalf("x out of [-1,1]: %v", x)
				}
			}
			lo, hi = math.Min(lo, ea.Y), math.Max(hi, ea.Y)
		}
		if !differs {
			t.Errorf("%s: seed does not matter", name)
		}
		if len(seqs) != 5 {
			t.Errorf("%s: %d keys seen", name, len(seqs))
		}
		if lo < -0.5 || hi > 1.5 || hi-lo < 0.1 {
			t.Errorf("%s: targets in [%v, %v]", name, lo, hi)
		}
	}
}

// TestTargetsAreLearnable: each key's function is smooth (nearby x, nearby
// y) and keys differ, which is what makes per-key learners worth having.
func TestTargetsAreLearnable(t *testing.T) {
	s, _ := New("mixed", Options{Keys: 3, Dim: 5, Noise: -1, Seed: 1})
	x := []float64{0.1, -0.2, 0.3, 0.4, -0.5}
	y := make([]float64, 3)
	for k, f := range s.targets {
		y[k] = f.eval(x)
		x2 := append([]float64(nil), x...)
		x2[0] += 1e-4
		if d := math.Abs(f.eval(x2) - y[k]); d > 1e-2 {
			t.Errorf("key %d not smooth: %v", k, d)
		}
	}
	if y[0] == y[1] || y[1] == y[2] {
		t.Errorf("keys share a function: %v", y)
	}
}

func TestUnknownStream(t *testing.T) {
	if _, err := New("nope", Options{}); err == nil {
		t.Error("unknown name accepted")
	}
	if _, err := New("friedman", Options{Dim: 3}); err == nil {
		t.Error("friedman with dim 3 accepted")
	}
}
