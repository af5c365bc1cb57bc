package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The read path. One kgo client fetches every partition a Reader was
// opened for (a Fetch request per broker covers all the partitions it
// leads, with fetch sessions); a poller goroutine takes what kgo buffered
// and appends it, in chunks, to each partition's queue. A queue holding
// more than ReaderQueueBytes pauses its partition's fetching (kgo rewinds
// whatever it fetched of a paused partition and did not hand out), so one
// slow partition holds back neither the others nor the memory.
//
// Adding, removing and moving partitions (Read, Close, Seek) are applied by
// the poller between two polls, so that no record fetched for an old
// position is queued after the move: a chunk queued after the move belongs
// to the new position.

// chunkLen bounds the records of one chunk, so that a large fetch is handed
// over, and its slice reused, in pieces.
const chunkLen = 256

// recordOverhead is what a record costs beyond its key, value and headers
// in the queue's byte count (the Record struct and kgo's).
const recordOverhead = 128

type opKind uint8

const (
	opAdd opKind = iota
	opRemove
	opSeek
)

// readOp is a change of what the client reads, applied by the poller.
type readOp struct {
	kind   opKind
	r      *reader
	offset int64
	gen    uint64
}

// reader is the Reader of one partition.
type reader struct {
	c  *Client
	tp topicPartition

	mu      sync.Mutex
	queue   []Chunk // queue[head:] not yet taken
	head    int
	bytes   int  // record bytes queued
	paused  bool // its fetching is paused until the engine takes half
	gen     uint64
	seekGen uint64 // the latest generation Seek handed out
	closed  bool
	free    [][]Record // recycled record slices
	ready   chan struct{}
}

// Read implements Cluster.
func (c *Client) Read(topic string, partition int32, from int64) Reader {
	r := &reader{c: c, tp: topicPartition{topic, partition}, ready: make(chan struct{}, 1)}
	c.submit(readOp{kind: opAdd, r: r, offset: from})
	return r
}

func (r *reader) Ready() <-chan struct{} { return r.ready }

func (r *reader) Next() (Chunk, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.head == len(r.queue) {
		return Chunk{}, false
	}
	ch := r.queue[r.head]
	r.queue[r.head] = Chunk{}
	r.head++
	if r.head == len(r.queue) {
		r.queue, r.head = r.queue[:0], 0
	}
	r.bytes -= chunkBytes(ch.Records)
	if r.paused && r.bytes <= r.c.opts.ReaderQueueBytes/2 {
		r.paused = false
		r.c.cl.ResumeFetchPartitions(map[string][]int32{r.tp.topic: {r.tp.part}})
	}
	if r.head < len(r.queue) {
		r.signal()
	}
	return ch, true
}

func (r *reader) Recycle(ch Chunk) {
	if ch.Records == nil {
		return
	}
	clear(ch.Records) // drop the references to the fetch buffers
	r.mu.Lock()
	if len(r.free) < 8 {
		r.free = append(r.free, ch.Records[:0])
	}
	r.mu.Unlock()
}

func (r *reader) SetOffset(offset int64) uint64 {
	r.mu.Lock()
	r.seekGen++
	gen := r.seekGen
	r.mu.Unlock()
	r.c.submit(readOp{kind: opSeek, r: r, offset: offset, gen: gen})
	return gen
}

func (r *reader) Close() {
	r.mu.Lock()
	closed := r.closed
	r.closed = true
	r.mu.Unlock()
	if !closed {
		r.c.submit(readOp{kind: opRemove, r: r})
	}
}

func (r *reader) signal() {
	select {
	case r.ready <- struct{}{}:
	default:
	}
}

// push queues a chunk; called by the poller only.
func (r *reader) push(ch Chunk) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	ch.Gen = r.gen
	r.queue = append(r.queue, ch)
	r.bytes += chunkBytes(ch.Records)
	if !r.paused && r.bytes >= r.c.opts.ReaderQueueBytes {
		r.paused = true
		r.c.cl.PauseFetchPartitions(map[string][]int32{r.tp.topic: {r.tp.part}})
	}
	r.signal()
}

