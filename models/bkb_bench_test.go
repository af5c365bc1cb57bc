package models

import (
	"fmt"
	"testing"
)

// benchBKB returns a BKB whose dictionary holds m inducing points (qbar is
// huge, so every pulled point stays in S and the size is stable), warmed up
// past its first epochs so that every buffer has reached its steady size.
func benchBKB(b *testing.B, m int) (*bkb, [][]float64) {
	spec := gaussianSpec("bkb", 5, 1, map[string]any{"xi": 0.1, "beta": 2, "qbar": 1e9, "max_budget": 4096})
	l := newBandit(b, spec, "bench").(*bkb)
	r := NewRand(uint64(m))
	pts := testArms(r, m, 5)
	for _, x := range pts {
		if err := l.Observe(x, testReward(x, r)); err != nil {
			b.Fatal(err)
		}
	}
	if l.Size() != m {
		b.Fatalf("dictionary %d, want %d", l.Size(), m)
	}
	for i := 0; i < 3*bkbDefaultRefresh; i++ {
		x := pts[i%m]
		if err := l.Observe(x, testReward(x, r)); err != nil {
			b.Fatal(err)
		}
	}
	return l, pts
}

var benchSizes = []int{16, 64, 256}

// BenchmarkBKBDecision: Choose over a new set of 100 candidate arms (the
// consumer's case: each request brings its own candidates), so every call
// embeds all 100 arms: O(A m (m + d) + A k m).
func BenchmarkBKBDecision(b *testing.B) {
	for _, m := range benchSizes {
		b.Run(fmt.Sprintf("m=%d", m), func(b *testing.B) {
			l, _ := benchBKB(b, m)
			r := NewRand(99)
			sets := [2][][]float64{testArms(r, 100, 5), testArms(r, 100, 5)}
			l.Choose(sets[0])
			l.Choose(sets[1])
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l.Choose(sets[i&1])
			}
		})
	}
}

// BenchmarkBKBStep: one bandit round on a fixed set of 100 arms: Choose
// (bringing the arms' memo up to date) then Observe of a pulled arm while S
// does not change: the incremental path, with the rebuild every `refresh`
// (128) pulls amortized in.
func BenchmarkBKBStep(b *testing.B) {
	for _, m := range benchSizes {
		b.Run(fmt.Sprintf("m=%d", m), func(b *testing.B) {
			l, pts := benchBKB(b, m)
			r := NewRand(7)
			arms := testArms(r, 100, 5)
			for i := 0; i < 2*bkbDefaultRefresh; i++ {
				l.Choose(arms)
				_ = l.Observe(pts[i%m], 0.5)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l.Choose(arms)
				if err := l.Observe(pts[i%m], 0.5); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBKBRebuild: the full posterior rebuild paid when S changes or a
// new distinct arm is pulled: O(U m (m + d) + m^3), here U = m.
func BenchmarkBKBRebuild(b *testing.B) {
	// Sizes stop at 128: a 256 rebuild takes ~0.1 s, too long for `make bench`'s 2000x.
	for _, m := range []int{16, 64, 128} {
		b.Run(fmt.Sprintf("m=%d", m), func(b *testing.B) {
			l, _ := benchBKB(b, m)
			// Fold the pending pulls as Observe does before a rebuild.
			l.cnt0 = append(l.cnt0[:0], l.cnt...)
			l.ysum0 = append(l.ysum0[:0], l.ysum...)
			l.dict0 = append(l.dict0[:0], l.dict...)
			l.logSlot, l.logY, l.logAdd = l.logSlot[:0], l.logY[:0], l.logAdd[:0]
			l.rebuild(l.spare)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if !l.rebuild(l.spare) {
					b.Fatal("rebuild failed")
				}
			}
		})
	}
}

// BenchmarkGPUCBStep: one exact GP-UCB round over 100 arms after t pulls
// (O(A t)), for comparison.
func BenchmarkGPUCBStep(b *testing.B) {
	for _, t := range []int{500, 2000} {
		b.Run(fmt.Sprintf("t=%d", t), func(b *testing.B) {
			spec := gaussianSpec("gp-ucb", 5, 1, map[string]any{"xi": 0.1, "beta": 2, "max_rounds": 16384})
			g := newBandit(b, spec, "bench")
			r := NewRand(3)
			arms := testArms(r, 100, 5)
			playBandit(b, g, arms, t, r)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d := g.Choose(arms)
				if err := g.Observe(arms[d.Arm], 0.5); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
