package processor

import (
	"math/rand/v2"
	"testing"
)

// cacheSim replays key accesses on an eviction order of at most max
// learners and counts the hits.
type cacheSim interface {
	hit(s *slot)
	add(s *slot)
	evictOne() *slot
}

type lruSim struct{ l lruList }

func (c *lruSim) hit(s *slot)      { c.l.moveToFront(s) }
func (c *lruSim) add(s *slot)      { c.l.pushFront(s) }
func (c *lruSim) evictOne() *slot  { s := c.l.back(); c.l.remove(s); return s }
func (c *slruSim) hit(s *slot)     { c.c.touch(s) }
func (c *slruSim) add(s *slot)     { c.c.insert(s) }
func (c *slruSim) evictOne() *slot { s := c.c.victim(); c.c.remove(s); return s }

type slruSim struct{ c segmentedLRU }

func hitRate(c cacheSim, max int, keys []uint64) float64 {
	live := map[uint64]*slot{}
	hits := 0
	for _, k := range keys {
		if s, ok := live[k]; ok {
			c.hit(s)
			hits++
			continue
		}
		s := &slot{updates: k}
		c.add(s)
		live[k] = s
		if len(live) > max {
			delete(live, c.evictOne().updates)
		}
	}
	return float64(hits) / float64(len(keys))
}

// returning is a stream where a share of the records come from returning
// users (Zipf popularity over a population larger than the cache) and the
// rest from one-off visitors.
func returning(n, population int, oneOff float64, seed uint64) []uint64 {
	r := rand.New(rand.NewPCG(seed, 1))
	z := rand.NewZipf(r, 1.1, 1, uint64(population-1))
	keys := make([]uint64, n)
	next := uint64(population)
	for i := range keys {
		if r.Float64() < oneOff {
			keys[i] = next
			next++
		} else {
			keys[i] = z.Uint64()
		}
	}
	return keys
}

// The segmented order keeps the returning users while one-off visitors
// pass through: its hit rate is well above plain LRU's wherever one-off
// keys are a large part of the stream, and no worse without them.
func TestSegmentedLRUHitRate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		oneOff     float64
		minGain    float64 // SLRU's hit rate minus LRU's, at least
		population int
	}{
		{"half one-off visitors", 0.5, 0.025, 100000},
		{"80% one-off visitors", 0.8, 0.012, 100000},
		{"returning users only", 0, 0.01, 100000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := returning(300000, tc.population, tc.oneOff, 7)
			lru := hitRate(&lruSim{}, 5000, keys)
			slru := hitRate(&slruSim{}, 5000, keys)
			t.Logf("hit rate: LRU %.3f, segmented LRU %.3f", lru, slru)
			if slru-lru < tc.minGain {
				t.Errorf("segmented LRU %.3f against LRU %.3f: gain below %.2f", slru, lru, tc.minGain)
			}
		})
	}
}

func TestSegmentedLRUInvariants(t *testing.T) {
	var c segmentedLRU
	c.init()
	r := rand.New(rand.NewPCG(3, 4))
	var in []*slot
	for i := 0; i < 20000; i++ {
		switch op := r.IntN(10); {
		case op < 4 || len(in) == 0:
			s := &slot{}
			c.insert(s)
			in = append(in, s)
			if v := c.victim(); v == s {
				t.Fatal("victim is the learner just inserted")
			} else if v != nil && len(in) > 64 {
				c.remove(v)
				in = removeSlot(in, v)
			}
		case op < 9:
			c.touch(in[r.IntN(len(in))])
			if c.protected.n*100 > protectedPercent*c.len() {
				t.Fatalf("after a use: protected %d of %d", c.protected.n, c.len())
			}
		default:
			s := in[r.IntN(len(in))]
			c.remove(s)
			in = removeSlot(in, s)
		}
		if c.len() != len(in) {
			t.Fatalf("len %d, want %d", c.len(), len(in))
		}
	}
}

func removeSlot(in []*slot, s *slot) []*slot {
	for i := range in {
		if in[i] == s {
			return append(in[:i], in[i+1:]...)
		}
	}
	panic("slot not found")
}
