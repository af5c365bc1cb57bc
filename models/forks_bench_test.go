package models

import (
	"fmt"
	"testing"
)

// forksBenchLearner returns a learner past its build phase (sketch or map
// built) on a synthetic d = 8 stream, and the stream to keep feeding it.
func forksBenchLearner(b *testing.B, spec Spec, built func(Learner) bool) (Learner, [][]float64, []float64) {
	b.Helper()
	xs, ys := forksStream(20000, spec.Dim, 77)
	l := mustNew(b, spec, "key-1")
	for i := 0; !built(l); i++ {
		if i == len(xs) {
			b.Fatal("the budget never filled")
		}
		if err := l.Update(xs[i], l.Predict(xs[i]), ys[i]); err != nil {
			b.Fatal(err)
		}
	}
	return l, xs, ys
}

func forksBenchRounds(b *testing.B, l Learner, xs [][]float64, ys []float64) {
	blob, err := l.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x := xs[i%len(xs)]
		if err := l.Update(x, l.Predict(x), ys[i%len(xs)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(blob)), "state-bytes") // after ResetTimer, which drops metrics
}

func forksSketched(l Learner) bool { return l.(*FORKS).sketched }

// A regular FORKS round (Predict + Update, no sketch update) at the paper's
// proportions sp = B, sm = 0.2 sp, k = 0.1 B: O(sm d + sm k + k^2), which is
// quadratic in B when k and sm both grow with it; "k=10" holds k fixed, the
// setting of the paper's "linear in B" claim (O(Bk + k^2) at fixed k).
func BenchmarkFORKSRegularRound(b *testing.B) {
	for _, B := range []int{100, 200, 400} {
		for _, fixedK := range []bool{false, true} {
			k := B / 10
			name := fmt.Sprintf("B=%d", B)
			if fixedK {
				k = 10
				name += "/k=10"
			}
			b.Run(name, func(b *testing.B) {
				spec := Spec{Algorithm: "forks", Dim: 8, Kernel: KernelSpec{Sigma: 1}, Seed: 1,
					Params: map[string]any{"B": B, "sp": B, "sm": B / 5, "k": k, "rho": 1 << 30}}
				l, xs, ys := forksBenchLearner(b, spec, forksSketched)
				forksBenchRounds(b, l, xs, ys)
			})
		}
	}
}

// An update round (rho = 1: every record is inserted into the sketch): psi
// over the B support vectors, TISVD, the Jacobi SVD of Phi_pm and the new Z,
// the ONS reset and step.
func BenchmarkFORKSUpdateRound(b *testing.B) {
	for _, B := range []int{100, 200, 400} {
		b.Run(fmt.Sprintf("B=%d", B), func(b *testing.B) {
			spec := Spec{Algorithm: "forks", Dim: 8, Kernel: KernelSpec{Sigma: 1}, Seed: 1,
				Params: map[string]any{"B": B, "sp": B, "sm": B / 5, "k": B / 10, "rho": 1}}
			l, xs, ys := forksBenchLearner(b, spec, forksSketched)
			forksBenchRounds(b, l, xs, ys)
		})
	}
}

func BenchmarkNOGD(b *testing.B) {
	for _, B := range []int{100, 200, 400} {
		b.Run(fmt.Sprintf("B=%d", B), func(b *testing.B) {
			spec := Spec{Algorithm: "nogd", Dim: 8, Kernel: KernelSpec{Sigma: 1}, Params: map[string]any{"B": B, "k": B / 10}}
			l, xs, ys := forksBenchLearner(b, spec, func(l Learner) bool { return l.(*NOGD).sketched })
			forksBenchRounds(b, l, xs, ys)
		})
	}
}

func BenchmarkFOGD(b *testing.B) {
	for _, D := range []int{400, 800, 1600} {
		b.Run(fmt.Sprintf("D=%d", D), func(b *testing.B) {
			spec := Spec{Algorithm: "fogd", Dim: 8, Kernel: KernelSpec{Sigma: 1}, Params: map[string]any{"D": D}}
			l, xs, ys := forksBenchLearner(b, spec, func(Learner) bool { return true })
			forksBenchRounds(b, l, xs, ys)
		})
	}
}
