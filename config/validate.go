package config

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/processor"
)

// Validate checks every key and returns all problems at once, each naming
// its key. It touches no file and no network (so a Kubernetes ConfigMap can be
// validated anywhere); files named by the TLS and SASL keys are read, with
// errors naming the key, when the Kafka dialer is built.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s%s: %s", c.src.where(key), key, fmt.Sprintf(format, a...)))
	}
	k := c.Kafka
	if len(k.Brokers) == 0 {
		bad("kafka.brokers", "at least one broker host:port is required")
	}
	for i, b := range k.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			bad(fmt.Sprintf("kafka.brokers[%d]", i), "%q is not host:port", b)
		}
	}
	for _, s := range []struct{ key, val string }{
		{"kafka.group", k.Group},
		{"kafka.input_topic", k.InputTopic},
		{"kafka.output_topic", k.OutputTopic},
		{"kafka.dlq_topic", k.DLQTopic},
	} {
		if strings.TrimSpace(s.val) == "" {
			bad(s.key, "must not be empty")
		}
	}
	topics := map[string]string{}
	for _, s := range []struct{ key, val string }{
		{"kafka.input_topic", k.InputTopic},
		{"kafka.output_topic", k.OutputTopic},
		{"kafka.dlq_topic", k.DLQTopic},
		{"kafka.labels_topic", k.LabelsTopic},
	} {
		if s.val == "" {
			continue
		}
		if prev, dup := topics[s.val]; dup {
			bad(s.key, "topic %q is already %s", s.val, prev)
		}
		topics[s.val] = s.key
	}
	for _, e := range []struct {
		key, v  string
		choices []string
	}{{"kafka.start_offset", k.StartOffset, processor.StartOffsets}, {"kafka.offset_reset", k.OffsetReset, processor.OffsetResets},
		{"kafka.isolation_level", k.IsolationLevel, processor.IsolationLevels},
		{"kafka.wrong_partition", k.WrongPartition, processor.WrongPartitions}, {"output.compression", c.Output.Compression, processor.Compressions},
		{"changelog.compression", c.Changelog.Compression, processor.Compressions},
		{"output.delivery", c.Output.Delivery, processor.OutputDeliveries}} {
		if err := processor.CheckChoice(e.v, e.choices); err != nil {
			bad(e.key, "%v", err)
		}
	}
	positiveDuration(bad, "kafka.session_timeout", k.SessionTimeout)
	positiveDuration(bad, "kafka.heartbeat_interval", k.HeartbeatInterval)
	positiveDuration(bad, "kafka.rebalance_timeout", k.RebalanceTimeout)
	positiveDuration(bad, "kafka.retry_backoff_max", k.RetryBackoffMax)
	if k.HeartbeatInterval >= k.SessionTimeout && k.HeartbeatInterval > 0 {
		bad("kafka.heartbeat_interval", "%v must be below kafka.session_timeout %v", k.HeartbeatInterval, k.SessionTimeout)
	}
	if k.MaxValueBytes <= 0 {
		bad("kafka.max_value_bytes", "%d must be > 0", k.MaxValueBytes)
	}
	if k.MaxKeyBytes <= 0 {
		bad("kafka.max_key_bytes", "%d must be > 0", k.MaxKeyBytes)
	}
	if k.MaxIDBytes <= 0 {
		bad("kafka.max_id_bytes", "%d must be > 0", k.MaxIDBytes)
	}
	if k.MaxKeyBytes > 0 && k.MaxIDBytes > 0 {
		changelogMax := 0
		if c.Changelog.Enabled {
			changelogMax = c.Changelog.MaxMessageBytes
		}
		if err := processor.CheckRecordLimits(k.MaxKeyBytes, k.MaxIDBytes, changelogMax); err != nil {
			bad("kafka.max_key_bytes", "%v (kafka.max_id_bytes %d)", err, k.MaxIDBytes)
		}
	}
	t := k.TLS
	if !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify) {
		bad("kafka.tls.enabled", "is false but other kafka.tls keys are set; set it to true or remove them")
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		bad("kafka.tls.cert_file", "cert_file and key_file go together (mutual TLS)")
	}
	s := k.SASL
	switch s.Mechanism {
	case "":
		if s.Username != "" || s.Password != "" || s.PasswordFile != "" {
			bad("kafka.sasl.mechanism", "is empty but a username or password is set; choose plain, scram-sha-256 or scram-sha-512")
		}
	case "plain", "scram-sha-256", "scram-sha-512":
		if s.Username == "" {
			bad("kafka.sasl.username", "required with mechanism %s", s.Mechanism)
		}
		if (s.Password == "") == (s.PasswordFile == "") {
			bad("kafka.sasl.password", "give exactly one of kafka.sasl.password (e.g. from %sKAFKA_SASL_PASSWORD) and kafka.sasl.password_file", EnvPrefix)
		}
	default:
		bad("kafka.sasl.mechanism", "%q: want plain, scram-sha-256 or scram-sha-512", s.Mechanism)
	}
	if c.Model.Algorithm == "" {
		bad("model.algorithm", "required")
	} else if err := c.Model.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%smodel: %v", c.src.where(modelErrorKey(err.Error())), err))
	}
	if c.Checkpoint.Dir == "" {
		bad("checkpoint.dir", "must not be empty")
	}
	positiveDuration(bad, "checkpoint.interval", c.Checkpoint.Interval)
	if cl := c.Changelog; cl.Enabled {
		if cl.ReplicationFactor < 0 {
			bad("changelog.replication_factor", "%d must be >= 0", cl.ReplicationFactor)
		}
		if cl.MinInsyncReplicas < 0 {
			bad("changelog.min_insync_replicas", "%d must be >= 0", cl.MinInsyncReplicas)
		}
		if cl.MaxMessageBytes < 1024 {
			bad("changelog.max_message_bytes", "%d must be >= 1024", cl.MaxMessageBytes)
		}
		if t := c.ChangelogTopic(); t == k.InputTopic || t == k.OutputTopic || t == k.DLQTopic || t == k.LabelsTopic {
			bad("changelog.topic", "%q is also one of the kafka topics", t)
		}
	}
	if n := c.Changelog.StandbyReplicas; n < 0 || n > 0 && !c.Changelog.Enabled {
		bad("changelog.standby_replicas", "%d must be >= 0, and needs changelog.enabled", n)
	}
	if c.Output.Delivery == "exactly_once" && !c.Changelog.Enabled {
		bad("output.delivery", "exactly_once needs changelog.enabled: the predictions commit with the checkpoint's changelog marker, which a restore resumes from")
	}
	if lim := kafkaio.DefaultTransactionTimeout / 4; c.Output.Delivery == "exactly_once" && c.Checkpoint.Interval > lim {
		bad("checkpoint.interval", "%v: with output.delivery exactly_once a transaction stays open for an interval; at most %v (a quarter of the %v transaction timeout)", c.Checkpoint.Interval, lim, kafkaio.DefaultTransactionTimeout)
	}
	if c.Changelog.Enabled && c.Kafka.IsolationLevel == "read_uncommitted" {
		bad("kafka.isolation_level", "read_uncommitted with changelog.enabled: a restore would read checkpoints that never committed (aborted, or a fenced member's); use read_committed, or disable the changelog")
	}
	if c.Checkpoint.MaxRecords <= 0 {
		bad("checkpoint.max_records", "%d must be > 0", c.Checkpoint.MaxRecords)
	}
	if m, lo := c.Checkpoint.MemTableMiB, checkpoint.MinMemTableBytes>>20; m < lo || m > processor.MaxCheckpointMemTableMiB {
		bad("checkpoint.memtable_mib", "%d must be in [%d, %d]", m, lo, processor.MaxCheckpointMemTableMiB)
	}
	if c.Checkpoint.StoreEvery <= 0 {
		bad("checkpoint.store_every", "%d must be > 0 (1 = the learners go to checkpoint.dir at every checkpoint)", c.Checkpoint.StoreEvery)
	}
	positiveDuration(bad, "labels.ttl", c.Labels.TTL)
	if c.Labels.MaxPendingTotal < 0 {
		bad("labels.max_pending_total", "%d must be >= 0 (0 = no process-wide bound)", c.Labels.MaxPendingTotal)
	}
	if c.Labels.MaxPending <= 0 {
		bad("labels.max_pending", "%d must be > 0", c.Labels.MaxPending)
	}
	positiveDuration(bad, "labels.merge_wait", c.Labels.MergeWait)
	if c.Labels.MaxTsSkew < 0 {
		bad("labels.max_ts_skew", "%v must be >= 0 (0 = no check)", c.Labels.MaxTsSkew)
	}
	if c.State.KeyTTL < 0 {
		bad("state.key_ttl", "%v must be >= 0 (0 = keys never expire)", c.State.KeyTTL)
	}
	if c.Cache.MaxLearners <= 0 {
		bad("cache.max_learners", "%d must be > 0", c.Cache.MaxLearners)
	}
	if c.Output.TopK < 0 {
		bad("output.top_k", "%d must be >= 0", c.Output.TopK)
	}
	if c.Output.BatchTimeout < 0 {
		bad("output.batch_timeout", "%v must be >= 0 (0 = no wait)", c.Output.BatchTimeout)
	}
	if c.HTTP.Addr != "" {
		if _, _, err := net.SplitHostPort(c.HTTP.Addr); err != nil {
			bad("http.addr", "%q is not [host]:port", c.HTTP.Addr)
		}
	}
	c.validateServe(bad)
	switch c.Log.Level {
	case "trace", "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q: want trace, debug, info, warn or error", c.Log.Level)
	}
	if c.Log.Format != "json" && c.Log.Format != "console" {
		bad("log.format", "%q: want json or console", c.Log.Format)
	}
	positiveDuration(bad, "shutdown.grace", c.Shutdown.Grace)
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("config: invalid: %w", errors.Join(errs...))
}

