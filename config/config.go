// Package config is the consumer's typed configuration: a YAML file (strict:
// an unknown key is an error naming the key and file:line), environment
// overrides KERNELSTREAM_<SECTION>_<KEY>, documented defaults on every field,
// and Validate, whose errors name the key.
//
// The `doc` tag of each field is the single source of the configuration
// reference (Keys lists it, docs/operations.md reproduces it and a test checks
// that the two agree). Defaults live in Default.
package config

import (
	"time"

	"github.com/kernelstream/kernelstream/models"
	"github.com/kernelstream/kernelstream/processor"
)

// Config is the whole consumer configuration.
type Config struct {
	src *source // where each key was set (Validate's error positions); nil for Default()

	Kafka      Kafka       `yaml:"kafka"`
	Model      models.Spec `yaml:"model" doc:"the model spec, the same object as cmd/eval's -model (algorithm, dim, loss, kernel, params, seed); required"`
	Checkpoint Checkpoint  `yaml:"checkpoint"`
	Changelog  Changelog   `yaml:"changelog"`
	Labels     Labels      `yaml:"labels"`
	State      State       `yaml:"state"`
	Cache      Cache       `yaml:"cache"`
	Output     Output      `yaml:"output"`
	HTTP       HTTP        `yaml:"http"`
	Serve      Serve       `yaml:"serve"`
	Log        Log         `yaml:"log"`
	Shutdown   Shutdown    `yaml:"shutdown"`
}

// Kafka is where records come from and go to.
type Kafka struct {
	Brokers        []string `yaml:"brokers" doc:"bootstrap brokers host:port (env: comma-separated)"`
	Group          string   `yaml:"group" doc:"consumer group id; every member of one deployment uses the same"`
	ClientID       string   `yaml:"client_id" doc:"client id sent to the brokers (quotas, broker logs)"`
	InstanceID     string   `yaml:"instance_id" doc:"stable member identity (the StatefulSet pod name) for the sticky balancer; empty = $POD_NAME, else the host name"`
	InputTopic     string   `yaml:"input_topic" doc:"topic of feature records"`
	OutputTopic    string   `yaml:"output_topic" doc:"topic the predictions are written to"`
	DLQTopic       string   `yaml:"dlq_topic" doc:"dead-letter topic for unusable records"`
	LabelsTopic    string   `yaml:"labels_topic" doc:"optional topic of delayed labels, co-partitioned with input_topic; empty = labels come on input_topic"`
	StartOffset    string   `yaml:"start_offset" doc:"where a partition with no checkpoint and no committed offset starts: earliest or latest"`
	OffsetReset    string   `yaml:"offset_reset" doc:"when the offset to resume from is out of the log's range (topic recreated, retention passed it): earliest (read the log from its start), latest (skip to its end) or fail (the partition stops, not ready); always logged and counted"`
	IsolationLevel string   `yaml:"isolation_level" doc:"what the input, labels and changelog reads see of transactional writes: read_committed (records of aborted transactions never reach a learner; transaction markers skipped) or read_uncommitted (refused with changelog.enabled: a restore would read checkpoints that never committed)"`
	WrongPartition string   `yaml:"wrong_partition" doc:"records whose key belongs to another partition under murmur2 (a producer with another partitioner): count (log and count, process anyway) or dead_letter (reason wrong_partition)"`
	// Group membership and retries.
	SessionTimeout    time.Duration `yaml:"session_timeout" doc:"group session timeout: a member silent this long is removed and its partitions move (the broker must allow it: Kafka accepts 6s to 30m by default, else the consumer exits 3)"`
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval" doc:"group heartbeat interval (below session_timeout)"`
	RebalanceTimeout  time.Duration `yaml:"rebalance_timeout" doc:"time members get to rejoin during a rebalance"`
	RetryBackoffMax   time.Duration `yaml:"retry_backoff_max" doc:"cap of the exponential backoff of the engine's retry loops (group join, list offsets, reading a partition kgo stopped, fencing, checkpoint); the Kafka client retries fetches and produces on its own"`
	MaxValueBytes     int           `yaml:"max_value_bytes" doc:"largest record value processed; bigger ones are dead-lettered (reason oversized)"`
	MaxKeyBytes       int           `yaml:"max_key_bytes" doc:"longest message key (routing key) processed; longer ones are dead-lettered (reason oversized) before they reach the state, whose store and changelog keys hold it; with max_id_bytes it must fit Badger's 65,000-byte keys and a changelog record"`
	MaxIDBytes        int           `yaml:"max_id_bytes" doc:"longest id token processed (id, arm and each arm's id, as written: a string's quotes included); longer ones are dead-lettered (reason oversized)"`
	TLS               TLS           `yaml:"tls"`
	SASL              SASL          `yaml:"sasl"`
}

