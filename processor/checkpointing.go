package processor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/kafkaio"
)

// A checkpoint of a partition is taken in two parts so that the worker does
// not stop for the broker round trip and the fsync:
//
//   - on the worker goroutine, startCheckpoint takes a snapshot: the dirty
//     learners serialized (and the blobs of evicted ones), the pending-map
//     changes, the meta with the next offsets, and the sequence number of the
//     last output emitted. The worker then goes on with the next records.
//   - on its own goroutine, commitSnapshot runs the protocol of docs/pipeline.md on
//     the snapshot: (1) wait until the emitter has every output up to that
//     sequence number acknowledged, (2) with a changelog, its records in one
//     transaction of the partition's transactional producer, (3) Badger
//     commit (atomic, package checkpoint), (4) group commit of the offsets.
//     With exactly-once outputs it runs on the worker goroutine: the
//     transaction holds the outputs up to the snapshot, and the next ones
//     go into the next.
//
// At most one checkpoint per partition is in flight. Evicted learners of the
// snapshot stay readable from memory (learnerCache.inflight) until it is
// committed, so Badger is never read for a key whose write is in progress.
// If the acknowledgements cannot be had (revoke, broker outage), the
// snapshot is abandoned: its changes are carried into the next snapshot
// (written first, so newer values of the same keys win), and nothing reached
// Badger. A store error is fatal.

// checkpointState is the worker's side of its checkpoints.
type checkpointState struct {
	sinceCkpt   int             // records since the last snapshot
	dirtyBytes  int             // learner bytes dirtied since the last snapshot (their last encoded sizes): checkpointBytes
	lastCkpt    time.Time       // when it was taken
	ckptBusy    bool            // a checkpoint is in flight (at most one per partition)
	ckptDone    chan ckptResult // its outcome, read by the worker
	carry       *snapshot       // the changes of an abandoned checkpoint, written by the next one
	ckptSeq     uint64          // sequence number of the last checkpoint (the changelog's markers)
	tombstones  []string        // erased keys whose empty bundle a completed checkpoint wrote: tombstoned next
	lastUpdated *slot           // the learner updated last (its kernel weights go with the snapshot)

	txn              kafkaio.Txn  // the partition's transactional producer (changelog, exactly-once outputs)
	txnOpen          bool         // a transaction of txn is open
	rebuildChangelog bool         // the next checkpoint writes the partition's whole state to the changelog
	markerOffset     atomic.Int64 // offset of the last marker written or restored from (the probe compares the log's end)
	ckptEp           *episode     // checkpoints abandoned for a Kafka outage, logged once per episode
	rollAt           time.Time    // when a marker is due to roll the changelog segment holding tombstones
	ckptBytes        int          // the changes above which a checkpoint comes early (checkpointFull); 0 = never
	diskIn           int          // loop rounds before the worker asks diskOK again (diskEveryRecords)
	backlog          storeBacklog // the changes of the checkpoints that went to the changelog only (backlog.go)
	storeNow         bool         // the next checkpoint goes to Badger too (the last before a revoke or shutdown)
}

// checkpointDue reports whether the partition has something for a
// checkpoint to write once the interval has passed: records, the changes of
// an abandoned checkpoint (retried on an idle partition too), restored
// learners not yet in Badger, group offsets behind, a segment to roll, a
// changelog to rebuild, a backlog for Badger.
func (w *worker) checkpointDue() bool {
	return w.sinceCkpt > 0 || w.carry != nil || len(w.cache.warm.idle) > 0 || w.groupBehind || w.rollDue() || w.rebuildChangelog || w.hasBacklog()
}

// rollDue reports whether the changelog segment holding the tombstones of
// the last erasure may be rolled: a record appended after segment.ms rolls
// it, and compaction then removes the erased keys' records within
// max.compaction.lag.ms, even on a partition that writes nothing else.
func (w *worker) rollDue() bool {
	return !w.rollAt.IsZero() && !time.Now().Before(w.rollAt)
}

