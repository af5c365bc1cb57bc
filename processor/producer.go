package processor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
)

// messageWriter produces a batch of messages and returns when every one is
// acknowledged, or with a kafka.WriteErrors naming the ones that were not
// (nil entries for those that were), or another error when none was.
type messageWriter interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// producer is an emitter's messageWriter: one Produce request per topic
// partition of the batch, sent at once, on kafka-go's protocol client, each
// request's record batch written by the engine (batchEncoder).
//
// It replaces kafka.Writer on the record path because the emitter already
// batches (the records that arrive while a request is in flight form the
// next one): the Writer batches again behind it, which cost per message a
// metadata lookup and a copy into a batch whose buffer is allocated at its
// full BatchSize (512 x 152 bytes at the emitter's size, for what is often
// one prediction at low rates), and per batch a wait of BatchTimeout that
// a synchronous caller cannot fill. Messages keep the Writer's placement:
// kafka.Murmur2Balancer over the topic's partitions (Java's default
// partitioner), the partition count read through the transport's metadata
// cache at each change of topic within a batch.
//
// A producer is used by one goroutine: its buffers are reused batch after
// batch.
type producer struct {
	client      *kafka.Client
	acks        kafka.RequiredAcks
	compression kafka.Compression
	timeout     time.Duration // per batch, as kafka.Writer's WriteTimeout

	balancer kafka.Murmur2Balancer
	ids      []int // 0..n-1, the partitions handed to the balancer
	groups   []produceGroup
	errs     []error // one per group, of the last batch
	wg       sync.WaitGroup
}

// produceGroup is the part of a batch bound for one topic partition.
type produceGroup struct {
	topic     string
	partition int
	idx       []int // indexes into the batch, in order
	enc       batchEncoder
}

// maxRequestBytes bounds the keys and values of one Produce request (before
// compression): Kafka's default message.max.bytes (1 MiB) applies to a
// whole record batch. A larger single message still goes alone, and a
// refusal reaches the emitter as kafka.MessageSizeTooLarge.
const maxRequestBytes = 1 << 20

func newProducer(client *kafka.Client, compression kafka.Compression) *producer {
	return &producer{client: client, acks: kafka.RequireAll, compression: compression, timeout: 10 * time.Second}
}

// WriteMessages implements messageWriter. Requests to different partitions
// go concurrently; within a partition they go in order, and a failure
// leaves the rest of that partition's messages unsent (reported failed),
// so that a retry of the failed ones keeps the partition's order.
func (pr *producer) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, pr.timeout)
	defer cancel()
	if err := pr.group(ctx, msgs); err != nil {
		return err
	}
	if len(pr.groups) == 1 {
		pr.errs[0] = pr.send(ctx, &pr.groups[0], msgs)
	} else {
		for i := range pr.groups {
			pr.wg.Add(1)
			go func() {
				defer pr.wg.Done()
				pr.errs[i] = pr.send(ctx, &pr.groups[i], msgs)
			}()
		}
		pr.wg.Wait()
	}
	var we kafka.WriteErrors
	for i := range pr.groups {
		err := pr.errs[i]
		if err == nil {
			continue
		}
		if we == nil {
			we = make(kafka.WriteErrors, len(msgs))
		}
		for _, j := range pr.groups[i].idx {
			we[j] = err
		}
	}
	if we != nil {
		return we
	}
	return nil
}

// group assigns every message its partition and sorts the batch into
// pr.groups (same topic and partition, batch order kept).
func (pr *producer) group(ctx context.Context, msgs []kafka.Message) error {
	for i := range pr.groups {
		pr.groups[i].idx = pr.groups[i].idx[:0]
	}
	used := 0
	lastTopic, n := "", 0
	for i := range msgs {
		m := &msgs[i]
		if m.Topic != lastTopic || n == 0 {
			var err error
			if n, err = pr.partitions(ctx, m.Topic); err != nil {
				return err
			}
			lastTopic = m.Topic
		}
		part := pr.balancer.Balance(*m, pr.ids[:n]...)
		g := -1
		for k := 0; k < used; k++ {
			if pr.groups[k].partition == part && pr.groups[k].topic == m.Topic {
				g = k
				break
			}
		}
		if g < 0 {
			if used == len(pr.groups) {
				pr.groups = append(pr.groups, produceGroup{})
				pr.errs = append(pr.errs, nil)
			}
			g = used
			used++
			pr.groups[g].topic, pr.groups[g].partition = m.Topic, part
		}
		pr.groups[g].idx = append(pr.groups[g].idx, i)
	}
	pr.groups = pr.groups[:used]
	pr.errs = pr.errs[:used]
	return nil
}