// TLS secures the connections to the brokers.
type TLS struct {
	Enabled            bool   `yaml:"enabled" doc:"use TLS towards the brokers"`
	CAFile             string `yaml:"ca_file" doc:"PEM bundle of the CAs that sign the brokers' certificates; empty = system roots"`
	CertFile           string `yaml:"cert_file" doc:"PEM client certificate (mutual TLS); needs key_file"`
	KeyFile            string `yaml:"key_file" doc:"PEM private key of cert_file"`
	ServerName         string `yaml:"server_name" doc:"name to verify in the brokers' certificates; empty = the host of each broker address"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify" doc:"do not verify the brokers' certificates (testing only)"`
}

// SASL authenticates to the brokers.
type SASL struct {
	Mechanism    string `yaml:"mechanism" doc:"empty (no SASL), plain, scram-sha-256 or scram-sha-512"`
	Username     string `yaml:"username" doc:"SASL user name"`
	Password     Secret `yaml:"password" doc:"SASL password; prefer the environment or password_file; never logged"`
	PasswordFile string `yaml:"password_file" doc:"file holding the SASL password (a mounted Secret); trailing newline ignored"`
}

// Checkpoint says where and how often learner state is made durable.
type Checkpoint struct {
	Dir         string        `yaml:"dir" doc:"Badger directory for learner state, pending labels and offsets (a persistent volume)"`
	Interval    time.Duration `yaml:"interval" doc:"time between checkpoints of a partition (at most 15s with output.delivery exactly_once)"`
	MaxRecords  int           `yaml:"max_records" doc:"records after which a partition checkpoints even before interval"`
	MemTableMiB int           `yaml:"memtable_mib" doc:"the state store's memtable size in MiB (8 to 1024): larger flushes and compacts less often, for streams whose learners are mostly on disk (64 against 16, 500,000 keys with 50,000 in memory: 1.1-1.6x the records/s, 30-40 % less CPU per record; docs/scale.md); the state directory may exceed the live state by about 4 x this and memory by about 2 x this"`
	StoreEvery  int           `yaml:"store_every" doc:"with a changelog, the checkpoints per write of the learners to checkpoint.dir: the others go to the changelog only and their changes wait in memory (at most 2 x memtable_mib a partition), so each learner reaches the local store once per store_every checkpoints however often it changes; a crash then restores the partition from the changelog, a revoke or shutdown writes it locally first (docs/pipeline.md, \"Checkpoints and recovery\"); 1 = every checkpoint; without a changelog always 1"`
	MinFreeMiB  int           `yaml:"min_free_mib" doc:"free space (MiB) of the checkpoint directory's file system below which the partitions stop reading and checkpointing (not ready) until space is freed, so that the state store never faults on a full disk; 0 = 256 + 4 x memtable_mib, negative = no check"`
}

// Changelog keeps the state in a compacted Kafka topic as well (docs/pipeline.md, "State in Kafka").
type Changelog struct {
	Enabled           bool          `yaml:"enabled" doc:"write every checkpoint to a compacted changelog topic, so that a member without the partition's local state (empty disk, moved pod) restores it from Kafka; false = state only in checkpoint.dir"`
	Topic             string        `yaml:"topic" doc:"changelog topic (one partition per input partition, compacted); empty = <kafka.group>-<kafka.input_topic>-changelog"`
	ReplicationFactor int           `yaml:"replication_factor" doc:"replication factor of the changelog topic when the consumer creates it; 0 = the brokers' default"`
	MinInsyncReplicas int           `yaml:"min_insync_replicas" doc:"min.insync.replicas of the changelog topic when the consumer creates it; 0 = the brokers' default"`
	MaxMessageBytes   int           `yaml:"max_message_bytes" doc:"largest changelog record (one key's learner); the topic is created with it as max.message.bytes"`
	MaxCompactionLag  time.Duration `yaml:"max_compaction_lag" doc:"bound on how long an erased or overwritten key's records stay in the changelog: a topic the consumer creates gets max.compaction.lag.ms and segment.ms of half this each (a segment rolls within one half, an idle partition's by a marker, and is compacted within the other), so an erasure is complete within it; an existing topic's settings are not changed; negative = the brokers' defaults (no bound)"`
	Compression       string        `yaml:"compression" doc:"compression of the changelog's batches: none, gzip, snappy, lz4 or zstd; learner states are binary floating-point numbers, which lz4 shrinks by 5-9 %, for 4.6 CPU-µs per bandit decision in make bench-decisions (docs/pipeline.md, \"State in Kafka\"); with output.delivery exactly_once the changelog shares the outputs' transactions and output.compression"`
	StandbyReplicas   int           `yaml:"standby_replicas" doc:"other members that keep a warm in-memory copy of each partition's state by tailing its changelog partition; the partition goes to one of them when its owner leaves (docs/pipeline.md, \"Standby replicas\")"`
}

