package processor

import (
	"context"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/internal/wire"
)

// The worker's output path: predictions and dead letters handed to the
// partition's emitter in sequence.

// output is the worker's side of the output path.
type output struct {
	em      *emitter
	seq     uint64           // outputs handed to the emitter
	outSlab slab             // the values of predictions
	out     kafkaio.Record   // the output being handed to the emitter
	hdrs    []kafkaio.Header // its propagated headers
	lost    bool             // an output was given up: no checkpoint may pass it
}

// send produces a prediction to the output topic.
func (w *worker) send(ctx context.Context, in *kafkaio.Record, out *wire.Prediction) error {
	value := w.outSlab.take(wire.AppendPrediction(w.outSlab.tail(), out))
	w.tally.predictions++
	w.hdrs = w.propagated(w.hdrs[:0], in.Headers)
	w.out = kafkaio.Record{Topic: w.cfg.OutputTopic, Key: in.Key, Value: value, Headers: w.hdrs}
	return w.enqueue(ctx, &w.out, in.Time, true)
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

// enqueue hands out to the emitter as the partition's next output. It
// gives up only when the emitter stopped or at the hard deadline (the
// record in hand at shutdown is still emitted); an output given up makes
// every later checkpoint impossible, so the records since the last one are
// replayed by the next owner.
func (w *worker) enqueue(_ context.Context, out *kafkaio.Record, input time.Time, output bool) error {
	w.seq++
	if err := w.em.emit(w.hard, w.seq, out, input, output); err != nil {
		w.lost = true
		if w.em.failed() != nil {
			return errEmitterStopped
		}
		return err
	}
	return nil
}

// dead sends the record unchanged to the dead-letter topic with headers.
func (w *worker) dead(ctx context.Context, msg *kafkaio.Record, emit bool, err error) error {
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
	headers := make([]kafkaio.Header, 0, len(msg.Headers)+6)
	headers = append(headers, msg.Headers...)
	headers = append(headers,
		kafkaio.Header{Key: wire.HeaderReason, Value: []byte(rs.String())},
		kafkaio.Header{Key: wire.HeaderError, Value: []byte(err.Error())},
		kafkaio.Header{Key: wire.HeaderTopic, Value: []byte(msg.Topic)},
		kafkaio.Header{Key: wire.HeaderPartition, Value: []byte(strconv.Itoa(int(msg.Partition)))},
		kafkaio.Header{Key: wire.HeaderOffset, Value: []byte(strconv.FormatInt(msg.Offset, 10))})
	value := msg.Value
	if size := len(msg.Key) + len(value) + headersSize(headers) + recordOverhead; size > int(w.p.batchLimit(w.cfg.DLQTopic)) && len(value) > 0 {
		// The topic would refuse it (and in a transaction, the refusal
		// fails the transaction, again at every restart): the dead letter
		// goes without its value, a header giving the original size.
		headers = append(headers, kafkaio.Header{Key: wire.HeaderOmitted, Value: []byte(strconv.Itoa(len(value)))})
		value = nil
	}
	w.out = kafkaio.Record{Topic: w.cfg.DLQTopic, Key: msg.Key, Value: value, Headers: headers, Time: msg.Time}
	_ = w.enqueue(ctx, &w.out, msg.Time, false)
	return nil
}

// headersSize is what headers add to a record's size.
func headersSize(hs []kafkaio.Header) int {
	n := 0
	for _, h := range hs {
		n += len(h.Key) + len(h.Value) + 2
	}
	return n
}
