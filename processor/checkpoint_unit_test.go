package processor

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/changelog"
	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/internal/kafkaio/kafkaiotest"
	"github.com/kernelstream/kernelstream/internal/wire"
)

// Checkpoint logic of one partition that needs no broker: what a
// checkpoint carries after abandoned ones, what a replay's skipped records
// do to the watermark, and the marker that rolls an idle partition's
// tombstones. The broker-level cases are in state_test.go.

// settle takes a checkpoint of the tester's partition and settles it as
// the background commit would have: written to Badger when err is nil,
// abandoned (or failed) with err otherwise.
func (ts *tester) settle(err error) *snapshot {
	ts.t.Helper()
	snap, e := ts.w.takeSnapshot()
	if e != nil {
		ts.t.Fatal(e)
	}
	if snap == nil {
		return nil
	}
	if err == nil {
		if e := ts.w.storeSnapshot(snap); e != nil {
			ts.t.Fatal(e)
		}
	}
	ts.w.ckptBusy = true
	if e := ts.w.complete(ckptResult{snap: snap, start: time.Now(), err: err}); e != nil {
		ts.t.Fatal(e)
	}
	return snap
}

// changelogKinds counts a snapshot's changelog records by kind.
func changelogKinds(t *testing.T, snap *snapshot) (bundles, pending, markers, tombstones int) {
	t.Helper()
	for _, m := range snap.changelog {
		if m.Value == nil {
			tombstones++
			continue
		}
		d, err := changelog.Decode(m.Key, m.Value)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case d.Marker != nil:
			markers++
		case d.Bundle != nil:
			bundles++
		case d.Pending != nil:
			pending++
		}
	}
	return
}

// TestAbandonedCheckpointsCarryEachKeyOnce: ten checkpoints of the same
// 50 keys are abandoned (Kafka unavailable); the eleventh writes each key
// once, not the 500 operations the carried snapshots add up to, and the
// state it stores is the uninterrupted run's.
func TestAbandonedCheckpointsCarryEachKeyOnce(t *testing.T) {
	t.Parallel()
	const keys, rounds = 50, 10
	ts := newTester(t, lmsSpec, func(c *Config) { c.MaxLearners = 2 * keys })
	ts.w.p.cfg.Changelog.Topic = "cl" // the tester has no broker to restore from
	var recs []testRecord
	for r := 0; r < rounds; r++ {
		for k := 0; k < keys; k++ {
			x := []float64{float64(k%7) / 7, float64(r) / rounds, 1}
			rec := testRecord{key: fmt.Sprintf("user-%d", k), value: string(wire.AppendLabeled(nil, fmt.Sprint(r), x, float64(k%3)))}
			recs = append(recs, rec)
			ts.consume(rec)
		}
		ts.settle(fmt.Errorf("%w: kafka unavailable", errAbandoned))
		if !ts.w.checkpointDue() {
			t.Fatal("an abandoned checkpoint is not due again until the partition gets a record")
		}
	}
	if n := ts.w.p.c.ckptAbandoned.Load(); n != rounds {
		t.Fatalf("%d checkpoints abandoned, want %d", n, rounds)
	}
	snap := ts.settle(nil)
	if n := len(snap.cp.Learners); n != keys {
		t.Errorf("the checkpoint after %d abandoned ones holds %d learner writes, want %d (one per key)", rounds, n, keys)
	}
	if b, _, m, _ := changelogKinds(t, snap); b != keys || m != 1 {
		t.Errorf("its changelog holds %d bundles and %d markers, want %d and 1", b, m, keys)
	}
	checkStates(t, replay(t, lmsSpec, recs, DefaultTopK), ts.close())
}

