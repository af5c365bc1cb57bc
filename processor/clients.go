package processor

import (
	"fmt"
	"net"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
)

// The processor's two Kafka clients, from one set of settings (brokers,
// client id, TLS, SASL): kafka-go for the consumer group and the admin
// requests of the start-up checks, franz-go's kgo (package kafkaio) for
// the record path. README "Dependencies" says why each.

// dialTimeout bounds one connection attempt to a broker; every caller
// retries with backoff above it.
const dialTimeout = 10 * time.Second

// dialer is the consumer group's (kafka-go).
func (p *Processor) dialer() (*kafka.Dialer, error) {
	mech, err := p.saslMechanism()
	if err != nil {
		return nil, err
	}
	return &kafka.Dialer{ClientID: p.cfg.ClientID, Timeout: dialTimeout, DualStack: true, TLS: p.cfg.TLS, SASLMechanism: mech}, nil
}

// client is a kafka-go admin client with its own Transport: a transport
// caches a failed dial for its address, and the process's other clients
// must not inherit that from the start-up checks run before the brokers
// were up.
func (p *Processor) client() *kafka.Client {
	mech, _ := p.saslMechanism() // Validate checked the mechanism
	t := &kafka.Transport{Dial: (&net.Dialer{Timeout: dialTimeout}).DialContext, DialTimeout: dialTimeout,
		ClientID: p.cfg.ClientID, TLS: p.cfg.TLS, SASL: mech}
	return &kafka.Client{Addr: kafka.TCP(p.cfg.Brokers...), Transport: t, Timeout: 10 * time.Second}
}

func (p *Processor) saslMechanism() (sasl.Mechanism, error) {
	s := p.cfg.SASL
	if s == nil {
		return nil, nil
	}
	switch s.Mechanism {
	case "plain":
		return plain.Mechanism{Username: s.Username, Password: s.Password}, nil
	case "scram-sha-256", "scram-sha-512":
		algo := scram.SHA256
		if s.Mechanism == "scram-sha-512" {
			algo = scram.SHA512
		}
		m, err := scram.Mechanism(algo, s.Username, s.Password)
		if err != nil {
			return nil, fmt.Errorf("processor: SASL: %w", err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("processor: SASL.Mechanism %q: want plain, scram-sha-256 or scram-sha-512", s.Mechanism)
}

// kafkaOptions are the record path's client options. batchMax gives each
// topic's largest record batch (its max.message.bytes).
func (p *Processor) kafkaOptions(batchMax func(topic string) int32) kafkaio.Options {
	o := kafkaio.Options{Brokers: p.cfg.Brokers, ClientID: p.cfg.ClientID, TLS: p.cfg.TLS,
		ReadUncommitted: p.cfg.IsolationLevel == "read_uncommitted",
		Compression:     p.cfg.Compression, TransactionCompression: p.transactionCompression(),
		Linger: p.cfg.BatchTimeout, BatchMaxBytes: batchMax, Logger: p.log,
		// A record up to MaxValueBytes must come whole, and a queue holds
		// at least a few of them.
		ReaderQueueBytes: max(kafkaio.DefaultReaderQueueBytes, 4*p.cfg.MaxValueBytes), TransactionTimeout: p.cfg.txnTimeout}
	if s := p.cfg.SASL; s != nil {
		o.SASL = &kafkaio.SASL{Mechanism: s.Mechanism, Username: s.Username, Password: s.Password}
	}
	return o
}

// transactionCompression is the codec of the partitions' transactional
// producers: the changelog's, unless the outputs ride the same
// transactions (exactly once), whose batches keep the outputs' codec.
func (p *Processor) transactionCompression() string {
	if p.cfg.OutputDelivery == "exactly_once" {
		return p.cfg.Compression
	}
	return p.cfg.Changelog.Compression
}
