package processor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

var lmsSpec = models.Spec{Algorithm: "ptest-lms", Dim: 3, Seed: 7, Params: map[string]any{"eta": 0.3}}

// specs returns the learners the equivalence test runs: the test learner,
// and kogd when it is registered (a real kernel learner).
func specs() []models.Spec {
	out := []models.Spec{lmsSpec}
	if _, ok := models.Lookup("kogd"); ok {
		out = append(out, models.Spec{Algorithm: "kogd", Dim: 3, Kernel: models.KernelSpec{Type: "gaussian", Sigma: 1}, Seed: 3})
	}
	return out
}

// TestEquivalence: per key, the predictions on the output topic and the
// checkpointed learner states equal a direct replay of the key's records
// through models.New(spec, key), with labels inline and delayed.
func TestEquivalence(t *testing.T) {
	t.Parallel()
	for _, spec := range specs() {
		t.Run(spec.Algorithm, func(t *testing.T) {
			if err := spec.Validate(); err != nil {
				t.Skipf("%s does not build here: %v", spec.Algorithm, err)
			}
			c := startCluster(t, 0, "")
			addr := c.ListenAddrs()[0]
			recs := stream(6, 40, 3, 1)
			produce(t, addr, recs)
			ref := replay(t, spec, recs, DefaultTopK)
			dir := t.TempDir()
			r := start(t, testConfig(t, addr, dir, spec, nil))
			out := newConsumer(t, addr, tOut)
			outs := waitDone(t, r, out, ref)
			r.stop(t)
			checkPredictions(t, ref, outs)
			checkStates(t, ref, dir)
			st := r.p.Stats()
			if st.Predictions != int64(len(ref.yhat)) || st.DeadLetters["bad_json"] != 0 || st.Updates == 0 {
				t.Errorf("stats: %+v", st)
			}
			t.Logf("%d predictions, %d updates, %d pending, progressive loss %.4g", st.Predictions, st.Updates, st.Pending, st.ProgressiveLoss)
		})
	}
}

// TestBackpressureOnHeldLearners: with far more keys than learners in
// memory, every record evicts a learner whose blob is held until a
// checkpoint writes it; a partition stops reading while twice
// CheckpointMaxRecords blobs are held behind the checkpoint in flight. The
// waits happen, and nothing changes in what is computed.
func TestBackpressureOnHeldLearners(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	recs := stream(150, 3, 3, 9) // 150 keys in rotation: every lookup a miss
	produce(t, addr, recs)
	ref := replay(t, lmsSpec, recs, DefaultTopK)
	dir := t.TempDir()
	cfg := testConfig(t, addr, dir, lmsSpec, nil)
	cfg.MaxLearners, cfg.CheckpointMaxRecords = 2, 5
	r := start(t, cfg)
	out := newConsumer(t, addr, tOut)
	outs := waitDone(t, r, out, ref)
	r.stop(t)
	checkPredictions(t, ref, outs)
	checkStates(t, ref, dir)
	if r.p.c.ckptWaitNanos.Load() == 0 {
		t.Error("no partition waited for a checkpoint with 10 evicted learners held behind it")
	}
	t.Logf("waited %v for checkpoints in flight; %d checkpoints", time.Duration(r.p.c.ckptWaitNanos.Load()), r.p.c.checkpoints.Load())
}

// TestLabelsTopic: the delayed labels come on a co-partitioned labels topic;
// the merge by timestamp (input first on ties) gives the same order as the
// scenario, so the results equal the direct replay.
func TestLabelsTopic(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	recs := stream(6, 40, 3, 4)
	for i := range recs {
		if !strings.Contains(recs[i].value, `"x"`) {
			recs[i].topic = tLabels
		}
	}
	produce(t, addr, recs)
	ref := replay(t, lmsSpec, recs, DefaultTopK)
	dir := t.TempDir()
	cfg := testConfig(t, addr, dir, lmsSpec, nil)
	cfg.LabelsTopic = tLabels
	r := start(t, cfg)
	out := newConsumer(t, addr, tOut)
	outs := waitDone(t, r, out, ref)
	// wait until the labels are applied too
	deadline := time.Now().Add(30 * time.Second)
	for r.p.Stats().Records["label"] < int64(len(recs)-len(ref.yhat)) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	r.stop(t)
	checkPredictions(t, ref, outs)
	checkStates(t, ref, dir)
}

