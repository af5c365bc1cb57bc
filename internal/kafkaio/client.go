package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Client is the Cluster of a real Kafka cluster: one kgo client that reads
// every partition the engine asks for (a poller routes fetched records to
// each partition's Reader) and produces with the idempotent producer.
type Client struct {
	cl   *kgo.Client
	opts Options
	log  zerolog.Logger

	mu         sync.Mutex
	readers    map[topicPartition]*reader
	ops        []readOp
	pollCancel context.CancelFunc // cancels the poll in progress, so that ops apply at once
	stop       context.CancelFunc
	polling    chan struct{} // closed when the poller has returned
}

var _ Cluster = (*Client)(nil)

type topicPartition struct {
	topic string
	part  int32
}

var codecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

// New returns a client; it connects lazily. Close it when done.
func New(o Options) (*Client, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	isolation := kgo.ReadCommitted()
	if o.ReadUncommitted {
		isolation = kgo.ReadUncommitted()
	}
	c := &Client{opts: o, log: o.Logger, readers: map[topicPartition]*reader{}, polling: make(chan struct{})}
	kopts := append(o.connOpts(), o.producerOpts()...)
	kopts = append(kopts,
		kgo.FetchIsolationLevel(isolation),
		// Control records come back so that a reader's position moves
		// past transaction markers (Chunk.Next): the merge and the
		// restore see a partition whose tail is a marker as read.
		kgo.KeepControlRecords(),
		// Every offset reset is the engine's to decide, log and count
		// (ErrOutOfRange); a detected truncation still resumes where the
		// log diverged and is reported as *DataLoss.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxWait(o.FetchMaxWait),
		kgo.FetchMaxPartitionBytes(o.FetchMaxPartitionBytes),
	)
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: %w", err)
	}
	c.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	go c.poll(ctx)
	return c, nil
}

// connOpts are the options of every client: where the brokers are, how to
// connect and authenticate, how to log.
func (o Options) connOpts() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.Brokers...),
		kgo.ClientID(o.ClientID),
		kgo.WithLogger(kgoLogger{o.Logger}),
		// A leader move answered NOT_LEADER_OR_FOLLOWER refreshes the
		// metadata at once; 1 s (not kgo's 5 s) bounds how soon a second
		// move can be followed.
		kgo.MetadataMinAge(time.Second),
	}
	if o.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(o.TLS))
	}
	if o.SASL != nil {
		opts = append(opts, kgo.SASL(mechanism(o.SASL)))
	}
	return opts
}

// producerOpts are the options of every producer, idempotent or
// transactional.
func (o Options) producerOpts() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(codecs[o.Compression]),
		kgo.WithCompressor(compressor(o.Compression)),
		kgo.ProducerLinger(o.Linger),
		kgo.MaxBufferedBytes(o.MaxBufferedBytes),
		kgo.MaxBufferedRecords(1 << 20), // the byte bound is the one that matters
		kgo.RecordPartitioner(partitioner{kgo.StickyKeyPartitioner(nil)}),
	}
	if o.BatchMaxBytes != nil {
		opts = append(opts, kgo.ProducerBatchMaxBytesFn(o.BatchMaxBytes))
	}
	return opts
}

func mechanism(s *SASL) sasl.Mechanism {
	switch s.Mechanism {
	case "plain":
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()
	case "scram-sha-256":
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()
	}
	return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()
}

// Close stops every reader and closes the connections. Records produced
// and not yet acknowledged fail (their done is called).
func (c *Client) Close() {
	c.stop()
	<-c.polling
	c.cl.Close()
}

// Offsets implements Cluster: two ListOffsets requests, routed by kgo to
// the partition's leader.
func (c *Client) Offsets(ctx context.Context, topic string, partition int32) (Range, error) {
	start, err := c.listOffset(ctx, topic, partition, -2)
	if err != nil {
		return Range{}, err
	}
	end, err := c.listOffset(ctx, topic, partition, -1)
	if err != nil {
		return Range{}, err
	}
	return Range{Start: start, End: end}, nil
}

func (c *Client) listOffset(ctx context.Context, topic string, partition int32, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	if !c.opts.ReadUncommitted {
		req.IsolationLevel = 1 // the end is the last stable offset
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.CurrentLeaderEpoch = -1
	rp.Timestamp = ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return 0, fmt.Errorf("list offsets of %s/%d: %w", topic, partition, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Partition != partition || t.Topic != topic {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return 0, fmt.Errorf("list offsets of %s/%d: %w", topic, partition, err)
			}
			return p.Offset, nil
		}
	}
	return 0, fmt.Errorf("list offsets of %s/%d: no answer for the partition", topic, partition)
}

// Partitions asks a broker for topic's partition count (not a cached
// answer: partitions added since show).
func (c *Client) Partitions(ctx context.Context, topic string) (int, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return 0, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == topic {
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				return 0, fmt.Errorf("metadata of %s: %w", topic, err)
			}
			return len(t.Partitions), nil
		}
	}
	return 0, fmt.Errorf("metadata of %s: no answer for the topic", topic)
}

// AddPartitions grows topic to count partitions; a topic that has them
// already (another member grew it first) is no error.
func (c *Client) AddPartitions(ctx context.Context, topic string, count int) error {
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, int32(count)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, c.cl)
	if err == nil {
		for _, t := range resp.Topics {
			if e := kerr.ErrorForCode(t.ErrorCode); e != nil && t.Topic == topic && !errors.Is(e, kerr.InvalidPartitions) {
				err = e
			}
		}
	}
	if err != nil {
		return fmt.Errorf("add partitions to %s up to %d: %w", topic, count, err)
	}
	return nil
}

// kgoLogger passes kgo's warnings and errors on, its info at debug level.
type kgoLogger struct{ l zerolog.Logger }

func (k kgoLogger) Level() kgo.LogLevel {
	switch lvl := k.l.GetLevel(); {
	case lvl <= zerolog.DebugLevel:
		return kgo.LogLevelInfo
	case lvl <= zerolog.WarnLevel:
		return kgo.LogLevelWarn
	case lvl <= zerolog.ErrorLevel:
		return kgo.LogLevelError
	}
	return kgo.LogLevelNone
}

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var ev *zerolog.Event
	switch level {
	case kgo.LogLevelError:
		ev = k.l.Error()
	case kgo.LogLevelWarn:
		ev = k.l.Warn()
	default:
		ev = k.l.Debug()
	}
	ev = ev.Str("client", "kgo")
	for i := 0; i+1 < len(keyvals); i += 2 {
		if key, ok := keyvals[i].(string); ok {
			ev = ev.Interface(key, keyvals[i+1])
		}
	}
	ev.Msg(msg)
}
