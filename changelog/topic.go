package changelog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

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
	// bundle (a key's learner and pending entries) a checkpoint may write.
	MaxMessageBytes int
}

// ErrTopic reports a changelog topic that exists but cannot be used; the
// consumer refuses to start with it.
var ErrTopic = errors.New("changelog topic unusable")

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
	if n := len(found.Partitions); n != partitions {
		return fmt.Errorf("%w: %s has %d partitions, the input has %d (partition p's state is in changelog partition p): delete it or name another with changelog.topic",
			ErrTopic, topic, n, partitions)
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
	if !hasCompact(policy) {
		return fmt.Errorf("%w: %s has cleanup.policy=%q, want compact (with delete, retention would drop state): kafka-configs --alter --add-config cleanup.policy=compact",
			ErrTopic, topic, policy)
	}
	return nil
}

func hasCompact(policy string) bool {
	for _, p := range strings.Split(policy, ",") {
		if strings.TrimSpace(p) == "compact" {
			return true
		}
	}
	return false
}

func create(ctx context.Context, cl *kafka.Client, topic string, partitions int, tc TopicConfig) error {
	entries := []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}}
	if tc.MinInsyncReplicas > 0 {
		entries = append(entries, kafka.ConfigEntry{ConfigName: "min.insync.replicas", ConfigValue: strconv.Itoa(tc.MinInsyncReplicas)})
	}
	if tc.MaxMessageBytes > 0 {
		entries = append(entries, kafka.ConfigEntry{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(tc.MaxMessageBytes)})
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
