package processor

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// Defaults of the Config fields (applied by New to zero values).
const (
	DefaultStartOffset           = "earliest"
	DefaultCheckpointInterval    = 5 * time.Second
	DefaultCheckpointMaxRecords  = 10000
	DefaultCheckpointMemTableMiB = checkpoint.DefaultMemTableBytes >> 20
	DefaultCheckpointStoreEvery  = 6
	DefaultLabelsTTL             = time.Hour
	DefaultMaxPending            = 100000
	DefaultMaxLearners           = 100000
	DefaultTopK                  = 10
	DefaultMaxValueBytes         = wire.DefaultMaxValueBytes
	DefaultMaxKeyBytes           = wire.DefaultMaxKeyBytes
	DefaultMaxIDBytes            = wire.DefaultMaxIDBytes
	DefaultShutdownGrace         = 25 * time.Second
	DefaultBatchTimeout          = time.Duration(0)
	DefaultCompression           = "lz4"
	DefaultSessionTimeout        = 10 * time.Second
	DefaultHeartbeatInterval     = time.Second
	DefaultRebalanceTimeout      = 30 * time.Second
	DefaultRetryBackoffMax       = 5 * time.Second
	DefaultOffsetReset           = "earliest"
	DefaultWrongPartition        = "count"
	DefaultMaxTsSkew             = 6 * time.Hour
	DefaultMergeWait             = 2 * time.Second
	DefaultIsolationLevel        = "read_committed"
	DefaultOutputDelivery        = "at_least_once"
)

// SASL is the account every connection authenticates with.
type SASL struct {
	// Mechanism is "plain", "scram-sha-256" or "scram-sha-512".
	Mechanism string
	Username  string
	Password  string
}

// MaxCheckpointMemTableMiB bounds CheckpointMemTableMiB: beyond a GiB the
// memtables' memory (about twice the size) outweighs what they save.
const MaxCheckpointMemTableMiB = 1024