// ChangelogTopic is the changelog topic: Topic, else <group>-<input>-changelog.
func (c *Config) ChangelogTopic() string {
	if c.Changelog.Topic != "" {
		return c.Changelog.Topic
	}
	return c.Kafka.Group + "-" + c.Kafka.InputTopic + "-changelog"
}

// Labels bounds the pending-label join.
type Labels struct {
	TTL             time.Duration `yaml:"ttl" doc:"event-time age after which a prediction still waiting for its label expires (counted)"`
	MaxPending      int           `yaml:"max_pending" doc:"pending predictions kept per partition; the oldest expire beyond it (counted)"`
	MaxPendingTotal int           `yaml:"max_pending_total" doc:"pending predictions kept by the whole process: each partition keeps at most this divided by the input's partition count (deterministic whatever the assignment); 0 = no process-wide bound"`
	MergeWait       time.Duration `yaml:"merge_wait" doc:"with labels_topic: longest wait for records the other topic's end offset (its last stable offset) says exist before merging a record without them"`
	MaxTsSkew       time.Duration `yaml:"max_ts_skew" doc:"largest distance between a record's ts and its Kafka timestamp; farther is a dead letter (reason bad_timestamp); 0 = no check"`
}

// State bounds how long a key's state lives.
type State struct {
	KeyTTL time.Duration `yaml:"key_ttl" doc:"event time after a key's last record at which its learner and pending entries expire (deterministic, like a delete record; keep it >= labels.ttl); 0 = never"`
}

// Cache bounds the learners held in memory.
type Cache struct {
	MaxLearners int `yaml:"max_learners" doc:"learners kept in memory by the whole process (each partition may hold one more, the one in use); colder ones live only in Badger and are read back on demand"`
}

// Output shapes the prediction records.
type Output struct {
	TopK         int           `yaml:"top_k" doc:"arms listed in the ranking of a decision record scored by a regression learner"`
	Headers      []string      `yaml:"headers" doc:"input record headers copied onto its prediction (case-insensitive names; [] = none), e.g. W3C trace context"`
	BatchTimeout time.Duration `yaml:"batch_timeout" doc:"the longest a prediction waits for its batch to fill (linger); 0: no wait, batches form while a request is in flight"`
	Delivery     string        `yaml:"delivery" doc:"at_least_once (predictions visible at once; after a crash the records since the last checkpoint are predicted again, same ids) or exactly_once (predictions written in each checkpoint's transaction, visible to read_committed readers when it commits, once; they wait up to checkpoint.interval, at most 15s; needs the changelog)"`
	Compression  string        `yaml:"compression" doc:"compression of the output and dead-letter batches (and of the changelog's with output.delivery exactly_once): none, gzip, snappy, lz4 or zstd; a batch whose records take under 512 bytes is sent uncompressed, whatever the codec"`
}

// HTTP serves /metrics, /healthz and /readyz.
type HTTP struct {
	Addr string `yaml:"addr" doc:"listen address of the HTTP server; empty = no server"`
}

