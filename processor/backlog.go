package processor

import (
	"fmt"

	"github.com/kernelstream/kernelstream/checkpoint"
)

// With a changelog, most checkpoints go to the changelog only
// (CheckpointStoreEvery): the changelog is where a restore reads a
// partition that Badger does not hold as of the changelog's last marker,
// so Badger may lag behind it. What those checkpoints changed waits in
// memory, the backlog, until a checkpoint writes it into Badger with its
// own changes: every CheckpointStoreEvery-th, or sooner when the backlog
// passes storeBacklogBytes, and the last one of a revoke or shutdown (or a
// write of the backlog alone, when the partition has nothing newer). A
// learner that changes at every checkpoint thus reaches Badger once per
// CheckpointStoreEvery checkpoints: in make bench-decisions, where every
// user decides about once an interval, Badger's writes, flushes and
// compactions, about 12 % of the member's CPU and the stalls behind most of
// its slow decisions, come that much less often (docs/scale.md, "Sixth
// session").
//
// What a crash costs: Badger then holds an older checkpoint than the
// changelog's last marker, so the restart reads the partition's changelog
// to its end (restoreChangelog), as a member with an empty disk does,
// instead of starting at once from Badger. Badger never holds anything but
// a checkpoint: the backlog is written with Store.Apply, which deletes the
// partition's meta first and writes it last, so a write cut short leaves a
// partition without local state, which the changelog restores.

// unstoredBlobs are the learner blobs of the checkpoints that went to the
// changelog only: the newest of each key, nil for a key they erased. They
// are read back like held blobs (learnerCache.get), but clean: the
// changelog has them.
type unstoredBlobs struct {
	blobs map[string][]byte
	bytes int // their sizes, for storeBacklogBytes
	fresh int // learners among them never stored in Badger (the on-disk count)
}

// add takes the blobs of a checkpoint, newer than those held.
func (u *unstoredBlobs) add(blobs map[string][]byte, fresh int) {
	if u.blobs == nil {
		u.blobs = make(map[string][]byte, len(blobs))
	}
	for k, b := range blobs {
		u.bytes += len(b) - len(u.blobs[k])
		u.blobs[k] = b
	}
	u.fresh += fresh
}

func (u *unstoredBlobs) reset() {
	clear(u.blobs)
	u.bytes, u.fresh = 0, 0
}

// storeBacklog is the rest of what those checkpoints changed: pending
// entries and idle times (nil values delete), and the newest meta.
type storeBacklog struct {
	pending, idle map[string][]byte
	meta          []byte
	bytes         int
	checkpoints   int
	inBadger      bool // Badger holds a checkpoint of the partition (its meta)
}

// add takes a checkpoint's changes, newer than those held.
func (b *storeBacklog) add(cp *checkpoint.Checkpoint) {
	if b.pending == nil {
		b.pending, b.idle = map[string][]byte{}, map[string][]byte{}
	}
	for _, set := range []struct {
		ops []checkpoint.Op
		m   map[string][]byte
	}{{cp.Pending, b.pending}, {cp.Idle, b.idle}} {
		for _, o := range set.ops {
			k := string(o.Key)
			if old, held := set.m[k]; held {
				b.bytes -= len(k) + len(old) // replaced: only the newest is held
			}
			b.bytes += len(k) + len(o.Value)
			set.m[k] = o.Value
		}
	}
	b.meta = cp.Meta
	b.checkpoints++
}

func (b *storeBacklog) reset() {
	clear(b.pending)
	clear(b.idle)
	b.meta, b.bytes, b.checkpoints = nil, 0, 0
}

// storeBacklogBytes bounds a partition's backlog: twice the memtable, the
// memory the store itself may take for its memtables.
func (w *worker) storeBacklogBytes() int { return 2 * w.cfg.CheckpointMemTableMiB << 20 }

// hasBacklog reports whether Badger lags the changelog.
func (w *worker) hasBacklog() bool { return w.backlog.checkpoints > 0 }