// buffer returns an empty record slice for a chunk.
func (r *reader) buffer() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.free); n > 0 {
		b := r.free[n-1]
		r.free = r.free[:n-1]
		return b
	}
	return make([]Record, 0, chunkLen)
}

func chunkBytes(rs []Record) int {
	n := 0
	for i := range rs {
		n += len(rs[i].Key) + len(rs[i].Value) + recordOverhead
		for _, h := range rs[i].Headers {
			n += len(h.Key) + len(h.Value)
		}
	}
	return n
}

// submit hands an op to the poller and cuts the poll in progress short.
func (c *Client) submit(op readOp) {
	c.mu.Lock()
	c.ops = append(c.ops, op)
	if c.pollCancel != nil {
		c.pollCancel()
	}
	c.mu.Unlock()
}

// poll is the poller goroutine.
func (c *Client) poll(ctx context.Context) {
	defer close(c.polling)
	for {
		c.mu.Lock()
		ops := c.ops
		c.ops = nil
		pctx, cancel := context.WithCancel(ctx)
		c.pollCancel = cancel
		c.mu.Unlock()
		c.apply(ops)
		fs := c.cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		c.route(fs)
	}
}

// apply carries out ops in order: removals and moves first leave kgo (a
// move is a removal and an addition at the new offset, so that kgo drops
// whatever it holds of the old position), then additions join it.
func (c *Client) apply(ops []readOp) {
	if len(ops) == 0 {
		return
	}
	remove := map[string][]int32{}
	add := map[string]map[int32]kgo.Offset{}
	for _, op := range ops {
		tp := op.r.tp
		switch op.kind {
		case opRemove:
			c.mu.Lock()
			current := c.readers[tp] == op.r
			if current {
				delete(c.readers, tp)
			}
			c.mu.Unlock()
			if !current {
				continue // a newer reader of the partition took over
			}
			remove[tp.topic] = append(remove[tp.topic], tp.part)
			if add[tp.topic] != nil {
				delete(add[tp.topic], tp.part)
			}
		case opAdd, opSeek:
			if op.kind == opSeek {
				remove[tp.topic] = append(remove[tp.topic], tp.part)
				op.r.reset(op.gen)
			}
			c.mu.Lock()
			c.readers[tp] = op.r
			c.mu.Unlock()
			if add[tp.topic] == nil {
				add[tp.topic] = map[int32]kgo.Offset{}
			}
			add[tp.topic][tp.part] = kgoOffset(op.offset)
		}
	}
	if len(remove) > 0 {
		c.cl.RemoveConsumePartitions(remove)
		// A removed partition must not stay paused: it may be read again.
		c.cl.ResumeFetchPartitions(remove)
	}
	if len(add) > 0 {
		c.cl.AddConsumePartitions(add)
	}
}

// reset empties the queue for a move to a new position (generation gen).
func (r *reader) reset(gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := r.head; i < len(r.queue); i++ {
		r.queue[i] = Chunk{}
	}
	r.queue, r.head, r.bytes = r.queue[:0], 0, 0
	r.gen = gen
	r.paused = false // the removal resumed it
}

func kgoOffset(o int64) kgo.Offset {
	switch o {
	case Start:
		return kgo.NewOffset().AtStart()
	case End:
		return kgo.NewOffset().AtEnd()
	}
	return kgo.NewOffset().At(o)
}