// TestRestart stops the processor mid-stream (context cancel) and restarts
// it on the same Badger directory; then a member with an empty disk takes
// the partitions over (the gap replay of docs/pipeline.md). Final states equal an
// uninterrupted run, every id has a prediction, and the checkpoints are
// forced through the staged (multi-transaction) path.
func TestRestart(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	recs := stream(8, 60, 3, 9)
	produce(t, addr, recs[:len(recs)/2])
	spec := lmsSpec
	ref := replay(t, spec, recs, DefaultTopK)
	dir := t.TempDir()
	cfg := testConfig(t, addr, dir, spec, nil)
	cfg.checkpointTxnBytes = 600 // every checkpoint spans several Badger transactions
	cfg.MaxLearners = 1          // constant eviction and read-back, around checkpoints in flight
	out := newConsumer(t, addr, tOut)

	r := start(t, cfg)
	out.waitFor(60*time.Second, "a third of the predictions", func(rs []outRecord) bool { return len(distinctIDs(rs)) >= len(ref.yhat)/3 })
	r.stop(t)
	first := r.p.Stats()
	r = start(t, cfg)
	produce(t, addr, recs[len(recs)/2:])
	waitDone(t, r, out, ref)
	r.stop(t)
	if r.p.staged.Load() == 0 {
		t.Error("no checkpoint took the staged path")
	}
	checkPredictions(t, ref, out.got)
	checkStates(t, ref, dir)
	t.Logf("first run %d predictions; total output %d for %d ids; staged commits %d", first.Predictions, len(out.got), len(ref.yhat), r.p.staged.Load())

	// A member with an empty disk rebuilds every learner from the log
	// without emitting anything.
	before := len(out.got)
	cfg.CheckpointDir = t.TempDir()
	r = start(t, cfg)
	deadline := time.Now().Add(60 * time.Second)
	for r.p.Stats().Replayed < int64(countInput(recs)) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	r.stop(t)
	if got := r.p.Stats(); got.Replayed != int64(countInput(recs)) || got.Predictions != 0 {
		t.Errorf("empty-disk member: replayed %d of %d, emitted %d", got.Replayed, countInput(recs), got.Predictions)
	}
	out.waitFor(2*time.Second, "", func([]outRecord) bool { return true })
	if len(out.got) != before {
		t.Errorf("the gap replay emitted %d predictions", len(out.got)-before)
	}
	checkStates(t, ref, cfg.CheckpointDir)
}

func countInput(recs []testRecord) int {
	n := 0
	for _, r := range recs {
		if r.topic == "" || r.topic == tIn {
			n++
		}
	}
	return n
}

// TestCrashRestart "kills" the processor four times mid-stream (the final
// checkpoint skipped, as after SIGKILL; a checkpoint in flight may land or
// not) and restarts it on the same directory each time; then a clean run
// finishes the stream. The states equal the direct replay and every id has
// a prediction; the outputs of the records since each last checkpoint are
// emitted again (at least once).
func TestCrashRestart(t *testing.T) {
	t.Parallel()
	addr, recs, ref := crashScenario(t)
	dir := t.TempDir()
	cfg := testConfig(t, addr, dir, lmsSpec, nil)
	cfg.CheckpointMaxRecords = 40
	cfg.MaxLearners = 2
	out := newConsumer(t, addr, tOut)
	chunk := len(recs) / 5
	for i := 0; i < 4; i++ {
		produce(t, addr, recs[i*chunk:(i+1)*chunk])
		crash := cfg
		crash.crashOnStop = true
		r := start(t, crash)
		out.waitFor(60*time.Second, "progress", atLeast(len(out.got)+chunk/4))
		r.stop(t)
	}
	produce(t, addr, recs[4*chunk:])
	crashed := len(out.got)
	r := start(t, cfg)
	waitDone(t, r, out, ref)
	r.stop(t)
	checkPredictions(t, ref, out.got)
	checkStates(t, ref, dir)
	t.Logf("%d outputs for %d ids (%d during the crashed runs)", len(out.got), len(ref.yhat), crashed)
}

// crashScenario is the stream of the crash tests on a broker of its own,
// and its direct replay.
func crashScenario(t *testing.T) (addr string, recs []testRecord, ref reference) {
	c := startCluster(t, 0, "")
	recs = stream(8, 90, 3, 17)
	return c.ListenAddrs()[0], recs, replay(t, lmsSpec, recs, DefaultTopK)
}

// TestOversizedDeadLetterRefused: when the dead-letter topic would refuse
// an oversized value (its max.message.bytes is smaller), the dead letter
// is sent without its value, with a header giving the original size, and
// processing goes on. With exactly_once outputs a refused dead letter
// would fail the transaction, again at every restart of the partition.
func TestOversizedDeadLetterRefused(t *testing.T) {
	t.Parallel()
	for _, delivery := range OutputDeliveries {
		t.Run(delivery, func(t *testing.T) {
			t.Parallel()
			c := startCluster(t, 0, "")
			addr := c.ListenAddrs()[0]
			if err := c.CreateTopic("dlq-small", nParts, map[string]string{"max.message.bytes": "1048576"}); err != nil {
				t.Fatal(err)
			}
			big := `{"id":"big","x":[1,2,3],"pad":"` + strings.Repeat("z", 3<<20) + `"}`
			good := stream(1, 3, 3, 8)
			recs := append([]testRecord{{key: "user-0", value: big}}, good...)
			produce(t, addr, recs)
			ref := replay(t, lmsSpec, good, DefaultTopK)
			cfg := testConfig(t, addr, t.TempDir(), lmsSpec, nil)
			cfg.DLQTopic = "dlq-small"
			cfg.Compression = "none"
			if delivery == "exactly_once" {
				cfg.OutputDelivery, cfg.Changelog.Topic = delivery, "cl"
			}
			r := start(t, cfg)
			out := newCommittedConsumer(t, addr, tOut)
			dlq := newCommittedConsumer(t, addr, "dlq-small")
			waitDone(t, r, out, ref)
			dead := dlq.waitFor(30*time.Second, "the dead letter", atLeast(1))
			if f := r.p.Failed(); len(f) > 0 || r.p.c.restarts.Load() > 0 {
				t.Errorf("failed %v, %d restarts", f, r.p.c.restarts.Load())
			}
			r.stop(t)
			d := dead[0]
			if len(d.value) != 0 || d.headers[wire.HeaderOmitted] != fmt.Sprint(len(big)) || d.headers[wire.HeaderReason] != "oversized" {
				t.Fatalf("dead letter: %d bytes, headers %v", len(d.value), d.headers)
			}
			checkPredictions(t, ref, out.got)
		})
	}
}
