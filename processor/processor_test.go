package processor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

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
	for _, spec := range specs() {
		t.Run(spec.Algorithm, func(t *testing.T) {
			if err := spec.Validate(); err != nil {
				t.Skipf("%s does not build here: %v", spec.Algorithm, err)
			}
			c := startCluster(t, 0, "")
			defer c.Close()
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

// TestLabelsTopic: the delayed labels come on a co-partitioned labels topic;
// the merge by timestamp (input first on ties) gives the same order as the
// scenario, so the results equal the direct replay.
func TestLabelsTopic(t *testing.T) {
	c := startCluster(t, 0, "")
	defer c.Close()
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

// TestBadInput: malformed JSON, wrong dimension, NaN, wrong types, labels
// for unknown ids, a record without key and a 10 MB value go to the
// dead-letter topic (or are counted drops), unchanged with headers;
// processing continues and the learner state equals a replay of the good
// records only.
func TestBadInput(t *testing.T) {
	c := startCluster(t, 0, "")
	defer c.Close()
	addr := c.ListenAddrs()[0]
	big := `{"id":"big","x":[1,2,3],"pad":"` + strings.Repeat("z", 10<<20) + `"}`
	bad := []testRecord{
		{key: "k", value: `{"id":"b1","x":[1,2,3]`},             // bad_json
		{key: "k", value: `{"id":"b2","x":[1,2]}`},              // dimension
		{key: "k", value: `{"id":"b3","x":[1,NaN,3]}`},          // non_finite
		{key: "k", value: `{"id":"b4","x":[1,1e400,3]}`},        // non_finite
		{key: "k", value: `{"id":"b5","x":[1,"2",3]}`},          // wrong_type
		{key: "k", value: `{"id":"b6","y":"one"}`},              // wrong_type
		{key: "", value: `{"id":"b7","x":[1,2,3]}`},             // no_key
		{key: "k", value: big},                                  // oversized
		{key: "k", value: `{"x":[1,2,3]}`},                      // missing_field
		{key: "k", value: `{"id":"nobody","y":1}`},              // unknown label: counted drop
		{key: "k", value: `{"id":"g0","reward":1,"arm":"zzz"}`}, // reward with an arm for a plain prediction
	}
	var recs []testRecord
	good := stream(2, 12, 3, 5)
	for i, g := range good {
		recs = append(recs, g)
		if i < len(bad) {
			recs = append(recs, bad[i])
		}
	}
	produce(t, addr, recs)
	spec := lmsSpec
	ref := replay(t, spec, good, DefaultTopK)
	dir := t.TempDir()
	r := start(t, testConfig(t, addr, dir, spec, nil))
	out := newConsumer(t, addr, tOut)
	dlq := newConsumer(t, addr, tDLQ)
	outs := waitDone(t, r, out, ref)
	dead := dlq.waitFor(60*time.Second, "dead letters", atLeast(9))
	r.stop(t)
	checkPredictions(t, ref, outs)
	checkStates(t, ref, dir)
	reasons := map[string]int{}
	for _, d := range dead {
		reasons[d.headers[headerReason]]++
		if d.headers[headerTopic] != tIn || d.headers[headerOffset] == "" || d.headers[headerPartition] == "" || d.headers[headerError] == "" {
			t.Errorf("dead letter without source headers: %v", d.headers)
		}
		found := false
		for _, b := range bad {
			found = found || string(d.value) == b.value
		}
		if !found {
			t.Errorf("dead letter value changed (%d bytes, omitted=%q)", len(d.value), d.headers[headerOmitted])
		}
	}
	want := map[string]int{"bad_json": 1, "dimension": 1, "non_finite": 2, "wrong_type": 2, "no_key": 1, "oversized": 1, "missing_field": 1}
	for k, n := range want {
		if reasons[k] != n {
			t.Errorf("dead letters %s = %d, want %d (all: %v)", k, reasons[k], n, reasons)
		}
	}
	st := r.p.Stats()
	if st.UnknownLabels != 2 || st.DeadLetters["oversized"] != 1 {
		t.Errorf("stats: unknown labels %d, dead %v", st.UnknownLabels, st.DeadLetters)
	}
}

// TestRestart stops the processor mid-stream (context cancel) and restarts
// it on the same Badger directory; then a member with an empty disk takes
// the partitions over (the gap replay of DESIGN.md). Final states equal an
// uninterrupted run, every id has a prediction, and the checkpoints are
// forced through the staged (multi-transaction) path.
func TestRestart(t *testing.T) {
	c := startCluster(t, 0, "")
	defer c.Close()
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

// TestDecisions: `arms` records answered by a bandit learner (Choose, the
// reward Observed through the pending map) and by a regression learner
// (top-k ranking, the reward of a named arm applied by Update), equal to a
// direct replay.
func TestDecisions(t *testing.T) {
	bandit := models.Spec{Algorithm: "ptest-ucb", Dim: 3, Seed: 11}
	if _, ok := models.Lookup("gp-ucb"); ok {
		gp := models.Spec{Algorithm: "gp-ucb", Dim: 3, Kernel: models.KernelSpec{Type: "gaussian", Sigma: 1}, Seed: 11}
		if l, err := models.New(gp, "k"); err == nil {
			if _, isBandit := l.(models.Bandit); isBandit {
				bandit = gp
			}
		}
	}
	for _, spec := range []models.Spec{bandit, lmsSpec} {
		t.Run(spec.Algorithm, func(t *testing.T) {
			c := startCluster(t, 0, "")
			defer c.Close()
			addr := c.ListenAddrs()[0]
			rng := models.NewRand(3)
			var recs []testRecord
			for i := 0; i < 30; i++ {
				for k := 0; k < 3; k++ {
					key := fmt.Sprintf("u%d", k)
					var arms []string
					for a := 0; a < 6; a++ {
						arms = append(arms, fmt.Sprintf(`{"id":"item%d","x":[%g,%g,%g]}`, a, rng.Float64(), rng.Float64(), float64(a)/6))
					}
					id := fmt.Sprintf(`"d%d"`, i)
					recs = append(recs, testRecord{key: key, value: `{"id":` + id + `,"arms":[` + strings.Join(arms, ",") + `]}`})
					if i%4 != 3 {
						reward := fmt.Sprintf("%g", rng.Float64())
						if spec.Algorithm == lmsSpec.Algorithm && i%2 == 1 {
							recs = append(recs, testRecord{key: key, value: `{"id":` + id + `,"reward":` + reward + `,"arm":"item0"}`})
						} else {
							recs = append(recs, testRecord{key: key, value: `{"id":` + id + `,"reward":` + reward + `}`})
						}
					}
				}
			}
			produce(t, addr, recs)
			ref := replay(t, spec, recs, 3)
			dir := t.TempDir()
			cfg := testConfig(t, addr, dir, spec, nil)
			cfg.TopK = 3
			r := start(t, cfg)
			out := newConsumer(t, addr, tOut)
			outs := waitDone(t, r, out, ref)
			r.stop(t)
			checkPredictions(t, ref, outs)
			checkStates(t, ref, dir)
			for id, o := range distinctIDs(outs) {
				if d, ok := ref.dec[id]; ok {
					if o.Arm == nil || o.UCB == nil || *o.UCB != d.UCB || o.Std == nil || *o.Std != d.Std {
						t.Errorf("%s: decision %s, want arm %d ucb %v", id, o.value, d.Arm, d.UCB)
					}
				}
				if want, ok := ref.rank[id]; ok {
					got, _ := json.Marshal(o.Ranking)
					if string(got) != "["+strings.Join(want, ",")+"]" {
						t.Errorf("%s: ranking %s, want %v", id, got, want)
					}
				}
			}
			if st := r.p.Stats(); st.Decisions != int64(len(ref.yhat)) || st.Rewards == 0 {
				t.Errorf("stats: %+v", st)
			}
		})
	}
}

// TestCrashRestart "kills" the processor four times mid-stream (the final
// checkpoint skipped, as after SIGKILL; a checkpoint in flight may land or
// not) and restarts it on the same directory each time; then a clean run
// finishes the stream. The states equal the direct replay and every id has
// a prediction; the outputs of the records since each last checkpoint are
// emitted again (at least once).
func TestCrashRestart(t *testing.T) {
	c := startCluster(t, 0, "")
	defer c.Close()
	addr := c.ListenAddrs()[0]
	recs := stream(8, 90, 3, 17)
	ref := replay(t, lmsSpec, recs, DefaultTopK)
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

// TestOversizedDeadLetterRefused: when the dead-letter topic refuses an
// oversized value (its max.message.bytes is smaller), the dead letter is
// sent without its value, with a header giving the original size, and
// processing goes on.
func TestOversizedDeadLetterRefused(t *testing.T) {
	c := startCluster(t, 0, "")
	defer c.Close()
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
	r := start(t, cfg)
	out := newConsumer(t, addr, tOut)
	dlq := newConsumer(t, addr, "dlq-small")
	waitDone(t, r, out, ref)
	dead := dlq.waitFor(30*time.Second, "the dead letter", atLeast(1))
	r.stop(t)
	d := dead[0]
	if len(d.value) != 0 || d.headers[headerOmitted] != fmt.Sprint(len(big)) || d.headers[headerReason] != "oversized" {
		t.Fatalf("dead letter: %d bytes, headers %v", len(d.value), d.headers)
	}
	checkPredictions(t, ref, out.got)
}
