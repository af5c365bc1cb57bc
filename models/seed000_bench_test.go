package models

import (
	"fmt"
	"testing"
)

// Predict+Update benchmarks of the paper-000 learners at dictionary sizes J.
//
// aogd-ald and nons-ald: max_budget = J and a tiny alpha fill the dictionary
// to exactly J first; in the steady state every round is the ALD-holding
// (projected) step on a fixed dictionary, the path a long stream spends its
// time on.
//
// kogd and kons append on every round by definition, so the dictionary cannot
// stay at J. They run in blocks of J/4 rounds from a snapshot at size J, and the
// snapshot is restored between blocks outside the timer (no allocation: the
// buffers keep their capacity). The measured size is thus J..1.25J.
//
//	go test ./models -run '^$' -bench 'Seed000' -benchmem

var s0BenchSizes = []int{16, 64, 256}

const s0BenchDim = 18 // elevators' dimension

// s0Fill drives l with random instances until it holds j points.
func s0Fill(b *testing.B, l Learner, j int, xs [][]float64, ys []float64) {
	for i := 0; l.Size() < j; i++ {
		if i >= len(xs) {
			b.Fatalf("dictionary reached only %d of %d", l.Size(), j)
		}
		p := l.Predict(xs[i])
		if err := l.Update(xs[i], p, ys[i]); err != nil {
			b.Fatal(err)
		}
	}
}

func benchmarkFixedDictionary(b *testing.B, alg string, params func(j int) map[string]any) {
	xs, ys := s0Data(8192, s0BenchDim, 21)
	for _, j := range s0BenchSizes {
		b.Run(fmt.Sprintf("J=%d", j), func(b *testing.B) {
			l := mustNew(b, gaussianSpec(alg, s0BenchDim, 2, params(j)), "key")
			s0Fill(b, l, j, xs, ys)
			// warm up the steady state (scratch capacity)
			for i := 0; i < 16; i++ {
				x := xs[4096+i]
				l.Update(x, l.Predict(x), ys[4096+i])
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := i & 4095
				x := xs[k]
				p := l.Predict(x)
				if err := l.Update(x, p, ys[k]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if l.Size() != j {
				b.Fatalf("dictionary %d, want %d", l.Size(), j)
			}
		})
	}
}

func BenchmarkSeed000AOGDALD(b *testing.B) {
	benchmarkFixedDictionary(b, "aogd-ald", func(j int) map[string]any {
		return map[string]any{"alpha": 1e-6, "max_budget": j, "B0": j}
	})
}

func BenchmarkSeed000NONSALD(b *testing.B) {
	benchmarkFixedDictionary(b, "nons-ald", func(j int) map[string]any {
		return map[string]any{"alpha": 1e-6, "max_budget": j}
	})
}

// s0Restorer saves a growing learner's state at size J and restores it in place.
type s0Restorer interface {
	Learner
	snapshot() func()
}

func (l *KOGD) snapshot() func() {
	n, a, n2, g2 := len(l.a), append([]float64(nil), l.a...), l.n2, l.g2
	return func() {
		l.dict = l.dict[:n*l.dim]
		l.a = l.a[:n]
		copy(l.a, a)
		l.kv = l.kv[:n]
		l.n2, l.g2 = n2, g2
	}
}

func (l *KONS) snapshot() func() {
	n := len(l.c)
	c, dg, m := append([]float64(nil), l.c...), append([]float64(nil), l.dg...), append([]float64(nil), l.minv.Data...)
	return func() {
		l.dict = l.dict[:n*l.dim]
		l.c, l.dg = l.c[:n], l.dg[:n]
		copy(l.c, c)
		copy(l.dg, dg)
		l.minv.Data = l.minv.Data[:len(m)]
		copy(l.minv.Data, m)
		l.minv.N = n
	}
}

func benchmarkGrowing(b *testing.B, alg string, params map[string]any) {
	xs, ys := s0Data(8192, s0BenchDim, 22)
	for _, j := range s0BenchSizes {
		b.Run(fmt.Sprintf("J=%d", j), func(b *testing.B) {
			l := mustNew(b, gaussianSpec(alg, s0BenchDim, 2, params), "key").(s0Restorer)
			s0Fill(b, l, j, xs, ys)
			restore := l.snapshot()
			block := max(1, j/4)
			step := func(i int) {
				k := 4096 + i%block
				x := xs[k]
				p := l.Predict(x)
				if err := l.Update(x, p, ys[k]); err != nil {
					b.Fatal(err)
				}
			}
			for i := 0; i < block; i++ { // grow the buffers once
				step(i)
			}
			restore()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i > 0 && i%block == 0 {
					b.StopTimer()
					restore()
					b.StartTimer()
				}
				step(i)
			}
		})
	}
}

func BenchmarkSeed000KOGD(b *testing.B) { benchmarkGrowing(b, "kogd", nil) }

func BenchmarkSeed000KONS(b *testing.B) { benchmarkGrowing(b, "kons", nil) }