// checkpointPhase is how far into its first interval partition part starts
// (its first checkpoint comes that much earlier), so that the partitions of
// a member checkpoint at different moments of the interval instead of all
// at once: partition p at frac(p x 0.618...) of it (the golden ratio's
// fractional multiples spread any set of partition numbers evenly). All at
// once, a member's checkpoints (snapshots on every worker, then the
// changelog transactions and Badger writes of every partition) competed for
// the CPUs in one burst every interval, the source of most decisions slower
// than 10 ms in make bench-decisions (docs/scale.md, "Decision latency").
// The interval of each partition is unchanged.
func checkpointPhase(part int, interval time.Duration) time.Duration {
	return time.Duration(spread(part) * float64(interval))
}

// spread is frac(part x 0.618...): partitions' phases in [0, 1).
func spread(part int) float64 {
	const phi = 0.6180339887498949
	f := float64(part) * phi
	return f - math.Floor(f)
}

// markDirty marks s changed since the last snapshot and counts its bytes
// (its last encoded size) towards the next checkpoint's.
func (w *worker) markDirty(s *slot) {
	if !s.dirty {
		s.dirty = true
		w.dirtyBytes += s.size + slotOverhead
	}
}

// slotOverhead is what a learner adds to a checkpoint beyond its value
// (its key, Badger's entry), and the first value of a new learner.
const slotOverhead = 64

// checkpointFull reports whether the partition's changes since the last
// snapshot would no longer fit in one transaction of the state store:
// checkpointing now keeps the checkpoint on the store's one-transaction path
// instead of the staged one, which writes every operation twice (and
// deletes it once) and fills the memtables with it. With 100 candidates of
// dimension 16 for 10,000 bkb users at 2,000 decisions/s (make
// bench-decisions), a partition's 5 s of changes passed the default store's
// 2.4 MiB cap after about 30 s, and its Badger flushes and compactions then
// took both CPUs for 100-200 ms at a time (docs/scale.md, "Decision
// latency"). Not before a quarter of the interval, so that a few very large
// learners do not make every record a checkpoint: the interval's bound is
// unchanged, a partition only checkpoints more often while its changes are
// large.
func (w *worker) checkpointFull() bool {
	if w.ckptBytes <= 0 {
		return false
	}
	// A pending entry: its composite key and the arm it keeps.
	pend := len(w.pend.dirty) * (128 + 8*w.cfg.Model.Dim)
	return w.dirtyBytes+pend >= w.ckptBytes && time.Since(w.lastCkpt) >= w.cfg.CheckpointInterval/4
}

// snapshot is one partition checkpoint ready to commit.
type snapshot struct {
	cp         checkpoint.Checkpoint
	seq        uint64
	offsets    map[string]map[int]int64
	fresh      int       // learners in it that were never stored
	kernelW    []float64 // kernel weights of the last updated learner, if exposed
	abandoned  bool
	changelog  []kafkaio.Record  // its changelog records, one transaction written before Badger
	warm       []checkpoint.Op   // restored learners it moves into Badger (warm.go), written before cp
	tombstoned []string          // keys of empty bundles a restore found that it tombstones (again candidates if it is abandoned)
	rebuild    bool              // write the whole partition to the changelog (Badger's state, the restored learners not yet in it, then this checkpoint's changes), in its transaction
	recreated  bool              // the changelog was found recreated: the next one rebuilds
	warmBase   map[string][]byte // of a rebuild: the restored learners not yet in Badger
	nextIn     int64             // the checkpoint's offsets (its bundles')
	nextLab    int64
	tombstones int  // tombstones among its changelog records
	rolls      bool // taken once the roll of a tombstones' segment was due (rollAt)

	changelogOnly bool                   // Badger waits: its changes join the backlog (backlog.go)
	store         *checkpoint.Checkpoint // what goes to Badger when it carries the backlog (Store.Apply); nil: cp (Store.Commit)
}

type ckptResult struct {
	snap  *snapshot
	start time.Time
	err   error
}

// startCheckpoint snapshots the partition and commits it in the background.
func (w *worker) startCheckpoint(ctx context.Context, gen *kafka.Generation) error {
	t0 := nowNano()
	snap, err := w.takeSnapshot()
	if err != nil || snap == nil {
		return err
	}
	if h := TestHookCheckpoint; h != nil {
		n := 0
		for _, op := range snap.cp.Learners {
			n += len(op.Value)
		}
		h(CheckpointEvent{Partition: w.part, Step: "snapshot", Start: t0, End: nowNano(), Learners: len(snap.cp.Learners), Bytes: n})
	}
	w.ckptBusy = true
	start := time.Now()
	if w.exactlyOnce() {
		// The outputs since the snapshot must go into the next
		// transaction: the worker waits for this one to commit.
		return w.complete(ckptResult{snap: snap, start: start, err: w.commitSnapshot(ctx, gen, snap)})
	}
	go func() {
		w.ckptDone <- ckptResult{snap: snap, start: start, err: w.commitSnapshot(ctx, gen, snap)}
	}()
	return nil
}

