package processor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/checkpoint"
)

// Start-up checks, run by Run before it joins the group (docs/pipeline.md,
// "Start-up checks"): a member that cannot work must say why and exit
// without joining, since every join and leave moves every partition of the
// group.

// ErrClusterMismatch: a configured topic does not exist (or may not be
// described), or the labels topic is not co-partitioned with the input.
// cmd/consumer exits with status 3.
var ErrClusterMismatch = errors.New("processor: the cluster does not match the configuration")

// ErrSpecMismatch: the checkpoint directory holds state of another model
// spec. cmd/consumer exits with status 4.
var ErrSpecMismatch = errors.New("processor: checkpoint directory holds state of another model spec")

// topicRole names a configured topic by its Config field.
type topicRole struct{ field, topic string }

func (p *Processor) topics() []topicRole {
	ts := []topicRole{{"InputTopic", p.cfg.InputTopic}, {"OutputTopic", p.cfg.OutputTopic}, {"DLQTopic", p.cfg.DLQTopic}}
	if p.cfg.LabelsTopic != "" {
		ts = append(ts, topicRole{"LabelsTopic", p.cfg.LabelsTopic})
	}
	return ts
}

// startupChecks checks the topics, then the stored partitions' spec hash.
// Broker unavailability is retried with backoff until ctx ends.
func (p *Processor) startupChecks(ctx context.Context, store *checkpoint.Store) error {
	parts, err := p.checkTopics(ctx)
	if err != nil {
		return err
	}
	p.inParts.Store(int64(parts))
	return p.checkSpec(store, parts)
}

// checkTopics returns the input topic's partition count.
func (p *Processor) checkTopics(ctx context.Context) (int, error) {
	roles := p.topics()
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = r.topic
	}
	ep := newEpisode(p.log, "metadata")
	backoff := 100 * time.Millisecond
	for {
		res, err := p.admin.Metadata(ctx, &kafka.MetadataRequest{Topics: names})
		if err == nil {
			ep.ok()
			return p.judgeTopics(roles, res)
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		ep.fail(err)
		forgetFailedDial(p.admin.Transport)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, p.cfg.RetryBackoffMax)
	}
}

// inputPartitions asks the input topic's partition count once (within 5
// s): the generation goes on with the count it has when Kafka does not
// answer.
func (p *Processor) inputPartitions(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Through kgo: kafka-go's transport answers Metadata from its cache.
	c, ok := p.kio.(interface {
		Partitions(context.Context, string) (int, error)
	})
	if !ok {
		return 0, errors.New("the cluster client cannot count partitions")
	}
	return c.Partitions(ctx, p.cfg.InputTopic)
}

// forgetFailedDial drops a transport's connection pools after a failed
// Metadata request. A kafka-go Transport answers Metadata from its cache, and
// a failed refresh stays in that cache until the next scheduled one, a random
// time up to MetadataTTL (6 s by default) later: without this, a broker that
// comes up is seen that much later. The next request builds a new pool,
// which dials at once. Only start-up's loops call it, before any writer or
// reader has sent anything through the transport.
func forgetFailedDial(rt kafka.RoundTripper) {
	if t, ok := rt.(*kafka.Transport); ok {
		t.CloseIdleConnections()
	}
}

func (p *Processor) judgeTopics(roles []topicRole, res *kafka.MetadataResponse) (int, error) {
	found := map[string]kafka.Topic{}
	for _, t := range res.Topics {
		found[t.Name] = t
	}
	var errs []error
	count := map[string]int{}
	for _, r := range roles {
		t, ok := found[r.topic]
		switch {
		case !ok || errors.Is(t.Error, kafka.UnknownTopicOrPartition):
			errs = append(errs, fmt.Errorf("%s %q does not exist (create it, or fix the configuration)", r.field, r.topic))
		case t.Error != nil:
			errs = append(errs, fmt.Errorf("%s %q: %w", r.field, r.topic, t.Error))
		case len(t.Partitions) == 0:
			errs = append(errs, fmt.Errorf("%s %q has no partitions", r.field, r.topic))
		default:
			count[r.topic] = len(t.Partitions)
		}
	}
	in, lab := count[p.cfg.InputTopic], count[p.cfg.LabelsTopic]
	if p.cfg.LabelsTopic != "" && in > 0 && lab > 0 && in != lab {
		errs = append(errs, fmt.Errorf("LabelsTopic %q has %d partitions, InputTopic %q has %d: they must be co-partitioned (same count, same key partitioner)",
			p.cfg.LabelsTopic, lab, p.cfg.InputTopic, in))
	}
	if len(errs) > 0 {
		return 0, fmt.Errorf("%w: %w", ErrClusterMismatch, errors.Join(errs...))
	}
	return in, nil
}

