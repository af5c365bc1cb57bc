package processor

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kernelstream/kernelstream/checkpoint"
)

// Idle-key expiry (Config.KeyTTL, docs/pipeline.md "Idle keys expire").
//
// A key's clock is the partition's event-time watermark at its last record,
// not that record's own ts: it never goes backwards, and a key that has just
// had a record cannot be older than the watermark minus the TTL. When the
// watermark advances, every key whose last record is more than KeyTTL behind
// it is erased before the record is handled, exactly like a delete record at
// that offset. Expiry is therefore a function of the record sequence only:
// a replay, a restore from the changelog or another member gives the same
// expiries. A key whose changelog bundle is ahead of the marker (its records
// are skipped during the replay) carries a last-record time at least as new
// as any the uninterrupted run had at those offsets, and its bundle already
// holds the effect of any expiry the run made meanwhile, so the replay
// expires it exactly when the run did.
//
// Memory: one entry per key of the partition (the map, the heap slot and the
// key), about 100 bytes; Badger and the changelog hold the time of each key
// so that restores rebuild the same index.

// idleEntry is one key's last-record time.
type idleEntry struct {
	key  string
	last int64 // watermark (ms) at the key's last record
	hidx int   // index in idleIndex.byLast
}

// idleIndex is one partition's idle-key index.
type idleIndex struct {
	ttl    int64 // ms
	m      map[string]*idleEntry
	byLast idleHeap
	dirty  map[string]struct{} // keys whose time changed or that left since the last snapshot
}

func newIdleIndex(ttlMs int64) *idleIndex {
	return &idleIndex{ttl: ttlMs, m: map[string]*idleEntry{}, dirty: map[string]struct{}{}}
}

// touch records a record of key at watermark now; an unknown key is
// added only when create is set.
func (ix *idleIndex) touch(key []byte, now int64, create bool) {
	if e, ok := ix.m[string(key)]; ok {
		if now > e.last {
			e.last = now
			heap.Fix(&ix.byLast, e.hidx)
			ix.dirty[e.key] = struct{}{}
		}
		return
	}
	if !create {
		return
	}
	ix.add(string(key), now)
	ix.dirty[string(key)] = struct{}{}
}

func (ix *idleIndex) add(k string, last int64) {
	e := &idleEntry{key: k, last: last}
	ix.m[k] = e
	heap.Push(&ix.byLast, e)
}

// forget removes key (erased on request).
func (ix *idleIndex) forget(key string) {
	if e, ok := ix.m[key]; ok {
		heap.Remove(&ix.byLast, e.hidx)
		delete(ix.m, key)
		ix.dirty[key] = struct{}{}
	}
}

// expire calls erase for every key whose last record is more than the TTL
// behind watermark, oldest first (ties by key), and returns how many.
func (ix *idleIndex) expire(watermark int64, erase func(key string)) int {
	if watermark < math.MinInt64+ix.ttl {
		return 0
	}
	limit := watermark - ix.ttl
	n := 0
	for len(ix.byLast) > 0 && ix.byLast[0].last < limit {
		k := ix.byLast[0].key
		erase(k) // calls forget
		n++
	}
	return n
}

// ops returns the index changes since the last call, for a checkpoint.
func (ix *idleIndex) ops() []checkpoint.Op {
	ops := make([]checkpoint.Op, 0, len(ix.dirty))
	for k := range ix.dirty {
		op := checkpoint.Op{Key: []byte(k)}
		if e, ok := ix.m[k]; ok {
			op.Value = encodeIdle(e.last)
		}
		ops = append(ops, op)
	}
	clear(ix.dirty)
	return ops
}

// last returns key's last-record time.
func (ix *idleIndex) last(key string) (int64, bool) {
	if e, ok := ix.m[key]; ok {
		return e.last, true
	}
	return 0, false
}

// encodeIdle is the stored value of a last-record time: 8 bytes, big endian.
func encodeIdle(last int64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(last))
}

func decodeIdle(key string, v []byte) (int64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("idle-key index entry of %q: %d bytes, want 8", key, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// idleHeap orders entries by last-record time, then key (deterministic).
type idleHeap []*idleEntry

func (h idleHeap) Len() int { return len(h) }
func (h idleHeap) Less(i, j int) bool {
	if h[i].last != h[j].last {
		return h[i].last < h[j].last
	}
	return h[i].key < h[j].key
}
func (h idleHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}
func (h *idleHeap) Push(x any) {
	e := x.(*idleEntry)
	e.hidx = len(*h)
	*h = append(*h, e)
}
func (h *idleHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// loadIdle builds the partition's idle-key index from Badger at restore.
// Learners without an entry (stored before KeyTTL was set, or whose entry
// is unreadable) start their clock at the restored watermark, and are
// written with the next checkpoint, so that a crash before it restores
// the same index again. With KeyTTL off, a stored index is dropped.
func (w *worker) loadIdle() error {
	if w.cfg.KeyTTL <= 0 {
		w.idle = nil
		return w.store.DropIdle(w.part)
	}
	ix := newIdleIndex(w.cfg.KeyTTL.Milliseconds())
	err := w.store.EachIdle(w.part, func(k, v []byte) error {
		last, err := decodeIdle(string(k), v)
		if err != nil {
			w.log.Warn().Err(err).Msg("idle-key index entry unreadable: the key's clock restarts now")
			return nil
		}
		ix.add(string(k), last)
		return nil
	})
	if err != nil {
		return err
	}
	missing := func(k string) {
		if _, ok := ix.m[k]; !ok {
			ix.add(k, w.watermark)
			ix.dirty[k] = struct{}{}
		}
	}
	if err := w.store.EachLearnerKey(w.part, func(k []byte) { missing(string(k)) }); err != nil {
		return err
	}
	for k := range w.cache.warm.idle {
		missing(k)
	}
	w.idle = ix
	return nil
}
