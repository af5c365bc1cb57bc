package processor

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kernelstream/kernelstream/changelog"
	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/kafkaio"
)

// ChangelogConfig puts learner state in Kafka as well as in Badger (package
// changelog; docs/pipeline.md, "State in Kafka").
type ChangelogConfig struct {
	// Topic is the compacted changelog topic, one partition per input
	// partition. Default "" = no changelog: state lives only in Badger.
	Topic string
	// ReplicationFactor and MinInsyncReplicas of the topic when the
	// processor creates it. Default 0 = the brokers' defaults.
	ReplicationFactor int
	MinInsyncReplicas int
	// MaxMessageBytes is the largest record a checkpoint writes (one key's
	// learner and pending entries); the topic is created with it as its
	// max.message.bytes. Default 8 MiB.
	MaxMessageBytes int
	// MaxCompactionLag bounds how long a compacted-away record stays in the
	// changelog: the topic, when the processor creates it, gets half of it
	// as max.compaction.lag.ms and half as segment.ms, so an erased key's
	// state is gone from Kafka within it after the checkpoint that erased
	// it (a partition whose changelog gets no newer record writes a marker
	// to roll its segment). Default 7 days; negative = the brokers' defaults
	// (no bound).
	MaxCompactionLag time.Duration
	// StandbyReplicas is how many other members keep a warm copy of each
	// partition's state by tailing its changelog partition (standby.go);
	// the group balancer must support it (StickyBalancer). Default 0.
	StandbyReplicas int
	// Compression of the changelog's batches: "none", "gzip", "snappy",
	// "lz4" or "zstd". Default "none" (DefaultChangelogCompression): a
	// learner's state is binary floating-point numbers, which lz4 shrank
	// by 5-9 % (bkb states of 1 to 160 KB) for 4.6 CPU-µs per decision of
	// make bench-decisions, 4 % of its cost (docs/pipeline.md, "State in
	// Kafka"). With OutputDelivery "exactly_once" the outputs and the
	// changelog share each partition's transactional producer, whose
	// batches then take Config.Compression, and this is ignored.
	Compression string
}

// Defaults of ChangelogConfig.
const (
	DefaultChangelogMaxMessageBytes  = 8 << 20
	DefaultChangelogMaxCompactionLag = 7 * 24 * time.Hour
	DefaultChangelogCompression      = "none"
)

// TestHookAfterChangelog, when set, runs after a checkpoint's changelog
// records are acknowledged and before its Badger commit: the crash tests
// (cmd/consumer) kill the process there, the one moment where Kafka holds a
// checkpoint that Badger does not. Production code never sets it.
var TestHookAfterChangelog func(partition int)

// restoreState is what a restore from the changelog leaves the worker.
type restoreState struct {
	skip         map[string]changelogSkip // keys whose restored state is ahead of the resume offsets
	warm         map[string][]byte        // learners the restore read, for the cache (warm.go)
	restoredMeta []byte                   // the meta of the changelog's last marker, when restored from it
}

// changelogSkip is a key whose restored bundle is newer than the marker the
// partition resumes from: its records below these offsets are in its state.
type changelogSkip struct{ in, lab int64 }

func (p *Processor) changelogSource() changelog.Source {
	return changelog.Source{Cluster: p.kio, Topic: p.cfg.Changelog.Topic}
}

// ensureChangelog creates or checks the changelog topic for an input of
// parts partitions, growing it when partitions were added to the input.
func (p *Processor) ensureChangelog(ctx context.Context, parts int) error {
	c := p.cfg.Changelog
	// Half the bound each: a segment rolls (a marker is appended) at most
	// segment.ms after it got a tombstone, and is compacted at most
	// max.compaction.lag.ms after that.
	tc := changelog.TopicConfig{ReplicationFactor: c.ReplicationFactor, MinInsyncReplicas: c.MinInsyncReplicas,
		MaxMessageBytes: c.MaxMessageBytes, MaxCompactionLag: c.MaxCompactionLag / 2}
	err := changelog.EnsureTopic(ctx, p.client(), c.Topic, parts, tc)
	var fewer *changelog.FewerPartitions
	if errors.As(err, &fewer) {
		p.log.Warn().Str("topic", c.Topic).Int("partitions", fewer.Have).Int("input_partitions", fewer.Want).
			Msg("partitions were added to the input: adding as many to the changelog")
		if err = p.kio.(interface {
			AddPartitions(context.Context, string, int) error
		}).AddPartitions(ctx, c.Topic, parts); err == nil {
			err = changelog.EnsureTopic(ctx, p.client(), c.Topic, parts, tc)
		}
	}
	if err == nil {
		p.clParts.Store(int64(parts))
	}
	return err
}

