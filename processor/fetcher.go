package processor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// fetcher reads one topic partition for a worker: Fetch requests on a
// connection to the partition's leader, one at a time, the records handed
// over in chunks of up to chunkLen.
//
// It replaces kafka-go's Reader on the record path (docs/scale.md, "An own
// fetch path"). The Reader hands every message through its own channel, a
// FetchMessage call (a lock and a select) and the worker's channel, and
// sets a read deadline per message: about a third of the drain's Kafka cost.
// The fetcher keeps the Reader's behaviour where the worker depends on it:
// the start offsets kafka.FirstOffset and kafka.LastOffset, a start below
// the log's first offset moved up to it (retention), a reconnection to the
// new leader after NotLeaderForPartition or UnknownTopicOrPartition, a fetch
// past the log end retried after a pause, and every failure logged through
// the worker's readerLog and retried with backoff, never returned.
type fetcher struct {
	topic      string
	partition  int
	brokers    []string
	dialer     *kafka.Dialer
	maxBytes   int
	maxWait    time.Duration
	backoffMin time.Duration
	backoffMax time.Duration
	readChunk  time.Duration // the read deadline for each chunk of a fetched batch
	log        *readerLog

	ch    chan chunk           // fetched records in offset order
	free  chan []kafka.Message // consumed chunks, back for reuse
	done  chan struct{}        // closed when run returns
	moved chan struct{}        // SetOffset's signal: cuts a backoff short

	mu      sync.Mutex
	seek    int64  // a new position asked by SetOffset, applied before the next fetch
	gen     uint64 // counts SetOffset calls; chunks fetched before the latest carry an older one
	pending bool   // seek is not applied yet
}

// chunk is a run of consecutive records of the partition. gen is the
// fetcher's generation when they were fetched: after SetOffset the reader
// of the channel drops chunks of an older one.
type chunk struct {
	msgs []kafka.Message
	gen  uint64
}

const (
	// chunkLen bounds the records of one chunk, so that a large fetch
	// (up to maxBytes) is handed over while it is read.
	chunkLen = 256
	// chunksQueued is the channel's capacity: with chunkLen, up to about
	// 1,000 records wait for the worker, as the Reader's queue held.
	chunksQueued = 4
	// chunkReadTimeout bounds the reading of one chunk of a fetched batch
	// once the broker has answered (kafka-go's ReadBatchTimeout default,
	// which its Reader applies to each message).
	chunkReadTimeout = 10 * time.Second
)

// newFetcher returns a fetcher starting at offset (an offset, or
// kafka.FirstOffset / kafka.LastOffset); run starts it.
func newFetcher(topic string, partition int, offset int64, brokers []string, dialer *kafka.Dialer, maxBytes int, maxWait, backoffMin, backoffMax time.Duration, log *readerLog) *fetcher {
	if dialer == nil {
		dialer = kafka.DefaultDialer
	}
	return &fetcher{
		topic: topic, partition: partition, brokers: brokers, dialer: dialer,
		maxBytes: maxBytes, maxWait: maxWait, backoffMin: backoffMin, backoffMax: backoffMax, readChunk: chunkReadTimeout, log: log,
		ch: make(chan chunk, chunksQueued), free: make(chan []kafka.Message, chunksQueued+2),
		done: make(chan struct{}), moved: make(chan struct{}, 1), seek: offset, pending: true,
	}
}

// SetOffset moves the fetcher to offset before its next fetch and returns
// the generation of the chunks that start there. Safe from any goroutine.
func (f *fetcher) SetOffset(offset int64) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seek, f.pending = offset, true
	f.gen++
	select {
	case f.moved <- struct{}{}:
	default:
	}
	return f.gen
}

// takeSeek returns the position SetOffset asked for since the last call,
// and the generation it started.
func (f *fetcher) takeSeek() (offset int64, gen uint64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.pending {
		return 0, f.gen, false
	}
	f.pending = false
	select { // applied: the signal must not cut a later, unrelated backoff short
	case <-f.moved:
	default:
	}
	return f.seek, f.gen, true
}

