package feed

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// Target says where records go.
type Target struct {
	Brokers []string
	Topic   string
	// LabelsTopic receives the delayed labels; empty = Topic.
	LabelsTopic string
	// Transport carries TLS/SASL settings; nil = kafka-go's default.
	Transport kafka.RoundTripper
}

// ProduceOptions pace the producer.
type ProduceOptions struct {
	// Rate is the target number of records per second (0 = as fast as possible).
	Rate float64
	// Batch is the number of records per WriteMessages call (default 500, or
	// Rate/100 below 50,000 records/s so the pacing stays smooth).
	Batch int
	// Progress, if set, is called after each batch with the records written.
	Progress func(written int)
	// OnRecord, if set, sees every record just before it is written (the
	// demo keeps the labels to score predictions with).
	OnRecord func(r *Record)
}

// NewWriter returns the kafka-go Writer the feed uses: murmur2 key hashing
// (the Java client's partitioner, so keys land where other producers put
// them), every replica acknowledging, and a short batch timeout.
func NewWriter(t Target, topic string) *kafka.Writer {
	return &kafka.Writer{
		Addr:         kafka.TCP(t.Brokers...),
		Topic:        topic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 2 * time.Millisecond,
		BatchSize:    1000,
		BatchBytes:   16 << 20,
		Transport:    t.Transport,
	}
}

// sizedWriter is NewWriter with its per-partition batch capped at the
// records one WriteMessages call carries: kafka-go allocates a batch's full
// BatchSize of messages up front, so a paced feed writing a few records a
// call would otherwise clear 1000-message arrays a hundred times a second
// per partition.
func sizedWriter(t Target, topic string, batch int) *kafka.Writer {
	w := NewWriter(t, topic)
	w.BatchSize = min(w.BatchSize, batch)
	return w
}

// batchSize is o.Batch, or by default 500 records, and about 100 batches a
// second when paced below 50,000 records/s: a paced stream, not bursts (at
// 5,000/s, 500-record bursts ten times a second made a latency benchmark
// measure how fast a pipeline drains a burst).
func (o ProduceOptions) batchSize() int {
	switch {
	case o.Batch > 0:
		return o.Batch
	case o.Rate > 0:
		return min(500, max(1, int(o.Rate/100)))
	}
	return 500
}

// catchUpSize is the largest batch: a paced feed behind its schedule (a slow
// broker) writes what is due in batches of up to four times its size, at
// most 500, so that the round trips do not cap its rate.
func (o ProduceOptions) catchUpSize() int {
	batch := o.batchSize()
	if o.Batch > 0 || o.Rate <= 0 {
		return batch
	}
	return min(500, 4*batch) // batchSize is at most 500 here

}

// nextBatch is the size of the next batch of a paced feed that has written
// written records in elapsed: its batch size, or what is due, up to most.
func (o ProduceOptions) nextBatch(batch, most, written int, elapsed time.Duration) int {
	due := int(elapsed.Seconds()*o.Rate) - written
	return min(most, max(batch, due))
}

// Produce writes every record of f to t and returns how many it wrote.
// Records of one key keep their order (one synchronous batch at a time).
func Produce(ctx context.Context, f *Feed, t Target, o ProduceOptions) (int, error) {
	batch, most := o.batchSize(), o.catchUpSize()
	limit := batch
	input := sizedWriter(t, t.Topic, most)
	defer input.Close()
	labels := input
	if t.LabelsTopic != "" && t.LabelsTopic != t.Topic {
		labels = sizedWriter(t, t.LabelsTopic, most)
		defer labels.Close()
	}
	var (
		rec      Record
		inMsgs   []kafka.Message
		lblMsgs  []kafka.Message
		written  int
		start    = time.Now()
		flushErr error
	)
	flush := func() {
		if len(inMsgs) > 0 {
			if err := input.WriteMessages(ctx, inMsgs...); err != nil {
				flushErr = fmt.Errorf("feed: write %s: %w", t.Topic, err)
				return
			}
		}
		if len(lblMsgs) > 0 {
			if err := labels.WriteMessages(ctx, lblMsgs...); err != nil {
				flushErr = fmt.Errorf("feed: write %s: %w", labels.Topic, err)
				return
			}
		}
		written += len(inMsgs) + len(lblMsgs)
		inMsgs, lblMsgs = inMsgs[:0], lblMsgs[:0]
		if o.Progress != nil {
			o.Progress(written)
		}
		if o.Rate > 0 {
			due := start.Add(time.Duration(float64(written) / o.Rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
			}
			limit = o.nextBatch(batch, most, written, time.Since(start))
		}
	}
	for f.Next(&rec) {
		if o.OnRecord != nil {
			o.OnRecord(&rec)
		}
		m := kafka.Message{Key: append([]byte(nil), rec.Key...), Value: append([]byte(nil), rec.Value...)}
		if rec.Label && labels != input {
			lblMsgs = append(lblMsgs, m)
		} else {
			inMsgs = append(inMsgs, m)
		}
		if len(inMsgs)+len(lblMsgs) >= limit {
			// A label must not overtake its features: both writers are
			// flushed together, input first.
			if flush(); flushErr != nil {
				return written, flushErr
			}
		}
		if err := ctx.Err(); err != nil {
			return written, err
		}
	}
	if flush(); flushErr != nil {
		return written, flushErr
	}
	return written, nil
}
