package models

import (
	"fmt"
	"testing"
)

// One iteration is one record: Predict then Update (the memo makes Update
// reuse Predict's work, as in eval and in the consumer with inline labels).

func BenchmarkPKAWVTaylor(b *testing.B) {
	const d = 8
	xs, ys := pkStream(21, 1024, d, 1)
	for _, m := range []int{2, 3, 4} {
		r, _ := TaylorFeatureCount(d, m)
		b.Run(fmt.Sprintf("d=%d/M=%d/r=%d", d, m, r), func(b *testing.B) {
			l := pkNew(b, "pkawv-taylor", d, 1, map[string]any{"M": m})
			pkRun(b, l, xs[:64], ys[:64])
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				x := xs[i%len(xs)]
				p := l.Predict(x)
				if err := l.Update(x, p, ys[i%len(ys)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPKAWVNystrom measures the steady state with a full dictionary of
// m centres (KORS no longer runs; the window is dropped).
func BenchmarkPKAWVNystrom(b *testing.B) {
	const d = 8
	xs, ys := pkStream(22, 4096, d, 1)
	for _, m := range []int{16, 64, 256} {
		b.Run(fmt.Sprintf("m=%d", m), func(b *testing.B) {
			l := pkNew(b, "pkawv-nystrom", d, 1, map[string]any{"beta": 1e12, "max_budget": m, "history": m})
			for i := 0; l.Size() < m; i++ {
				x := xs[i%len(xs)]
				if err := l.Update(x, l.Predict(x), ys[i%len(ys)]); err != nil {
					b.Fatal(err)
				}
			}
			pkRun(b, l, xs[:64], ys[:64])
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				x := xs[i%len(xs)]
				p := l.Predict(x)
				if err := l.Update(x, p, ys[i%len(ys)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkKAWV is the oracle's cost at t stored instances (one record more
// each iteration would grow t, so each iteration predicts and updates a copy
// restored at a fixed t: this measures Predict+Update at t, plus the restore).
func BenchmarkKAWV(b *testing.B) {
	const d = 8
	xs, ys := pkStream(23, 4096, d, 1)
	for _, t := range []int{1000, 4000} {
		b.Run(fmt.Sprintf("t=%d", t), func(b *testing.B) {
			l := pkNew(b, "kawv", d, 1, nil).(*KAWV)
			pkRun(b, l, xs[:t], ys[:t])
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				x := xs[i%len(xs)]
				p := l.Predict(x)
				if err := l.Update(x, p, ys[i%len(ys)]); err != nil {
					b.Fatal(err)
				}
				// Drop the appended instance so that t stays fixed.
				l.z = l.z[:t]
				l.x = l.x[:t*d]
				l.l.N, l.l.Data = t, l.l.Data[:t*(t+1)/2]
			}
		})
	}
}
