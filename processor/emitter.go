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
	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/wire"
)

// outMsg is one message to produce (a prediction or a dead letter) with the
// per-partition sequence number the checkpoint waits for.
type outMsg struct {
	msg    kafka.Message
	seq    uint64
	input  time.Time // input record's timestamp (latency histogram); zero for dead letters
	output bool      // a prediction (counted in the latency histogram)
}

// emitter produces one partition's messages in order, in batches: while a
// batch is in flight the next records accumulate, so throughput grows with
// load while an idle stream pays one round trip, plus at most linger for a
// batch to fill (Config.BatchTimeout, Kafka's linger.ms). It retries the
// unacknowledged messages of a batch with backoff until they are
// acknowledged (at least once) or the emitter is stopped, and publishes the
// highest acknowledged sequence number for the checkpoint's first step.
type emitter struct {
	w       messageWriter
	ch      chan outMsg
	log     zerolog.Logger
	metrics *metrics
	backoff time.Duration
	linger  time.Duration

	mu     sync.Mutex
	acked  uint64
	notify chan struct{}
	done   chan struct{}

	// failErr is the non-retriable produce error that stopped the emitter
	// (set before done is closed; an atomic because the worker asks after
	// every record). onAcked, if set, is told how many predictions each
	// acknowledged batch held.
	failErr atomic.Pointer[error]
	onAcked func(n int)
}

const emitBatch = 512

func newEmitter(w messageWriter, log zerolog.Logger, m *metrics, backoffMax, linger time.Duration) *emitter {
	return &emitter{w: w, ch: make(chan outMsg, 4*emitBatch), log: log, metrics: m, backoff: backoffMax, linger: linger,
		notify: make(chan struct{}), done: make(chan struct{})}
}

// run produces until ctx is cancelled (the caller cancels it once the final
// checkpoint has waited for what it needed, or gives up) or a produce error
// that retrying cannot fix stops it (failed then returns it): nothing past
// the failed batch is acknowledged, so no checkpoint passes it.
func (e *emitter) run(ctx context.Context) {
	defer close(e.done)
	batch := make([]outMsg, 0, emitBatch)
	msgs := make([]kafka.Message, 0, emitBatch)
	ep := newEpisode(e.log, "produce")
	lingerTimer := time.NewTimer(time.Hour)
	lingerTimer.Stop()
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case m := <-e.ch:
			batch = append(batch, m)
		}
		batch = e.fill(ctx, batch, lingerTimer)
		msgs = msgs[:0]
		for _, m := range batch {
			msgs = append(msgs, m.msg)
		}
		delay := 50 * time.Millisecond
		persistent := 0
		for {
			err := e.w.WriteMessages(ctx, msgs...)
			if err == nil {
				ep.ok()
				break
			}
			if ctx.Err() != nil {
				return
			}
			tooLarge := isTooLarge(err)
			fatal := classifyProduce(err, msgs, &persistent)
			msgs = unacknowledged(msgs, err) // classified first: it compacts msgs
			if tooLarge && stripOversized(msgs) {
				e.log.Warn().Err(err).Msg("dead letter refused as too large by the DLQ topic: resent without its value")
				continue
			}
			if fatal != nil {
				e.failErr.Store(&fatal)
				return
			}
			ep.fail(err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, e.backoff)
		}
		now := time.Now()
		outputs := 0
		for _, m := range batch {
			if m.output {
				outputs++
				if e.metrics != nil {
					e.metrics.latency.Observe(now.Sub(m.input).Seconds())
				}
			}
		}
		if e.onAcked != nil {
			e.onAcked(outputs)
		}
		e.mu.Lock()
		e.acked = batch[len(batch)-1].seq
		close(e.notify)
		e.notify = make(chan struct{})
		e.mu.Unlock()
	}
}

