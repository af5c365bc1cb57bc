package processor

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernelstream/kernelstream/internal/wire"
)

// tally holds the counts a worker makes per record until publish adds them
// to the process counters (counters: atomics that every partition's worker,
// the emitters, /metrics and Stats share). Adding to them per record cost
// five to seven atomic read-modify-writes on cache lines that every core
// writes, 4 to 7 % of a record's CPU in the drain profile (docs/scale.md).
// The worker publishes its lag when its partition starts; then whenever it
// may wait (for records, or for a checkpoint in flight), at least every
// publishEvery records, and before it stops, so the counters lag the
// records by at most one chunk under load and not at all when it is idle.
type tally struct {
	records     [wire.NumKinds]int64
	replayed    int64
	predictions int64
	decisions   int64
	updates     int64
	rewards     int64
	lossCount   int64
	loss        float64
	reward      float64
	pending     int64 // net change of the pending entries
	lag         int64 // the partition's lag as last seen; worker.lag is the published one
	n           int   // records handled since the last publish
}

// published is the worker's side of the process counters and its gauges.
type published struct {
	tally       tally // per-record counts not yet published
	lag         int64 // last lag published to the counters
	lagGauge    prometheus.Gauge
	onDiskGauge prometheus.Gauge
	ckptGauge   prometheus.Gauge // partition_checkpointed_offset
}

// publishEvery is how many records a busy worker handles between publishes.
const publishEvery = 256

// publish adds the tally to the process counters and the lag gauge, then
// empties it.
func (w *worker) publish() {
	t := &w.tally
	c := &w.p.c
	for k, v := range t.records {
		if v != 0 {
			c.records[k].Add(v)
		}
	}
	addNonZero(&c.replayed, t.replayed)
	addNonZero(&c.predictions, t.predictions)
	addNonZero(&c.decisions, t.decisions)
	addNonZero(&c.updates, t.updates)
	addNonZero(&c.rewards, t.rewards)
	addNonZero(&c.lossCount, t.lossCount)
	addNonZero(&c.pending, t.pending)
	if t.lossCount != 0 {
		addFloat(&c.lossBits, t.loss)
	}
	if t.rewards != 0 {
		addFloat(&c.rewardBits, t.reward)
	}
	if t.lag != w.lag {
		if w.lagGauge != nil {
			w.lagGauge.Set(float64(t.lag))
		}
		c.lag.Add(t.lag - w.lag)
		w.lag = t.lag
	}
	*t = tally{lag: t.lag}
}

func addNonZero(a interface{ Add(int64) int64 }, v int64) {
	if v != 0 {
		a.Add(v)
	}
}
