package processor

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// TestRebalance (with the sticky balancer): a second member joins mid-stream (partitions move to it,
// and it rebuilds their state from the log by the gap replay), then the
// first leaves (everything moves to the second). At the end the second
// member's checkpoint holds every learner, equal to a direct replay, and
// every id has a prediction.
func TestRebalance(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("several group rebalances")
	}
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	recs := stream(9, 60, 3, 13)
	ref := replay(t, lmsSpec, recs, DefaultTopK)
	third := len(recs) / 3
	produce(t, addr, recs[:third])
	out := newConsumer(t, addr, tOut)
	cfgA := testConfig(t, addr, t.TempDir(), lmsSpec, nil)
	cfgA.GroupBalancers = []kafka.GroupBalancer{NewStickyBalancer("member-a"), kafka.RangeGroupBalancer{}}
	a := start(t, cfgA)
	out.waitFor(60*time.Second, "first predictions", atLeast(len(ref.yhat)/6))
	dirB := t.TempDir()
	cfgB := testConfig(t, addr, dirB, lmsSpec, nil)
	cfgB.GroupBalancers = []kafka.GroupBalancer{NewStickyBalancer("member-b"), kafka.RangeGroupBalancer{}}
	b := start(t, cfgB)
	deadline := time.Now().Add(60 * time.Second)
	for (len(b.p.Stats().Partitions) == 0 || len(a.p.Stats().Partitions) == 0) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	pa, pb := a.p.Stats().Partitions, b.p.Stats().Partitions
	if len(pa) == 0 || len(pb) == 0 {
		t.Fatalf("partitions not shared after the join: a %v, b %v", pa, pb)
	}
	t.Logf("after the join: a %v, b %v", pa, pb)
	produce(t, addr, recs[third:2*third])
	out.waitFor(60*time.Second, "two thirds of the predictions", atLeast(len(ref.yhat)/2))
	a.stop(t)
	produce(t, addr, recs[2*third:])
	waitDone(t, b, out, ref)
	b.stop(t)
	checkPredictions(t, ref, out.got)
	checkStates(t, ref, dirB)
	t.Logf("%d outputs for %d ids; b replayed %d records", len(out.got), len(ref.yhat), b.p.Stats().Replayed)
}

// TestMetrics runs a short stream and reads the Prometheus registry: the
// documented series exist and the counters moved.
func TestMetrics(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	recs := stream(3, 10, 3, 2)
	recs = append(recs, testRecord{key: "k", value: `not json`})
	produce(t, addr, recs)
	ref := replay(t, lmsSpec, recs, DefaultTopK)
	reg := prometheus.NewPedanticRegistry()
	cfg := testConfig(t, addr, t.TempDir(), lmsSpec, nil)
	cfg.Registerer = reg
	r := start(t, cfg)
	out := newConsumer(t, addr, tOut)
	waitDone(t, r, out, ref)
	deadline := time.Now().Add(10 * time.Second)
	for r.p.Stats().LearnersOnDisk < int64(len(ref.states)) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if st := r.p.Stats(); st.LearnersOnDisk != int64(len(ref.states)) || st.LearnersInMemory > int64(cfg.MaxLearners)+nParts {
		t.Errorf("learners on disk %d (want %d), in memory %d (cap %d)", st.LearnersOnDisk, len(ref.states), st.LearnersInMemory, cfg.MaxLearners)
	}
	defer r.stop(t)
	value := gathered(t, reg)
	for _, want := range []string{"records_total", "predictions_total", "updates_total", "dead_letters_total", "pending_labels",
		"pending_expired_total", "checkpoint_duration_seconds", "partition_lag_records", "input_to_prediction_seconds",
		"progressive_loss", "learners_in_memory", "learners_on_disk", "replayed_records_total", "numerical_rejections_total",
		"unknown_labels_total", "decisions_total", "checkpoints_total", "kernel_weight", "partition_offset",
		"partition_end_offset", "partition_checkpointed_offset", "failed_partitions", "state_disk_min_free_bytes",
		"checkpoint_learners_total", "checkpoint_learner_bytes_total"} {
		if _, ok := value["kernelstream_"+want]; !ok {
			t.Errorf("metric kernelstream_%s missing", want)
		}
	}
	for name, want := range map[string]float64{
		"kernelstream_predictions_total":                   float64(len(ref.yhat)),
		"kernelstream_dead_letters_total{reason=bad_json}": 1,
		"kernelstream_input_to_prediction_seconds":         float64(len(ref.yhat)),
		"kernelstream_records_total{kind=features}":        float64(r.p.Stats().Records["features"]),
	} {
		if value[name] != want {
			t.Errorf("%s = %v, want %v", name, value[name], want)
		}
	}
	// Every key's learner reached Badger in its final state (learners on
	// disk, above), so each was counted at least once, and its final
	// state's bytes (a stored value holds the state and more).
	finalBytes := 0
	for _, st := range ref.states {
		finalBytes += len(st)
	}
	if n, b := value["kernelstream_checkpoint_learners_total"], value["kernelstream_checkpoint_learner_bytes_total"]; n < float64(len(ref.states)) || b < float64(finalBytes) {
		t.Errorf("checkpoint_learners_total %v, checkpoint_learner_bytes_total %v: want at least %d learners, %d bytes", n, b, len(ref.states), finalBytes)
	}
	if value["kernelstream_checkpoint_duration_seconds"] == 0 || value["kernelstream_updates_total"] == 0 || value["kernelstream_progressive_loss"] == 0 {
		t.Errorf("counters did not move: %v", value)
	}
	t.Logf("%d series", len(value))
	// Per partition, sampled by the probe: the position reaches the end,
	// and a checkpoint covers it (the series the stall alerts compare).
	waitUntil(t, 10*time.Second, "every partition at its end and checkpointed there", func() bool {
		v, seen := gathered(t, reg), 0
		for p := 0; p < nParts; p++ {
			l := "{partition=" + itoa(p) + "}"
			end := v["kernelstream_partition_end_offset"+l]
			if end == 0 {
				continue
			}
			seen++
			if v["kernelstream_partition_offset"+l] != end || v["kernelstream_partition_checkpointed_offset"+l] != end {
				return false
			}
		}
		return seen > 0 && v["kernelstream_failed_partitions"] == 0
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// gathered reads reg into a map from name{label=value}... (and the bare
// name, summed over its series) to the value (a histogram's sample count).
func gathered(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	value := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			value[name] += v
			if name != mf.GetName() {
				value[mf.GetName()] += v
			}
		}
	}
	return value
}