// exactlyOnce reports whether the outputs are written in the checkpoints'
// transactions (OutputDelivery exactly_once).
func (w *worker) exactlyOnce() bool { return w.cfg.OutputDelivery == "exactly_once" }

// beginTxn opens the partition's next transaction.
func (w *worker) beginTxn() error {
	if err := w.txn.Begin(); err != nil {
		return fmt.Errorf("transaction of partition %d: %w", w.part, err)
	}
	w.txnOpen = true
	return nil
}

// errRestartPartition: an exactly-once checkpoint did not commit, and the
// outputs of its transaction were aborted with it; the partition starts
// again from its last checkpoint, which predicts those records again.
var errRestartPartition = errors.New("processor: partition restarts from its last checkpoint")

// takeSnapshot returns nil when nothing changed since the last checkpoint
// and the group's offsets are those of the checkpoint.
func (w *worker) takeSnapshot() (*snapshot, error) {
	if w.em != nil { // (unit tests snapshot workers without one)
		w.em.flush(w.hard) // the snapshot waits for the acknowledgement of every output so far
	}
	if w.sinceCkpt == 0 && len(w.pend.dirty) == 0 && w.carry == nil && !w.cache.warm.warming() && (w.idle == nil || len(w.idle.dirty) == 0) && !w.groupBehind && !w.rollDue() && !w.rebuildChangelog {
		return nil, w.flushBacklog() // nothing newer: an idle partition's backlog goes to Badger alone
	}
	if w.rebuildChangelog {
		// The rebuild writes Badger's state to the changelog: Badger
		// must hold every checkpoint first.
		if err := w.flushBacklog(); err != nil {
			return nil, err
		}
	}
	if w.skip != nil && !w.skipDone() {
		return nil, nil // a key's restored state is ahead of the offsets: no checkpoint yet
	}
	w.groupBehind = false // this checkpoint commits the offsets (a failed group commit waits for the next change)
	w.skip = nil
	w.ckptSeq++
	w.cache.flushLookups(&w.p.c)
	learners, fresh, err := w.cache.snapshot()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errStoreFailed, err)
	}
	pending := make([]checkpoint.Op, 0, len(w.pend.dirty))
	for k := range w.pend.dirty {
		op := checkpoint.Op{Key: []byte(k)}
		if e, ok := w.pend.m[k]; ok {
			op.Value = encodePending(e)
		}
		pending = append(pending, op)
	}
	clear(w.pend.dirty)
	snap := &snapshot{seq: w.seq, fresh: fresh,
		cp: checkpoint.Checkpoint{Meta: w.encodeMeta(), Learners: learners, Pending: pending}}
	if w.idle != nil {
		snap.cp.Idle = w.idle.ops()
	}
	if c := w.carry; c != nil {
		// The newer operation of a key replaces the carried one: however
		// many checkpoints are abandoned, a key is in the next one once.
		snap.cp.Learners = mergeOps(c.cp.Learners, snap.cp.Learners)
		snap.cp.Pending = mergeOps(c.cp.Pending, snap.cp.Pending)
		snap.cp.Idle = mergeOps(c.cp.Idle, snap.cp.Idle)
		snap.fresh += c.fresh
		w.carry = nil
	}
	snap.rebuild = w.rebuildChangelog
	snap.rolls = w.rollDue()
	snap.nextIn, snap.nextLab = w.nextIn, w.nextLab
	if snap.rebuild && w.cfg.Changelog.Topic != "" {
		// The restored learners not yet in Badger are part of the whole
		// state; the background commit must not read the worker's maps.
		snap.warmBase = make(map[string][]byte, len(w.cache.warm.idle)+len(w.cache.warm.inflight))
		for _, m := range []map[string][]byte{w.cache.warm.inflight, w.cache.warm.idle} {
			for k, b := range m {
				snap.warmBase[k] = b
			}
		}
	}
	if w.lost {
		snap.seq = ^uint64(0) // never acknowledged: this snapshot can only be abandoned
	}
	snap.offsets = map[string]map[int]int64{}
	if w.nextIn >= 0 {
		snap.offsets[w.cfg.InputTopic] = map[int]int64{w.part: max(w.nextIn, w.groupIn)}
	}
	if w.cfg.LabelsTopic != "" && w.nextLab >= 0 {
		snap.offsets[w.cfg.LabelsTopic] = map[int]int64{w.part: max(w.nextLab, w.groupLab)}
	}
	if w.cfg.Changelog.Topic != "" {
		var err error
		if snap.changelog, err = w.snapshotChangelog(snap); err != nil {
			return nil, fmt.Errorf("%w: %w", errStoreFailed, err)
		}
	}
	// Restored learners go into Badger a chunk per checkpoint; until the
	// last one is there, Badger gets no meta (the partition counts as
	// having no local state, and the changelog restores it again).
	snap.warm = w.cache.warmChunk()
	if len(w.cache.warm.idle) > 0 {
		snap.cp.Meta = nil
	}
	if w.lastUpdated != nil {
		if kw, ok := w.lastUpdated.l.(kernelWeighter); ok {
			snap.kernelW = append([]float64(nil), kw.KernelWeights()...)
		}
	}
	if w.changelogOnly(snap) {
		snap.changelogOnly = true
	} else if w.hasBacklog() {
		snap.store = w.withBacklog(&snap.cp)
	}
	w.sinceCkpt, w.dirtyBytes = 0, 0
	w.lastCkpt = time.Now()
	return snap, nil
}

