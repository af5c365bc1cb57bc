// Package kafkaiotest is an in-memory kafkaio.Cluster for tests that drive
// the engine without a broker: produced records are appended to in-memory
// logs and acknowledged at once (or when the test says), and readers serve
// those logs, or chunks the test feeds them one by one.
package kafkaiotest

import (
	"context"
	"sync"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
)

// Cluster is an in-memory kafkaio.Cluster. The zero value is ready to use.
type Cluster struct {
	mu      sync.Mutex
	logs    map[topicPartition][]kafkaio.Record
	readers []*Reader
	hold    bool
	held    []heldRecord
	failErr error
	order   []kafkaio.Record // every record produced, in Produce order
	epochs  map[string]int   // transactional id -> the epoch of its latest Init
}

type topicPartition struct {
	topic string
	part  int32
}

type heldRecord struct {
	r    *kafkaio.Record
	done func(*kafkaio.Record, error)
}

var _ kafkaio.Cluster = (*Cluster)(nil)

// Produce appends a copy of r to its topic's partition (0 when r names
// none) and acknowledges it, at once unless Hold is on.
func (c *Cluster) Produce(ctx context.Context, r *kafkaio.Record, done func(*kafkaio.Record, error)) {
	if err := ctx.Err(); err != nil {
		done(r, err)
		return
	}
	c.mu.Lock()
	if c.failErr != nil {
		err := c.failErr
		c.mu.Unlock()
		done(r, err)
		return
	}
	tp := topicPartition{r.Topic, max(r.Partition, 0)}
	if c.logs == nil {
		c.logs = map[topicPartition][]kafkaio.Record{}
	}
	cp := *r
	cp.Partition, cp.Offset = tp.part, int64(len(c.logs[tp]))
	cp.Key = append([]byte(nil), r.Key...)
	cp.Value = append([]byte(nil), r.Value...)
	cp.Headers = append([]kafkaio.Header(nil), r.Headers...)
	c.logs[tp] = append(c.logs[tp], cp)
	c.order = append(c.order, cp)
	readers := append([]*Reader(nil), c.readers...)
	if c.hold {
		c.held = append(c.held, heldRecord{r, done})
		c.mu.Unlock()
		notify(readers, tp)
		return
	}
	c.mu.Unlock()
	notify(readers, tp)
	r.Partition, r.Offset = cp.Partition, cp.Offset
	done(r, nil)
}

func notify(readers []*Reader, tp topicPartition) {
	for _, rd := range readers {
		if rd.tp == tp {
			rd.signal()
		}
	}
}

// Hold makes Produce keep acknowledgements until Release.
func (c *Cluster) Hold() {
	c.mu.Lock()
	c.hold = true
	c.mu.Unlock()
}

// Release acknowledges every held record and stops holding.
func (c *Cluster) Release() {
	c.mu.Lock()
	held := c.held
	c.held, c.hold = nil, false
	c.mu.Unlock()
	for _, h := range held {
		h.done(h.r, nil)
	}
}

// Fail makes every later Produce fail with err (nil: succeed again).
func (c *Cluster) Fail(err error) {
	c.mu.Lock()
	c.failErr = err
	c.mu.Unlock()
}

// Records returns a copy of what was produced to topic, partition after
// partition, in offset order.
func (c *Cluster) Records(topic string) []kafkaio.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	last := int32(-1)
	for tp := range c.logs {
		if tp.topic == topic {
			last = max(last, tp.part)
		}
	}
	var out []kafkaio.Record
	for p := int32(0); p <= last; p++ {
		out = append(out, c.logs[topicPartition{topic, p}]...)
	}
	return out
}

// Produced returns a copy of every record produced, all topics, in Produce
// order.
func (c *Cluster) Produced() []kafkaio.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]kafkaio.Record(nil), c.order...)
}

// Append writes records to topic/partition as a producer outside the
// engine would (offsets assigned in order).
func (c *Cluster) Append(topic string, partition int32, recs ...kafkaio.Record) {
	for i := range recs {
		r := recs[i]
		r.Topic, r.Partition = topic, partition
		c.Produce(context.Background(), &r, func(*kafkaio.Record, error) {})
	}
}

// Offsets implements kafkaio.Cluster: [0, length of the log).
func (c *Cluster) Offsets(_ context.Context, topic string, partition int32) (kafkaio.Range, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return kafkaio.Range{Start: 0, End: int64(len(c.logs[topicPartition{topic, partition}]))}, nil
}

// Read implements kafkaio.Cluster: a reader serving the in-memory log, a
// chunk of up to 256 records per Next.
func (c *Cluster) Read(topic string, partition int32, from int64) kafkaio.Reader {
	r := &Reader{c: c, tp: topicPartition{topic, partition}, ready: make(chan struct{}, 1)}
	r.SetOffset(from)
	r.gen = 0 // a reader's first chunks are of generation 0, as kafkaio.Client's
	c.mu.Lock()
	c.readers = append(c.readers, r)
	c.mu.Unlock()
	return r
}

// Reader is a kafkaio.Reader of an in-memory log (Cluster.Read), or of the
// chunks a test pushes (NewFeed).
type Reader struct {
	c     *Cluster // nil for a feed
	tp    topicPartition
	mu    sync.Mutex
	pos   int64
	gen   uint64
	fed   []kafkaio.Chunk
	ready chan struct{}
}

