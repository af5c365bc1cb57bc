package processor

import (
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/checkpoint"
)

// TestCrashRestartChangelogOnlyCheckpoints: with a changelog, up to two of
// every three checkpoints go to the changelog only (CheckpointStoreEvery 3;
// a partition's first after a restore goes to Badger), and
// two learners in memory for eight keys make most of them read back from
// the blobs waiting for Badger. A member is killed four times mid-stream
// (no final checkpoint: Badger is left behind the changelog) and restarted
// on the same directory, each restart restoring from the changelog; then a
// clean run finishes the stream. The states in Badger after its revoke's
// final checkpoint, and those a member with an empty disk restores from the
// changelog, equal the direct replay's, and every id has a prediction.
func TestCrashRestartChangelogOnlyCheckpoints(t *testing.T) {
	t.Parallel()
	addr, recs, ref := crashScenario(t)
	dir := t.TempDir()
	cfg := changelogConfig(t, addr, dir)
	// Checkpoints by count only, every 4 records of a partition: none
	// comes by time to write an idle partition's backlog before the kill.
	cfg.CheckpointStoreEvery, cfg.CheckpointMaxRecords, cfg.CheckpointInterval, cfg.MaxLearners = 3, 4, time.Hour, 2
	out := newConsumer(t, addr, tOut)
	part := len(recs) / 20 // four runs of four parts, then the rest
	var ckpts, storeWrites, restores int64
	for i := 0; i < 4; i++ {
		crash := cfg
		crash.crashOnStop = true
		r := start(t, crash)
		// The run's records in four parts, each checkpointed before the
		// next is written: a checkpoint takes whatever was processed.
		for j := 0; j < 4; j++ {
			from := (4*i + j) * part
			produce(t, addr, recs[from:from+part])
			waitUntil(t, 60*time.Second, "a checkpoint of the part", func() bool { return r.p.Stats().Checkpoints >= int64(2*j+2) })
		}
		r.stop(t)
		st := r.p.Stats()
		ckpts, storeWrites, restores = ckpts+st.Checkpoints, storeWrites+st.StoreWrites, restores+r.p.c.restores.Load()
	}
	if storeWrites >= ckpts || restores == 0 {
		t.Fatalf("killed runs: %d checkpoints, %d of them written to Badger, %d restores from the changelog: want some to the changelog only, and a restore", ckpts, storeWrites, restores)
	}
	produce(t, addr, recs[16*part:])
	r := start(t, cfg)
	waitDone(t, r, out, ref)
	r.stop(t)
	checkPredictions(t, ref, out.got)
	checkStates(t, ref, dir)
	checkStates(t, ref, restoreFresh(t, addr, int64(partitionsOf(recs))))
	t.Logf("killed runs: %d checkpoints, %d Badger writes, %d restores", ckpts, storeWrites, restores)
}

// TestStoreTurnsSpread: with CheckpointStoreEvery 6, each of a member's
// first four partitions writes Badger at a checkpoint of the cycle of its
// own (by sequence number), so that their writes do not come within one
// interval; a backlog of five checkpoints goes to Badger at the next
// whatever the phase.
func TestStoreTurnsSpread(t *testing.T) {
	turns := map[uint64]int{} // sequence number within the cycle -> partition
	for part := 0; part < 4; part++ {
		w := &worker{part: part, cfg: &Config{CheckpointStoreEvery: 6}}
		n := 0
		for seq := uint64(1); seq <= 6; seq++ {
			if w.ckptSeq = seq; w.storeTurn() {
				if other, ok := turns[seq]; ok {
					t.Errorf("partitions %d and %d both write Badger at checkpoint %d of the cycle", other, part, seq)
				}
				turns[seq] = part
				n++
			}
		}
		if n != 1 {
			t.Errorf("partition %d: %d Badger turns in a cycle of 6, want 1", part, n)
		}
		w.backlog.checkpoints = 5 // five checkpoints wait: the next goes to Badger, its turn or not
		for seq := uint64(1); seq <= 6; seq++ {
			if w.ckptSeq = seq; !w.storeTurn() {
				t.Errorf("partition %d: a backlog of 5 checkpoints does not go to Badger at checkpoint %d", part, seq)
			}
		}
	}
}

// TestBacklogBytes: the backlog's size, which bounds it (storeBacklogBytes),
// counts each key's newest change once, however many checkpoints changed it.
func TestBacklogBytes(t *testing.T) {
	cp := func(ops ...checkpoint.Op) *checkpoint.Checkpoint {
		return &checkpoint.Checkpoint{Pending: ops, Meta: []byte("m")}
	}
	op := func(k, v string) checkpoint.Op {
		var val []byte
		if v != "" {
			val = []byte(v)
		}
		return checkpoint.Op{Key: []byte(k), Value: val}
	}
	for _, c := range []struct {
		name string
		cps  []*checkpoint.Checkpoint
		want int
	}{
		{"one change", []*checkpoint.Checkpoint{cp(op("ab", "xyz"))}, 5},
		{"two keys", []*checkpoint.Checkpoint{cp(op("ab", "xyz"), op("c", "d"))}, 7},
		{"a key changed again", []*checkpoint.Checkpoint{cp(op("ab", "xyz")), cp(op("ab", "x"))}, 3},
		{"a key deleted after", []*checkpoint.Checkpoint{cp(op("ab", "xyz")), cp(op("ab", ""))}, 2},
	} {
		var b storeBacklog
		for _, cp := range c.cps {
			b.add(cp)
		}
		if b.bytes != c.want || b.checkpoints != len(c.cps) {
			t.Errorf("%s: bytes %d, checkpoints %d; want %d, %d", c.name, b.bytes, b.checkpoints, c.want, len(c.cps))
		}
	}
}
