package config

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/processor"
)

// ProcessorConfig maps the configuration onto processor.Config, with the
// kafka-go Dialer and Transport carrying TLS and SASL, and the sticky
// balancer (identity kafka.instance_id, else processor.MemberIdentity())
// offered before range so that partitions stay where their state is. Call
// Validate first.
func (c *Config) ProcessorConfig(logger zerolog.Logger, reg prometheus.Registerer) (processor.Config, error) {
	dialer, transport, err := c.Kafka.Clients()
	if err != nil {
		return processor.Config{}, err
	}
	identity := c.Kafka.InstanceID
	if identity == "" {
		identity = processor.MemberIdentity()
	}
	return processor.Config{
		Brokers:              append([]string(nil), c.Kafka.Brokers...),
		Group:                c.Kafka.Group,
		InputTopic:           c.Kafka.InputTopic,
		OutputTopic:          c.Kafka.OutputTopic,
		DLQTopic:             c.Kafka.DLQTopic,
		LabelsTopic:          c.Kafka.LabelsTopic,
		StartOffset:          c.Kafka.StartOffset,
		OffsetReset:          c.Kafka.OffsetReset,
		WrongPartition:       c.Kafka.WrongPartition,
		MaxTsSkew:            maxTsSkew(c.Labels.MaxTsSkew),
		MergeWait:            c.Labels.MergeWait,
		Model:                c.Model,
		CheckpointDir:        c.Checkpoint.Dir,
		CheckpointInterval:   c.Checkpoint.Interval,
		CheckpointMaxRecords: c.Checkpoint.MaxRecords,
		LabelsTTL:            c.Labels.TTL,
		MaxPending:           c.Labels.MaxPending,
		MaxLearners:          c.Cache.MaxLearners,
		TopK:                 c.Output.TopK,
		MaxValueBytes:        c.Kafka.MaxValueBytes,
		ShutdownGrace:        c.Shutdown.Grace,
		BatchTimeout:         c.Output.BatchTimeout,
		SessionTimeout:       c.Kafka.SessionTimeout,
		HeartbeatInterval:    c.Kafka.HeartbeatInterval,
		RebalanceTimeout:     c.Kafka.RebalanceTimeout,
		RetryBackoffMax:      c.Kafka.RetryBackoffMax,
		Dialer:               dialer,
		Transport:            transport,
		GroupBalancers:       []kafka.GroupBalancer{processor.NewStickyBalancer(identity), kafka.RangeGroupBalancer{}},
		Logger:               logger,
		Registerer:           reg,
	}, nil
}

// maxTsSkew maps labels.max_ts_skew (0 = no check) onto processor.Config's
// MaxTsSkew (0 = the default, negative = no check).
func maxTsSkew(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