// recycle gives a consumed chunk's slice back for the fetcher to fill again.
func (f *fetcher) recycle(msgs []kafka.Message) {
	clear(msgs) // drop the references to keys and values
	select {
	case f.free <- msgs[:0]:
	default:
	}
}

// run fetches until ctx ends; wait for done before dropping the fetcher.
// Consecutive failures (dials, or connections that fail before a fetch
// succeeds) back off as kafka-go's reader does; a successful fetch resets
// the count.
func (f *fetcher) run(ctx context.Context) {
	defer close(f.done)
	offset, gen, _ := f.takeSeek()
	for fails := 0; ; {
		if fails > 0 && !f.backoff(ctx, backoffDelay(fails, f.backoffMin, f.backoffMax)) {
			return
		}
		if o, g, ok := f.takeSeek(); ok {
			offset, gen = o, g
		}
		conn, err := f.dial(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			f.log.Printf("connecting to the leader of partition %d of %s: %v", f.partition, f.topic, err)
			fails++
			continue
		}
		// Closing the connection when ctx ends unblocks whatever waits on
		// the broker: the offsets asked next, a fetch in flight.
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		start, err := position(conn, offset)
		if err != nil {
			stop()
			conn.Close()
			if ctx.Err() != nil {
				return
			}
			f.log.Printf("positioning on partition %d of %s at offset %v: %v", f.partition, f.topic, humanOffset(offset), err)
			fails++
			continue
		}
		var progress, failed bool
		offset, gen, progress, failed = f.readLoop(ctx, conn, start, gen)
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return
		}
		if progress {
			fails = 0
		}
		if failed {
			fails++
		}
	}
}

// readLoop fetches on conn until it must reconnect or ctx ends. It returns
// the offset to go on from, whether a fetch succeeded, and whether it ended
// on a failure (else on SetOffset).
func (f *fetcher) readLoop(ctx context.Context, conn *kafka.Conn, offset int64, gen uint64) (int64, uint64, bool, bool) {
	progress := false
	for {
		if o, g, ok := f.takeSeek(); ok {
			return o, g, progress, false // reconnect at the new position (rare: an offset reset)
		}
		to, err := f.fetch(ctx, conn, offset, gen)
		if ctx.Err() != nil {
			return offset, gen, progress, false
		}
		offset = to
		switch {
		case errors.Is(err, io.EOF): // the batch was read to its end
			progress = true
			f.log.ok()
		case errors.Is(err, kafka.RequestTimedOut):
			// The broker's own wait expired: ask again.
		case errors.Is(err, kafka.OffsetOutOfRange):
			// Below the log's first offset (retention deleted the records:
			// the worker logs the gap it sees) or past its end. The
			// connection is not usable after it: reconnect, at once after
			// records came on it; position moves a position below the
			// first offset up to it and fails (backing off) for one past
			// the end. (A connection refused at its first fetch backs off:
			// no loop without pause against a broker whose offsets and
			// fetches disagree; logged, once per episode.)
			if !progress {
				f.log.Printf("fetching partition %d of %s at offset %d: %v", f.partition, f.topic, offset, err)
			}
			return offset, gen, progress, !progress
		case errors.Is(err, io.ErrNoProgress):
			// kafka-go's Conn judged itself corrupted: reconnect, quietly
			// as its Reader does.
			return offset, gen, progress, true
		default:
			// NotLeaderForPartition, UnknownTopicOrPartition, a broken
			// connection, a kafka error: log, then reconnect (the leader is
			// looked up again).
			f.log.Printf("fetching partition %d of %s at offset %d: %v", f.partition, f.topic, offset, err)
			return offset, gen, progress, true
		}
	}
}

