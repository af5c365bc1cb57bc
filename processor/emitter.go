package processor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/internal/wire"
)

// emitter produces one partition's outputs (predictions and dead letters)
// and tells the checkpoint which of them the brokers have acknowledged.
//
// Each output takes a slot of a ring of emitWindow, numbered by the
// worker's sequence number, and goes to the cluster's producer or the
// partition's transaction (in the worker's loop in bursts: flush); the
// producer (kgo's, idempotent) batches what accumulates while a request is
// in flight, retries what can be retried without duplicating or reordering
// it, and calls the slot back once the record is acknowledged by every
// in-sync replica. Acknowledgements come in order per output partition but
// not across partitions, so the emitter publishes the highest sequence
// number below which every output is acknowledged: what the checkpoint
// waits for. A full ring (emitWindow outputs unacknowledged) makes the
// worker wait: the brokers' pace bounds the memory.
type emitter struct {
	kio     producer // the cluster's idempotent producer, or the partition's transaction
	log     zerolog.Logger
	metrics *metrics
	onAcked func(n int) // told how many predictions were acknowledged
	slots   []outSlot
	queued  []*outSlot // emitted, not yet handed to the producer (the worker's; flush)
	batch   int        // outputs queued before a flush: emitBatch in the worker's loop, else 1 (at once)

	mu      sync.Mutex
	acked   uint64 // every output up to it is acknowledged
	notify  chan struct{}
	waiters int    // goroutines in waitAcked: notify is closed (and replaced) only for them
	wakeAt  uint64 // the least output a waiter waits for since notify was last closed (max: none)

	// Stage timestamps (stages.go), when traced: the worker's record in
	// hand, and per slot the stages of its output.
	cur   *StageTimes
	trace []StageTimes
	hook  func(StageTimes)

	failErr  atomic.Pointer[error] // the error that stopped the emitter for good
	done     chan struct{}         // closed with failErr set
	doneOnce sync.Once
}

// producer is what the emitter produces with: kafkaio.Cluster (at least
// once) or the partition's kafkaio.Txn (exactly once).
type producer interface {
	Produce(ctx context.Context, r *kafkaio.Record, done func(*kafkaio.Record, error))
}

// emitWindow is the ring's size: the outputs a partition may have
// unacknowledged.
const emitWindow = 8192

// emitRefill is how many slots a full ring frees before the worker that
// waits for one goes on (emit). At one wake-up an acknowledgement, a
// 200,000-record make bench-e2e drain woke the workers about 45,000 times
// (advance's channels: 4.4 MB allocated).
const emitRefill = emitWindow / 8

// outSlot is one output in the producer's hands.
type outSlot struct {
	em     *emitter
	rec    kafkaio.Record
	seq    uint64
	input  time.Time // the input record's timestamp (latency histogram); zero for dead letters
	output bool      // a prediction
	hdrs   []kafkaio.Header
	state  atomic.Uint32
	ack    func(*kafkaio.Record, error) // s.delivered, bound once
}

// Slot states.
const (
	slotFree uint32 = iota
	slotSent
	slotAcked
)

func newEmitter(kio producer, log zerolog.Logger, m *metrics) *emitter {
	e := &emitter{kio: kio, log: log, metrics: m, slots: make([]outSlot, emitWindow), batch: 1,
		notify: make(chan struct{}), wakeAt: ^uint64(0), done: make(chan struct{})}
	for i := range e.slots {
		s := &e.slots[i]
		s.em = e
		s.ack = s.delivered
	}
	return e
}

// emit produces out as output number seq (the worker's numbering, from 1,
// without gaps). It waits while the ring is full; it fails when the
// emitter stopped or ctx ended (the output is then lost: no checkpoint may
// pass it).
func (e *emitter) emit(ctx context.Context, seq uint64, out *kafkaio.Record, input time.Time, output bool) error {
	s := &e.slots[seq%emitWindow]
	for s.state.Load() != slotFree {
		e.flush(ctx)
		// The ring is full: wait until emitRefill outputs are acknowledged,
		// not just this slot's, or the worker wakes for every
		// acknowledgement and emits one output each time.
		if err := e.waitAcked(ctx, seq-emitWindow+emitRefill); err != nil {
			return err
		}
	}
	s.seq, s.input, s.output = seq, input, output
	// Field by field, not s.rec = *out: the slot's record keeps what the
	// client attached to it for producing it again.
	s.hdrs = append(s.hdrs[:0], out.Headers...)
	s.rec.Topic, s.rec.Key, s.rec.Value, s.rec.Headers, s.rec.Time = out.Topic, out.Key, out.Value, s.hdrs, out.Time
	s.rec.Partition = -1 // murmur2 of the key, as Kafka's Java client places it
	s.state.Store(slotSent)
	if e.trace != nil && output {
		e.trace[seq%emitWindow] = *e.cur // Produced at flush
	}
	e.queued = append(e.queued, s)
	if len(e.queued) >= e.batch {
		e.flush(ctx)
	}
	return nil
}

// emitBatch is how many outputs the emitter queues at most before it hands
// them to the producer in one burst (flush). kgo's Produce takes the
// client's producer lock and its topic's partitions for every record; the
// partitions' workers calling it in turn, a record at a time from both
// CPUs, made the lock's cache line travel at nearly every call.
const emitBatch = 32

// flush hands the queued outputs to the producer, in order. The worker
// calls it whenever it would wait (for a record, for acknowledgements, for
// a checkpoint), before every snapshot (which waits for the
// acknowledgement of every output before it) and when it stops.
func (e *emitter) flush(ctx context.Context) {
	for _, s := range e.queued {
		if e.trace != nil && s.output {
			e.trace[s.seq%emitWindow].Produced = nowNano()
		}
		e.kio.Produce(ctx, &s.rec, s.ack)
	}
	clear(e.queued)
	e.queued = e.queued[:0]
}

