package models

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// TestReload: a learner built for one key, used, then reloaded with another
// key's blob is that key's learner: the same state bytes, and the same
// decisions and state after the same rounds as a learner built for that key
// and restored with UnmarshalBinary. Each case reloads a learner whose
// buffers are larger, smaller or absent, with and without an arm memo on
// either side, since Reload keeps the buffers' capacity and the memo's.
func TestReload(t *testing.T) {
	spec := gaussianSpec("bkb", 3, 1, map[string]any{"xi": 0.1, "lambda": 0.01, "max_budget": 24, "max_history": 40})
	// grow: rounds on a fixed arm set (its memo) and on fresh candidates.
	grow := func(b Bandit, memoRounds, freshRounds int, seed uint64) {
		r := NewRand(seed)
		playBandit(t, b, testArms(r, 7, 3), memoRounds, r)
		playFresh(t, b, 3, 5, freshRounds, r)
	}
	cases := []struct {
		name                  string
		usedMemo, usedFresh   int // the reloaded learner's own rounds, for key "used"
		stateMemo, stateFresh int // the blob's rounds, for key "state"
	}{
		{"larger buffers, memo over none", 30, 60, 40, 0},
		{"smaller buffers, none over memo", 3, 0, 20, 80},
		{"fresh learner", 0, 0, 10, 10},
		{"empty state over a grown one", 40, 40, 0, 0},
		{"memo over memo", 50, 0, 25, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := newBandit(t, spec, "state")
			grow(src, c.stateMemo, c.stateFresh, 11)
			blob := mustMarshal(t, src)

			reused := newBandit(t, spec, "used")
			grow(reused, c.usedMemo, c.usedFresh, 12)
			rl, ok := reused.(Reloader)
			if !ok {
				t.Fatal("bkb is not a Reloader")
			}
			if err := rl.Reload(blob); err != nil {
				t.Fatalf("Reload: %v", err)
			}
			if got := mustMarshal(t, reused); !slices.Equal(got, blob) {
				t.Fatal("reloaded state bytes differ from the blob")
			}
			want := newBandit(t, spec, "state")
			if err := want.UnmarshalBinary(blob); err != nil {
				t.Fatal(err)
			}
			sameRestoredFields(t, reused.(*BKB), want.(*BKB))
			// The same rounds on both: scoring's Choose on a new set, then
			// learning on a repeated set (the memo) and fresh candidates.
			r1, r2 := NewRand(13), NewRand(13)
			a1, a2 := testArms(r1, 6, 3), testArms(r2, 6, 3)
			if d1, d2 := reused.Choose(a1), want.Choose(a2); d1 != d2 {
				t.Fatalf("first Choose: %+v, want %+v", d1, d2)
			}
			if d1, d2 := playBandit(t, reused, a1, 15, r1), playBandit(t, want, a2, 15, r2); !slices.Equal(d1, d2) {
				t.Fatal("decisions on a repeated arm set differ")
			}
			if d1, d2 := playFresh(t, reused, 3, 5, 15, r1), playFresh(t, want, 3, 5, 15, r2); !slices.Equal(d1, d2) {
				t.Fatal("decisions on fresh candidates differ")
			}
			if !slices.Equal(mustMarshal(t, reused), mustMarshal(t, want)) {
				t.Fatal("states differ after the same rounds")
			}
		})
	}
}

// sameRestoredFields checks every field restore sets or derives, beyond the
// state bytes (the slot index, the eviction list, the memo's embeddings),
// so that a field a step would read stale from the reloaded learner's
// previous key cannot hide behind equal outputs. Scratch is not compared.
func sameRestoredFields(t *testing.T, got, want *BKB) {
	t.Helper()
	type vec struct {
		name      string
		got, want []float64
	}
	vecs := []vec{{"pts", got.pts, want.pts}, {"ysum", got.ysum, want.ysum}, {"umin", got.umin, want.umin},
		{"L_S", got.ls.Data, want.ls.Data}, {"L_V", got.lv.Data, want.lv.Data}, {"r", got.r, want.r}, {"qs", got.qs, want.qs},
		{"w", got.w[:got.lv.N], want.w[:want.lv.N]}}
	if want.armOK {
		vecs = append(vecs, vec{"arms", got.arms, want.arms}, vec{"aq", got.aq, want.aq}, vec{"amu", got.amu, want.amu},
			vec{"za", got.za, want.za}, vec{"ares", got.ares, want.ares})
	}
	for _, v := range vecs {
		if !slices.Equal(v.got, v.want) {
			t.Errorf("%s differs", v.name)
		}
	}
	for _, v := range []struct {
		name      string
		got, want []int
	}{{"cnt", got.cnt, want.cnt}, {"last", got.last, want.last}, {"dict", got.dict, want.dict},
		{"lruPrev", got.lruPrev, want.lruPrev}, {"lruNext", got.lruNext, want.lruNext}} {
		if !slices.Equal(v.got, v.want) {
			t.Errorf("%s differs", v.name)
		}
	}
	if !maps.Equal(got.index.m, want.index.m) {
		t.Errorf("slot index differs: %d entries, want %d", len(got.index.m), len(want.index.m))
	}
	type scalars struct {
		t, ls, lv, nArms, ksuStride, lruHead, lruTail int
		armOK, ksuOK                                  bool
		trVinv, sumK, kappa2, rho                     float64
		lastArms                                      uint64
		rng                                           Rand
	}
	of := func(b *BKB) scalars {
		return scalars{b.t, b.ls.N, b.lv.N, b.nArms, b.ksuStride, b.lruHead, b.lruTail, b.armOK, b.ksuOK, b.trVinv, b.sumK, b.kappa2, b.rho, b.lastArms, b.rng}
	}
	if g, w := of(got), of(want); g != w {
		t.Errorf("fields differ:\n got %+v\nwant %+v", g, w)
	}
}