// Config configures a Processor. Zero values take the documented defaults;
// Validate reports the first invalid field by name.
type Config struct {
	// Brokers are the bootstrap addresses (host:port). Required.
	Brokers []string
	// Group is the consumer group id. Required.
	Group string
	// InputTopic carries the feature, label, decision and reward records. Required.
	InputTopic string
	// OutputTopic receives one prediction per record with x or arms. Required.
	OutputTopic string
	// DLQTopic receives every unusable record unchanged. Required.
	DLQTopic string
	// LabelsTopic optionally carries labels and rewards, co-partitioned with
	// InputTopic (same key -> same partition number). Default "" (labels only
	// on InputTopic).
	LabelsTopic string
	// StartOffset is "earliest" (default) or "latest": where a partition
	// starts when neither Badger nor the group has an offset for it.
	StartOffset string
	// MergeWait bounds how long the merge of InputTopic and LabelsTopic
	// waits for records the other topic's high-water mark says exist
	// before taking a record without them (merge.go). Default 2s.
	MergeWait time.Duration
	// OffsetReset is the policy when the offset a partition resumes from is
	// out of the log's range (the topic was recreated, or retention deleted
	// it): "earliest" (default: read from the log start, so a recreated
	// topic is read whole), "latest" (skip to the log end) or "fail" (the
	// partition stops and the processor reports not ready). Every reset is
	// logged and counted (docs/pipeline.md, "Offsets out of range").
	OffsetReset string
	// WrongPartition is what happens to a record whose key does not belong
	// to the partition it arrived on under murmur2 (kafka-go's
	// Murmur2Balancer, Kafka's Java default): "count" (default: counted,
	// logged at most once a second, processed) or "dead_letter" (reason
	// wrong_partition).
	WrongPartition string
	// MaxTsSkew bounds |ts - Kafka timestamp| of a record; a farther ts is a
	// dead letter (reason bad_timestamp), so a ts in the wrong unit cannot
	// move the event-time watermark. Default 6h; negative = no check.
	MaxTsSkew time.Duration

	// Model is the learner spec every key's learner is built from. Required.
	Model models.Spec

	// CheckpointDir is the Badger directory. Required.
	CheckpointDir string
	// Changelog keeps the state in a compacted Kafka topic too, so that a
	// member without the partition's Badger state restores it from there.
	// Default: off (Changelog.Topic "").
	Changelog ChangelogConfig
	// CheckpointInterval is the time between checkpoints of a partition.
	// Default 5s.
	CheckpointInterval time.Duration
	// CheckpointMaxRecords triggers a checkpoint after this many records of a
	// partition. Default 10000.
	CheckpointMaxRecords int
	// CheckpointMemTableMiB is the state store's memtable size in MiB
	// (checkpoint.Options.MemTableBytes). Default 16; 8 to
	// MaxCheckpointMemTableMiB. Larger memtables suit streams whose
	// learners are mostly on disk (docs/scale.md), at about 4 MiB of disk
	// and 2 MiB of memory per MiB.
	CheckpointMemTableMiB int
	// CheckpointStoreEvery is, with a changelog, how many checkpoints make
	// one write of the learners to Badger: the others go to the changelog
	// only, and their changes wait in memory until the next that goes to
	// Badger too (sooner when they pass 2 x CheckpointMemTableMiB, and at
	// revoke and shutdown). A learner that changes at every checkpoint then
	// reaches Badger once every CheckpointStoreEvery checkpoints instead of
	// every time, and Badger's flushes and compactions, which take whole
	// CPUs for milliseconds, come that much less often; the price is that a
	// crash leaves Badger behind the changelog, which the restart then
	// restores the partition from (docs/pipeline.md, "Checkpoints and
	// recovery"). Default 6; 1 = every checkpoint; always 1 without a
	// changelog.
	CheckpointStoreEvery int
	// CheckpointMinFreeMiB is the free space below which the checkpoint
	// directory's file system counts as full: the partitions stop reading
	// and checkpointing (the processor is not ready) until space is freed,
	// so that Badger never writes into a memory-mapped file the disk
	// cannot back (SIGBUS). Default 0 = 256 + 4 x CheckpointMemTableMiB;
	// negative = no check.
	CheckpointMinFreeMiB int

	// LabelsTTL expires pending predictions older than this in event time
	// (the partition's largest ts seen minus the entry's ts). Default 1h.
	LabelsTTL time.Duration
	// KeyTTL expires idle keys: a key whose last record is more than KeyTTL
	// behind the partition's event-time watermark loses its learner and
	// pending entries, as if a delete record had come (docs/pipeline.md,
	// "Idle keys expire"); deterministic on every replay. Keep it at least
	// LabelsTTL. Default 0 = keys never expire.
	KeyTTL time.Duration
	// MaxPending bounds the pending-label map of one partition; the oldest
	// entry (by offset) expires first. Default 100000.
	MaxPending int
	// MaxPendingTotal bounds the pending entries of the whole process: each
	// partition keeps at most MaxPendingTotal / (the input's partition
	// count), rounded up, whatever the assignment, so a member that holds
	// every partition stays within it. A share of the topic's partition
	// count (not of the partitions assigned) keeps expiry a function of the
	// partition's own records, hence deterministic across rebalances.
	// Default 0 = no process-wide bound (MaxPending per partition only).
	MaxPendingTotal int
	// MaxLearners bounds the learners this processor holds in memory (all
	// partitions together; each partition keeps at least the learner in
	// use); the least recently used are evicted to Badger at the next
	// checkpoint and read back on demand. Default 100000.
	MaxLearners int
	// TopK is the length of the ranking a regression learner returns for an
	// `arms` record. Default 10.
	TopK int
	// MaxValueBytes is the largest record value processed; bigger values are
	// dead-lettered with reason "oversized". Default 1 MiB.
	MaxValueBytes int
	// MaxKeyBytes is the longest message key processed, MaxIDBytes the
	// longest id token (id, arm, an arm's id; as written, quotes
	// included); longer ones are dead-lettered with reason "oversized"
	// before they reach the state, whose store and changelog keys hold
	// them (wire.Limits). Defaults 1 KiB and 512 bytes; Validate checks
	// that they fit Badger's keys and a changelog record.
	MaxKeyBytes int
	MaxIDBytes  int
	// PropagateHeaders names the input record headers copied onto its
	// prediction (compared without regard to case), e.g. "traceparent" for
	// W3C trace context. Default nil = none.
	PropagateHeaders []string

	// ShutdownGrace bounds the final checkpoint and group leave after Run's
	// context is cancelled. Default 25s (below Kubernetes' default 30 s
	// termination grace period, leaving time for the process to exit).
	ShutdownGrace time.Duration
	// BatchTimeout is the longest a prediction waits for its batch to fill
	// before it is produced (Kafka's linger.ms). Default 0: what is queued
	// goes at once, and the predictions made while a request is in flight
	// form the next batch, so batches grow with the load without a timer
	// (docs/pipeline.md, "Output").
	BatchTimeout time.Duration
	// OutputDelivery is "at_least_once" (default: predictions are visible
	// as soon as they are written; after a crash the records since the
	// last checkpoint are predicted again, under the same ids; the
	// idempotent producer adds no duplicates of its own) or
	// "exactly_once" (predictions and dead letters are written in the
	// transaction of the partition's checkpoint and are visible to
	// read_committed readers when it commits, once: they wait up to
	// CheckpointInterval; needs Changelog.Topic, whose marker commits with
	// them).
	OutputDelivery string
	// Compression of the output and dead-letter batches: "none", "gzip",
	// "snappy", "lz4" or "zstd". Default "lz4" (cheap on CPU; predictions
	// are JSON and compress several-fold, which is what a network-bound
	// producer needs).
	Compression string
	// SessionTimeout, HeartbeatInterval and RebalanceTimeout tune the group
	// membership. Defaults 10s, 1s, 30s.
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	RebalanceTimeout  time.Duration
	// RetryBackoffMax caps the exponential backoff of every retry loop
	// (group join, fetch, produce, checkpoint). Default 5s.
	RetryBackoffMax time.Duration

	// ClientID names this member's connections to the brokers. Default
	// "kernelstream".
	ClientID string
	// TLS, when set, secures every connection (the group's, the record
	// path's, the admin requests'). Default nil = plaintext.
	TLS *tls.Config
	// SASL, when set, authenticates every connection. Default nil = none.
	SASL *SASL
	// IsolationLevel of every read (input, labels, changelog):
	// "read_committed" (default: records of aborted transactions never
	// reach a learner, and transaction markers are skipped) or
	// "read_uncommitted".
	IsolationLevel string
	// GroupBalancers are offered to the group in priority order. Default nil
	// = range.
	GroupBalancers []kafka.GroupBalancer

	// Scoring turns on answers to scoring requests (Processor.Score, the
	// endpoint POST /v1/score): Scoring.Addr is the address at which this
	// member serves them, announced to the others in its JoinGroup user
	// data (StickyBalancer.SetAddr) and read back from theirs, with the
	// assignment, through DescribeGroups, so that a request is forwarded
	// to the owner of its key's partition. Default: off (Addr "").
	Scoring ScoringConfig

	// Logger receives all logs. Default: zerolog's zero Logger (discards).
	Logger zerolog.Logger
	// Registerer receives the metrics (metrics.go). Default nil = no metrics.
	Registerer prometheus.Registerer

	// checkpointTxnBytes, when > 0, caps a Badger transaction (tests force
	// staged checkpoints with it).
	checkpointTxnBytes int
	// loopHook, when set, runs at the top of every turn of a worker's
	// loop, on its goroutine (tests freeze a member with it).
	loopHook func(w *worker)
	// crashOnStop makes a cancelled Run skip the final checkpoints, like a
	// process killed between two checkpoints (tests).
	crashOnStop bool
	// partitionWatch, when > 0, replaces how often the group looks for
	// partitions added to the input (10 s; tests).
	partitionWatch time.Duration
	// txnTimeout, when > 0, replaces kafkaio.DefaultTransactionTimeout
	// (tests make the coordinator abort a transaction).
	txnTimeout time.Duration
}