// checkSpec reads the meta of every partition that may be stored (those of
// the input topic and those the store says it held) and refuses a spec hash
// other than this processor's.
func (p *Processor) checkSpec(store *checkpoint.Store, parts int) error {
	cand := map[int]bool{}
	for i := 0; i < parts; i++ {
		cand[i] = true
	}
	if held, err := store.Held(); err == nil {
		for _, h := range held {
			cand[h] = true
		}
	}
	var bad []int
	for part := range cand {
		meta, ok, err := store.Meta(part)
		if err != nil {
			return fmt.Errorf("%w: read meta of partition %d: %w", errStoreFailed, part, err)
		}
		if !ok {
			continue
		}
		h, err := metaSpecHash(meta)
		if err != nil {
			return fmt.Errorf("%w: partition %d: %w", ErrSpecMismatch, part, err)
		}
		if h != p.specHash {
			bad = append(bad, part)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Ints(bad)
	s := make([]string, len(bad))
	for i, b := range bad {
		s[i] = fmt.Sprint(b)
	}
	return fmt.Errorf("%w: partitions %s of CheckpointDir %q were written with another model spec; use a new directory (or consumer group) for a new model",
		ErrSpecMismatch, strings.Join(s, ","), p.cfg.CheckpointDir)
}

// errEmitterStopped: an output could not be queued because the emitter
// stopped on a non-retriable error.
var errEmitterStopped = errors.New("processor: emitter stopped")

// failure is what stopped the partition, or keys of it.
type failure struct {
	quarantine map[string]error // keys whose stored learner is corrupt (quarantine.go)
	failedErr  error            // the non-retriable error that stopped the partition (fail)
}

// fail stops the partition for a non-retriable error: it is logged with the
// topic and cause, counted (failed_partitions_total), and the processor is
// not ready until the partition is reassigned or the process restarts. The
// other partitions go on.
func (w *worker) fail(err error) {
	if w.failedErr != nil {
		return
	}
	w.failedErr = err
	w.p.setFailed(w.part, err)
	w.log.Error().Err(err).Msg("partition stopped: this error does not go away by retrying; fix the cause and restart (the partition resumes from its last checkpoint); /readyz reports not ready meanwhile")
}

// defaultMaxMessageBytes is Kafka's default max.message.bytes, for a topic
// whose configuration cannot be read.
const defaultMaxMessageBytes = 1000012

// readTopicConfigs reads the max.message.bytes of the topics the processor
// writes (output, dead letters, changelog), so that the producer never
// builds a record batch a topic would refuse (the limit counts the whole
// encoded batch, headers and framing included), and the changelog's
// delete.retention.ms (how long a tombstone stays: a standby copy older
// than it may miss an erasure).
func (p *Processor) readTopicConfigs(ctx context.Context) error {
	topics := []string{p.cfg.OutputTopic, p.cfg.DLQTopic}
	if p.cfg.Changelog.Topic != "" {
		topics = append(topics, p.cfg.Changelog.Topic)
	}
	req := &kafka.DescribeConfigsRequest{}
	for _, t := range topics {
		req.Resources = append(req.Resources, kafka.DescribeConfigRequestResource{ResourceType: kafka.ResourceTypeTopic,
			ResourceName: t, ConfigNames: []string{"max.message.bytes", "delete.retention.ms"}})
	}
	limits := map[string]int32{}
	p.deleteRetention = defaultDeleteRetention
	err := retry(ctx, p.log, "describe topic configs", p.cfg.RetryBackoffMax, func() error {
		res, err := p.admin.DescribeConfigs(ctx, req)
		if err != nil {
			return err
		}
		for _, r := range res.Resources {
			if r.Error != nil {
				p.log.Warn().Err(r.Error).Str("topic", r.ResourceName).Int("assumed", defaultMaxMessageBytes).
					Msg("cannot read the topic's max.message.bytes; assuming Kafka's default")
				continue
			}
			for _, e := range r.ConfigEntries {
				v, err := strconv.ParseInt(e.ConfigValue, 10, 64)
				switch {
				case err != nil || v <= 0:
				case e.ConfigName == "max.message.bytes" && v <= math.MaxInt32:
					limits[r.ResourceName] = int32(v)
				case e.ConfigName == "delete.retention.ms" && r.ResourceName == p.cfg.Changelog.Topic:
					p.deleteRetention = time.Duration(v) * time.Millisecond
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.limits = limits
	if t := p.cfg.Changelog.Topic; t != "" {
		p.changelogLimit = int(p.batchLimit(t))
	}
	p.log.Debug().Interface("max_message_bytes", limits).Dur("changelog_delete_retention", p.deleteRetention).Msg("topic configs")
	return nil
}

// defaultDeleteRetention is Kafka's default delete.retention.ms.
const defaultDeleteRetention = 24 * time.Hour

// batchLimit is topic's largest record batch: its max.message.bytes.
func (p *Processor) batchLimit(topic string) int32 {
	if v, ok := p.limits[topic]; ok {
		return v
	}
	return defaultMaxMessageBytes
}