// changelogPartition makes sure the changelog has partition part, which a
// partition added to the input while the group ran lacks: the input's
// partition count is read again and the changelog grown to it.
func (p *Processor) changelogPartition(ctx context.Context, part int) error {
	if int64(part) < p.clParts.Load() {
		return nil
	}
	return retry(ctx, p.log, "grow the changelog to the input's partitions", p.cfg.RetryBackoffMax, func() error {
		parts, err := p.checkTopics(ctx)
		if err != nil {
			return err
		}
		if part >= parts {
			return fmt.Errorf("partition %d assigned, the input has %d", part, parts)
		}
		return p.ensureChangelog(ctx, parts)
	})
}

// restoreChangelog makes Badger hold the partition's newest checkpointed
// state before the worker reads it: when Badger has nothing, or an older
// checkpoint than the changelog's last marker, the changelog partition is
// read to its end and written into Badger; when the changelog lacks what
// Badger has (the changelog was just enabled, or recreated), Badger's state
// is written to it first.
func (w *worker) restoreChangelog(ctx context.Context) error {
	src := w.p.changelogSource()
	local, hasLocal, err := w.localSeq()
	if err != nil {
		return err
	}
	var tail uint64
	var at int64
	var found bool
	err = w.restoreStep(ctx, "read the changelog's last marker", func() (err error) {
		tail, at, found, err = src.LastMarker(ctx, w.part)
		return err
	})
	if err != nil {
		return err
	}
	if found {
		w.markerOffset.Store(at) // a changelog recreated later ends below it
	}
	warm, lastRead := w.p.takeStandby(w.part)
	if found && hasLocal && tail == local {
		return nil // Badger has the changelog's last checkpoint
	}
	if warm != nil && time.Since(lastRead) > w.p.deleteRetention {
		// The copy stopped reading longer ago than the changelog keeps a
		// tombstone: a key erased since may be gone from the log with its
		// tombstone, and the copy would bring it back.
		if rg, err := src.Cluster.Offsets(ctx, src.Topic, int32(w.part)); err != nil || rg.End > warm.Next {
			w.log.Info().Dur("stale", time.Since(lastRead)).Dur("delete_retention", w.p.deleteRetention).
				Msg("standby copy older than the changelog's delete.retention.ms: restoring from the changelog instead")
			warm = nil
		}
	}
	start := time.Now()
	st := warm
	if st == nil {
		st = changelog.NewState()
	}
	before := st.Records
	if err := w.restoreStep(ctx, "read the changelog", func() error { return src.ReadFrom(ctx, w.part, st) }); err != nil {
		return err
	}
	read := st.Records - before
	w.p.c.changelogRead.Add(int64(read))
	if st.Marker == nil || (hasLocal && st.Marker.Seq < local) {
		if !hasLocal {
			return nil // no checkpoint anywhere: a fresh partition
		}
		return w.restoreStep(ctx, "write the local state to the changelog", func() error { return w.bootstrapChangelog(ctx) })
	}
	if hasLocal {
		// The changelog is ahead of Badger (a crash between a checkpoint's
		// transaction and its Badger commit). It must also hold what
		// Badger holds: a changelog recreated after Badger's checkpoint
		// holds only the checkpoint that did not reach Badger, the one
		// after Badger's (each checkpoint reaches Badger right after its
		// transaction), so Badger's state with that checkpoint's records
		// over it is that checkpoint's state. Replaying from Badger's
		// checkpoint instead would, with exactly_once, commit that
		// checkpoint's predictions twice.
		merged, err := w.mergeLocal(st)
		if err != nil {
			return err
		}
		if merged > 0 {
			w.log.Warn().Int("keys", merged).Uint64("seq", st.Marker.Seq).Uint64("local_seq", local).
				Msg("the changelog lacks state the local store holds (the topic was recreated after the local checkpoint): restored from both; the next checkpoint writes all of it to the changelog")
			w.rebuildChangelog = true
		}
	}
	if err := w.applyChangelog(st); err != nil {
		return err
	}
	if legacy(st) {
		// Written before pending entries were records of their own: the
		// state is written again in the current layout, so that no entry
		// lives only in a bundle that a newer one replaces.
		if err := w.restoreStep(ctx, "rewrite the changelog in the current layout", func() error { return w.rewriteChangelog(ctx, st) }); err != nil {
			return err
		}
	}
	w.p.c.restores.Add(1)
	part := strconv.Itoa(w.part)
	w.p.m.restoreSecs.WithLabelValues(part).Set(time.Since(start).Seconds())
	w.p.m.restoreRecs.WithLabelValues(part).Set(float64(read))
	w.log.Info().Uint64("seq", st.Marker.Seq).Uint64("local_seq", local).Bool("local_state", hasLocal).Bool("standby", warm != nil).
		Int("keys", len(st.Bundles)).Int("records", read).Int64("bytes", st.Bytes).Int("ahead", len(w.skip)).
		Dur("took", time.Since(start)).Msg("partition state restored from the changelog")
	return nil
}