// TestReloadRefuses: a blob UnmarshalBinary refuses, Reload refuses too,
// with an error and no panic (the learner is then dropped).
func TestReloadRefuses(t *testing.T) {
	spec := gaussianSpec("bkb", 2, 1, map[string]any{"xi": 0.1, "lambda": 0.01})
	src := newBandit(t, spec, "k")
	r := NewRand(3)
	playBandit(t, src, testArms(r, 5, 2), 20, r)
	good := mustMarshal(t, src)
	other := mustMarshal(t, newBandit(t, gaussianSpec("bkb", 3, 1, nil), "k"))
	for name, blob := range map[string][]byte{
		"truncated":       good[:len(good)/2],
		"another dim":     other,
		"a flipped byte":  append(append([]byte(nil), good[:40]...), append([]byte{good[40] ^ 0xff}, good[41:]...)...),
		"empty":           nil,
		"another learner": mustMarshal(t, mustNew(t, gaussianSpec("kogd", 2, 1, nil), "k")),
	} {
		l := newBandit(t, spec, "k")
		playBandit(t, l, testArms(r, 5, 2), 10, r)
		if err := l.(Reloader).Reload(blob); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestUnmarshalRefusedLeavesUsedLearner: UnmarshalBinary decodes into a
// copy whose buffers are its own (dropBuffers), so a blob refused halfway
// leaves a grown learner exactly as it was, its next decisions included;
// a buffer shared with the copy would have been written by the decode.
func TestUnmarshalRefusedLeavesUsedLearner(t *testing.T) {
	spec := gaussianSpec("bkb", 3, 1, map[string]any{"xi": 0.1, "lambda": 0.01, "max_budget": 24, "max_history": 40})
	other := newBandit(t, spec, "other")
	// other's state is smaller than l's below, so that its vectors fit in
	// l's buffers, where a shared buffer would receive them.
	r := NewRand(21)
	playBandit(t, other, testArms(r, 4, 3), 10, r)
	// Blobs with a valid frame and checksum that restore refuses only after
	// it has decoded every vector: at the shapes' check, and at the slot
	// index, the last step that can refuse.
	refused := func(mutate func(*BKB)) []byte {
		v := newBandit(t, spec, "other").(*BKB)
		if err := v.UnmarshalBinary(mustMarshal(t, other)); err != nil {
			t.Fatal(err)
		}
		mutate(v)
		return mustMarshal(t, v)
	}
	for _, blob := range [][]byte{
		refused(func(v *BKB) { v.ls.Data[0] = -v.ls.Data[0] }),
		refused(func(v *BKB) { copy(v.point(1), v.point(0)) }),
	} {
		l := newBandit(t, spec, "k")
		twin := newBandit(t, spec, "k")
		for _, b := range []Bandit{l, twin} {
			r := NewRand(22)
			playBandit(t, b, testArms(r, 9, 3), 40, r)
		}
		if err := l.UnmarshalBinary(blob); err == nil {
			t.Fatal("corrupt blob accepted")
		}
		if !slices.Equal(mustMarshal(t, l), mustMarshal(t, twin)) {
			t.Fatal("a refused blob changed the learner's state")
		}
		sameRestoredFields(t, l.(*BKB), twin.(*BKB))
		r1, r2 := NewRand(23), NewRand(23)
		if d1, d2 := playFresh(t, l, 3, 5, 10, r1), playFresh(t, twin, 3, 5, 10, r2); !slices.Equal(d1, d2) {
			t.Fatal("a refused blob changed the learner's next decisions")
		}
	}
}

// BenchmarkReload is BenchmarkBKBRestore through Reload into one learner
// kept across restores, as scoring on request keeps its copies.
func BenchmarkReload(b *testing.B) {
	for _, c := range []struct{ m, u int }{{16, 500}, {128, 500}} {
		b.Run(fmt.Sprintf("m=%d/U=%d", c.m, c.u), func(b *testing.B) {
			l, _ := benchBKB(b, c.m, c.u)
			blob := mustMarshal(b, l)
			spec := gaussianSpec("bkb", 5, 1, map[string]any{"beta": 0.5, "qbar": 1e9, "max_budget": c.m})
			into := newBandit(b, spec, "bench").(Reloader)
			b.ReportAllocs()
			for b.Loop() {
				if err := into.Reload(blob); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
