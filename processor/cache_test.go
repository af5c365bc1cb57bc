package processor

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/models"
)

// TestCacheStoredKeys checks the stored-key set of learnerCache: a key never
// checkpointed is created without a Badger read, every checkpointed key is
// read back (in the same cache and in a new one restored from the same
// store, as after a restart), and a key of an abandoned checkpoint is still
// found (from memory, then from the next checkpoint).
func TestCacheStoredKeys(t *testing.T) {
	store, err := checkpoint.Open(checkpoint.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	spec, err := models.NewFactory(models.Spec{Algorithm: "ptest-lms", Dim: 3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	x := []float64{0.1, -0.2, 0.3}
	var global, disk atomic.Int64
	c := newLearnerCache(0, spec, store, 4, &global, &disk)
	if err := c.loadStored(); err != nil {
		t.Fatal(err)
	}
	key := func(i int) []byte { return []byte(fmt.Sprintf("k%03d", i)) }
	touch := func(c *learnerCache, i int) {
		t.Helper()
		s, err := c.get(key(i))
		if err != nil {
			t.Fatal(err)
		}
		p := s.l.Predict(x)
		if err := s.l.Update(x, p, float64(i)); err != nil {
			t.Fatal(err)
		}
		s.updates++
		s.dirty = true
	}
	var carry []checkpoint.Op // an abandoned snapshot, written first by the next one (as the worker does)
	carryFresh := 0
	commit := func(c *learnerCache) {
		t.Helper()
		ops, fresh, err := c.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		ops, fresh = append(carry, ops...), fresh+carryFresh
		carry, carryFresh = nil, 0
		if err := store.Commit(0, &checkpoint.Checkpoint{Meta: []byte{1}, Learners: ops}); err != nil {
			t.Fatal(err)
		}
		c.committed(fresh)
	}
	for i := 0; i < 20; i++ { // 20 new keys: no Badger read for any
		touch(c, i)
	}
	if c.skipped != 20 {
		t.Fatalf("skipped %d reads, want 20", c.skipped)
	}
	commit(c)
	// Keys 20..29 go into a checkpoint that is abandoned.
	for i := 20; i < 30; i++ {
		touch(c, i)
	}
	if carry, carryFresh, err = c.snapshot(); err != nil {
		t.Fatal(err)
	}
	c.abandoned()
	for i := 0; i < 30; i++ { // second visit: all read back, with their update
		s, err := c.get(key(i))
		if err != nil {
			t.Fatal(err)
		}
		if s.updates != 1 {
			t.Fatalf("key %d: n_updates %d after read-back, want 1", i, s.updates)
		}
		touch(c, i)
	}
	if c.skipped != 30 {
		t.Fatalf("skipped %d reads, want 30", c.skipped)
	}
	// 90 lookups: 30 new keys, the second visit's get read back from Badger
	// (committed) or from held blobs (abandoned), its touch a hit.
	if l := c.look; l.hits+l.held+l.reads+l.fresh != 90 || l.fresh != 30 || l.hits < 30 || l.reads == 0 || l.held == 0 || l.readNanos <= 0 {
		t.Fatalf("lookups %+v", l)
	}
	var cs counters
	l := c.look
	c.flushLookups(&cs)
	if cs.cacheHits.Load() != l.hits || cs.cacheHeld.Load() != l.held || cs.cacheReads.Load() != l.reads ||
		cs.cacheReadNanos.Load() != l.readNanos || cs.cacheFresh.Load() != l.fresh || c.look != (lookups{}) {
		t.Fatalf("flushLookups: counters %d/%d/%d/%d, cache left %+v", cs.cacheHits.Load(), cs.cacheHeld.Load(), cs.cacheReads.Load(), cs.cacheFresh.Load(), c.look)
	}
	commit(c)
	want := map[string][]byte{}
	for k, s := range c.live {
		b, err := encodeSlot(s)
		if err != nil {
			t.Fatal(err)
		}
		want[k] = b
	}
	if err := store.EachLearner(0, func(k, v []byte) error {
		if _, live := want[string(k)]; !live {
			want[string(k)] = v
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(want) != 30 || c.onDisk != 30 {
		t.Fatalf("%d learners, %d on disk, want 30", len(want), c.onDisk)
	}
	// A new cache on the same store (a restart): every key is read back.
	var g2, d2 atomic.Int64
	c2 := newLearnerCache(0, spec, store, 4, &g2, &d2)
	if err := c2.loadStored(); err != nil {
		t.Fatal(err)
	}
	if c2.onDisk != 30 {
		t.Fatalf("restored on-disk count %d, want 30", c2.onDisk)
	}
	for i := 0; i < 30; i++ {
		s, err := c2.get(key(i))
		if err != nil {
			t.Fatal(err)
		}
		b, err := encodeSlot(s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, want[string(key(i))]) || s.updates != 2 {
			t.Fatalf("key %d restored differently (n_updates %d)", i, s.updates)
		}
	}
	if c2.skipped != 0 {
		t.Fatalf("restored cache skipped %d reads of stored keys", c2.skipped)
	}
	if _, err := c2.get([]byte("new")); err != nil || c2.skipped != 1 {
		t.Fatalf("a new key after restore: err %v, skipped %d, want 1", err, c2.skipped)
	}
}
