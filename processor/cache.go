package processor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/models"
)

// slot is one key's learner in memory.
type slot struct {
	key     string
	l       models.Learner
	updates uint64 // n_updates: successful updates so far (part of the stored state)
	size    int    // bytes of its last encoded value (encodeSlot's buffer size)
	dirty   bool   // changed since the last checkpoint (Predict may advance the PRNG)
	stored  bool   // a version of it is in Badger

	prev, next *slot // eviction-order links (intrusive: no allocation per learner)
	protected  bool  // in the protected segment of the eviction order (slru.go)
}

// learnerCache holds one partition's learners. At most about max learners
// are in memory across all partitions (a shared counter); the partition
// that needs room evicts in its segmented-LRU order (slru.go). An evicted
// learner that is dirty is marshalled into `evicted` and stays there until the next checkpoint writes it: it never
// reaches Badger outside a checkpoint, so Badger only ever holds checkpointed
// state, and a key read back before that checkpoint comes from `evicted`.
type learnerCache struct {
	part     int
	factory  *models.Factory
	store    *checkpoint.Store
	live     map[string]*slot
	lru      segmentedLRU
	evicted  map[string][]byte
	inflight map[string][]byte // blobs of the checkpoint in flight (nil: a key it deletes)
	spare    map[string][]byte // the last committed inflight map, emptied: the next `evicted` (no regrowth)
	fresh    map[string]bool   // evicted learners never stored in Badger
	deleted  map[string]bool   // keys erased since the last snapshot: no older version may be read back
	warm     warmBlobs         // learners restored from the changelog, not yet in Badger (warm.go)
	unstored unstoredBlobs     // learners of checkpoints that went to the changelog only (backlog.go)
	onDisk   int               // learners in Badger for this partition
	max      int
	global   *atomic.Int64 // learners in memory, all partitions
	disk     *atomic.Int64 // learners in Badger, all assigned partitions
	loads    int64         // learners read back from Badger or `evicted`

	// stored holds a hash of every key that may have a learner in Badger
	// for this partition: filled from a key-only scan at restore and by
	// every snapshot (before its commit, so a key is in it no later than
	// its blob is in Badger). A key whose hash is absent has never been
	// checkpointed, so its first sight skips the Badger read. A hash
	// collision or an abandoned checkpoint only costs a read that finds
	// nothing; a stored key is never missing (no false negative). 8 to 16
	// bytes per stored key (hashSet).
	stored  hashSet
	seed    maphash.Seed
	skipped int64 // reads skipped for keys never stored

	// meanwhile, when set, is called every snapshotYield learners a
	// snapshot encodes: the scoring requests waiting for the worker are
	// answered from the cache as it stands, each key's value consistent
	// (value reads live learners, then evicted, where the snapshot puts
	// what it encodes), instead of after the whole snapshot (10-30 ms for
	// 1,000-2,500 bkb learners, the tail of POST /v1/score).
	meanwhile func()

	// Lookups since the last flushLookups, by where the learner came from
	// (plain fields: the cache is its worker's alone; the counters of the
	// whole process get them at each snapshot, so the hot path pays no
	// atomic operation).
	look lookups
}

// lookups counts learner lookups by outcome.
type lookups struct {
	hits      int64 // in memory
	held      int64 // an evicted, in-flight or restored blob decoded
	reads     int64 // read from Badger (found or not)
	readNanos int64 // time spent in those reads
	fresh     int64 // never stored: a new learner without a read
}

func newLearnerCache(part int, factory *models.Factory, store *checkpoint.Store, max int, global, disk *atomic.Int64) *learnerCache {
	return &learnerCache{part: part, factory: factory, store: store, live: map[string]*slot{}, evicted: map[string][]byte{},
		fresh: map[string]bool{}, max: max, global: global, disk: disk,
		seed: maphash.MakeSeed()}
}

