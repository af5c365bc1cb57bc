package processor

import (
	"math"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/wire"
)

// metrics are the Prometheus series of docs/pipeline.md. Counters that Stats
// also reports are read from the shared atomics by CounterFuncs, so there is
// one source of truth.
type metrics struct {
	latency       prometheus.Histogram
	checkpointDur prometheus.Histogram
	lag           *prometheus.GaugeVec
	onDisk        *prometheus.GaugeVec
	kernelWeight  *prometheus.GaugeVec
	restoreSecs   *prometheus.GaugeVec
	restoreRecs   *prometheus.GaugeVec
	standbyLag    *prometheus.GaugeVec
	position      *prometheus.GaugeVec
	end           *prometheus.GaugeVec
	checkpointed  *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer, c *counters, model string, minFreeBytes int64) *metrics {
	m := &metrics{
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "kernelstream", Name: "input_to_prediction_seconds",
			Help:    "Time from the input record's timestamp to the acknowledgement of its prediction.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		checkpointDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "kernelstream", Name: "checkpoint_duration_seconds",
			Help:    "Duration of one partition checkpoint (acks wait, Badger write, group commit).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kernelstream", Name: "partition_lag_records",
			Help: "The log end (last stable offset under read_committed) minus the next offset to process, per input partition.",
		}, []string{"partition"}),
		onDisk: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kernelstream", Name: "learners_on_disk",
			Help: "Learners stored in Badger per partition (counted at restore and checkpoint).",
		}, []string{"partition"}),
		kernelWeight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kernelstream", Name: "kernel_weight",
			Help: "Kernel weights of the most recently updated learner of a partition, when the learner exposes them.",
		}, []string{"partition", "kernel"}),
		restoreSecs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kernelstream", Name: "changelog_restore_seconds",
			Help: "Duration of the partition's last restore from the changelog (read to its end, pending entries written).",
		}, []string{"partition"}),
		restoreRecs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kernelstream", Name: "changelog_restore_records",
			Help: "Changelog records read by the partition's last restore.",
		}, []string{"partition"}),
		standbyLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kernelstream", Name: "changelog_standby_lag_records",
			Help: "Changelog records not yet read by this member's standby copy of the partition.",
		}, []string{"partition"}),
		// Per partition, so that an alert sees one stuck partition that the
		// sums of a busy member would hide.
		position: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kernelstream", Name: "partition_offset",
			Help: "The next input offset the partition processes, sampled every second with partition_end_offset.",
		}, []string{"partition"}),
		end: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kernelstream", Name: "partition_end_offset",
			Help: "The input partition's end (last stable offset under read_committed), sampled every second.",
		}, []string{"partition"}),
		checkpointed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kernelstream", Name: "partition_checkpointed_offset",
			Help: "The input offset of the partition's last committed checkpoint, where a restart resumes (0 before its first).",
		}, []string{"partition"}),
	}
	if reg == nil {
		return m
	}
	counterVec := func(name, help, label string, names []string, get func(i int) float64) {
		for i, n := range names {
			i := i
			reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
				Namespace: "kernelstream", Name: name, Help: help, ConstLabels: prometheus.Labels{label: n},
			}, func() float64 { return get(i) }))
		}
	}
	counter := func(name, help string, get func() float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "kernelstream", Name: name, Help: help}, get))
	}
	gauge := func(name, help string, get func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "kernelstream", Name: name, Help: help}, get))
	}
	counterVec("records_total", "Input records by kind, each once: its kind when used, dead when dead-lettered.", "kind", wire.KindNames(), func(i int) float64 { return float64(c.records[i].Load()) })
	counterVec("dead_letters_total", "Records sent to the dead-letter topic, by reason.", "reason", wire.ReasonNames(), func(i int) float64 { return float64(c.dead[i].Load()) })
	counterVec("pending_expired_total", "Pending predictions dropped without a label, by cause.", "cause", expiryNames[:], func(i int) float64 { return float64(c.expired[i].Load()) })
	counter("predictions_total", "Predictions and decisions queued for the output topic (see predictions_acked_total).", func() float64 { return float64(c.predictions.Load()) })
	counter("predictions_acked_total", "Predictions and decisions acknowledged by the brokers.", func() float64 { return float64(c.acked.Load()) })
	counter("wrong_partition_records_total", "Records whose key belongs to another partition under murmur2.", func() float64 { return float64(c.wrongPart.Load()) })
	counterVec("quarantined_total", "Undecodable stored state set aside: a key's learner (its records dead-lettered) or a pending entry.", "what", quarantineNames[:], func(i int) float64 { return float64(c.quarantined[i].Load()) })
	counter("learner_panics_total", "Records on which a learner panicked (record dead-lettered, learner restored).", func() float64 { return float64(c.panics.Load()) })
	counterVec("offset_resets_total", "Resume offsets out of the log's range, by the policy applied.", "policy", resetNames[:], func(i int) float64 { return float64(c.resets[i].Load()) })
	counter("log_truncations_total", "Log truncations detected under a position being read (KIP-320); reading went on where the log diverged.", func() float64 { return float64(c.truncations.Load()) })
	gauge("failed_partitions", "Partitions of this member stopped now by a non-retriable error (until the next rebalance or restart).", func() float64 { return float64(c.failedNow.Load()) })
	counter("failed_partitions_total", "Partitions stopped by a non-retriable error (the processor is then not ready).", func() float64 { return float64(c.failed.Load()) })
	counter("decisions_total", "Decisions (answers to arms records) emitted.", func() float64 { return float64(c.decisions.Load()) })
	counter("updates_total", "Learner updates applied.", func() float64 { return float64(c.updates.Load()) })
	counter("unknown_labels_total", "Labels or rewards whose id was not pending.", func() float64 { return float64(c.unknown.Load()) })
	counter("numerical_rejections_total", "Updates refused by the numerical guard (state kept, record dead-lettered).", func() float64 { return float64(c.numerical.Load()) })
	counter("replayed_records_total", "Input records replayed without emitting to rebuild state.", func() float64 { return float64(c.replayed.Load()) })
	counter("checkpoints_total", "Partition checkpoints committed.", func() float64 { return float64(c.checkpoints.Load()) })
	gauge("state_disk_free_bytes", "Free space of the checkpoint directory's file system at the last check (-1 unknown); below checkpoint.min_free_mib the partitions stop (not ready).", func() float64 { return float64(c.disk.free.Load()) })
	gauge("state_disk_min_free_bytes", "checkpoint.min_free_mib in bytes: the free space below which the partitions stop.", func() float64 { return float64(minFreeBytes) })
	counter("partition_restarts_total", "Partitions restarted from their last checkpoint (output.delivery exactly_once) after a transaction that did not commit; its outputs were aborted and are predicted again.", func() float64 { return float64(c.restarts.Load()) })
	counter("checkpoint_learners_total", "Learner states written by committed checkpoints (each changed learner once per checkpoint).", func() float64 { return float64(c.ckptLearners.Load()) })
	counter("checkpoint_learner_bytes_total", "Bytes of those states: their rate is what the changelog writes for the learners (the state store writes each at most once per checkpoint.store_every checkpoints); divided by checkpoint_learners_total, a state's mean size.", func() float64 { return float64(c.ckptLearnerBytes.Load()) })
	counter("checkpoint_store_writes_total", "Checkpoints that wrote the state store, with the changes of those that went to the changelog only (checkpoint.store_every), and writes of such changes alone.", func() float64 { return float64(c.storeWrites.Load()) })
	counter("checkpoints_abandoned_total", "Partition checkpoints abandoned (outputs unacknowledged, Kafka unavailable): their changes went into the next one.", func() float64 { return float64(c.ckptAbandoned.Load()) })
	counter("checkpoint_wait_seconds_total", "Time partitions stopped reading to let a checkpoint in flight finish, once twice checkpoint.max_records evicted learners were held in memory behind it (the state store is slower than the stream).",
		func() float64 { return float64(c.ckptWaitNanos.Load()) / 1e9 })
	gauge("pending_labels", "Predictions waiting for a label, all partitions.", func() float64 { return float64(c.pending.Load()) })
	counter("changelog_records_total", "Records written to the changelog topic (bundles and markers).", func() float64 { return float64(c.changelogRecords.Load()) })
	counter("changelog_bytes_total", "Value bytes written to the changelog topic.", func() float64 { return float64(c.changelogBytes.Load()) })
	counter("changelog_restored_records_total", "Changelog records read by partition restores.", func() float64 { return float64(c.changelogRead.Load()) })
	counter("keys_erased_total", "Keys whose learner and pending entries were deleted on request (delete records).", func() float64 { return float64(c.erased.Load()) })
	counter("learner_memory_hits_total", "Learner lookups answered from memory (learners in use, evicted ones not yet written, restored ones), counted at each checkpoint.",
		func() float64 { return float64(c.cacheHits.Load() + c.cacheHeld.Load()) })
	counter("learner_store_reads_total", "Learner lookups that read Badger (a learner not in memory), counted at each checkpoint.", func() float64 { return float64(c.cacheReads.Load()) })
	counter("learner_store_read_seconds_total", "Time spent in those reads: divided by learner_store_reads_total, the cost of a miss.", func() float64 { return float64(c.cacheReadNanos.Load()) / 1e9 })
	counter("learners_created_total", "Lookups of keys never stored: a new learner, no read.", func() float64 { return float64(c.cacheFresh.Load()) })
	counter("keys_expired_total", "Idle keys whose learner and pending entries expired (state.key_ttl).", func() float64 { return float64(c.keysExpired.Load()) })
	counter("changelog_restores_total", "Partitions whose state was restored from the changelog.", func() float64 { return float64(c.restores.Load()) })
	gauge("learners_in_memory", "Learner objects held in memory.", func() float64 { return float64(c.inMemory.Load()) })
	gauge("state_dir_bytes", "Disk space used by the checkpoint directory (sampled every 10 s).", func() float64 { return storeSize(c, (*checkpoint.Store).DiskBytes) })
	gauge("state_live_bytes", "Bytes of live keys and values in the checkpoint store: what it holds after compaction (sampled every 30 s).", func() float64 { return storeSize(c, (*checkpoint.Store).LiveBytes) })
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "kernelstream", Name: "progressive_loss",
		Help: "Mean loss of predictions on their labels since start.", ConstLabels: prometheus.Labels{"model": model},
	}, func() float64 {
		n := c.lossCount.Load()
		if n == 0 {
			return 0
		}
		return math.Float64frombits(c.lossBits.Load()) / float64(n)
	}))
	reg.MustRegister(m.latency, m.checkpointDur, m.lag, m.onDisk, m.kernelWeight, m.restoreSecs, m.restoreRecs, m.standbyLag, m.position, m.end, m.checkpointed)
	return m
}

func (m *metrics) setKernelWeights(part int, w []float64) {
	p := strconv.Itoa(part)
	for i, v := range w {
		m.kernelWeight.WithLabelValues(p, strconv.Itoa(i)).Set(v)
	}
}

// kernelWeighter is the optional learner capability exported as kernel_weight.
type kernelWeighter interface{ KernelWeights() []float64 }

// storeSize reads a size of the open store, 0 when none is open.
func storeSize(c *counters, size func(*checkpoint.Store) int64) float64 {
	if s := c.store.Load(); s != nil {
		return float64(size(s))
	}
	return 0
}

// addFloat adds v to a float64 stored as bits.
func addFloat(a interface {
	Load() uint64
	CompareAndSwap(old, new uint64) bool
}, v float64) {
	for {
		old := a.Load()
		if a.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}