// restoreStep runs one Kafka step of a restore (a read of the changelog,
// or a write of the local state to it). A step that may succeed later (a
// broker restarting, a leader moving, a topic recreated meanwhile) is
// retried until ctx ends; one that cannot (fenced, refused, a corrupt or
// truncated changelog, a record too large) fails the partition, loudly,
// and the restore returns errPartitionFailed: the other partitions and the
// process go on.
func (w *worker) restoreStep(ctx context.Context, what string, step func() error) error {
	var storeErr error
	err := retry(ctx, w.log, what, w.cfg.RetryBackoffMax, func() error {
		err := step()
		if errors.Is(err, errStoreFailed) {
			storeErr = err // Badger, not Kafka: the process stops
			return nil
		}
		if err == nil || ctx.Err() != nil || restoreRetriable(err) {
			return err
		}
		w.fail(fmt.Errorf("restore: %s: %w", what, err))
		return nil
	})
	if storeErr != nil {
		return storeErr
	}
	if err == nil && w.failedErr != nil {
		return fmt.Errorf("%w: %w", errPartitionFailed, w.failedErr)
	}
	return err
}

// restoreRetriable reports whether a restore step may succeed if run again.
func restoreRetriable(err error) bool {
	var loss *kafkaio.DataLoss
	switch {
	case errors.As(err, &loss), errors.Is(err, changelog.ErrCorrupt), errors.Is(err, errChangelogTooBig):
		return false
	case errors.Is(err, kafkaio.ErrRecreated), errors.Is(err, kafkaio.ErrOutOfRange):
		return true // written or read again from the start
	}
	return kafkaio.IsRetriable(err)
}

// txnID is the transactional id of partition part's checkpoints: one per
// group, input topic and partition, so that whichever member holds the
// partition fences every former holder.
func (p *Processor) txnID(part int) string {
	return fmt.Sprintf("kernelstream.%s.%s.%d", p.cfg.Group, p.cfg.InputTopic, part)
}

// openTxn makes the partition's transactional producer and fences the
// partition's former owners: their open transaction is aborted and nothing
// they send after lands. It retries while Kafka is unavailable; a refusal
// (authorization) fails the partition.
func (w *worker) openTxn(ctx context.Context) error {
	txn, what, op := w.txn, "abort the transaction that did not commit", kafkaio.Txn.Abort
	if txn == nil {
		var err error
		if txn, err = w.kio.Transactional(w.p.txnID(w.part)); err != nil {
			w.fail(err)
			return err
		}
		what, op = "fence the partition's former owners", kafkaio.Txn.Init
	}
	// A restart after a transaction that did not commit goes on with the
	// producer it had, and aborts what it left open: initialising a new
	// one would fence whichever member owns the partition by now, were this
	// one a zombie. kgo re-initialises this one with its own epoch when it
	// must (after a transaction the coordinator timed out), which fails if
	// another producer took the id.
	err := retry(ctx, w.log, what, w.cfg.RetryBackoffMax, func() error {
		err := op(txn, ctx)
		if err != nil && !kafkaio.IsRetriable(err) && ctx.Err() == nil {
			w.fail(fmt.Errorf("transactional producer of the checkpoints: %w", err))
			return nil
		}
		return err
	})
	if err == nil && w.failedErr != nil {
		err = w.failedErr
	}
	if err != nil {
		txn.Close()
		return err
	}
	w.txn = txn
	return nil
}