// loadStored fills the stored-key set from Badger (keys only) and sets the
// on-disk count; called once at restore, before any get.
func (c *learnerCache) loadStored() error {
	n := 0
	err := c.store.EachLearnerKey(c.part, func(key []byte) {
		c.stored.add(c.hash(key))
		n++
	})
	if err != nil {
		return err
	}
	c.setOnDisk(n)
	return nil
}

func (c *learnerCache) hash(key []byte) uint64 { return maphash.Bytes(c.seed, key) }

// mayBeStored is false only for a key that was never checkpointed.
func (c *learnerCache) mayBeStored(key []byte) bool {
	return c.stored.has(c.hash(key))
}

// setOnDisk sets the partition's stored-learner count (and the global one).
func (c *learnerCache) setOnDisk(n int) {
	c.disk.Add(int64(n - c.onDisk))
	c.onDisk = n
}

// get returns the learner of key, loading or creating it.
func (c *learnerCache) get(key []byte) (*slot, error) {
	if s, ok := c.live[string(key)]; ok {
		c.lru.touch(s)
		c.look.hits++
		return s, nil
	}
	k := string(key)
	l, err := c.factory.New(k)
	if err != nil {
		return nil, fmt.Errorf("new learner for key %q: %w", k, err)
	}
	s := &slot{key: k, l: l}
	blob, held := c.evicted[k]
	if !held {
		blob, held = c.inflight[k]
	}
	clean := false
	if !held {
		blob, held = c.unstored.blobs[k]
		clean = held // in the changelog already: only Badger waits for it
	}
	if !held {
		var idle bool
		if blob, held, idle = c.warm.take(k); idle {
			c.fresh[k] = true // not in Badger
		}
	}
	switch {
	case c.deleted[k]:
		// Erased: a fresh learner, whatever an older version says. It is
		// dirty until a snapshot writes it over the erased version, so the
		// mark is no longer needed.
		delete(c.deleted, k)
		s.dirty = true
	case held && blob == nil:
		// Erased by the checkpoint in flight, whose delete may not be in
		// Badger yet: a fresh learner, as for c.deleted.
		s.dirty = true
	case held:
		if err := c.decode(s, blob); err != nil {
			return nil, err
		}
		// Its newest blob is held in memory, not yet (or not surely)
		// in Badger: it is dirty until a checkpoint writes it again.
		delete(c.evicted, k)
		s.dirty = !clean
		s.stored = !c.fresh[k]
		delete(c.fresh, k)
		c.look.held++
	case c.mayBeStored(key):
		// Decoded straight from Badger's buffer: no copy of the blob.
		start := time.Now()
		ok, err := c.store.ReadLearner(c.part, key, func(blob []byte) error { return c.decode(s, blob) })
		c.look.reads++
		c.look.readNanos += int64(time.Since(start))
		if err != nil {
			return nil, err
		}
		s.stored = ok
	default:
		c.skipped++
		c.look.fresh++
	}
	c.lru.insert(s)
	c.live[k] = s
	c.global.Add(1)
	return s, c.evict()
}

// decode restores s from a stored value (uvarint n_updates | learner blob).
func (c *learnerCache) decode(s *slot, blob []byte) error {
	c.loads++
	n, w := binary.Uvarint(blob)
	if w <= 0 {
		return &corruptError{key: s.key, part: c.part, err: errors.New("corrupt n_updates")}
	}
	if err := unmarshalSafely(s.l, blob[w:]); err != nil {
		return &corruptError{key: s.key, part: c.part, err: err}
	}
	s.updates = n
	return nil
}

// evict drops learners in eviction order (slru.go) while the global count
// is above max, keeping at least the one just used (the front of the order).
func (c *learnerCache) evict() error {
	for c.global.Load() > int64(c.max) {
		s := c.lru.victim()
		if s == nil {
			break
		}
		if s.dirty {
			b, err := encodeSlot(s)
			if err != nil {
				return err
			}
			c.evicted[s.key] = b
			if !s.stored {
				c.fresh[s.key] = true
			}
		}
		c.lru.remove(s)
		delete(c.live, s.key)
		c.global.Add(-1)
	}
	return nil
}