// mergeOps returns the carried operations of keys fresh does not change,
// then fresh.
func mergeOps(carried, fresh []checkpoint.Op) []checkpoint.Op {
	if len(carried) == 0 {
		return fresh
	}
	newer := make(map[string]struct{}, len(fresh))
	for _, o := range fresh {
		newer[string(o.Key)] = struct{}{}
	}
	out := make([]checkpoint.Op, 0, len(carried)+len(fresh))
	for _, o := range carried {
		if _, ok := newer[string(o.Key)]; !ok {
			out = append(out, o)
		}
	}
	return append(out, fresh...)
}

// errAbandoned marks a checkpoint that could not be written for now (its
// outputs not acknowledged, Kafka unavailable): its changes go into the
// next one.
var errAbandoned = errors.New("checkpoint abandoned")

// errPartitionFailed marks a checkpoint that cannot be written by this
// member however often it tries (it was fenced by the partition's new
// owner, a learner exceeds the changelog's record limit, writes are
// refused): the partition stops, loudly.
var errPartitionFailed = errors.New("partition cannot checkpoint")

// commitSnapshot runs the protocol; it touches only the snapshot, the
// emitter, the store and the generation (all safe from this goroutine).
// offsetCommitter commits the group's offsets: the generation's
// (*kafka.Generation), or a test's.
type offsetCommitter interface {
	CommitOffsets(offsets map[string]map[int]int64) error
}

func (w *worker) commitSnapshot(ctx context.Context, gen offsetCommitter, snap *snapshot) error {
	if snap.seq == ^uint64(0) {
		return fmt.Errorf("%w: an output was given up", errAbandoned)
	}
	hook := TestHookCheckpoint
	t0 := nowNano()
	step := func(name string) {
		if hook != nil {
			t := nowNano()
			hook(CheckpointEvent{Partition: w.part, Step: name, Start: t0, End: t})
			t0 = t
		}
	}
	if err := w.em.waitAcked(ctx, snap.seq); err != nil {
		return fmt.Errorf("%w: %w", errAbandoned, err)
	}
	step("acked")
	defer step("group")
	if records := snap.changelog; records != nil {
		if snap.rebuild {
			// The changelog lacks the partition (recreated): the whole
			// state goes with this checkpoint's changes, in its
			// transaction.
			var err error
			if records, err = w.rebuildRecords(snap); err != nil {
				return fmt.Errorf("%w: %w", errStoreFailed, err)
			}
		}
		if err := w.writeChangelog(w.hard, records); errors.Is(err, errLandedInRecreated) {
			// Committed, outputs and all: Badger takes the checkpoint
			// (predicting its records again would commit them twice),
			// flagged so that a restart before the rebuild rebuilds too.
			snap.recreated = true // complete says so
			snap.cp.Meta = withMetaFlags(snap.cp.Meta, metaChangelogIncomplete)
			if snap.store != nil {
				snap.store.Meta = snap.cp.Meta
			}
		} else if err != nil {
			return w.changelogFailed(snap, err)
		}
		if h := TestHookAfterChangelog; h != nil {
			h(w.part)
		}
		step("changelog")
	}
	if !snap.changelogOnly {
		if err := w.storeSnapshot(snap); err != nil {
			return fmt.Errorf("%w: %w", errStoreFailed, err)
		}
		step("badger")
	}
	if err := gen.CommitOffsets(snap.offsets); err != nil {
		w.log.Debug().Err(err).Msg("group commit failed (the Badger checkpoint stands)")
	}
	return nil
}