func positiveDuration(bad func(key, format string, a ...any), key string, d time.Duration) {
	if d <= 0 {
		bad(key, "%v must be > 0", d)
	}
}

// validateServe checks the serve keys. The files they name are read when
// the endpoint starts (ServeTLS, ServeToken), with errors naming the key.
func (c *Config) validateServe(bad func(key, format string, a ...any)) {
	s := c.Serve
	if s.Addr == "" {
		if s != (Serve{Timeout: s.Timeout}) {
			bad("serve.addr", "is empty (the endpoint is off) but other serve keys are set; set it or remove them")
		}
		return
	}
	if _, _, err := net.SplitHostPort(s.Addr); err != nil {
		bad("serve.addr", "%q is not [host]:port", s.Addr)
	} else if s.Addr == c.HTTP.Addr {
		bad("serve.addr", "%q is also http.addr: learner state is served apart from the metrics", s.Addr)
	}
	if s.AdvertisedAddr != "" {
		if host, port, err := net.SplitHostPort(s.AdvertisedAddr); err != nil || host == "" || port == "" {
			bad("serve.advertised_addr", "%q is not host:port", s.AdvertisedAddr)
		}
	}
	if (s.TLSCert == "") != (s.TLSKey == "") {
		bad("serve.tls_cert", "tls_cert and tls_key go together")
	}
	if s.ClientCA != "" && s.TLSCert == "" {
		bad("serve.client_ca", "mutual TLS needs serve.tls_cert and serve.tls_key")
	}
	if s.PeerCA != "" && s.TLSCert == "" {
		bad("serve.peer_ca", "verifies the members' certificates: needs serve.tls_cert and serve.tls_key")
	}
	positiveDuration(bad, "serve.timeout", s.Timeout)
}