// localSeq is the sequence number of Badger's last checkpoint.
func (w *worker) localSeq() (uint64, bool, error) {
	meta, ok, err := w.store.Meta(w.part)
	if err != nil || !ok {
		return 0, false, err
	}
	probe, err := w.metaProbe(meta)
	if err != nil {
		return 0, false, err
	}
	return probe.ckptSeq, true, nil
}

// metaProbe decodes a partition meta (Badger's or a changelog marker's)
// into a throwaway worker of this partition, leaving w as it is.
func (w *worker) metaProbe(meta []byte) (*worker, error) {
	probe := &worker{p: w.p, part: w.part, cfg: w.cfg}
	if err := probe.decodeMeta(meta); err != nil {
		return nil, err
	}
	return probe, nil
}

// applyChangelog replaces the partition's Badger state with st: its
// pending entries are written now, its learners are handed to the cache
// (warm.go) and reach Badger with the next checkpoints, and the marker's meta
// is the partition's until then. It notes the keys whose bundle is ahead of
// the marker.
//
// Ahead means input or labels offsets beyond the marker's, not a higher
// sequence number: a run that starts with no marker numbers its checkpoints
// from 1 again, so the bundles of an earlier run's first checkpoint, killed
// before its marker, can carry the sequence number of a later run's marker
// while holding their keys' records far beyond it. Their states are still
// right at their own offsets (records are applied deterministically), so
// they count as ahead like any unfinished checkpoint's bundles.
func (w *worker) applyChangelog(st *changelog.State) error {
	at, err := w.metaProbe(st.Marker.Meta)
	if err != nil {
		return fmt.Errorf("the changelog's last marker: %w", err)
	}
	cp := checkpoint.Checkpoint{}
	w.skip = nil
	warm := make(map[string][]byte, len(st.Bundles))
	for k, v := range st.Pending {
		cp.Pending = append(cp.Pending, checkpoint.Op{Key: []byte(k), Value: v})
	}
	for k, b := range st.Bundles {
		if b.Learner != nil {
			warm[k] = b.Learner
		}
		for _, e := range b.Pending {
			cp.Pending = append(cp.Pending, checkpoint.Op{Key: e.Key, Value: e.Value})
		}
		if b.HasLastRecord && w.cfg.KeyTTL > 0 {
			cp.Idle = append(cp.Idle, checkpoint.Op{Key: []byte(k), Value: encodeIdle(b.LastRecord)})
		}
		ahead := !at.reached(changelogSkip{in: b.NextIn, lab: b.NextLab})
		if b.Empty() && !ahead {
			w.tombstones = append(w.tombstones, k) // erased: its empty bundle may go
		}
		if ahead {
			if w.skip == nil {
				w.skip = map[string]changelogSkip{}
			}
			w.skip[k] = changelogSkip{in: b.NextIn, lab: b.NextLab}
		}
	}
	if err := w.store.ResetPartition(w.part); err != nil {
		return err
	}
	if err := w.store.Load(w.part, &cp); err != nil {
		return fmt.Errorf("write the restored state: %w", err)
	}
	w.warm = warm
	w.restoredMeta = st.Marker.Meta
	return nil
}

// bootstrapChangelog writes every key Badger holds for the partition, its
// pending entries and a marker with Badger's meta, in one transaction, so
// that the changelog alone can restore it (the changelog was just enabled,
// or recreated, and a restore found no marker in it).
func (w *worker) bootstrapChangelog(ctx context.Context) error {
	meta, ok, err := w.store.Meta(w.part)
	if err != nil || !ok {
		return storeFailed(err)
	}
	probe, err := w.metaProbe(meta)
	if err != nil {
		return storeFailed(err)
	}
	bundles, pending, err := w.storedState(probe.ckptSeq, probe.nextIn, probe.nextLab, nil)
	if err != nil {
		return storeFailed(err)
	}
	w.log.Info().Int("keys", len(bundles)).Int("pending", len(pending)).Uint64("seq", probe.ckptSeq).
		Msg("writing the partition's whole state from the local store to the changelog")
	return w.writeChangelog(ctx, w.changelogMessages(bundles, pending, nil, &changelog.Marker{Seq: probe.ckptSeq, Meta: meta}))
}

