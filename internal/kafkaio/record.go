package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Record is one Kafka record as the engine sees it. A fetched record's Key,
// Value and header values point into the client's fetch buffers: they are
// valid until the Chunk holding it is recycled.
type Record struct {
	Topic     string
	Partition int32 // on Produce: -1 lets the partitioner choose (murmur2 of the key)
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
	Time      time.Time // the Kafka timestamp; on Produce, zero means now

	// produced is the client's state for producing this record, made at
	// its first Produce and reused by the next ones: a caller that
	// produces from a fixed set of Records (the engine's emitter) costs
	// no allocation per record.
	produced *produced
}

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Symbolic start offsets for Read. Their values are kafka-go's (and Kafka's
// ListOffsets timestamps), which the engine's stored partition metas use.
const (
	Start int64 = -2 // the log start
	End   int64 = -1 // the log end: only records written from now on
)

// Range is a partition's offsets: [Start, End), End being the last stable
// offset under read_committed (the high-water mark when no transaction is
// open) and the high-water mark under read_uncommitted.
type Range struct{ Start, End int64 }

// Chunk is a run of consecutive records of one partition in offset order,
// or an event of the partition (Err set, no records).
type Chunk struct {
	Records []Record
	// Next is the offset after the last record or control record this
	// chunk covers: the position a reader resumes from. It can be beyond
	// the last record's offset + 1 when transaction markers or aborted
	// records followed it.
	Next int64
	// Gen is the reader's generation when the chunk was fetched; Seek
	// starts a new one, and the chunks of older generations are stale.
	Gen uint64
	// Err, with no records, reports what happened to the partition: a
	// *DataLoss (the client resumed where the log diverged), ErrOutOfRange
	// (the position is outside the log; nothing more comes until Seek), or
	// another error after which the partition is not read again until
	// Seek.
	Err error
	// HighWatermark and StableOffset are the partition's, as of the fetch.
	HighWatermark, StableOffset int64
	// Polled is when the poller took the chunk's records from kgo (Unix
	// nanoseconds): the engine's stage timestamps (processor.StageTimes).
	Polled int64
}

// ErrOutOfRange: the reader's position is outside the log (below its start
// after retention, or past its end after the topic was recreated or the log
// truncated beyond what the client could locate). The engine decides where
// to go on (its offset-reset policy) and calls Seek.
var ErrOutOfRange = errors.New("kafkaio: offset out of range")

// DataLoss reports a log truncation the client detected (KIP-320: an
// unclean leader election, a replica that lost acknowledged records): the
// records from ResetTo to ConsumedTo were replaced or lost. The reader goes
// on from ResetTo.
type DataLoss struct {
	Topic      string
	Partition  int32
	ConsumedTo int64 // the position before the loss was detected
	ResetTo    int64 // where reading resumes
}

func (e *DataLoss) Error() string {
	return fmt.Sprintf("kafkaio: %s/%d lost records: consumed to offset %d, resumed at %d (log truncated: unclean leader election?)",
		e.Topic, e.Partition, e.ConsumedTo, e.ResetTo)
}

// Reader reads one partition: chunks in offset order, fetched ahead of the
// engine within a byte bound.
type Reader interface {
	// Ready is signalled whenever a chunk may be waiting; Next then takes
	// it. Use it in a select; it may fire spuriously.
	Ready() <-chan struct{}
	// Next returns the oldest queued chunk, if any.
	Next() (Chunk, bool)
	// Recycle gives a consumed chunk's record slice back for reuse; its
	// records must not be used after.
	Recycle(Chunk)
	// Seek moves the reader to offset (or Start, End) and returns the
	// generation of the chunks from there; queued and in-flight chunks of
	// older generations are dropped or must be ignored by Gen.
	SetOffset(offset int64) uint64
	// Close stops reading the partition.
	Close()
}

// Cluster is what the engine needs of Kafka.
type Cluster interface {
	// Read returns a reader of topic/partition from offset (or Start, End).
	Read(topic string, partition int32, from int64) Reader
	// Offsets returns the partition's log range, asking the leader.
	Offsets(ctx context.Context, topic string, partition int32) (Range, error)
	// Produce sends r; done is called exactly once, when r is acknowledged
	// by every in-sync replica (err nil) or has failed for good. r and its
	// byte slices must stay untouched until then. Records to the same
	// partition are written, and their done called, in Produce order.
	// Produce blocks while the client's buffer is full, until ctx ends
	// (done is then called with ctx's error).
	Produce(ctx context.Context, r *Record, done func(r *Record, err error))
	// Transactional returns a transactional producer named id (Txn).
	Transactional(id string) (Txn, error)
}