// DefaultScoreTimeout bounds how long a scoring request waits for the
// worker of its key's partition (ScoringConfig.Timeout).
const DefaultScoreTimeout = 2 * time.Second

// ScoringConfig turns on scoring requests (score.go).
type ScoringConfig struct {
	// Addr is this member's scoring address as the other members reach it
	// (host:port); "" = scoring off.
	Addr string
	// Timeout bounds the wait for the partition's worker, which answers
	// between two records; past it the request is answered unavailable
	// (retryable). Default DefaultScoreTimeout.
	Timeout time.Duration
}

// withDefaults returns cfg with zero fields set to their defaults.
func (cfg Config) withDefaults() Config {
	if cfg.StartOffset == "" {
		cfg.StartOffset = DefaultStartOffset
	}
	if cfg.OffsetReset == "" {
		cfg.OffsetReset = DefaultOffsetReset
	}
	if cfg.IsolationLevel == "" {
		cfg.IsolationLevel = DefaultIsolationLevel
	}
	if cfg.OutputDelivery == "" {
		cfg.OutputDelivery = DefaultOutputDelivery
	}
	if cfg.WrongPartition == "" {
		cfg.WrongPartition = DefaultWrongPartition
	}
	if cfg.MergeWait == 0 {
		cfg.MergeWait = DefaultMergeWait
	}
	if cfg.MaxTsSkew == 0 {
		cfg.MaxTsSkew = DefaultMaxTsSkew
	}
	if cfg.CheckpointInterval == 0 {
		cfg.CheckpointInterval = DefaultCheckpointInterval
	}
	if cfg.CheckpointMaxRecords == 0 {
		cfg.CheckpointMaxRecords = DefaultCheckpointMaxRecords
	}
	if cfg.CheckpointMemTableMiB == 0 {
		cfg.CheckpointMemTableMiB = DefaultCheckpointMemTableMiB
	}
	if cfg.CheckpointStoreEvery == 0 {
		cfg.CheckpointStoreEvery = DefaultCheckpointStoreEvery
	}
	if cfg.LabelsTTL == 0 {
		cfg.LabelsTTL = DefaultLabelsTTL
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.MaxLearners == 0 {
		cfg.MaxLearners = DefaultMaxLearners
	}
	if cfg.TopK == 0 {
		cfg.TopK = DefaultTopK
	}
	lim := cfg.limits().WithDefaults()
	cfg.MaxValueBytes, cfg.MaxKeyBytes, cfg.MaxIDBytes = lim.Value, lim.Key, lim.ID
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.Scoring.Timeout == 0 {
		cfg.Scoring.Timeout = DefaultScoreTimeout
	}
	if cfg.Compression == "" {
		cfg.Compression = DefaultCompression
	}
	if cfg.Changelog.MaxMessageBytes == 0 {
		cfg.Changelog.MaxMessageBytes = DefaultChangelogMaxMessageBytes
	}
	if cfg.Changelog.Compression == "" {
		cfg.Changelog.Compression = DefaultChangelogCompression
	}
	if cfg.Changelog.MaxCompactionLag == 0 {
		cfg.Changelog.MaxCompactionLag = DefaultChangelogMaxCompactionLag
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.RebalanceTimeout == 0 {
		cfg.RebalanceTimeout = DefaultRebalanceTimeout
	}
	if cfg.RetryBackoffMax == 0 {
		cfg.RetryBackoffMax = DefaultRetryBackoffMax
	}
	return cfg
}

// Validate checks cfg after defaults; the error names the field.
func (cfg Config) Validate() error {
	c := cfg.withDefaults()
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("processor: %s: %s", field, fmt.Sprintf(format, a...)))
	}
	if len(c.Brokers) == 0 {
		bad("Brokers", "at least one broker address is required")
	}
	for i, b := range c.Brokers {
		if b == "" {
			bad("Brokers", "entry %d is empty", i)
		}
	}
	if c.Group == "" {
		bad("Group", "required")
	}
	if c.InputTopic == "" {
		bad("InputTopic", "required")
	}
	if c.OutputTopic == "" {
		bad("OutputTopic", "required")
	}
	if c.DLQTopic == "" {
		bad("DLQTopic", "required")
	}
	for _, t := range []struct{ name, v string }{{"OutputTopic", c.OutputTopic}, {"DLQTopic", c.DLQTopic}, {"LabelsTopic", c.LabelsTopic}} {
		if t.v != "" && t.v == c.InputTopic {
			bad(t.name, "must differ from InputTopic %q", c.InputTopic)
		}
	}
	for _, e := range []struct {
		field, v string
		choices  []string
	}{{"StartOffset", c.StartOffset, StartOffsets}, {"Compression", c.Compression, Compressions},
		{"Changelog.Compression", c.Changelog.Compression, Compressions},
		{"OffsetReset", c.OffsetReset, OffsetResets}, {"WrongPartition", c.WrongPartition, WrongPartitions},
		{"IsolationLevel", c.IsolationLevel, IsolationLevels}, {"OutputDelivery", c.OutputDelivery, OutputDeliveries}} {
		if err := CheckChoice(e.v, e.choices); err != nil {
			bad(e.field, "%v", err)
		}
	}
	if err := c.Model.Validate(); err != nil {
		bad("Model", "%v", err)
	}
	if c.CheckpointDir == "" {
		bad("CheckpointDir", "required")
	}
	if cl := c.Changelog; cl.Topic != "" {
		for _, t := range []struct{ name, v string }{{"InputTopic", c.InputTopic}, {"OutputTopic", c.OutputTopic}, {"DLQTopic", c.DLQTopic}, {"LabelsTopic", c.LabelsTopic}} {
			if t.v == cl.Topic {
				bad("Changelog.Topic", "must differ from %s %q", t.name, t.v)
			}
		}
		if cl.ReplicationFactor < 0 || cl.MinInsyncReplicas < 0 || cl.MaxMessageBytes < 1024 {
			bad("Changelog", "ReplicationFactor and MinInsyncReplicas must be >= 0 and MaxMessageBytes >= 1024")
		}
	}
	if c.OutputDelivery == "exactly_once" && c.Changelog.Topic == "" {
		bad("OutputDelivery", "exactly_once needs Changelog.Topic: the predictions commit with the checkpoint's changelog marker, which a restore resumes from")
	}
	if lim := kafkaio.DefaultTransactionTimeout / 4; c.OutputDelivery == "exactly_once" && c.CheckpointInterval > lim {
		bad("CheckpointInterval", "%v: with exactly_once a transaction stays open for an interval; at most %v (a quarter of the %v transaction timeout)", c.CheckpointInterval, lim, kafkaio.DefaultTransactionTimeout)
	}
	if c.Changelog.Topic != "" && c.IsolationLevel == "read_uncommitted" {
		bad("IsolationLevel", "read_uncommitted with Changelog.Topic: a restore would read checkpoints that never committed (aborted, or a fenced member's); use read_committed, or no changelog")
	}
	if n := c.Changelog.StandbyReplicas; n < 0 || n > 0 && c.Changelog.Topic == "" {
		bad("Changelog.StandbyReplicas", "%d: must be >= 0, and needs Changelog.Topic", n)
	}
	positive := []struct {
		name string
		v    time.Duration
	}{{"CheckpointInterval", c.CheckpointInterval}, {"LabelsTTL", c.LabelsTTL}, {"ShutdownGrace", c.ShutdownGrace},
		{"BatchTimeout", c.BatchTimeout}, {"SessionTimeout", c.SessionTimeout}, {"HeartbeatInterval", c.HeartbeatInterval},
		{"RebalanceTimeout", c.RebalanceTimeout}, {"RetryBackoffMax", c.RetryBackoffMax}, {"MergeWait", c.MergeWait},
		{"Scoring.Timeout", c.Scoring.Timeout}}
	for _, p := range positive {
		if p.v < 0 {
			bad(p.name, "%v must be > 0", p.v)
		}
	}
	if c.KeyTTL < 0 {
		bad("KeyTTL", "%v must be >= 0 (0 = keys never expire)", c.KeyTTL)
	}
	ints := []struct {
		name string
		v    int
	}{{"CheckpointMaxRecords", c.CheckpointMaxRecords}, {"CheckpointStoreEvery", c.CheckpointStoreEvery}, {"MaxPending", c.MaxPending}, {"MaxLearners", c.MaxLearners},
		{"TopK", c.TopK}, {"MaxValueBytes", c.MaxValueBytes}, {"MaxKeyBytes", c.MaxKeyBytes}, {"MaxIDBytes", c.MaxIDBytes}}
	for _, p := range ints {
		if p.v < 0 {
			bad(p.name, "%d must be > 0", p.v)
		}
	}
	if c.MaxKeyBytes > 0 && c.MaxIDBytes > 0 {
		changelogMax := 0
		if c.Changelog.Topic != "" {
			changelogMax = c.Changelog.MaxMessageBytes
		}
		if err := CheckRecordLimits(c.MaxKeyBytes, c.MaxIDBytes, changelogMax); err != nil {
			bad("MaxKeyBytes, MaxIDBytes", "%v", err)
		}
	}
	if lo := checkpoint.MinMemTableBytes >> 20; c.CheckpointMemTableMiB != 0 && (c.CheckpointMemTableMiB < lo || c.CheckpointMemTableMiB > MaxCheckpointMemTableMiB) {
		bad("CheckpointMemTableMiB", "%d must be in [%d, %d]", c.CheckpointMemTableMiB, lo, MaxCheckpointMemTableMiB)
	}
	if s := c.SASL; s != nil {
		if err := CheckChoice(s.Mechanism, SASLMechanisms); err != nil {
			bad("SASL.Mechanism", "%v", err)
		}
	}
	if c.HeartbeatInterval >= c.SessionTimeout {
		bad("HeartbeatInterval", "%v must be below SessionTimeout %v", c.HeartbeatInterval, c.SessionTimeout)
	}
	return errors.Join(errs...)
}