// NewFeed returns a reader that hands out the chunks given to Push.
func NewFeed() *Reader { return &Reader{ready: make(chan struct{}, 1)} }

// Push queues a chunk of a feed as it is (its Gen included: 0 until the
// first SetOffset).
func (r *Reader) Push(ch kafkaio.Chunk) {
	r.mu.Lock()
	r.fed = append(r.fed, ch)
	r.mu.Unlock()
	r.signal()
}

func (r *Reader) signal() {
	select {
	case r.ready <- struct{}{}:
	default:
	}
}

func (r *Reader) Ready() <-chan struct{} { return r.ready }

func (r *Reader) Next() (kafkaio.Chunk, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		if len(r.fed) == 0 {
			return kafkaio.Chunk{}, false
		}
		ch := r.fed[0]
		r.fed = r.fed[1:]
		return ch, true
	}
	r.c.mu.Lock()
	log := r.c.logs[r.tp]
	r.c.mu.Unlock()
	if r.pos >= int64(len(log)) {
		return kafkaio.Chunk{}, false
	}
	end := min(int64(len(log)), r.pos+256)
	ch := kafkaio.Chunk{Records: append([]kafkaio.Record(nil), log[r.pos:end]...), Next: end, Gen: r.gen,
		HighWatermark: int64(len(log)), StableOffset: int64(len(log))}
	r.pos = end
	if end < int64(len(log)) {
		r.signal()
	}
	return ch, true
}

func (r *Reader) Recycle(kafkaio.Chunk) {}

func (r *Reader) SetOffset(offset int64) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	r.fed = nil
	switch offset {
	case kafkaio.Start:
		r.pos = 0
	case kafkaio.End:
		if r.c != nil {
			r.c.mu.Lock()
			r.pos = int64(len(r.c.logs[r.tp]))
			r.c.mu.Unlock()
		}
	default:
		r.pos = offset
	}
	r.signal()
	return r.gen
}

func (r *Reader) Close() {
	if r.c == nil {
		return
	}
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	for i, x := range r.c.readers {
		if x == r {
			r.c.readers = append(r.c.readers[:i], r.c.readers[i+1:]...)
			return
		}
	}
}

// Discard is a kafkaio.Cluster that acknowledges every produced record at
// once and keeps none (benchmarks of the engine without Kafka); it has no
// records to read.
type Discard struct{}

var _ kafkaio.Cluster = Discard{}

func (Discard) Produce(_ context.Context, r *kafkaio.Record, done func(*kafkaio.Record, error)) {
	done(r, nil)
}

func (Discard) Offsets(context.Context, string, int32) (kafkaio.Range, error) {
	return kafkaio.Range{}, nil
}

func (Discard) Read(string, int32, int64) kafkaio.Reader { return NewFeed() }

// Transactional implements kafkaio.Cluster: an in-memory transactional
// producer. Its records join the logs at Commit; Init fences the earlier
// producers of the id.
func (c *Cluster) Transactional(id string) (kafkaio.Txn, error) {
	return &Txn{c: c, id: id}, nil
}

// Txn is Cluster's transactional producer.
type Txn struct {
	c     *Cluster
	id    string
	epoch int
	open  bool
	recs  []heldRecord
}

func (t *Txn) Init(context.Context) error {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.c.epochs == nil {
		t.c.epochs = map[string]int{}
	}
	t.c.epochs[t.id]++
	t.epoch = t.c.epochs[t.id]
	t.open, t.recs = false, nil
	return nil
}

func (t *Txn) fenced() error {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.c.epochs[t.id] != t.epoch {
		return kafkaio.ErrFenced
	}
	return nil
}

func (t *Txn) Begin() error {
	if err := t.fenced(); err != nil {
		return err
	}
	t.open = true
	return nil
}

// Produce keeps r for Commit and reports it written.
func (t *Txn) Produce(ctx context.Context, r *kafkaio.Record, done func(*kafkaio.Record, error)) {
	if err := t.fenced(); err != nil {
		done(r, err)
		return
	}
	cp := *r
	cp.Key, cp.Value = append([]byte(nil), r.Key...), append([]byte(nil), r.Value...)
	cp.Headers = append([]kafkaio.Header(nil), r.Headers...)
	// Acknowledged now; the offset it gets at Commit is written back to
	// r, as kafkaio's producer writes it into the record it was given.
	t.recs = append(t.recs, heldRecord{r: &cp, done: func(w *kafkaio.Record, err error) {
		if err == nil {
			r.Partition, r.Offset = w.Partition, w.Offset
		}
	}})
	done(r, nil)
}

func (t *Txn) Commit(ctx context.Context) error {
	if err := t.fenced(); err != nil {
		t.recs, t.open = nil, false
		return err
	}
	for _, h := range t.recs {
		t.c.Produce(ctx, h.r, h.done)
	}
	t.recs, t.open = nil, false
	return nil
}

func (t *Txn) Abort(context.Context) error {
	t.recs, t.open = nil, false
	return nil
}

func (t *Txn) Close() {}

// Transactional implements kafkaio.Cluster: commits are discarded too.
func (Discard) Transactional(string) (kafkaio.Txn, error) {
	return &Txn{c: &Cluster{}, id: "discard"}, nil
}