// fetch reads one batch from offset and hands its records over; it returns
// the offset after the last record handed over.
func (f *fetcher) fetch(ctx context.Context, conn *kafka.Conn, offset int64, gen uint64) (int64, error) {
	conn.SetReadDeadline(time.Now().Add(f.maxWait))
	batch := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: f.maxBytes})
	// The deadline covers a chunk's reading, renewed after each hand-over:
	// the time spent waiting for the worker is not the broker's.
	conn.SetReadDeadline(time.Now().Add(f.readChunk))
	var msgs []kafka.Message // taken when the first record comes: most fetches of an idle partition bring none
	var err error
	for {
		var m kafka.Message
		if m, err = batch.ReadMessage(); err != nil {
			break
		}
		if msgs == nil {
			msgs = f.buffer()
		}
		msgs = append(msgs, m)
		offset = m.Offset + 1
		if len(msgs) == chunkLen {
			if !f.send(ctx, msgs, gen) {
				err = ctx.Err()
				break
			}
			msgs = nil
			conn.SetReadDeadline(time.Now().Add(f.readChunk))
		}
	}
	batch.Close() // its error is the one ReadMessage returned
	conn.SetReadDeadline(time.Time{})
	if len(msgs) > 0 && !f.send(ctx, msgs, gen) && err == nil {
		err = ctx.Err()
	}
	return offset, err
}

// buffer returns an empty slice for a chunk, reused when one came back.
func (f *fetcher) buffer() []kafka.Message {
	select {
	case b := <-f.free:
		return b
	default:
		return make([]kafka.Message, 0, chunkLen)
	}
}

// send hands a chunk over; false when ctx ended first.
func (f *fetcher) send(ctx context.Context, msgs []kafka.Message, gen uint64) bool {
	c := chunk{msgs: msgs, gen: gen}
	select {
	case f.ch <- c:
		return true
	default:
	}
	select {
	case f.ch <- c:
		return true
	case <-ctx.Done():
		return false
	}
}

// dial connects to the partition's leader, trying the brokers in turn.
func (f *fetcher) dial(ctx context.Context) (*kafka.Conn, error) {
	err := errors.New("no broker address")
	for _, broker := range f.brokers {
		var conn *kafka.Conn
		if conn, err = f.dialer.DialLeader(ctx, "tcp", broker, f.topic, f.partition); err == nil {
			return conn, nil
		}
	}
	return nil, err
}

// position sets conn at offset and returns it, resolving kafka.FirstOffset
// and kafka.LastOffset and moving an offset below the log's first up to
// it; one past the log's end is kafka.OffsetOutOfRange.
func position(conn *kafka.Conn, offset int64) (int64, error) {
	first, last, err := readOffsets(conn)
	if err != nil {
		return 0, err
	}
	switch offset = concrete(offset, logRange{first, last}); {
	case offset < first:
		offset = first
	case offset > last:
		return 0, fmt.Errorf("offset %d is past the last offset %d: %w", offset, last, kafka.OffsetOutOfRange)
	}
	// The range is checked above: Seek asks the broker nothing more.
	return conn.Seek(offset, kafka.SeekAbsolute|kafka.SeekDontCheck)
}

func readOffsets(conn *kafka.Conn) (first, last int64, err error) {
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	defer conn.SetDeadline(time.Time{})
	return conn.ReadOffsets()
}

// backoffDelay is kafka-go's reader backoff: attempt^2 x min, capped at max.
func backoffDelay(attempt int, min, max time.Duration) time.Duration {
	d := time.Duration(attempt*attempt) * min
	if d > max || d <= 0 {
		d = max
	}
	return d
}

// backoff sleeps d, or less when SetOffset moves the fetcher (a new
// position deserves a try at once); false when ctx ended first.
func (f *fetcher) backoff(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-f.moved:
	}
	return true
}

// humanOffset prints the symbolic start offsets by name.
type humanOffset int64

func (o humanOffset) String() string {
	switch int64(o) {
	case kafka.FirstOffset:
		return "first"
	case kafka.LastOffset:
		return "last"
	}
	return fmt.Sprint(int64(o))
}
