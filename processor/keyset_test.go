package processor

import (
	"math/rand/v2"
	"testing"
)

// TestHashSet checks the stored-key hash set against a Go map: no false
// negative for any added hash (0 included), no false positive on random
// others, through several growths.
func TestHashSet(t *testing.T) {
	var s hashSet
	ref := map[uint64]bool{}
	r := rand.New(rand.NewPCG(3, 4))
	for _, h := range []uint64{0, 1, ^uint64(0)} {
		s.add(h)
		ref[h] = true
	}
	for i := 0; i < 100000; i++ {
		h := r.Uint64()
		if i%7 == 0 {
			h &= 0xffff // clustered low values: long probe runs
		}
		s.add(h)
		s.add(h) // idempotent
		ref[h] = true
	}
	for h := range ref {
		if !s.has(h) {
			t.Fatalf("hash %#x added but not found", h)
		}
	}
	// 0 and 1 share a slot by design; other misses must be rejected.
	if want := len(ref) - 1; s.n != want {
		t.Fatalf("n = %d, want %d", s.n, want)
	}
	for i := 0; i < 100000; i++ {
		h := r.Uint64() | 1<<63 | 1<<40
		if s.has(h) != ref[h] {
			t.Fatalf("has(%#x) = %v, want %v", h, s.has(h), ref[h])
		}
	}
	if 4*s.n > 3*len(s.slots) {
		t.Fatalf("load %d/%d above 3/4", s.n, len(s.slots))
	}
	s.reset()
	if s.has(5) || s.n != 0 {
		t.Fatal("reset set not empty")
	}
}
