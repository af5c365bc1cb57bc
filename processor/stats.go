package processor

import (
	"math"
	"sync/atomic"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/wire"
)

// Stats is a snapshot of the processor's counters since New (process-wide,
// all partitions). Replayed records count in Records too.
type Stats struct {
	// Records by kind: "features" (id,x), "labeled" (id,x,y), "label"
	// (id,y or id,reward), "decision" (id,arms), "delete", "dead"
	// (dead-lettered). Each record counts once: in its kind when it was
	// used, as "dead" when it was dead-lettered.
	Records map[string]int64
	// Predictions emitted to the output topic (replays emit nothing).
	Predictions int64
	// Decisions is the subset of Predictions answering an `arms` record.
	Decisions int64
	// Updates applied to learners (Update or Observe that succeeded).
	Updates int64
	// DeadLetters by reason (bad_json, wrong_type, missing_field, dimension,
	// non_finite, oversized, no_key, unknown_arm, ...).
	DeadLetters map[string]int64
	// Pending is the number of predictions waiting for a label, all partitions.
	Pending int64
	// Expired pending entries by cause: "ttl", "count", "replaced".
	Expired map[string]int64
	// KeysErased counts keys deleted on request (delete records) and
	// KeysExpired idle keys expired by KeyTTL.
	KeysErased, KeysExpired int64
	// UnknownLabels counts labels whose id is not pending (dropped, counted).
	UnknownLabels int64
	// NumericalRejections counts updates refused by the numerical guard
	// (their records are dead-lettered, reason non_finite).
	NumericalRejections int64
	// Replayed counts input records replayed without emitting to rebuild state.
	Replayed int64
	// LearnersInMemory is the number of learner objects held in memory.
	LearnersInMemory int64
	// LearnersOnDisk is the number of learners stored in Badger for the
	// partitions currently assigned.
	LearnersOnDisk int64
	// Checkpoints completed (all partitions).
	Checkpoints int64
	// StoreWrites counts the checkpoints that wrote Badger and the writes of
	// a backlog alone; the other checkpoints went to the changelog only
	// (CheckpointStoreEvery).
	StoreWrites int64
	// CheckpointsAbandoned counts checkpoints that could not be written
	// for now (outputs unacknowledged, Kafka unavailable): their changes
	// went into the next one.
	CheckpointsAbandoned int64
	// LossSum and LossCount give the progressive loss (loss of each
	// prediction on its label, averaged): ProgressiveLoss = LossSum/LossCount.
	LossSum         float64
	LossCount       int64
	ProgressiveLoss float64
	// RewardSum and Rewards give the mean bandit reward.
	RewardSum float64
	Rewards   int64
	// Lag is the sum over the assigned partitions of high-water mark minus
	// next offset (0 when caught up), published when a partition starts,
	// whenever its worker may wait (for records or for a checkpoint in
	// flight), at least every 256 records (tally.go), and by a probe of the
	// high-water marks every second (offsets.go).
	Lag int64
	// WrongPartition counts records whose key belongs to another partition
	// under murmur2 (processed or dead-lettered per WrongPartition).
	WrongPartition int64
	// Quarantined counts undecodable stored state: "learner" (a key's blob;
	// its records are dead-lettered with reason corrupt_state) and
	// "pending" (a pending entry, skipped at restore).
	Quarantined map[string]int64
	// LearnerPanics counts records on which a learner panicked.
	LearnerPanics int64
	// OffsetResets counts resume offsets out of the log's range, by the
	// policy applied: "earliest", "latest", "fail".
	OffsetResets map[string]int64
	// Truncations counts log truncations detected under a position being
	// read (KIP-320: records replaced by an unclean leader election);
	// reading goes on where the log diverged.
	Truncations int64
	// FailedPartitions counts partitions stopped by a non-retriable error
	// (produce refused, offset out of range with policy fail).
	FailedPartitions int64
	// PredictionsAcked counts predictions acknowledged by the brokers
	// (Predictions counts them when queued).
	PredictionsAcked int64
	// Partitions currently assigned and restored.
	Partitions []int
}