// rebuildRecords are the changelog records of a checkpoint that writes the
// partition's whole state (the changelog lacks it: recreated, or emptied):
// every key Badger holds, as of the last checkpoint, and the restored
// learners not yet in Badger, then the checkpoint's own records, which
// replace those of the keys it changed. All in one transaction, before
// Badger: a checkpoint of the whole state that fails leaves Badger and the
// outputs of exactly_once as they were.
func (w *worker) rebuildRecords(snap *snapshot) ([]kafkaio.Record, error) {
	bundles, pending, err := w.storedState(snap.seq, snap.nextIn, snap.nextLab, snap.warmBase)
	if err != nil {
		return nil, err
	}
	w.log.Info().Int("keys", len(bundles)).Int("pending", len(pending)).Uint64("seq", snap.seq).
		Msg("writing the partition's whole state to the changelog")
	base := w.changelogMessages(bundles, pending, nil, nil)
	return append(base, snap.changelog...), nil
}

// storedState reads the partition's state from Badger as bundles of the
// given checkpoint (seq and offsets) and pending entries, with the
// restored learners of warm (not yet in Badger) in place of Badger's.
func (w *worker) storedState(seq uint64, nextIn, nextLab int64, warm map[string][]byte) ([]keyBundle, []checkpoint.Op, error) {
	bundles := map[string]*changelog.Bundle{}
	bundle := func(k string) *changelog.Bundle {
		b, ok := bundles[k]
		if !ok {
			b = &changelog.Bundle{Seq: seq, NextIn: nextIn, NextLab: nextLab}
			bundles[k] = b
		}
		return b
	}
	err := w.store.EachLearner(w.part, func(k, v []byte) error {
		bundle(string(k)).Learner = append([]byte(nil), v...)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for k, v := range warm {
		bundle(k).Learner = v
	}
	var pending []checkpoint.Op
	err = w.store.EachPending(w.part, func(k, v []byte) error {
		pending = append(pending, checkpoint.Op{Key: append([]byte(nil), k...), Value: append([]byte(nil), v...)})
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if w.cfg.KeyTTL > 0 {
		err = w.store.EachIdle(w.part, func(k, v []byte) error {
			if last, err := decodeIdle(string(k), v); err == nil { // a corrupt entry restarts the key's clock at restore
				b := bundle(string(k))
				b.HasLastRecord, b.LastRecord = true, last
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	list := make([]keyBundle, 0, len(bundles))
	for k, b := range bundles {
		if !b.Empty() {
			list = append(list, keyBundle{key: []byte(k), b: *b})
		}
	}
	slices.SortFunc(list, func(a, b keyBundle) int { return bytes.Compare(a.key, b.key) })
	slices.SortFunc(pending, func(a, b checkpoint.Op) int { return bytes.Compare(a.Key, b.Key) })
	return list, pending, nil
}

// mergeLocal adds to st the learners, idle times and pending entries that
// Badger holds and st neither holds nor erased (a tombstone), as of Badger's
// checkpoint, and returns how many learners and entries it added.
func (w *worker) mergeLocal(st *changelog.State) (int, error) {
	meta, ok, err := w.store.Meta(w.part)
	if err != nil || !ok {
		return 0, err
	}
	probe, err := w.metaProbe(meta)
	if err != nil {
		return 0, err
	}
	absent := func(k string) bool {
		_, held := st.Bundles[k]
		_, erased := st.Erased[k]
		return !held && !erased
	}
	added := map[string]*changelog.Bundle{}
	err = w.store.EachLearner(w.part, func(k, v []byte) error {
		if absent(string(k)) {
			added[string(k)] = &changelog.Bundle{Seq: probe.ckptSeq, NextIn: probe.nextIn, NextLab: probe.nextLab, Learner: append([]byte(nil), v...)}
		}
		return nil
	})
	if err == nil && w.cfg.KeyTTL > 0 {
		err = w.store.EachIdle(w.part, func(k, v []byte) error {
			if b, ok := added[string(k)]; ok {
				if last, err := decodeIdle(string(k), v); err == nil {
					b.HasLastRecord, b.LastRecord = true, last
				}
			}
			return nil
		})
	}
	n := len(added)
	if err == nil && !legacy(st) { // a legacy changelog keeps entries in bundles
		err = w.store.EachPending(w.part, func(k, v []byte) error {
			_, held := st.Pending[string(k)]
			_, erased := st.ErasedPending[string(k)]
			if !held && !erased {
				st.Pending[string(k)] = append([]byte(nil), v...)
				n++
			}
			return nil
		})
	}
	if err != nil {
		return 0, err
	}
	for k, b := range added {
		st.Bundles[k] = b
	}
	return n, nil
}

// storeFailed marks a Badger error (nil stays nil).
func storeFailed(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", errStoreFailed, err)
}

// legacy reports a changelog state with pending entries inside bundles.
func legacy(st *changelog.State) bool {
	for _, b := range st.Bundles {
		if len(b.Pending) > 0 {
			return true
		}
	}
	return false
}

// rewriteChangelog writes the restored state st again, in one transaction,
// in the current layout: its bundles without their pending entries, which
// become records of their own, and its marker.
func (w *worker) rewriteChangelog(ctx context.Context, st *changelog.State) error {
	list := make([]keyBundle, 0, len(st.Bundles))
	var pending []checkpoint.Op
	for k, v := range st.Pending {
		pending = append(pending, checkpoint.Op{Key: []byte(k), Value: v})
	}
	for k, b := range st.Bundles {
		for _, e := range b.Pending {
			pending = append(pending, checkpoint.Op{Key: e.Key, Value: e.Value})
		}
		nb := *b
		nb.Pending = nil
		if !nb.Empty() {
			list = append(list, keyBundle{key: []byte(k), b: nb})
		}
	}
	slices.SortFunc(list, func(a, b keyBundle) int { return bytes.Compare(a.key, b.key) })
	slices.SortFunc(pending, func(a, b checkpoint.Op) int { return bytes.Compare(a.Key, b.Key) })
	w.log.Info().Int("keys", len(list)).Int("pending", len(pending)).Msg("changelog in the layout before pending records: writing the restored state again")
	return w.writeChangelog(ctx, w.changelogMessages(list, pending, nil, st.Marker))
}

// routingOf is the routing key of a pending entry's composite key.
func routingOf(pendingKey []byte) []byte {
	n, w := binary.Uvarint(pendingKey)
	if w <= 0 || uint64(len(pendingKey)-w) < n {
		return nil
	}
	return pendingKey[w : w+int(n)]
}

// snapshotChangelog builds the changelog records of a snapshot, written in
// one transaction: a bundle for every routing key whose learner or idle
// time it changes (the key's learner as of the snapshot), a tombstone for
// every key it erases, a record (or a tombstone) for every pending entry it
// adds or removes, in key order, then the marker. It runs on the worker
// goroutine, like takeSnapshot.
//
// A snapshot of a stream with many keys holds a bundle per record, so the
// keys are sorted once in a slice (no map per key) and the records' keys and
// values are cut from one buffer (BenchmarkSnapshotChangelog).
func (w *worker) snapshotChangelog(snap *snapshot) ([]kafkaio.Record, error) {
	cp := &snap.cp
	touched := make([]touchedKey, 0, len(cp.Learners)+len(cp.Idle))
	for i, o := range cp.Learners {
		touched = append(touched, touchedKey{key: o.Key, learner: o.Value, op: i + 1})
	}
	for _, o := range cp.Idle {
		touched = append(touched, touchedKey{key: o.Key})
	}
	// By key, and within a key by operation: the last learner operation of
	// a key wins (this snapshot's over those carried from an abandoned one).
	slices.SortFunc(touched, func(a, b touchedKey) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		return a.op - b.op
	})
	bundles := make([]keyBundle, 0, len(touched))
	var erased [][]byte
	for i, t := range touched {
		if i+1 < len(touched) && bytes.Equal(touched[i+1].key, t.key) {
			continue // a later operation of the same key follows
		}
		v := t.learner
		if t.op == 0 { // no learner operation: the key's current value
			var err error
			if v, err = w.cache.value(string(t.key)); err != nil {
				return nil, err
			}
		}
		kb := keyBundle{key: t.key, b: changelog.Bundle{Seq: w.ckptSeq, NextIn: w.nextIn, NextLab: w.nextLab, Learner: v}}
		if w.idle != nil {
			kb.b.LastRecord, kb.b.HasLastRecord = w.idle.last(string(t.key))
		}
		if kb.b.Empty() {
			erased = append(erased, t.key) // the transaction makes the tombstone safe at once
			continue
		}
		bundles = append(bundles, kb)
	}
	pending := cp.Pending
	if len(pending) > 1 {
		pending = slices.Clone(pending)
		slices.SortStableFunc(pending, func(a, b checkpoint.Op) int { return bytes.Compare(a.Key, b.Key) })
	}
	for _, k := range w.tombstones { // empty bundles a restore found (written before transactions)
		erased = append(erased, []byte(k))
	}
	snap.tombstoned, w.tombstones = w.tombstones, nil
	snap.tombstones = len(erased)
	for _, o := range pending {
		if o.Value == nil {
			snap.tombstones++
		}
	}
	return w.changelogMessages(bundles, pending, erased, &changelog.Marker{Seq: w.ckptSeq, Meta: cp.Meta}), nil
}

// touchedKey is a routing key a snapshot changes; op is the position + 1 of
// its learner operation in the checkpoint, 0 for a key changed only by
// pending or idle-index operations.
type touchedKey struct {
	key     []byte
	learner []byte
	op      int
}

// keyBundle is a routing key's changelog bundle.
type keyBundle struct {
	key []byte
	b   changelog.Bundle
}

// changelogMessages encodes the tombstones of the erased keys, the bundles
// (sorted by key), the pending entries (sorted by key; a nil value is a
// tombstone: the entry was labelled, expired or erased) and the marker,
// last (none when m is nil). The records' keys and values share one buffer.
func (w *worker) changelogMessages(bundles []keyBundle, pending []checkpoint.Op, erased [][]byte, m *changelog.Marker) []kafkaio.Record {
	size := 0
	for i := range bundles {
		size += 1 + len(bundles[i].key) + len(bundles[i].b.Learner) + 64 // record key, learner, bundle header and checksum
	}
	for _, o := range pending {
		size += 1 + len(o.Key) + len(o.Value) + 16
	}
	for _, k := range erased {
		size += 1 + len(k)
	}
	buf := make([]byte, 0, size)
	cut := func(start int) []byte { return buf[start:len(buf):len(buf)] }
	topic, part := w.cfg.Changelog.Topic, int32(w.part)
	msgs := make([]kafkaio.Record, 0, len(erased)+len(bundles)+len(pending)+1)
	for _, k := range erased {
		start := len(buf)
		buf = changelog.AppendBundleKey(buf, k)
		msgs = append(msgs, kafkaio.Record{Topic: topic, Partition: part, Key: cut(start)})
	}
	for i := range bundles {
		kb := &bundles[i]
		start := len(buf)
		buf = changelog.AppendBundleKey(buf, kb.key)
		key := cut(start)
		start = len(buf)
		buf = changelog.EncodeBundle(buf, &kb.b)
		msgs = append(msgs, kafkaio.Record{Topic: topic, Partition: part, Key: key, Value: cut(start)})
	}
	for _, o := range pending {
		start := len(buf)
		buf = append(append(buf, changelog.PendingKey(nil)...), o.Key...)
		key := cut(start)
		var value []byte
		if o.Value != nil {
			start = len(buf)
			buf = changelog.EncodePending(buf, o.Value)
			value = cut(start)
		}
		msgs = append(msgs, kafkaio.Record{Topic: topic, Partition: part, Key: key, Value: value})
	}
	if m == nil {
		return msgs
	}
	return append(msgs, kafkaio.Record{Topic: topic, Partition: part, Key: changelog.MarkerKey(), Value: changelog.EncodeMarker(nil, m)})
}

// errLandedInRecreated: a checkpoint's transaction committed (its outputs
// too, with exactly_once) into a changelog topic recreated since the
// previous one: the checkpoint stands, and the next writes the whole state.
var errLandedInRecreated = fmt.Errorf("the transaction landed in a recreated topic: %w", kafkaio.ErrRecreated)

// errChangelogTooBig: a key's learner exceeds the changelog topic's record
// limit.
var errChangelogTooBig = errors.New("changelog record above the topic's max.message.bytes")

// writeChangelog writes a checkpoint's changelog records in one
// transaction of the partition's transactional producer: a restore sees
// all of them or none, and nothing a fenced former owner writes is ever
// seen. It fails with kafkaio.ErrFenced (the partition has another owner),
// kafkaio.ErrRecreated (the topic was recreated: the partition is to be
// written anew), errChangelogTooBig, or another produce error (retriable
// or not: kafkaio.IsRetriable).
func (w *worker) writeChangelog(ctx context.Context, msgs []kafkaio.Record) error {
	limit := w.p.changelogLimit
	var n int64
	for _, m := range msgs {
		if size := len(m.Key) + len(m.Value) + recordOverhead; size > limit {
			return fmt.Errorf("%w: key %q of partition %d needs %d bytes, the limit is %d", errChangelogTooBig, m.Key[1:], w.part, size, limit)
		}
		n += int64(len(m.Value))
	}
	if !w.txnOpen { // open already with exactly-once outputs: they commit together
		if err := w.beginTxn(); err != nil {
			return fmt.Errorf("changelog %s/%d: %w", w.cfg.Changelog.Topic, w.part, err)
		}
	}
	var mu sync.Mutex
	var failed error
	done := func(_ *kafkaio.Record, err error) {
		if err != nil {
			mu.Lock()
			failed = cmp.Or(failed, err)
			mu.Unlock()
		}
	}
	for i := range msgs {
		w.txn.Produce(ctx, &msgs[i], done)
	}
	err := w.txn.Commit(ctx)
	w.txnOpen = false
	mu.Lock()
	if err != nil && failed != nil && !errors.Is(err, kafkaio.ErrFenced) && !errors.Is(err, kafkaio.ErrRecreated) {
		err = fmt.Errorf("%w (a record: %w)", err, failed)
	}
	mu.Unlock()
	if err != nil {
		return fmt.Errorf("changelog %s/%d: %w", w.cfg.Changelog.Topic, w.part, err)
	}
	if last := msgs[len(msgs)-1].Offset; last < w.markerOffset.Load() {
		// The marker landed below the last one: the topic was recreated
		// between two transactions. What this one wrote is there; the
		// rest of the state is not.
		w.markerOffset.Store(last)
		return fmt.Errorf("changelog %s/%d: marker at offset %d below the previous one: %w", w.cfg.Changelog.Topic, w.part, last, errLandedInRecreated)
	} else {
		w.markerOffset.Store(last)
	}
	w.p.c.changelogRecords.Add(int64(len(msgs)))
	w.p.c.changelogBytes.Add(n)
	return nil
}

// recordOverhead is what a record costs in a batch beyond its key and
// value (length, attributes, deltas, header count): the changelog topic's
// limit bounds the batch, and a batch holds at least one record.
const recordOverhead = 128

// skipped reports whether msg belongs to a key whose restored state already
// contains it (the key's bundle was newer than the marker resumed from).
func (w *worker) skipped(msg *kafkaio.Record, fromLabels bool) bool {
	s, ok := w.skip[string(msg.Key)]
	if !ok {
		return false
	}
	if fromLabels {
		return msg.Offset < s.lab
	}
	return msg.Offset < s.in
}

// skipDone drops the skip entries the partition has read past; checkpoints
// wait until none is left (a checkpoint's offsets must hold for every key).
func (w *worker) skipDone() bool {
	for k, s := range w.skip {
		if w.reached(s) {
			delete(w.skip, k)
		}
	}
	return len(w.skip) == 0
}

// reached reports whether the worker's position is at or past s (the
// labels offset counts only with a labels topic).
func (w *worker) reached(s changelogSkip) bool {
	return w.nextIn >= s.in && (w.cfg.LabelsTopic == "" || w.nextLab >= s.lab)
}

// produceAll produces recs and waits until every one is acknowledged; it
// returns the first failure.
func produceAll(ctx context.Context, kio kafkaio.Cluster, recs []kafkaio.Record) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	wg.Add(len(recs))
	done := func(_ *kafkaio.Record, err error) {
		if err != nil {
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
		}
		wg.Done()
	}
	for i := range recs {
		kio.Produce(ctx, &recs[i], done)
	}
	wg.Wait()
	return first
}