// TestSkippedRecordsMoveTheWatermark: after a restore whose changelog holds
// a key's bundle ahead of the marker (written by a checkpoint that did not
// complete, as a changelog of the pre-transaction layout may hold), the
// replay skips that key's records, but their event times still move the
// watermark: the pending entry they expire in the uninterrupted run
// expires in the replay too, and its late label is unknown in both
// instead of updating the learner in one.
func TestSkippedRecordsMoveTheWatermark(t *testing.T) {
	t.Parallel()
	tune := func(c *Config) { c.LabelsTTL = time.Second }
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const j, k = "user-1", "user-2"
	recs := []testRecord{{key: j, value: string(wire.AppendFeatures(nil, "a", []float64{1, 2, 3})), time: base}}
	for i := 1; i <= 5; i++ { // 10 s later: the label of "a" is overdue
		recs = append(recs, testRecord{key: k, value: string(wire.AppendLabeled(nil, fmt.Sprint(i), []float64{float64(i), 1, 0}, 1)),
			time: base.Add(10*time.Second + time.Duration(i)*time.Millisecond)})
	}
	// The late label: its own time would not expire "a"; the watermark does.
	recs = append(recs, testRecord{key: j, value: string(wire.AppendLabel(nil, "a", 5)), time: base.Add(500 * time.Millisecond)})

	// The uninterrupted run, checkpointed after the first record (the
	// marker) and after the fifth (whose bundle of k is kept, its marker
	// lost).
	run := newTester(t, lmsSpec, tune)
	run.w.p.cfg.Changelog.Topic = "cl"
	run.consume(recs[0])
	first := run.settle(nil)
	run.consume(recs[1:6]...)
	second := run.settle(nil)
	run.consume(recs[6])
	if u := run.w.p.Stats().UnknownLabels; u != 1 {
		t.Fatalf("the uninterrupted run counted %d unknown labels, want 1 (the test needs the expiry)", u)
	}
	want := storedStates(t, run.close())

	st := changelog.NewState()
	apply := func(ms []kafkaio.Record, keep func(changelog.Decoded) bool) {
		for i := range ms {
			d, err := changelog.Decode(ms[i].Key, ms[i].Value)
			if err != nil {
				t.Fatal(err)
			}
			if keep(d) {
				if err := st.Apply(&ms[i]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	apply(first.changelog, func(changelog.Decoded) bool { return true })
	apply(second.changelog, func(d changelog.Decoded) bool { return d.Bundle != nil && string(d.Routing) == k })

	restored := newTester(t, lmsSpec, tune)
	if err := restored.w.applyChangelog(st); err != nil {
		t.Fatal(err)
	}
	if err := restored.w.restore(-1, -1); err != nil {
		t.Fatal(err)
	}
	if restored.w.nextIn != 1 || !restored.w.skipped(&kafkaio.Record{Key: []byte(k), Offset: 1}, false) {
		t.Fatalf("restored at offset %d, skipping %v: the test needs k's bundle ahead of the marker at 1", restored.w.nextIn, restored.w.skip)
	}
	restored.next[tIn] = 1
	restored.consume(recs[1:]...)
	if u := restored.w.p.Stats().UnknownLabels; u != 1 {
		t.Errorf("the replay counted %d unknown labels, want 1 as the uninterrupted run", u)
	}
	got := storedStates(t, restored.close())
	for key, w := range want {
		if !bytes.Equal(got[key], w) {
			t.Errorf("key %s: the restored state (%d bytes) differs from the uninterrupted run's (%d bytes)", key, len(got[key]), len(w))
		}
	}
}

// TestIdlePartitionRollsItsTombstones: a checkpoint that writes tombstones
// is followed, half of changelog.max_compaction_lag later, by a marker
// even though the partition gets no further record, so that the segment
// holding them rolls (segment.ms) and compaction removes the erased key
// within max.compaction.lag.ms. Without it an idle partition's erasure
// waited for its next record, forever on an idle partition.
func TestIdlePartitionRollsItsTombstones(t *testing.T) {
	t.Parallel()
	const lag = 2 * time.Second
	ts := newTester(t, lmsSpec, nil)
	ts.w.p.cfg.Changelog.Topic = "cl"
	ts.w.p.cfg.Changelog.MaxCompactionLag = lag
	ts.consume(testRecord{key: "user-1", value: string(wire.AppendLabeled(nil, "a", []float64{1, 2, 3}, 1))})
	ts.settle(nil)
	ts.consume(testRecord{key: "user-1", value: `{"id":"b","delete":true}`})
	erasing := ts.settle(nil)
	if _, _, _, tomb := changelogKinds(t, erasing); tomb == 0 {
		t.Fatal("the erasing checkpoint wrote no tombstone")
	}
	if snap, err := ts.w.takeSnapshot(); err != nil || snap != nil {
		t.Fatalf("a checkpoint (%v, %v) before the roll is due: nothing changed", snap, err)
	}
	// A checkpoint before the roll is due does not roll the segment, and
	// one that is abandoned leaves the roll due.
	ts.consume(testRecord{key: "user-2", value: string(wire.AppendLabeled(nil, "a", []float64{3, 2, 1}, 1))})
	ts.settle(nil)
	time.Sleep(time.Until(ts.w.rollAt))
	if !ts.w.checkpointDue() {
		t.Fatal("the roll is no longer due after a checkpoint that came before it")
	}
	ts.settle(fmt.Errorf("%w: kafka unavailable", errAbandoned))
	if !ts.w.checkpointDue() {
		t.Fatal("the roll is no longer due after an abandoned checkpoint")
	}
	roll := ts.settle(nil)
	if roll == nil {
		t.Fatalf("no checkpoint %v after the tombstones on an idle partition", lag/2)
	}
	if b, p, m, tomb := changelogKinds(t, roll); b+p+tomb != 0 || m != 1 {
		t.Errorf("the rolling checkpoint wrote %d bundles, %d pending entries, %d tombstones and %d markers: want the marker only", b, p, tomb, m)
	}
	if snap, err := ts.w.takeSnapshot(); err != nil || snap != nil {
		t.Errorf("another checkpoint (%v, %v) after the roll: one marker is enough", snap, err)
	}
}

// TestStaleStandbyCopyIsDropped: a standby copy stopped reading longer ago
// than the changelog's delete.retention.ms, and meanwhile a key was erased
// and compaction removed its records, tombstone included. Taking over from
// the copy would bring the erased key back; the restore reads the
// changelog from its start instead.
func TestStaleStandbyCopyIsDropped(t *testing.T) {
	t.Parallel()
	const erased, kept = "user-1", "user-2"
	run := newTester(t, lmsSpec, nil)
	run.w.p.cfg.Changelog.Topic = "cl"
	run.consume(testRecord{key: erased, value: string(wire.AppendLabeled(nil, "a", []float64{1, 2, 3}, 1))},
		testRecord{key: kept, value: string(wire.AppendLabeled(nil, "a", []float64{3, 2, 1}, 2))})
	first := run.settle(nil)
	run.consume(testRecord{key: erased, value: `{"id":"b","delete":true}`})
	second := run.settle(nil)
	want := storedStates(t, run.close())
	if _, ok := want[erased]; ok || len(want) != 1 {
		t.Fatalf("the run stored %d learners: the test needs %s erased", len(want), erased)
	}

	// The copy read the first checkpoint; the log, compacted past
	// delete.retention.ms, keeps the newest record of every key but the
	// erased one (offsets renumbered: only their order matters here).
	copyState := changelog.NewState()
	newest := map[string]int{}
	all := append(append([]kafkaio.Record(nil), first.changelog...), second.changelog...)
	for i, m := range all {
		newest[string(m.Key)] = i
	}
	cl := &kafkaiotest.Cluster{}
	for i, m := range all {
		if i < len(first.changelog) {
			if err := copyState.Apply(&all[i]); err != nil {
				t.Fatal(err)
			}
		}
		if d, err := changelog.Decode(m.Key, m.Value); newest[string(m.Key)] == i && (err != nil || string(d.Routing) != erased) {
			cl.Append("cl", 0, m)
		}
		if i == len(first.changelog)-1 {
			copyState.Next = int64(len(cl.Records("cl")))
		}
	}

	restored := newTester(t, lmsSpec, nil)
	p := restored.w.p
	p.kio, p.cfg.Changelog.Topic, p.deleteRetention = cl, "cl", time.Minute
	p.standbys = map[int]*standbyCopy{0: {st: copyState, read: time.Now().Add(-time.Hour)}}
	if err := restored.w.restore(-1, -1); err != nil {
		t.Fatal(err)
	}
	got := storedStates(t, restored.close())
	if _, ok := got[erased]; ok {
		t.Errorf("the erased key %s came back from a stale standby copy", erased)
	}
	if !bytes.Equal(got[kept], want[kept]) {
		t.Errorf("key %s: restored state (%d bytes) differs from the run's (%d bytes)", kept, len(got[kept]), len(want[kept]))
	}
}

// TestChangelogBehindTheLocalStore: the changelog topic was recreated after
// the partition's last Badger checkpoint and then got one checkpoint's
// transaction (its keys and a marker newer than Badger's) before the
// member crashed ahead of that checkpoint's Badger commit. The restarted
// member must not restore that checkpoint's keys alone (and reset Badger
// under them), nor replay from Badger's checkpoint (with exactly_once,
// committing that checkpoint's predictions twice): Badger's state with the
// changelog's records over it is the newer checkpoint's, restored as such,
// and the next checkpoint writes all of it to the changelog.
func TestChangelogBehindTheLocalStore(t *testing.T) {
	t.Parallel()
	var recs []testRecord
	for k := 0; k < 4; k++ {
		recs = append(recs, testRecord{key: fmt.Sprintf("user-%d", k), value: string(wire.AppendLabeled(nil, "a", []float64{float64(k), 1, 2}, 1))})
	}
	later := []testRecord{
		{key: "user-0", value: string(wire.AppendLabeled(nil, "b", []float64{3, 2, 1}, 2))},
		{key: "user-1", value: string(wire.AppendFeatures(nil, "c", []float64{1, 1, 1}))}, // a pending entry
		{key: "user-2", value: `{"id":"d","delete":true}`},                                // a tombstone
	}
	run := newTester(t, lmsSpec, nil)
	run.w.p.cfg.Changelog.Topic = "cl"
	run.consume(recs...)
	run.settle(nil) // in Badger and in the old topic
	run.consume(later...)
	snap, err := run.w.takeSnapshot() // its transaction lands in the new topic; the member dies before Badger
	if err != nil || snap == nil {
		t.Fatal(snap, err)
	}
	dir := run.crash()

	cl := &kafkaiotest.Cluster{}
	cl.Append("cl", 0, snap.changelog...)
	restored := newTester(t, lmsSpec, func(c *Config) { c.CheckpointDir = dir })
	p := restored.w.p
	p.kio, p.cfg.Changelog.Topic, p.changelogLimit = cl, "cl", 1<<20
	txn, err := cl.Transactional("t")
	if err != nil {
		t.Fatal(err)
	}
	restored.w.txn = txn
	if err := restored.w.restore(-1, -1); err != nil {
		t.Fatal(err)
	}
	if want := int64(len(recs) + len(later)); restored.w.nextIn != want {
		t.Fatalf("resumed at offset %d, want %d (the newer checkpoint's)", restored.w.nextIn, want)
	}
	if !restored.w.rebuildChangelog {
		t.Fatal("the next checkpoint does not write the whole state to the changelog")
	}
	restored.w.groupBehind = true // a checkpoint with nothing new: the rebuild
	rebuild, err := restored.w.takeSnapshot()
	if err != nil || rebuild == nil || !rebuild.rebuild {
		t.Fatal(rebuild, err)
	}
	err = restored.w.commitSnapshot(context.Background(), noCommit{}, rebuild)
	restored.w.ckptBusy = true
	if cerr := restored.w.complete(ckptResult{snap: rebuild, start: time.Now(), err: err}); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	whole := newTester(t, lmsSpec, nil) // the uninterrupted run
	whole.consume(append(append([]testRecord(nil), recs...), later...)...)
	want, got := storedStates(t, whole.close()), storedStates(t, restored.close())
	if len(got) != len(want) {
		t.Errorf("%d learners restored, want %d", len(got), len(want))
	}
	for k, w := range want {
		if !bytes.Equal(got[k], w) {
			t.Errorf("key %s: restored state (%d bytes) differs from the uninterrupted run's (%d bytes)", k, len(got[k]), len(w))
		}
	}
	st := changelog.NewState()
	for _, m := range cl.Records("cl") {
		if err := st.Apply(&m); err != nil {
			t.Fatal(err)
		}
	}
	if len(st.Bundles) != len(want) || len(st.Pending) != 1 {
		t.Errorf("the changelog holds %d keys and %d pending entries after the rebuild, want %d and 1", len(st.Bundles), len(st.Pending), len(want))
	}
}

// crash closes the tester's store without a checkpoint, as a process
// killed between two checkpoints leaves it, and returns its directory.
func (ts *tester) crash() string {
	ts.t.Helper()
	ts.w.cache.release()
	ts.done = true
	if err := ts.store.Close(); err != nil {
		ts.t.Fatal(err)
	}
	return ts.dir
}

// noCommit is an offsetCommitter for a tester: there is no group.
type noCommit struct{}

func (noCommit) CommitOffsets(map[string]map[int]int64) error { return nil }

// TestCheckpointLandedInARecreatedChangelog: a checkpoint's transaction
// commits, but its marker lands below the previous one: the changelog
// topic was recreated in between. The transaction committed (with
// exactly_once, its predictions too), so the checkpoint stands: Badger
// takes it instead of the partition replaying (and committing those
// predictions again), flagged so that even a restart before the next
// checkpoint writes the whole state to the changelog.
func TestCheckpointLandedInARecreatedChangelog(t *testing.T) {
	t.Parallel()
	ts := newTester(t, lmsSpec, nil)
	cl := &kafkaiotest.Cluster{}
	p := ts.w.p
	p.kio, p.cfg.Changelog.Topic, p.changelogLimit = cl, "cl", 1<<20
	txn, err := cl.Transactional("t")
	if err != nil {
		t.Fatal(err)
	}
	ts.w.txn = txn
	recs := stream(3, 4, 3, 59)
	ts.consume(recs...)
	snap, err := ts.w.takeSnapshot()
	if err != nil || snap == nil {
		t.Fatal(snap, err)
	}
	ts.w.markerOffset.Store(1000) // the last marker, in the topic before it was recreated
	err = ts.w.commitSnapshot(context.Background(), noCommit{}, snap)
	ts.w.ckptBusy = true
	if cerr := ts.w.complete(ckptResult{snap: snap, start: time.Now(), err: err}); err != nil || cerr != nil {
		t.Fatalf("checkpoint: %v, %v: want it to stand", err, cerr)
	}
	if !ts.w.rebuildChangelog {
		t.Error("the next checkpoint does not write the whole state")
	}
	dir := ts.crash()
	restarted := newTester(t, lmsSpec, func(c *Config) { c.CheckpointDir = dir })
	if restarted.w.nextIn != int64(len(recs)) {
		t.Errorf("restarted at offset %d, want %d: the checkpoint did not stand", restarted.w.nextIn, len(recs))
	}
	if !restarted.w.rebuildChangelog {
		t.Error("a restart before the rebuild forgot that the changelog lacks the partition's state")
	}
}

// TestLargeChangesCheckpointEarly: a partition whose changes since its last
// snapshot approach one state-store transaction checkpoints before its
// interval is up (but not within its first quarter), and the count starts
// again at each snapshot; a learner changed twice counts once.
func TestLargeChangesCheckpointEarly(t *testing.T) {
	d := newDecisionBench(t, 20)
	w := d.w
	w.cfg.CheckpointInterval = 4 * time.Second
	for u := 0; u < 20; u++ {
		d.step(t, u)
	}
	if _, err := w.takeSnapshot(); err != nil { // every learner has its encoded size now
		t.Fatal(err)
	}
	if w.dirtyBytes != 0 {
		t.Fatalf("dirty bytes after a snapshot: %d", w.dirtyBytes)
	}
	d.step(t, 3)
	one := w.dirtyBytes
	if one <= slotOverhead {
		t.Fatalf("one learner's decision dirtied %d bytes, want its encoded size and more", one)
	}
	d.step(t, 3) // its reward and its next decision: the same learner
	if w.dirtyBytes != one {
		t.Fatalf("the same learner again: dirty bytes %d -> %d", one, w.dirtyBytes)
	}
	for _, c := range []struct {
		name  string
		cap   int
		since time.Duration
		want  bool
	}{
		{"no bound", 0, time.Hour, false},
		{"below the bound", 1 << 30, 3 * time.Second, false},
		{"above the bound", one, 3 * time.Second, true},
		{"above it within the interval's first quarter", one, 900 * time.Millisecond, false},
		{"above it after the first quarter", one, 1100 * time.Millisecond, true},
	} {
		w.ckptBytes, w.lastCkpt = c.cap, time.Now().Add(-c.since)
		if got := w.checkpointFull(); got != c.want {
			t.Errorf("%s: checkpointFull %v, want %v (dirty %d, pending %d)", c.name, got, c.want, w.dirtyBytes, len(w.pend.dirty))
		}
	}
	if _, err := w.takeSnapshot(); err != nil {
		t.Fatal(err)
	}
	if w.dirtyBytes != 0 || w.checkpointFull() {
		t.Fatalf("after the snapshot: dirty bytes %d, full %v", w.dirtyBytes, w.checkpointFull())
	}
}