// fill adds to batch what is queued, then waits up to e.linger from now
// for more while the batch is below emitBatch.
func (e *emitter) fill(ctx context.Context, batch []outMsg, t *time.Timer) []outMsg {
queued:
	for len(batch) < emitBatch {
		select {
		case m := <-e.ch:
			batch = append(batch, m)
		default:
			break queued
		}
	}
	if e.linger <= 0 || len(batch) >= emitBatch {
		return batch
	}
	t.Reset(e.linger)
	defer t.Stop()
	for len(batch) < emitBatch {
		select {
		case m := <-e.ch:
			batch = append(batch, m)
		case <-t.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}

// unacknowledged returns the messages of msgs that err reports as not
// acknowledged, in order, compacted in place; all of them unless err is a
// kafka.WriteErrors.
func unacknowledged(msgs []kafka.Message, err error) []kafka.Message {
	var we kafka.WriteErrors
	if !errors.As(err, &we) || len(we) != len(msgs) {
		return msgs
	}
	n := 0
	for i := range msgs {
		if we[i] != nil {
			msgs[n] = msgs[i]
			n++
		}
	}
	if n == 0 {
		return msgs
	}
	return msgs[:n]
}

// waitAcked blocks until every message up to seq is acknowledged.
func (e *emitter) waitAcked(ctx context.Context, seq uint64) error {
	for {
		e.mu.Lock()
		acked, ch := e.acked, e.notify
		e.mu.Unlock()
		if acked >= seq {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.done:
			return errors.New("emitter stopped before acknowledging")
		case <-ch:
		}
	}
}

// failed returns the error that stopped the emitter for good, if any.
func (e *emitter) failed() error {
	if err := e.failErr.Load(); err != nil {
		return *err
	}
	return nil
}

// unknownTopicAttempts is how many consecutive attempts may fail with
// "unknown topic or partition" before the emitter gives up: Kafka calls the
// error retriable (metadata may lag a topic's creation), but the start-up
// checks saw every topic, so a persistent one means the topic was deleted.
const unknownTopicAttempts = 5

// classifyProduce returns a non-nil error, naming the topic and the cause,
// when err is one that retrying cannot fix: a Kafka error the protocol
// marks non-retriable (authorization denied, invalid topic, record
// rejected, ...), or an unknown topic that persists. Network errors and
// retriable Kafka errors return nil.
func classifyProduce(err error, msgs []kafka.Message, persistent *int) error {
	code, topic := kafkaCode(err, msgs)
	switch {
	case code == 0:
		return nil
	case code == kafka.UnknownTopicOrPartition:
		*persistent++
		if *persistent < unknownTopicAttempts {
			return nil
		}
		return fmt.Errorf("produce to topic %q: %w (after %d attempts; was the topic deleted?)", topic, code, *persistent)
	case code.Temporary():
		return nil
	}
	return fmt.Errorf("produce to topic %q: %w (not retriable)", topic, code)
}

// kafkaCode finds the Kafka error code in err (the first message's with a
// code, for a kafka.WriteErrors) and the topic it concerns.
func kafkaCode(err error, msgs []kafka.Message) (kafka.Error, string) {
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		for i, e := range we {
			var code kafka.Error
			if e != nil && errors.As(e, &code) && i < len(msgs) {
				return code, msgs[i].Topic
			}
		}
		return 0, ""
	}
	var code kafka.Error
	if errors.As(err, &code) && len(msgs) > 0 {
		return code, msgs[0].Topic
	}
	return 0, ""
}

func isTooLarge(err error) bool {
	var tl kafka.MessageTooLargeError
	if errors.As(err, &tl) || errors.Is(err, kafka.MessageSizeTooLarge) {
		return true
	}
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if e != nil && (errors.Is(e, kafka.MessageSizeTooLarge) || errors.As(e, &tl)) {
				return true
			}
		}
	}
	return false
}

// stripOversized replaces the value of dead letters the brokers refuse as too
// large by nothing, with a header giving the original size (the one case
// where a dead letter is not the record unchanged).
func stripOversized(msgs []kafka.Message) (stripped bool) {
	for i := range msgs {
		if len(msgs[i].Value) > strippedAbove && hasHeader(msgs[i].Headers, wire.HeaderReason) {
			msgs[i].Headers = append(msgs[i].Headers, kafka.Header{Key: wire.HeaderOmitted, Value: []byte(strconv.Itoa(len(msgs[i].Value)))})
			msgs[i].Value = nil
			stripped = true
		}
	}
	return stripped
}

// strippedAbove is the value size above which a refused dead letter loses its value.
const strippedAbove = 512 << 10

func hasHeader(hs []kafka.Header, key string) bool {
	for _, h := range hs {
		if h.Key == key {
			return true
		}
	}
	return false
}
