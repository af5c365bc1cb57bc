package changelog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// TopicConfig is how EnsureTopic creates a missing changelog topic.
type TopicConfig struct {
	// ReplicationFactor of a created topic. Default 0 = the broker's
	// default.replication.factor.
	ReplicationFactor int
	// MinInsyncReplicas of a created topic (min.insync.replicas). Default 0
	// = the broker's default.
	MinInsyncReplicas int
	// MaxMessageBytes of a created topic (max.message.bytes): the largest
	// record (a key's learner) a checkpoint may write.
	MaxMessageBytes int
	// MaxCompactionLag of a created topic, as its max.compaction.lag.ms
	// and segment.ms: a record is compacted away (an erased key's state
	// gone) at most this long after a newer record of its key or its
	// tombstone was written. Default 0 = the brokers' defaults (no bound).
	MaxCompactionLag time.Duration
}

// ErrTopic reports a changelog topic that exists but cannot be used; the
// consumer refuses to start with it.
var ErrTopic = errors.New("changelog topic unusable")

// FewerPartitions reports a changelog topic with fewer partitions than the
// input: partitions were added to the input, and the changelog is to grow
// to the same count (partition p's state is in changelog partition p).
type FewerPartitions struct {
	Topic      string
	Have, Want int
}

func (e *FewerPartitions) Error() string {
	return fmt.Sprintf("changelog topic %s has %d partitions, the input %d: partitions were added to the input", e.Topic, e.Have, e.Want)
}

// EnsureTopic creates topic (compacted, partitions partitions) when it does
// not exist, and otherwise checks that it has partitions partitions and
// cleanup.policy=compact, so that a restore can read a partition's state
// from the changelog partition of the same number and compaction keeps the
// newest record of every key. It returns an ErrTopic error naming the topic
// and the problem.
func EnsureTopic(ctx context.Context, cl *kafka.Client, topic string, partitions int, tc TopicConfig) error {
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return fmt.Errorf("changelog topic %s: metadata: %w", topic, err)
	}
	var found *kafka.Topic
	for i := range md.Topics {
		if md.Topics[i].Name == topic && md.Topics[i].Error == nil {
			found = &md.Topics[i]
		}
	}
	if found == nil {
		return create(ctx, cl, topic, partitions, tc)
	}
	switch n := len(found.Partitions); {
	case n > partitions:
		return fmt.Errorf("%w: %s has %d partitions, the input has %d (partition p's state is in changelog partition p; a changelog of another input?): delete it or name another with changelog.topic",
			ErrTopic, topic, n, partitions)
	case n < partitions:
		// Partitions were added to the input: the new ones' state goes
		// into new changelog partitions of the same numbers.
		return &FewerPartitions{Topic: topic, Have: n, Want: partitions}
	}
	res, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"cleanup.policy"},
	}}})
	if err != nil {
		return fmt.Errorf("changelog topic %s: describe configs: %w", topic, err)
	}
	policy := ""
	for _, r := range res.Resources {
		if r.Error != nil {
			return fmt.Errorf("changelog topic %s: describe configs: %w", topic, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == "cleanup.policy" {
				policy = e.ConfigValue
			}
		}
	}
	if !onlyCompact(policy) {
		return fmt.Errorf("%w: %s has cleanup.policy=%q, want compact alone (with delete, retention drops the bundles and markers of keys and partitions that stay idle, and a restore loses them): kafka-configs --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact",
			ErrTopic, topic, policy, topic)
	}
	return nil
}

// onlyCompact reports a cleanup.policy of compact alone.
func onlyCompact(policy string) bool {
	compact := false
	for _, p := range strings.Split(policy, ",") {
		switch strings.TrimSpace(p) {
		case "compact":
			compact = true
		case "":
		default:
			return false
		}
	}
	return compact
}

func create(ctx context.Context, cl *kafka.Client, topic string, partitions int, tc TopicConfig) error {
	entries := []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}}
	if tc.MinInsyncReplicas > 0 {
		entries = append(entries, kafka.ConfigEntry{ConfigName: "min.insync.replicas", ConfigValue: strconv.Itoa(tc.MinInsyncReplicas)})
	}
	if tc.MaxMessageBytes > 0 {
		entries = append(entries, kafka.ConfigEntry{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(tc.MaxMessageBytes)})
	}
	if ms := tc.MaxCompactionLag.Milliseconds(); ms > 0 {
		entries = append(entries, kafka.ConfigEntry{ConfigName: "max.compaction.lag.ms", ConfigValue: strconv.FormatInt(ms, 10)},
			kafka.ConfigEntry{ConfigName: "segment.ms", ConfigValue: strconv.FormatInt(ms, 10)})
	}
	rf := tc.ReplicationFactor
	if rf == 0 {
		rf = -1
	}
	res, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: topic, NumPartitions: partitions, ReplicationFactor: rf, ConfigEntries: entries,
	}}})
	if err != nil {
		return fmt.Errorf("changelog topic %s: create: %w", topic, err)
	}
	if e := res.Errors[topic]; e != nil && !errors.Is(e, kafka.TopicAlreadyExists) {
		return fmt.Errorf("changelog topic %s: create: %w", topic, e)
	}
	return nil
}
