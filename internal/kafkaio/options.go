package kafkaio

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// Options configures a Client. Zero values take the documented defaults;
// Validate reports the first invalid field by name.
type Options struct {
	// Brokers are the bootstrap addresses (host:port). Required.
	Brokers []string
	// ClientID names the client to the brokers. Default "kernelstream".
	ClientID string
	// TLS, when set, is used for every connection. Default nil = plaintext.
	TLS *tls.Config
	// SASL, when set, authenticates every connection. Default nil = none.
	SASL *SASL

	// ReadUncommitted makes readers return records of open and aborted
	// transactions too. Default false: read_committed, as a stream
	// processor that must never learn from an aborted write needs.
	ReadUncommitted bool
	// FetchMaxWait is how long a broker may hold a fetch for records to
	// arrive. Records are answered as soon as they exist, so it costs no
	// latency to a busy partition; it bounds how long a partition that
	// joins the fetch (newly read, or resumed after its queue was full)
	// waits for the fetch in flight to its leader, which idle partitions
	// keep waiting (measured: a resumed partition's last records 400 ms
	// late with 500 ms). Default 100ms: an idle member sends each broker
	// about ten empty incremental fetches a second.
	FetchMaxWait time.Duration
	// FetchMaxPartitionBytes is the most a fetch asks of one partition
	// (a larger single batch still comes whole, KIP-74). Default 1 MiB.
	FetchMaxPartitionBytes int32
	// ReaderQueueBytes bounds the record bytes a Reader holds fetched
	// ahead of the engine: past it the partition's fetching pauses until
	// the engine has taken half of them. Default 8 MiB.
	ReaderQueueBytes int

	// Compression of produced batches: "none", "gzip", "snappy", "lz4" or
	// "zstd". Default "lz4". Batches under minCompressBytes stay
	// uncompressed whatever the codec (compress.go).
	Compression string
	// TransactionCompression is the compression of the transactional
	// producers' batches (Client.Transactional), with Compression's
	// choices. Default "": Compression.
	TransactionCompression string
	// Linger is how long a produced record may wait for its batch to fill
	// (Kafka's linger.ms). Default 0: records go as soon as the
	// connection is free, and those produced meanwhile form the next
	// batch.
	Linger time.Duration
	// BatchMaxBytes, when set, is the largest encoded record batch for a
	// topic: the topic's max.message.bytes as read from the brokers (a
	// batch that the broker would refuse is never built). Default: Kafka's
	// default max.message.bytes (1000012) for every topic.
	BatchMaxBytes func(topic string) int32
	// MaxBufferedBytes bounds the record bytes produced but not yet
	// acknowledged, process-wide; Produce blocks beyond it. Default 256 MiB.
	MaxBufferedBytes int
	// TransactionTimeout bounds a transaction's life on the coordinator:
	// one left open by a producer that stopped is aborted after it.
	// Default DefaultTransactionTimeout (1 minute).
	TransactionTimeout time.Duration

	// Logger receives the client's warnings and errors (and its info
	// messages at debug level). Default: discard.
	Logger zerolog.Logger
}

// SASL is a SASL/PLAIN or SASL/SCRAM account.
type SASL struct {
	// Mechanism is "plain", "scram-sha-256" or "scram-sha-512".
	Mechanism string
	Username  string
	Password  string
}

// Defaults of Options.
const (
	DefaultClientID               = "kernelstream"
	DefaultFetchMaxWait           = 100 * time.Millisecond
	DefaultFetchMaxPartitionBytes = 1 << 20
	DefaultReaderQueueBytes       = 8 << 20
	DefaultCompression            = "lz4"
	DefaultMaxBufferedBytes       = 256 << 20
)

// Validate reports the first invalid field.
func (o Options) Validate() error {
	if len(o.Brokers) == 0 {
		return errors.New("kafkaio: Brokers: at least one bootstrap address is required")
	}
	if _, ok := codecs[o.Compression]; !ok && o.Compression != "" {
		return fmt.Errorf("kafkaio: Compression %q: want none, gzip, snappy, lz4 or zstd", o.Compression)
	}
	if _, ok := codecs[o.TransactionCompression]; !ok && o.TransactionCompression != "" {
		return fmt.Errorf("kafkaio: TransactionCompression %q: want none, gzip, snappy, lz4 or zstd", o.TransactionCompression)
	}
	if s := o.SASL; s != nil {
		switch s.Mechanism {
		case "plain", "scram-sha-256", "scram-sha-512":
		default:
			return fmt.Errorf("kafkaio: SASL.Mechanism %q: want plain, scram-sha-256 or scram-sha-512", s.Mechanism)
		}
	}
	switch {
	case o.FetchMaxWait < 0:
		return fmt.Errorf("kafkaio: FetchMaxWait %v is negative", o.FetchMaxWait)
	case o.FetchMaxPartitionBytes < 0:
		return fmt.Errorf("kafkaio: FetchMaxPartitionBytes %d is negative", o.FetchMaxPartitionBytes)
	case o.ReaderQueueBytes < 0:
		return fmt.Errorf("kafkaio: ReaderQueueBytes %d is negative", o.ReaderQueueBytes)
	case o.Linger < 0:
		return fmt.Errorf("kafkaio: Linger %v is negative", o.Linger)
	case o.MaxBufferedBytes < 0:
		return fmt.Errorf("kafkaio: MaxBufferedBytes %d is negative", o.MaxBufferedBytes)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.ClientID == "" {
		o.ClientID = DefaultClientID
	}
	if o.FetchMaxWait == 0 {
		o.FetchMaxWait = DefaultFetchMaxWait
	}
	if o.FetchMaxPartitionBytes == 0 {
		o.FetchMaxPartitionBytes = DefaultFetchMaxPartitionBytes
	}
	if o.ReaderQueueBytes == 0 {
		o.ReaderQueueBytes = DefaultReaderQueueBytes
	}
	if o.Compression == "" {
		o.Compression = DefaultCompression
	}
	if o.TransactionCompression == "" {
		o.TransactionCompression = o.Compression
	}
	if o.MaxBufferedBytes == 0 {
		o.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	return o
}