// delivered is the producer's callback of slot s.
func (s *outSlot) delivered(r *kafkaio.Record, err error) {
	e := s.em
	if err != nil {
		if e.resendStripped(s, err) {
			return
		}
		e.fail(fmt.Errorf("produce to topic %q: %w", r.Topic, err))
		return
	}
	if s.output {
		if e.trace != nil {
			t := e.trace[s.seq%emitWindow]
			t.Acked = nowNano()
			e.hook(t)
		}
		if e.metrics != nil {
			e.metrics.latency.Observe(time.Unix(0, ackWall.now()).Sub(s.input).Seconds())
		}
		if e.onAcked != nil {
			e.onAcked(1)
		}
	}
	s.state.Store(slotAcked)
	e.advance()
}

// ackWall is the wall clock the latency histogram reads at each
// acknowledgement: time.Now() reads two clocks (52 ns on the 2-core bench
// VM, 1.5% of make bench-e2e's CPU profile at one call a prediction),
// ackWall the monotonic one (25 ns) plus the wall clock's offset from it,
// read again once a second. It is time.Now()'s wall time but for a step or
// slew of the wall clock within the last second.
var ackWall wallClock

type wallClock struct {
	offset atomic.Int64 // wall minus monotonic nanoseconds at the last reading
	read   atomic.Int64 // monotonic nanoseconds of that reading; 0 before the first
}

// monoBase is the monotonic clock's origin for wallClock.
var monoBase = time.Now()

// now returns the wall time in Unix nanoseconds (safe from any goroutine:
// readings racing each other store offsets that are all right).
func (c *wallClock) now() int64 {
	mono := int64(time.Since(monoBase))
	if r := c.read.Load(); r == 0 || mono-r >= int64(time.Second) {
		t := time.Now()
		mono = int64(t.Sub(monoBase))
		c.offset.Store(t.UnixNano() - mono)
		c.read.Store(max(mono, 1))
	}
	return c.offset.Load() + mono
}

// advance moves acked over every acknowledged slot that follows it.
func (e *emitter) advance() {
	e.mu.Lock()
	moved := false
	for {
		// The state first: a free slot may be being filled by the worker,
		// an acknowledged one holds output acked+1 (a slot is reused only
		// once acked has passed it).
		s := &e.slots[(e.acked+1)%emitWindow]
		if s.state.Load() != slotAcked {
			break
		}
		s.rec.Key, s.rec.Value, s.rec.Headers, s.input = nil, nil, nil, time.Time{}
		clear(s.hdrs)
		s.state.Store(slotFree)
		e.acked++
		moved = true
	}
	if moved && e.waiters > 0 && e.acked >= e.wakeAt {
		// Only once a waiter's output is acknowledged, not at every
		// acknowledgement: each close wakes the waiters.
		close(e.notify)
		e.notify = make(chan struct{})
		e.wakeAt = ^uint64(0) // the waiters not done say again what they wait for
	}
	e.mu.Unlock()
}

// resendStripped resends a dead letter that the DLQ topic refused as too
// large without its value (a header gives the original size): the one case
// where a dead letter is not the record unchanged. It reports whether it
// did.
func (e *emitter) resendStripped(s *outSlot, err error) bool {
	if !errors.Is(err, kerr.MessageTooLarge) || len(s.rec.Value) <= strippedAbove || !hasHeader(s.rec.Headers, wire.HeaderReason) {
		return false
	}
	e.log.Warn().Err(err).Msg("dead letter refused as too large by the DLQ topic: resent without its value")
	s.hdrs = append(s.hdrs, kafkaio.Header{Key: wire.HeaderOmitted, Value: []byte(strconv.Itoa(len(s.rec.Value)))})
	s.rec.Headers, s.rec.Value, s.rec.Partition = s.hdrs, nil, -1
	// Not from the producer's callback: Produce may block on a full buffer.
	go e.kio.Produce(context.Background(), &s.rec, s.ack)
	return true
}

// strippedAbove is the value size above which a refused dead letter loses its value.
const strippedAbove = 512 << 10

func hasHeader(hs []kafkaio.Header, key string) bool {
	for _, h := range hs {
		if h.Key == key {
			return true
		}
	}
	return false
}

func (e *emitter) fail(err error) {
	e.doneOnce.Do(func() {
		e.failErr.Store(&err)
		close(e.done)
	})
}

// waitAcked blocks until every output up to seq is acknowledged.
func (e *emitter) waitAcked(ctx context.Context, seq uint64) error {
	e.mu.Lock()
	e.waiters++
	defer func() {
		e.mu.Lock()
		e.waiters--
		e.mu.Unlock()
	}()
	for {
		acked, ch := e.acked, e.notify
		if acked < seq {
			e.wakeAt = min(e.wakeAt, seq)
		}
		e.mu.Unlock()
		if acked >= seq {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.done:
			return fmt.Errorf("emitter stopped before acknowledging: %w", e.failed())
		case <-ch:
		}
		e.mu.Lock()
	}
}

// failed returns the error that stopped the emitter for good, if any: a
// record the producer gave up on (kgo retries everything retrying can fix:
// what reaches here is refused for good, an unknown topic that persists,
// or the end of the partition's hard deadline).
func (e *emitter) failed() error {
	if err := e.failErr.Load(); err != nil {
		return *err
	}
	return nil
}