// drop forgets the live learner s without writing it: the next get reads
// back its last encoded version (held blob or Badger), or starts afresh.
func (c *learnerCache) drop(s *slot) {
	if c.live[s.key] != s {
		return
	}
	c.lru.remove(s)
	delete(c.live, s.key)
	c.global.Add(-1)
}

// encodeSlot is the stored value: uvarint n_updates | learner blob.
func encodeSlot(s *slot) ([]byte, error) {
	// One allocation, sized by the key's previous value (states grow
	// slowly): the state is written behind the prefix, not copied there.
	out := binary.AppendUvarint(make([]byte, 0, s.size+64), s.updates)
	out, err := models.AppendState(out, s.l)
	if err != nil {
		return nil, fmt.Errorf("marshal learner of key %q: %w", s.key, err)
	}
	s.size = len(out)
	return out, nil
}

// value is key's current stored value (uvarint n_updates | blob) without
// touching the LRU: from memory when the learner is there (encoded now),
// else held or in-flight blobs, else Badger; nil when the key has none.
func (c *learnerCache) value(k string) ([]byte, error) {
	if s, ok := c.live[k]; ok {
		return encodeSlot(s)
	}
	if b, ok := c.evicted[k]; ok {
		return b, nil
	}
	if b, ok := c.inflight[k]; ok {
		return b, nil
	}
	if b, ok := c.unstored.blobs[k]; ok {
		return b, nil
	}
	if b, ok := c.warm.peek(k); ok {
		return b, nil
	}
	b, _, err := c.store.Learner(c.part, []byte(k))
	return b, err
}

// flushLookups adds the lookups counted since the last call to the
// process's counters.
func (c *learnerCache) flushLookups(to *counters) {
	l := c.look
	to.cacheHits.Add(l.hits)
	to.cacheHeld.Add(l.held)
	to.cacheReads.Add(l.reads)
	to.cacheReadNanos.Add(l.readNanos)
	to.cacheFresh.Add(l.fresh)
	c.look = lookups{}
}

// snapshotYield is how many learners a snapshot encodes between two calls
// of learnerCache.meanwhile: about 0.1-0.3 ms of bkb learners.
const snapshotYield = 64

// snapshot returns the learner operations of a checkpoint (the held blobs
// of evicted learners and the dirty live ones, serialized now), marks them
// clean, and keeps every blob of it readable in inflight until the commit
// lands or is abandoned (a learner evicted meanwhile is read back from
// there, never from a Badger that does not have it yet). fresh counts the
// learners never stored before.
func (c *learnerCache) snapshot() (ops []checkpoint.Op, fresh int, err error) {
	ops = make([]checkpoint.Op, 0, len(c.evicted))
	for k, b := range c.evicted {
		kb := []byte(k)
		c.stored.add(c.hash(kb))
		ops = append(ops, checkpoint.Op{Key: kb, Value: b})
	}
	for k := range c.deleted {
		_, live := c.live[k]
		_, held := c.evicted[k]
		if !live && !held { // re-created since: its new version is written instead
			ops = append(ops, checkpoint.Op{Key: []byte(k)}) // nil value: delete
			// Held as nil until the commit lands: a read-back of the key
			// starts afresh instead of finding the old version in Badger.
			c.evicted[k] = nil
		}
	}
	clear(c.deleted)
	fresh = len(c.fresh)
	n := 0
	for _, s := range c.live {
		if !s.dirty {
			continue
		}
		if n++; n%snapshotYield == 0 && c.meanwhile != nil {
			c.meanwhile()
		}
		b, err := encodeSlot(s)
		if err != nil {
			return nil, 0, err
		}
		kb := []byte(s.key)
		c.stored.add(c.hash(kb))
		ops = append(ops, checkpoint.Op{Key: kb, Value: b})
		s.dirty = false
		if !s.stored {
			s.stored = true
			fresh++
		}
		// Now clean, it may be evicted without a blob before the commit
		// lands: a read-back must then find this version, not Badger's.
		c.evicted[s.key] = b
	}
	c.inflight = c.evicted
	c.evicted = c.spare
	c.spare = nil
	if c.evicted == nil {
		c.evicted = make(map[string][]byte, len(c.inflight))
	}
	clear(c.fresh)
	return ops, fresh, nil
}