// route queues what a poll returned on each partition's reader.
func (c *Client) route(fs kgo.Fetches) {
	polled := time.Now().UnixNano()
	c.mu.Lock()
	readers := c.readers
	c.mu.Unlock()
	// The map is only written by the poller (apply), which is this
	// goroutine: reading it unlocked from here on is safe.
	var recreated map[string]map[int32]bool // topics answered UNKNOWN_TOPIC_ID, and the partitions told
	for i := range fs {
		for j := range fs[i].Topics {
			t := &fs[i].Topics[j]
			for k := range t.Partitions {
				p := &t.Partitions[k]
				r := readers[topicPartition{t.Topic, p.Partition}]
				if r == nil {
					continue // removed since it was fetched, or an injected poll error
				}
				if p.Err != nil {
					if errors.Is(p.Err, kerr.UnknownTopicID) {
						if recreated == nil {
							recreated = map[string]map[int32]bool{}
						}
						if recreated[t.Topic] == nil {
							recreated[t.Topic] = map[int32]bool{}
						}
						recreated[t.Topic][p.Partition] = true
					}
					r.push(Chunk{Err: fetchErr(t.Topic, p), Next: -1, HighWatermark: p.HighWatermark, StableOffset: p.LastStableOffset})
				}
				c.queueRecords(r, p, polled)
			}
		}
	}
	for topic, told := range recreated {
		c.forgetTopic(readers, topic, told)
	}
}

// forgetTopic makes kgo forget a topic that was deleted and recreated under
// it: kgo keeps the old topic ID and fails every fetch of the topic until
// the topic is purged and its partitions added again. Every reader of the
// topic is told (those the poll did not report too), so that each moves
// (SetOffset) to where the engine decides, which adds it again.
func (c *Client) forgetTopic(readers map[topicPartition]*reader, topic string, told map[int32]bool) {
	c.cl.PurgeTopicsFromConsuming(topic)
	for tp, r := range readers {
		if tp.topic == topic && !told[tp.part] {
			r.push(Chunk{Err: fmt.Errorf("fetch %s/%d: %w", topic, tp.part, kerr.UnknownTopicID), Next: -1})
		}
	}
}

// queueRecords cuts a fetched partition's records into chunks. Control
// records are not handed out; they only move Next.
func (c *Client) queueRecords(r *reader, p *kgo.FetchPartition, polled int64) {
	var recs []Record
	var hdrs []Header // the chunk's headers, one slab
	next := int64(-1)
	flush := func() {
		if recs != nil || next >= 0 {
			r.push(Chunk{Records: recs, Next: next, HighWatermark: p.HighWatermark, StableOffset: p.LastStableOffset, Polled: polled})
		}
		recs, hdrs, next = nil, nil, -1
	}
	for _, kr := range p.Records {
		next = kr.Offset + 1
		if kr.Attrs.IsControl() {
			continue
		}
		if recs == nil {
			recs = r.buffer()
		}
		rec := Record{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset, Key: kr.Key, Value: kr.Value, Time: kr.Timestamp}
		if len(kr.Headers) > 0 {
			// Appending may move the slab; the records cut from it before
			// keep the old array, which nothing writes again.
			start := len(hdrs)
			for _, h := range kr.Headers {
				hdrs = append(hdrs, Header{Key: h.Key, Value: h.Value})
			}
			rec.Headers = hdrs[start:len(hdrs):len(hdrs)]
		}
		recs = append(recs, rec)
		if len(recs) == chunkLen {
			flush()
		}
	}
	flush()
}

// fetchErr maps a partition's fetch error onto the package's.
func fetchErr(topic string, p *kgo.FetchPartition) error {
	var loss *kgo.ErrDataLoss
	if errors.As(p.Err, &loss) {
		return &DataLoss{Topic: topic, Partition: p.Partition, ConsumedTo: loss.ConsumedTo, ResetTo: loss.ResetTo}
	}
	if errors.Is(p.Err, kerr.OffsetOutOfRange) {
		return fmt.Errorf("%s/%d (log start %d, high-water mark %d): %w", topic, p.Partition, p.LogStartOffset, p.HighWatermark, ErrOutOfRange)
	}
	return fmt.Errorf("fetch %s/%d: %w", topic, p.Partition, p.Err)
}
