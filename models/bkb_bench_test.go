package models

import (
	"fmt"
	"testing"
)

// benchBKB returns a BKB with m inducing points among u stored arms (qbar is
// huge, so every p is 1 and no member leaves by resampling; max_budget = m
// holds |S| at m), warmed up past its refreshes so that every buffer has
// reached its steady size.
func benchBKB(b *testing.B, m, u int) (*BKB, [][]float64) {
	spec := gaussianSpec("bkb", 5, 1, map[string]any{"beta": 0.5, "qbar": 1e9, "max_budget": m})
	l := newBandit(b, spec, "bench").(*BKB)
	r := NewRand(uint64(m))
	pts := testArms(r, u, 5)
	for _, x := range pts {
		if err := l.Observe(x, testReward(x, r)); err != nil {
			b.Fatal(err)
		}
	}
	if l.Size() != m || len(l.cnt) != u {
		b.Fatalf("dictionary %d of %d arms, want %d of %d", l.Size(), len(l.cnt), m, u)
	}
	for i := 0; i < 2*bkbDefaultRefresh; i++ {
		x := l.point(l.dict[i%m])
		if err := l.Observe(x, testReward(x, r)); err != nil {
			b.Fatal(err)
		}
	}
	return l, pts
}

// BenchmarkBKBChoose: Choose over a new set of A candidates (each request
// brings its own, as from a retrieval stage), so every call embeds all of
// them: O(A m (m + d)), independent of t.
func BenchmarkBKBChoose(b *testing.B) {
	for _, m := range []int{16, 64, 256} {
		for _, a := range []int{20, 100} {
			b.Run(fmt.Sprintf("m=%d/A=%d", m, a), func(b *testing.B) {
				l, _ := benchBKB(b, m, 2*m)
				r := NewRand(99)
				sets := [2][][]float64{testArms(r, a, 5), testArms(r, a, 5)}
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
}

// BenchmarkBKBObserve: the reward of a pulled arm while S does not change:
// rank-one updates of L_V, the members' variances and the arm memo
// (A = 100), O(m^2 + A m), the O(m^3) refresh every 128 pulls amortized in.
func BenchmarkBKBObserve(b *testing.B) {
	for _, m := range []int{16, 64, 256} {
		b.Run(fmt.Sprintf("m=%d", m), func(b *testing.B) {
			l, _ := benchBKB(b, m, 2*m)
			arms := testArms(NewRand(5), 100, 5)
			l.Choose(arms)
			r := NewRand(3)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				x := l.point(l.dict[i%m])
				if err := l.Observe(x, testReward(x, r)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBKBSwap: S changes: a member leaves (Givens deletion, O(m^2)) and
// a stored arm joins (bordered factors and one kernel row over the U stored
// arms, O(U m)). No O(m^3) rebuild.
func BenchmarkBKBSwap(b *testing.B) {
	for _, m := range []int{16, 64, 256} {
		for _, u := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("m=%d/U=%d", m, u), func(b *testing.B) {
				l, _ := benchBKB(b, m, u)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					s := l.dict[0]
					l.removeMember(0)
					l.addMember(s)
				}
				if l.Size() != m {
					b.Fatalf("dictionary %d, want %d", l.Size(), m)
				}
			})
		}
	}
}

// BenchmarkGPUCBStep: one exact GP-UCB round over 100 arms after t pulls
// (O(A t)), for comparison.
func BenchmarkGPUCBStep(b *testing.B) {
	for _, t := range []int{500, 2000} {
		b.Run(fmt.Sprintf("t=%d", t), func(b *testing.B) {
			spec := gaussianSpec("gp-ucb", 5, 1, map[string]any{"xi": 0.1, "lambda": 0.01, "beta": 2, "max_rounds": 16384})
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

// BenchmarkBKBRestore: decoding a grown learner's state into a new learner,
// as a scoring request does with the key's live state (processor, Score)
// and a cache miss does with a stored one. O(U d + m^2): the kernel cache's
// O(U m d) waits for the first Observe.
func BenchmarkBKBRestore(b *testing.B) {
	for _, c := range []struct{ m, u int }{{16, 500}, {128, 500}} {
		b.Run(fmt.Sprintf("m=%d/U=%d", c.m, c.u), func(b *testing.B) {
			l, _ := benchBKB(b, c.m, c.u)
			blob, err := l.MarshalBinary()
			if err != nil {
				b.Fatal(err)
			}
			spec := gaussianSpec("bkb", 5, 1, map[string]any{"beta": 0.5, "qbar": 1e9, "max_budget": c.m})
			b.ReportAllocs()
			for b.Loop() {
				if err := newBandit(b, spec, "bench").(*BKB).UnmarshalBinary(blob); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