// committed ends the checkpoint in flight: its blobs are in Badger.
func (c *learnerCache) committed(fresh int) {
	clear(c.inflight)
	c.spare, c.inflight = c.inflight, nil
	c.setOnDisk(c.onDisk + fresh + c.warm.committed())
}

// committedToChangelog ends the checkpoint in flight that went to the
// changelog only: its blobs wait in unstored for the checkpoint that writes
// them into Badger (fresh counts the learners among them never stored).
func (c *learnerCache) committedToChangelog(fresh int) {
	c.unstored.add(c.inflight, fresh)
	clear(c.inflight)
	c.spare, c.inflight = c.inflight, nil
}

// unstoredWritten notes that a checkpoint wrote the unstored blobs into
// Badger.
func (c *learnerCache) unstoredWritten() {
	c.setOnDisk(c.onDisk + c.unstored.fresh)
	c.unstored.reset()
}

// warmChunk returns the next chunk of restored learners for Badger.
func (c *learnerCache) warmChunk() []checkpoint.Op {
	return c.warm.chunk(func(k []byte) { c.stored.add(c.hash(k)) })
}

// abandoned ends the checkpoint in flight without a commit: its held blobs
// become evicted ones again unless a newer version exists (the snapshot's
// operations themselves are carried into the next checkpoint).
func (c *learnerCache) abandoned() {
	for k, b := range c.inflight {
		if b == nil { // a delete that did not reach Badger
			_, live := c.live[k]
			if _, newer := c.evicted[k]; !live && !newer {
				c.markDeleted(k)
			}
			continue
		}
		if s, live := c.live[k]; live {
			// snapshot marked it clean; dirty again, so that evicting it
			// keeps its blob in memory (Badger does not have it).
			s.dirty = true
			continue
		}
		if _, newer := c.evicted[k]; !newer {
			c.evicted[k] = b
		}
	}
	c.inflight = nil
	c.warm.abandoned(func(k string) bool {
		_, live := c.live[k]
		_, held := c.evicted[k]
		return live || held
	})
}

// remove erases key: its learner leaves memory, its held blob is dropped,
// and the next snapshot deletes it from Badger.
func (c *learnerCache) remove(k string) {
	if s, ok := c.live[k]; ok {
		c.lru.remove(s)
		delete(c.live, k)
		c.global.Add(-1)
	}
	delete(c.evicted, k)
	delete(c.fresh, k)
	c.warm.drop(k)
	c.markDeleted(k)
}

// markDeleted records that k's older versions must not be read back until
// a snapshot writes its delete.
func (c *learnerCache) markDeleted(k string) {
	if c.deleted == nil {
		c.deleted = map[string]bool{}
	}
	c.deleted[k] = true
}

// held is the number of evicted learners waiting in memory for a snapshot.
func (c *learnerCache) held() int { return len(c.evicted) }

// release drops all learners (partition revoked).
func (c *learnerCache) release() {
	c.global.Add(-int64(len(c.live)))
	c.setOnDisk(0)
	c.live = map[string]*slot{}
	c.lru.init()
	clear(c.evicted)
	clear(c.fresh)
	c.stored.reset()
	c.inflight = nil
	c.warm = warmBlobs{}
	c.unstored.reset()
}