// changelogFailed classifies a failed changelog write: the partition stops
// (errPartitionFailed) when writing it again cannot help, else the
// checkpoint is abandoned and carried (errAbandoned); a recreated topic
// makes the next checkpoint write the partition anew.
func (w *worker) changelogFailed(snap *snapshot, err error) error {
	switch {
	case errors.Is(err, kafkaio.ErrFenced):
		return fmt.Errorf("%w: this member lost the partition to another (its checkpoints are fenced): %w", errPartitionFailed, err)
	case errors.Is(err, kafkaio.ErrRecreated):
		snap.recreated = true
		return fmt.Errorf("%w: %w", errAbandoned, err)
	case errors.Is(err, errChangelogTooBig), !kafkaio.IsRetriable(err):
		return fmt.Errorf("%w: %w", errPartitionFailed, err)
	}
	return fmt.Errorf("%w: %w", errAbandoned, err)
}

// storeSnapshot writes snap into Badger: the restored learners it moves
// first (older than anything of the same key in cp), then cp atomically.
func (w *worker) storeSnapshot(snap *snapshot) error {
	if len(snap.warm) > 0 {
		if err := w.store.Load(w.part, &checkpoint.Checkpoint{Learners: snap.warm}); err != nil {
			return err
		}
	}
	if snap.store != nil {
		return w.store.Apply(w.part, snap.store)
	}
	return w.store.Commit(w.part, &snap.cp)
}

// pollCheckpoint handles the outcome of the checkpoint in flight, if any.
func (w *worker) pollCheckpoint() error {
	if !w.ckptBusy {
		return nil
	}
	select {
	case res := <-w.ckptDone:
		return w.complete(res)
	default:
		return nil
	}
}

// awaitCheckpoint waits for the checkpoint in flight. A learner evicted
// since the last snapshot is held in memory as a blob until a checkpoint
// writes it: when the store is slower than the stream, as with many more
// keys than cache.max_learners and Badger compacting, the worker stops
// reading once twice CheckpointMaxRecords blobs are held behind the
// checkpoint in flight, so that memory stays bounded and the lag shows the
// store's pace (kernelstream_checkpoint_wait_seconds_total counts the wait).
// With every learner in memory nothing is held and nothing waits.
func (w *worker) awaitCheckpoint(ctx context.Context) error {
	w.em.flush(w.hard)
	w.publish() // it may wait: the counters and the lag are the records handled so far
	start := time.Now()
	defer func() { w.p.c.ckptWaitNanos.Add(int64(time.Since(start))) }()
	select {
	case res := <-w.ckptDone:
		return w.complete(res)
	case <-ctx.Done():
		return nil // revoked or stopping: the run loop ends and waits for it
	}
}