// counters are the live atomics behind Stats and the Prometheus metrics.
type counters struct {
	records     [wire.NumKinds]atomic.Int64
	predictions atomic.Int64
	decisions   atomic.Int64
	updates     atomic.Int64
	dead        [wire.NumReasons]atomic.Int64
	pending     atomic.Int64
	expired     [numExpiries]atomic.Int64
	unknown     atomic.Int64
	numerical   atomic.Int64
	replayed    atomic.Int64
	inMemory    atomic.Int64
	onDisk      atomic.Int64
	checkpoints atomic.Int64
	lag         atomic.Int64
	wrongPart   atomic.Int64
	quarantined [numQuarantines]atomic.Int64
	panics      atomic.Int64
	resets      [numResets]atomic.Int64
	truncations atomic.Int64
	// checkpoints abandoned (outputs unacknowledged, Kafka unavailable):
	// their changes went into the next one
	ckptAbandoned atomic.Int64
	restarts      atomic.Int64  // exactly-once partitions restarted after a transaction that did not commit
	disk          diskGuard     // free space of the checkpoint directory (disk.go)
	failed        atomic.Int64  // partitions stopped by a non-retriable error
	failedNow     atomic.Int64  // of those, the ones stopped in the current generation
	acked         atomic.Int64  // predictions acknowledged by the brokers
	lossBits      atomic.Uint64 // float64 sum, CAS-added
	lossCount     atomic.Int64
	rewardBits    atomic.Uint64
	rewards       atomic.Int64
	store         atomic.Pointer[checkpoint.Store] // open while Run runs (the size gauges read it)

	storeWrites      atomic.Int64 // checkpoints and backlogs written to Badger
	ckptLearners     atomic.Int64 // learner states written by committed checkpoints
	ckptLearnerBytes atomic.Int64 // their bytes
	changelogRecords atomic.Int64 // records written to the changelog
	changelogBytes   atomic.Int64 // their value bytes
	changelogRead    atomic.Int64 // records read by restores
	restores         atomic.Int64 // partitions restored from the changelog
	erased           atomic.Int64 // keys deleted on request
	keysExpired      atomic.Int64 // idle keys expired (KeyTTL)
	// learner lookups (learnerCache.lookups), flushed at each snapshot
	cacheHits, cacheHeld, cacheReads, cacheReadNanos, cacheFresh atomic.Int64
	// time partitions waited for a checkpoint in flight (backpressure)
	ckptWaitNanos atomic.Int64
}

// Expiry causes of pending entries.
const (
	expiryTTL = iota
	expiryCount
	expiryReplaced
	numExpiries
)

var expiryNames = [numExpiries]string{"ttl", "count", "replaced"}

// What a quarantine set aside.
const (
	quarantineLearner = iota
	quarantinePending
	numQuarantines
)

var quarantineNames = [numQuarantines]string{"learner", "pending"}

// Offset reset policies (OffsetReset), the label of the reset metric.
const (
	resetEarliest = iota
	resetLatest
	resetFail
	numResets
)

var resetNames = [numResets]string{"earliest", "latest", "fail"}

func (c *counters) snapshot() Stats {
	s := Stats{
		Records:     map[string]int64{},
		DeadLetters: map[string]int64{},
		Expired:     map[string]int64{},
	}
	for i := range c.records {
		s.Records[wire.Kind(i).String()] = c.records[i].Load()
	}
	for i := range c.dead {
		if n := c.dead[i].Load(); n > 0 {
			s.DeadLetters[wire.Reason(i).String()] = n
		}
	}
	for i := range c.expired {
		s.Expired[expiryNames[i]] = c.expired[i].Load()
	}
	s.Predictions = c.predictions.Load()
	s.Decisions = c.decisions.Load()
	s.Updates = c.updates.Load()
	s.Pending = c.pending.Load()
	s.UnknownLabels = c.unknown.Load()
	s.KeysErased = c.erased.Load()
	s.KeysExpired = c.keysExpired.Load()
	s.NumericalRejections = c.numerical.Load()
	s.Replayed = c.replayed.Load()
	s.LearnersInMemory = c.inMemory.Load()
	s.LearnersOnDisk = c.onDisk.Load()
	s.Checkpoints = c.checkpoints.Load()
	s.CheckpointsAbandoned = c.ckptAbandoned.Load()
	s.StoreWrites = c.storeWrites.Load()
	s.Lag = c.lag.Load()
	s.LossCount = c.lossCount.Load()
	s.LossSum = math.Float64frombits(c.lossBits.Load())
	if s.LossCount > 0 {
		s.ProgressiveLoss = s.LossSum / float64(s.LossCount)
	}
	s.WrongPartition = c.wrongPart.Load()
	s.Quarantined = map[string]int64{}
	for i := range c.quarantined {
		s.Quarantined[quarantineNames[i]] = c.quarantined[i].Load()
	}
	s.LearnerPanics = c.panics.Load()
	s.Truncations = c.truncations.Load()
	s.OffsetResets = map[string]int64{}
	for i := range c.resets {
		s.OffsetResets[resetNames[i]] = c.resets[i].Load()
	}
	s.FailedPartitions = c.failed.Load()
	s.PredictionsAcked = c.acked.Load()
	s.Rewards = c.rewards.Load()
	s.RewardSum = math.Float64frombits(c.rewardBits.Load())
	return s
}
