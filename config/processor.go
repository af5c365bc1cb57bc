package config

import (
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/processor"
)

// MemberIdentity is the stable identity of this process for the sticky
// balancer when kafka.instance_id is empty: the POD_NAME environment
// variable (set from the downward API by the StatefulSet in deployments/k8s),
// else the host name (the pod name in Kubernetes too), else "". It lives
// here, with the other environment reading, so that package processor never
// reads the environment.
func MemberIdentity() string {
	if v := strings.TrimSpace(os.Getenv("POD_NAME")); v != "" {
		return v
	}
	if h, err := os.Hostname(); err == nil {
		return h
	}
	return ""
}

// ProcessorConfig maps the configuration onto processor.Config, with the
// TLS configuration and SASL account read from their files, and the sticky
// balancer (identity kafka.instance_id, else MemberIdentity())
// offered before range so that partitions stay where their state is. Call
// Validate first.
func (c *Config) ProcessorConfig(logger zerolog.Logger, reg prometheus.Registerer) (processor.Config, error) {
	tc, sasl, err := c.Kafka.Security()
	if err != nil {
		return processor.Config{}, err
	}
	identity := c.Kafka.InstanceID
	if identity == "" {
		identity = MemberIdentity()
	}
	sticky := processor.NewStickyBalancer(identity)
	scoring := processor.ScoringConfig{Addr: c.Serve.Advertised(), Timeout: c.Serve.Timeout}
	sticky.SetAddr(scoring.Addr)
	return processor.Config{
		Brokers:               append([]string(nil), c.Kafka.Brokers...),
		Group:                 c.Kafka.Group,
		InputTopic:            c.Kafka.InputTopic,
		OutputTopic:           c.Kafka.OutputTopic,
		DLQTopic:              c.Kafka.DLQTopic,
		LabelsTopic:           c.Kafka.LabelsTopic,
		StartOffset:           c.Kafka.StartOffset,
		OffsetReset:           c.Kafka.OffsetReset,
		WrongPartition:        c.Kafka.WrongPartition,
		MaxTsSkew:             maxTsSkew(c.Labels.MaxTsSkew),
		MergeWait:             c.Labels.MergeWait,
		Model:                 c.Model,
		CheckpointDir:         c.Checkpoint.Dir,
		Changelog:             c.processorChangelog(),
		CheckpointInterval:    c.Checkpoint.Interval,
		CheckpointMaxRecords:  c.Checkpoint.MaxRecords,
		CheckpointMemTableMiB: c.Checkpoint.MemTableMiB,
		CheckpointStoreEvery:  c.Checkpoint.StoreEvery,
		CheckpointMinFreeMiB:  c.Checkpoint.MinFreeMiB,
		LabelsTTL:             c.Labels.TTL,
		KeyTTL:                c.State.KeyTTL,
		MaxPending:            c.Labels.MaxPending,
		MaxPendingTotal:       c.Labels.MaxPendingTotal,
		MaxLearners:           c.Cache.MaxLearners,
		TopK:                  c.Output.TopK,
		MaxValueBytes:         c.Kafka.MaxValueBytes,
		MaxKeyBytes:           c.Kafka.MaxKeyBytes,
		MaxIDBytes:            c.Kafka.MaxIDBytes,
		PropagateHeaders:      append([]string(nil), c.Output.Headers...),
		ShutdownGrace:         c.Shutdown.Grace,
		BatchTimeout:          c.Output.BatchTimeout,
		Compression:           c.Output.Compression,
		OutputDelivery:        c.Output.Delivery,
		SessionTimeout:        c.Kafka.SessionTimeout,
		HeartbeatInterval:     c.Kafka.HeartbeatInterval,
		RebalanceTimeout:      c.Kafka.RebalanceTimeout,
		RetryBackoffMax:       c.Kafka.RetryBackoffMax,
		ClientID:              c.Kafka.ClientID,
		TLS:                   tc,
		SASL:                  sasl,
		IsolationLevel:        c.Kafka.IsolationLevel,
		GroupBalancers:        []kafka.GroupBalancer{sticky, kafka.RangeGroupBalancer{}},
		Scoring:               scoring,
		Logger:                logger,
		Registerer:            reg,
	}, nil
}

func (c *Config) processorChangelog() processor.ChangelogConfig {
	if !c.Changelog.Enabled {
		return processor.ChangelogConfig{}
	}
	return processor.ChangelogConfig{Topic: c.ChangelogTopic(), ReplicationFactor: c.Changelog.ReplicationFactor,
		MinInsyncReplicas: c.Changelog.MinInsyncReplicas, MaxMessageBytes: c.Changelog.MaxMessageBytes, MaxCompactionLag: c.Changelog.MaxCompactionLag,
		StandbyReplicas: c.Changelog.StandbyReplicas, Compression: c.Changelog.Compression}
}

// maxTsSkew maps labels.max_ts_skew (0 = no check) onto processor.Config's
// MaxTsSkew (0 = the default, negative = no check).
func maxTsSkew(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
