package models

import (
	"fmt"
	"math"
	"testing"
)

// oksBenchStream is a fixed pool of inputs in [-1,1]^d with a smooth target
// in [0,1], cycled through by the benchmarks (no allocation per round).
func oksBenchStream(n, d int) (xs [][]float64, ys []float64) {
	r := NewRand(42)
	for i := 0; i < n; i++ {
		x := make([]float64, d)
		for j := range x {
			x[j] = 2*r.Float64() - 1
		}
		xs = append(xs, x)
		ys = append(ys, 0.5+0.4*math.Sin(2*x[0])*math.Cos(x[1]))
	}
	return xs, ys
}

// oksFillKernelArms puts every kernel arm at its cap with random support
// vectors and small coefficients, so a benchmark measures the steady state.
func oksFillKernelArms(l Learner, xs [][]float64) {
	arms := oksOf(l).arms.(*kernelArms)
	r := NewRand(7)
	for i := range arms.arms {
		a := &arms.arms[i]
		for len(a.a) < arms.maxBudget {
			a.a = append(a.a, 1e-3*(2*r.Float64()-1))
			a.sv = append(a.sv, xs[r.Intn(len(xs))]...)
		}
		a.norm2 = 0.5
	}
}

// oksSparseStream imitates phishing as shipped: each row has nnz of the d
// binary features set, normalised to unit length; the label is -1/+1.
func oksSparseStream(n, d, nnz int) (xs [][]float64, ys []float64) {
	r := NewRand(43)
	v := 1 / math.Sqrt(float64(nnz))
	for i := 0; i < n; i++ {
		x := make([]float64, d)
		for k := 0; k < nnz; {
			j := r.Intn(d)
			if x[j] == 0 {
				x[j] = v
				k++
			}
		}
		xs = append(xs, x)
		ys = append(ys, Label(x[0]+x[1]-x[2]))
	}
	return xs, ys
}

// oksBenchRound runs b.N predict+update rounds after warm rounds of warm-up
// (so that buffers are grown and the distribution has moved).
func oksBenchRound(b *testing.B, spec Spec, warm int) {
	xs, ys := oksBenchStream(1024, spec.Dim)
	oksBenchRoundOn(b, spec, warm, xs, ys)
}

func oksBenchRoundOn(b *testing.B, spec Spec, warm int, xs [][]float64, ys []float64) {
	if spec.Scale == (ScaleSpec{}) {
		spec.Scale = paperScale // the papers' timings are of the learner alone
	}
	l, err := New(spec, "bench")
	if err != nil {
		b.Fatal(err)
	}
	if _, ok := oksOf(l).arms.(*kernelArms); ok {
		oksFillKernelArms(l, xs)
	}
	for i := 0; i < warm; i++ {
		x := xs[i%len(xs)]
		if err := l.Update(x, l.Predict(x), ys[i%len(ys)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x := xs[i%len(xs)]
		if err := l.Update(x, l.Predict(x), ys[i%len(ys)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRFOKSPlus is one RF-OKS++ round (predict + update) at the paper's
// D = 400, K = 6, on elevators' dimension (18) and phishing's (68). The
// paper's R code takes 64.5-92 us per round (Tables 5, 6).
func BenchmarkRFOKSPlus(b *testing.B) {
	for _, d := range []int{18, 68} {
		for _, nf := range []int{100, 400} {
			b.Run(fmt.Sprintf("D=%d/d=%d", nf, d), func(b *testing.B) {
				spec := Spec{Algorithm: "rf-oks++", Dim: d, Loss: "square", Params: map[string]any{"D": nf}, Seed: 1}
				oksBenchRound(b, spec, 2000)
			})
		}
	}
}

// BenchmarkRFOKSPlusPhishing is one RF-OKS++ round (logistic loss, D = 400)
// on phishing-shaped input: 68 binary features, 30 set per row.
func BenchmarkRFOKSPlusPhishing(b *testing.B) {
	b.Run("D=400/d=68-nnz30", func(b *testing.B) {
		spec := Spec{Algorithm: "rf-oks++", Dim: 68, Loss: "logistic", Params: map[string]any{"D": 400}, Seed: 1}
		xs, ys := oksSparseStream(1024, 68, 30)
		oksBenchRoundOn(b, spec, 2000, xs, ys)
	})
}

// BenchmarkRFIOKS is one RF-IOKS round at D = 400, d = 18 (absolute loss).
func BenchmarkRFIOKS(b *testing.B) {
	b.Run("D=400/d=18", func(b *testing.B) {
		spec := Spec{Algorithm: "rf-ioks", Dim: 18, Loss: "absolute", Params: map[string]any{"D": 400, "T": 20000}, Seed: 1}
		oksBenchRound(b, spec, 2000)
	})
}

// BenchmarkOKSKernel is one round of the kernel-expansion learners with
// every arm at its cap B (steady state: replacement of the smallest
// coefficient, O(B d) per round), d = 18, K = 6.
func BenchmarkOKSKernel(b *testing.B) {
	for _, alg := range []string{"oks++", "ioks", "oks"} {
		for _, budget := range []int{64, 256, 1024} {
			b.Run(fmt.Sprintf("%s/B=%d", alg, budget), func(b *testing.B) {
				params := map[string]any{"max_budget": budget, "sigmas": []any{0.5, 1.0, 2.0, 4.0, 8.0, 16.0}}
				if alg != "oks++" {
					params["T"] = 100000
				}
				spec := Spec{Algorithm: alg, Dim: 18, Loss: "square", Params: params, Seed: 1}
				oksBenchRound(b, spec, 200)
			})
		}
	}
}