// partitions returns the partition count of topic from the transport's
// metadata cache (kafka.Transport refreshes it every MetadataTTL, 6 s by
// default, and when a request meets a moved leader), as kafka.Writer does.
func (pr *producer) partitions(ctx context.Context, topic string) (int, error) {
	r, err := pr.client.Transport.RoundTrip(ctx, pr.client.Addr, &metadataAPI.Request{TopicNames: []string{topic}})
	if err != nil {
		return 0, fmt.Errorf("metadata of topic %q: %w", topic, err)
	}
	for _, t := range r.(*metadataAPI.Response).Topics {
		if t.Name != topic {
			continue
		}
		if t.ErrorCode != 0 {
			return 0, fmt.Errorf("metadata of topic %q: %w", topic, kafka.Error(t.ErrorCode))
		}
		n := len(t.Partitions)
		if n == 0 {
			break
		}
		for len(pr.ids) < n {
			pr.ids = append(pr.ids, len(pr.ids))
		}
		return n, nil
	}
	return 0, fmt.Errorf("metadata of topic %q: %w", topic, kafka.UnknownTopicOrPartition)
}

// send produces one group in requests of at most maxRequestBytes.
func (pr *producer) send(ctx context.Context, g *produceGroup, msgs []kafka.Message) error {
	for start := 0; start < len(g.idx); {
		end, size := start, 0
		for end < len(g.idx) {
			m := &msgs[g.idx[end]]
			s := len(m.Key) + len(m.Value)
			if end > start && size+s > maxRequestBytes {
				break
			}
			size += s
			end++
		}
		var err error
		for attempt := 0; ; attempt++ {
			if err = pr.produce(ctx, g, msgs, start, end); err == nil || attempt+1 == produceAttempts || !retriable(err) {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
			}
		}
		if err != nil {
			// What was acknowledged stays so: only the rest is reported.
			g.idx = g.idx[start:]
			return fmt.Errorf("produce to %s/%d: %w", g.topic, g.partition, err)
		}
		start = end
	}
	g.idx = g.idx[:0]
	return nil
}

// produceAttempts is how many times a request is tried before its failure
// reaches the emitter (kafka.Writer's MaxAttempts was 3 here): a connection
// that died with a restarted broker fails once, and is not an outage.
const produceAttempts = 3

func (pr *producer) produce(ctx context.Context, g *produceGroup, msgs []kafka.Message, start, end int) error {
	batch, err := g.enc.encode(msgs, g.idx[start:end], pr.compression, time.Now())
	if err != nil {
		return fmt.Errorf("encode a record batch: %w", err)
	}
	res, err := pr.client.RawProduce(ctx, &kafka.RawProduceRequest{Topic: g.topic, Partition: g.partition,
		RequiredAcks: pr.acks, RawRecords: protocol.RawRecordSet{Reader: bytes.NewReader(batch)}})
	if err != nil {
		// RawProduce returns when ctx ends even if kafka-go's connection
		// goroutine has the request and is still copying it: the next
		// attempt must not rewrite the bytes under it.
		g.enc = batchEncoder{}
		return err
	}
	if res == nil {
		return nil
	}
	if res.Error != nil {
		return res.Error
	}
	for _, e := range res.RecordErrors {
		return e
	}
	return nil
}

// retriable is true for network errors and the Kafka errors the protocol
// marks retriable; false for the others (too large, not authorized, ...)
// and for a cancelled or expired context.
func retriable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var code kafka.Error
	if errors.As(err, &code) {
		return code.Temporary()
	}
	return true
}
