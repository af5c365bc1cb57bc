// Package broker runs an embedded Kafka-protocol broker (franz-go's kfake) on
// loopback, for the demo, the end-to-end tests and the benchmarks: real Kafka
// clients (kafka-go, kcat) talk to it over TCP exactly as to a cluster.
package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Options configures Start. The zero value is one broker on a random port.
type Options struct {
	// Port is the listening port of a single broker; 0 picks a free one.
	Port int
	// Brokers is the number of brokers when Port is 0 (default 1).
	Brokers int
	// TLS, when set, makes the brokers speak TLS only.
	TLS *tls.Config
	// Users enables SASL with these accounts (mechanism PLAIN,
	// SCRAM-SHA-256 or SCRAM-SHA-512).
	Users []User
	// DataDir persists the log on disk (kfake's DataDir); empty = in memory.
	DataDir string
}

// User is one SASL account of the embedded broker.
type User struct{ Mechanism, Name, Password string }

// Broker is a running embedded cluster.
type Broker struct {
	cluster *kfake.Cluster
	addrs   []string

	mu        sync.Mutex
	compacted map[string]bool // topic NUL partition: CompactLikeKafka installed
}

// Start starts the cluster; Close stops it.
func Start(o Options) (*Broker, error) {
	opts := []kfake.Opt{
		// Short sessions let a killed consumer's partitions move quickly.
		kfake.GroupMinSessionTimeout(time.Second),
		kfake.DefaultNumPartitions(1),
	}
	switch {
	case o.Port != 0:
		opts = append(opts, kfake.Ports(o.Port))
	case o.Brokers > 1:
		opts = append(opts, kfake.NumBrokers(o.Brokers))
	default:
		opts = append(opts, kfake.NumBrokers(1))
	}
	if o.TLS != nil {
		opts = append(opts, kfake.TLS(o.TLS))
	}
	if len(o.Users) > 0 {
		opts = append(opts, kfake.EnableSASL())
		for _, u := range o.Users {
			opts = append(opts, kfake.Superuser(u.Mechanism, u.Name, u.Password))
		}
	}
	if o.DataDir != "" {
		opts = append(opts, kfake.DataDir(o.DataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("broker: start kfake: %w", err)
	}
	return &Broker{cluster: c, addrs: c.ListenAddrs()}, nil
}

// Addrs are the brokers' host:port addresses (127.0.0.1).
func (b *Broker) Addrs() []string { return append([]string(nil), b.addrs...) }

// Cluster exposes kfake for fault injection in tests.
func (b *Broker) Cluster() *kfake.Cluster { return b.cluster }

// Close stops the cluster.
func (b *Broker) Close() { b.cluster.Close() }

// CreateTopics creates each topic with the given partition count (an
// existing topic is not an error).
func (b *Broker) CreateTopics(ctx context.Context, partitions int, topics ...string) error {
	return CreateTopics(ctx, b.addrs, partitions, topics...)
}

// CreateTopics creates each topic, with the given partition count, on the
// cluster at addrs (an existing topic is not an error).
func CreateTopics(ctx context.Context, addrs []string, partitions int, topics ...string) error {
	cl := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 10 * time.Second}
	req := &kafka.CreateTopicsRequest{}
	for _, t := range topics {
		req.Topics = append(req.Topics, kafka.TopicConfig{Topic: t, NumPartitions: partitions, ReplicationFactor: 1})
	}
	resp, err := cl.CreateTopics(ctx, req)
	if err != nil {
		return fmt.Errorf("broker: create topics %v: %w", topics, err)
	}
	for t, e := range resp.Errors {
		if e != nil && !errors.Is(e, kafka.TopicAlreadyExists) {
			return fmt.Errorf("broker: create topic %s: %w", t, e)
		}
	}
	return nil
}

// DeleteTopics deletes topics and their records on the cluster at addrs (a
// benchmark's rounds give the memory of the embedded broker back).
func DeleteTopics(ctx context.Context, addrs []string, topics ...string) error {
	cl := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 10 * time.Second}
	resp, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: topics})
	if err != nil {
		return fmt.Errorf("broker: delete topics %v: %w", topics, err)
	}
	for t, e := range resp.Errors {
		if e != nil {
			return fmt.Errorf("broker: delete topic %s: %w", t, e)
		}
	}
	return nil
}