// changelogOnly reports whether snap goes to the changelog only. Not the
// checkpoints that move restored learners into Badger or rebuild the
// changelog, nor the last one before a revoke or shutdown (storeNow), nor
// one of a partition Badger has no checkpoint of yet: a member restarting
// after a crash then restores from the changelog over its older local
// checkpoint, as a member whose disk lags does, rather than as one without
// the partition's state.
func (w *worker) changelogOnly(snap *snapshot) bool {
	return w.cfg.CheckpointStoreEvery > 1 && w.cfg.Changelog.Topic != "" && !w.storeNow && w.backlog.inBadger &&
		!snap.rebuild && snap.warm == nil && snap.cp.Meta != nil &&
		!w.storeTurn() &&
		w.backlog.bytes+w.cache.unstored.bytes < w.storeBacklogBytes()
}

// storeTurn reports whether the next checkpoint is the one in
// CheckpointStoreEvery that goes to Badger: by its sequence number, at a
// phase of its own for each partition (spread, as checkpointPhase), so
// that a member's partitions write Badger at different checkpoints of the
// cycle rather than within one interval.
func (w *worker) storeTurn() bool {
	every := uint64(w.cfg.CheckpointStoreEvery)
	phase := uint64(spread(w.part) * float64(every))
	return (w.ckptSeq+phase)%every == 0 || w.backlog.checkpoints+1 >= int(every)
}

// withBacklog returns cp with the backlog under it (cp's operations win),
// for Store.Apply.
func (w *worker) withBacklog(cp *checkpoint.Checkpoint) *checkpoint.Checkpoint {
	ops := func(m map[string][]byte) []checkpoint.Op {
		out := make([]checkpoint.Op, 0, len(m))
		for k, v := range m {
			out = append(out, checkpoint.Op{Key: []byte(k), Value: v})
		}
		return out
	}
	return &checkpoint.Checkpoint{Meta: cp.Meta,
		Learners: mergeOps(ops(w.cache.unstored.blobs), cp.Learners),
		Pending:  mergeOps(ops(w.backlog.pending), cp.Pending),
		Idle:     mergeOps(ops(w.backlog.idle), cp.Idle)}
}

// storeSettled ends a committed checkpoint's part in Badger: one that went
// to the changelog only joins the backlog (and, landed in a recreated
// changelog, which lacks the backlog's checkpoints, the backlog goes to
// Badger at once, flagged so that a restart rebuilds the changelog); one
// that wrote Badger empties the backlog if it carried it.
func (w *worker) storeSettled(snap *snapshot) error {
	if !snap.changelogOnly {
		w.cache.committed(snap.fresh)
		if snap.store != nil {
			w.backlogStored()
		} else {
			w.p.c.storeWrites.Add(1)
		}
		w.backlog.inBadger = snap.cp.Meta != nil
		return nil
	}
	w.cache.committedToChangelog(snap.fresh)
	w.backlog.add(&snap.cp)
	if snap.recreated {
		return w.flushBacklog()
	}
	return nil
}

// flushBacklog writes the backlog into Badger now, on the worker: before a
// checkpoint that rebuilds the changelog from Badger's state, at a revoke or
// shutdown with nothing newer to checkpoint, on an idle partition.
func (w *worker) flushBacklog() error {
	if !w.hasBacklog() {
		return nil
	}
	if err := w.store.Apply(w.part, w.withBacklog(&checkpoint.Checkpoint{Meta: w.backlog.meta})); err != nil {
		return fmt.Errorf("%w: %w", errStoreFailed, err)
	}
	w.backlogStored()
	w.backlog.inBadger = true
	return nil
}

// backlogStored notes a write of the backlog into Badger (alone or under a
// checkpoint): its learners are on disk now and it starts empty.
func (w *worker) backlogStored() {
	w.p.c.storeWrites.Add(1)
	w.cache.unstoredWritten()
	w.backlog.reset()
}