// complete applies a checkpoint's outcome on the worker goroutine.
func (w *worker) complete(res ckptResult) error {
	w.ckptBusy = false
	if res.snap.recreated {
		if !w.rebuildChangelog {
			w.log.Warn().Err(res.err).Msg("the changelog lacks this partition's state (the topic was recreated?): the next checkpoint writes all of it")
		}
		w.rebuildChangelog = true
	} else if res.err == nil && res.snap.rebuild {
		w.rebuildChangelog = false
	}
	if w.exactlyOnce() && res.err == nil {
		if err := w.beginTxn(); err != nil {
			res.err = w.changelogFailed(res.snap, err)
		}
	}
	switch {
	case res.err == nil:
		if w.ckptEp != nil {
			w.ckptEp.ok()
		}
		// Only a marker appended once segment.ms has passed rolls the
		// segment: an earlier checkpoint leaves the roll due, and one
		// abandoned leaves it due again. The latest tombstones set it: the
		// segment they are in started no later than they were written, so
		// segment.ms after them it rolls, with any earlier tombstones in
		// it (a busy partition rolls its segments by its own appends).
		if res.snap.rolls {
			w.rollAt = time.Time{}
		}
		if res.snap.tombstones > 0 && w.cfg.Changelog.MaxCompactionLag > 0 {
			w.rollAt = time.Now().Add(w.cfg.Changelog.MaxCompactionLag / 2)
		}
		if err := w.storeSettled(res.snap); err != nil {
			return err
		}
		w.p.c.checkpoints.Add(1)
		w.countLearnersWritten(res.snap.cp.Learners)
		w.onDiskGauge.Set(float64(w.cache.onDisk))
		if off, ok := res.snap.offsets[w.cfg.InputTopic][w.part]; ok {
			w.ckptGauge.Set(float64(off))
		}
		if res.snap.kernelW != nil {
			w.p.m.setKernelWeights(w.part, res.snap.kernelW)
		}
		w.p.m.checkpointDur.Observe(time.Since(res.start).Seconds())
		return nil
	case errors.Is(res.err, errStoreFailed):
		return res.err
	case errors.Is(res.err, errPartitionFailed):
		w.fail(res.err)
		return nil
	case w.exactlyOnce():
		if err := w.em.failed(); err != nil && !kafkaio.IsRetriable(err) {
			w.fail(err) // a restart would meet it again
			return nil
		}
		return fmt.Errorf("%w: %w", errRestartPartition, res.err)
	}
	w.cache.abandoned()
	w.tombstones = append(w.tombstones, res.snap.tombstoned...)
	w.carry = res.snap
	if errors.Is(res.err, context.Canceled) {
		// Cut short because the partition is being revoked or the member
		// stops, not by Kafka: the final checkpoint takes these changes.
		return nil
	}
	w.p.c.ckptAbandoned.Add(1)
	if w.ckptEp == nil {
		w.ckptEp = newEpisode(w.log, "checkpoint")
	}
	w.ckptEp.fail(res.err) // the changes go into the next checkpoint
	return nil
}

// finalCheckpoint waits for the checkpoint in flight, then checkpoints the
// rest, all within the hard deadline. Without acknowledgements it gives up:
// the records since the last checkpoint will be replayed by the next owner.
func (w *worker) finalCheckpoint(gen *kafka.Generation) error {
	if w.ckptBusy {
		// Always wait: its context (the worker's) is cancelled, so it ends
		// at once unless it is inside the Badger or group commit, which are
		// bounded; and the store must not be closed under it.
		if err := w.complete(<-w.ckptDone); err != nil {
			return err
		}
	}
	if !w.p.diskOK() {
		w.log.Warn().Msg("final checkpoint skipped: the checkpoint directory is nearly full; the records since the last one will be replayed")
		return nil
	}
	w.storeNow = true // the next owner, or this member restarting, finds Badger as current as the changelog
	defer func() { w.storeNow = false }()
	snap, err := w.takeSnapshot()
	if err != nil || snap == nil {
		return err
	}
	res := ckptResult{snap: snap, start: time.Now()}
	res.err = w.commitSnapshot(w.hard, gen, snap)
	if res.err != nil && !errors.Is(res.err, errStoreFailed) {
		w.log.Warn().Err(res.err).Msg("final checkpoint skipped: the records since the last one will be replayed")
	}
	return w.complete(res)
}

// countLearnersWritten counts the learner states a committed checkpoint
// wrote (deletes aside): their bytes over time are the state store's and the
// changelog's write rate, which grows with the states (docs/bandits.md,
// "State size and checkpoints").
func (w *worker) countLearnersWritten(ops []checkpoint.Op) {
	var n, bytes int64
	for _, op := range ops {
		if op.Value != nil {
			n++
			bytes += int64(len(op.Value))
		}
	}
	w.p.c.ckptLearners.Add(n)
	w.p.c.ckptLearnerBytes.Add(bytes)
}
