package processor

import (
	"context"
	"strconv"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/wire"
)

// The worker's output path: predictions and dead letters handed to the
// partition's emitter in sequence.

// send queues a prediction for the output topic.
func (w *worker) send(ctx context.Context, in *kafka.Message, out *wire.Prediction) error {
	value := w.outSlab.take(wire.AppendPrediction(w.outSlab.tail(), out))
	w.tally.predictions++
	return w.enqueue(ctx, outMsg{msg: kafka.Message{Topic: w.cfg.OutputTopic, Key: in.Key, Value: value, Headers: w.propagated(in.Headers)}, input: in.Time, output: true})
}

// slab hands out the values of predictions from 64 KiB arrays: one
// allocation per few hundred predictions instead of one each. A value is
// never written after it is taken (capacity clipped), and an array is
// garbage once the emitter holds none of its values.
type slab struct{ buf []byte }

const (
	slabBytes = 64 << 10
	slabMin   = 512 // a fresh array when less is left
)

// tail is the free rest of the current array, to append one value to.
func (s *slab) tail() []byte {
	if cap(s.buf)-len(s.buf) < slabMin {
		s.buf = make([]byte, 0, slabBytes)
	}
	return s.buf[len(s.buf):]
}

// take returns v, appended to tail(), as a value of its own: in the array
// when it fit (append wrote in place), else in the array append made.
func (s *slab) take(v []byte) []byte {
	if len(v) <= cap(s.buf)-len(s.buf) {
		s.buf = s.buf[:len(s.buf)+len(v)]
	}
	return v[:len(v):len(v)]
}

// enqueue hands m to the emitter. It gives up only at the hard deadline
// (the record in hand at shutdown is still emitted); a message given up
// makes the final checkpoint impossible, so the records since the last one
// are replayed by the next owner.
func (w *worker) enqueue(_ context.Context, m outMsg) error {
	w.seq++
	m.seq = w.seq
	select { // the common case, without the three-way select's cost
	case w.em.ch <- m:
		return nil
	default:
	}
	select {
	case w.em.ch <- m:
		return nil
	case <-w.em.done: // stopped by a non-retriable error (run's loop sees it)
		w.lost = true
		return errEmitterStopped
	case <-w.hard.Done():
		w.lost = true
		return w.hard.Err()
	}
}

// dead sends the record unchanged to the dead-letter topic with headers.
func (w *worker) dead(ctx context.Context, msg *kafka.Message, emit bool, err error) error {
	c := &w.p.c
	rs := wire.ReasonOf(err)
	c.dead[rs].Add(1)
	c.records[wire.KindDead].Add(1)
	w.rateLog("dead_"+rs.String(), func(ev *zerolog.Event) {
		ev.Str("reason", rs.String()).Str("error", err.Error()).Str("topic", msg.Topic).Int64("offset", msg.Offset).Msg("dead letter")
	})
	if !emit {
		return nil
	}
	headers := make([]kafka.Header, 0, len(msg.Headers)+5)
	headers = append(headers, msg.Headers...)
	headers = append(headers,
		kafka.Header{Key: wire.HeaderReason, Value: []byte(rs.String())},
		kafka.Header{Key: wire.HeaderError, Value: []byte(err.Error())},
		kafka.Header{Key: wire.HeaderTopic, Value: []byte(msg.Topic)},
		kafka.Header{Key: wire.HeaderPartition, Value: []byte(strconv.Itoa(msg.Partition))},
		kafka.Header{Key: wire.HeaderOffset, Value: []byte(strconv.FormatInt(msg.Offset, 10))})
	_ = w.enqueue(ctx, outMsg{msg: kafka.Message{Topic: w.cfg.DLQTopic, Key: msg.Key, Value: msg.Value, Headers: headers, Time: msg.Time}})
	return nil
}