// Serve is the scoring endpoint POST /v1/score (docs/bandits.md, "Scoring
// on request"). It answers from learner state, which is user data: it is
// off unless addr is set, and apart from the metrics server.
type Serve struct {
	Addr           string        `yaml:"addr" doc:"listen address of the scoring endpoint POST /v1/score, apart from http.addr (it answers from learner state, which is user data); empty = off"`
	AdvertisedAddr string        `yaml:"advertised_addr" doc:"host:port at which the other members reach this one to forward a request for a key whose partition it owns (announced in the group's member metadata); empty = addr's host (the host name when addr names none or 0.0.0.0) with addr's port; in Kubernetes set it from the pod's IP or DNS name"`
	TLSCert        string        `yaml:"tls_cert" doc:"PEM certificate of the endpoint (HTTPS); needs tls_key; also the client certificate when forwarding to another member; empty = plain HTTP"`
	TLSKey         string        `yaml:"tls_key" doc:"PEM private key of tls_cert"`
	ClientCA       string        `yaml:"client_ca" doc:"PEM bundle of the CAs whose client certificates are accepted (mutual TLS: a request without one is refused); needs tls_cert; empty = no client certificate asked"`
	PeerCA         string        `yaml:"peer_ca" doc:"PEM bundle verifying the other members' certificates when forwarding; empty = client_ca, else the system roots"`
	TokenFile      string        `yaml:"token_file" doc:"file holding the bearer token every request must carry (Authorization: Bearer ...; a mounted Secret; trailing newline ignored; compared in constant time); empty = no token"`
	Timeout        time.Duration `yaml:"timeout" doc:"longest a request waits for the worker of its key's partition, which answers between two records; then 503, retryable"`
}

// Log configures zerolog.
type Log struct {
	Level  string `yaml:"level" doc:"trace, debug, info, warn or error"`
	Format string `yaml:"format" doc:"json (one object a line) or console (human-readable)"`
}

// Shutdown bounds the exit on SIGTERM/SIGINT.
type Shutdown struct {
	Grace time.Duration `yaml:"grace" doc:"time allowed to finish the record in hand, checkpoint every partition and leave the group; keep it below the pod's terminationGracePeriodSeconds"`
}

// Default returns the configuration every file and environment variable
// overrides. The model has no default: model.algorithm and model.dim are
// required.
func Default() Config {
	return Config{
		Kafka: Kafka{
			Brokers:        []string{"localhost:9092"},
			Group:          "kernelstream",
			ClientID:       "kernelstream",
			InputTopic:     "features",
			OutputTopic:    "predictions",
			DLQTopic:       "dead-letters",
			StartOffset:    processor.DefaultStartOffset,
			OffsetReset:    processor.DefaultOffsetReset,
			IsolationLevel: processor.DefaultIsolationLevel,
			WrongPartition: processor.DefaultWrongPartition,

			SessionTimeout:    processor.DefaultSessionTimeout,
			HeartbeatInterval: processor.DefaultHeartbeatInterval,
			RebalanceTimeout:  processor.DefaultRebalanceTimeout,
			RetryBackoffMax:   processor.DefaultRetryBackoffMax,
			MaxValueBytes:     processor.DefaultMaxValueBytes,
			MaxKeyBytes:       processor.DefaultMaxKeyBytes,
			MaxIDBytes:        processor.DefaultMaxIDBytes,
		},
		Model: models.Spec{Kernel: models.KernelSpec{Type: "gaussian"}},
		Checkpoint: Checkpoint{
			Dir:         "/var/lib/kernelstream",
			Interval:    processor.DefaultCheckpointInterval,
			MaxRecords:  processor.DefaultCheckpointMaxRecords,
			MemTableMiB: processor.DefaultCheckpointMemTableMiB,
			StoreEvery:  processor.DefaultCheckpointStoreEvery,
		},
		Changelog: Changelog{Enabled: true, MaxMessageBytes: processor.DefaultChangelogMaxMessageBytes, Compression: processor.DefaultChangelogCompression, MaxCompactionLag: processor.DefaultChangelogMaxCompactionLag},
		Labels:    Labels{TTL: processor.DefaultLabelsTTL, MaxPending: processor.DefaultMaxPending, MergeWait: processor.DefaultMergeWait, MaxTsSkew: processor.DefaultMaxTsSkew},
		Cache:     Cache{MaxLearners: processor.DefaultMaxLearners},
		Output:    Output{TopK: processor.DefaultTopK, Headers: []string{"traceparent", "tracestate"}, BatchTimeout: processor.DefaultBatchTimeout, Compression: processor.DefaultCompression, Delivery: processor.DefaultOutputDelivery},
		HTTP:      HTTP{Addr: ":8080"},
		Serve:     Serve{Timeout: processor.DefaultScoreTimeout},
		Log:       Log{Level: "info", Format: "json"},
		Shutdown:  Shutdown{Grace: processor.DefaultShutdownGrace},
	}
}
