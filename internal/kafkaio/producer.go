package kafkaio

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produced is a Record's kgo counterpart, kept with it (Record.produced)
// for its next Produce. Its promise is a closure bound to it once, when it
// is made, so the promise finds it again without a map or an allocation per
// record. The kgo record's Context is the caller's, which kgo may still
// read after the promise (a wait for an unknown topic keeps the first
// record's context): nothing of the wrapper's own is exposed to kgo but the
// record it reuses.
type produced struct {
	kr      kgo.Record
	hdrs    []kgo.RecordHeader
	src     *Record
	done    func(*Record, error)
	txn     *txn // the transaction it belongs to, if any: a failure fails it
	promise func(*kgo.Record, error)
}

// Produce implements Cluster.
func (c *Client) Produce(ctx context.Context, r *Record, done func(*Record, error)) {
	produce(ctx, c.cl, nil, r, done)
}

// produce produces r with cl (the idempotent producer, or a transactional
// one).
func produce(ctx context.Context, cl *kgo.Client, in *txn, r *Record, done func(*Record, error)) {
	w := r.produced
	if w == nil {
		w = &produced{}
		w.promise = func(kr *kgo.Record, err error) { delivered(w, kr, err) }
		r.produced = w
	}
	w.src, w.done, w.txn = r, done, in
	w.hdrs = w.hdrs[:0]
	for _, h := range r.Headers {
		w.hdrs = append(w.hdrs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	w.kr = kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: w.hdrs,
		Timestamp: r.Time, Context: ctx}
	cl.Produce(ctx, &w.kr, w.promise)
}

// delivered is the promise of every produced record.
func delivered(w *produced, kr *kgo.Record, err error) {
	r, done, t := w.src, w.done, w.txn
	if err == nil {
		r.Partition, r.Offset = kr.Partition, kr.Offset
	} else if t != nil {
		t.fail(r, err)
		if isFenced(err) {
			err = t.classify("produce", err) // ErrFenced, as Commit would say
		}
	}
	clear(w.hdrs)
	w.src, w.done, w.txn, w.kr = nil, nil, nil, kgo.Record{}
	done(r, err)
}

// partitioner places a record on the partition it names, and a record
// without one (Partition -1) as Kafka's Java client does: murmur2 of the
// key modulo the partition count (kgo's StickyKeyPartitioner; records
// without a key stick to one partition per batch).
type partitioner struct{ keyed kgo.Partitioner }

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return topicPartitioner{p.keyed.ForTopic(topic)}
}

type topicPartitioner struct{ keyed kgo.TopicPartitioner }

func (t topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return r.Partition >= 0 || t.keyed.RequiresConsistency(r)
}

func (t topicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Partition >= 0 {
		return int(r.Partition)
	}
	return t.keyed.Partition(r, n)
}
