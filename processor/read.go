package processor

import (
	"errors"
	"time"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
)

// The worker's read side: a reader per topic (input, and labels when
// configured) at the restored positions, merged (merge.go), and what the
// readers report: positions past transaction markers, truncations, offsets
// out of range, partitions kgo stopped reading.

func (w *worker) newMerger() *merger {
	m := &merger{in: newSide(w.kio.Read(w.cfg.InputTopic, int32(w.part), w.nextIn), w.nextIn, false),
		event: w.readerEvent, moved: w.moved}
	if w.cfg.LabelsTopic != "" {
		lab := newSide(w.kio.Read(w.cfg.LabelsTopic, int32(w.part), w.nextLab), w.nextLab, true)
		m.lab = &lab
		m.hwm, m.wait = w.hwm, w.cfg.MergeWait
	}
	return m
}

// moved advances the worker's position past the transaction markers or
// aborted records that followed the records it handled, so that the
// checkpoint resumes after them, the lag reads 0 at the log's end, and a
// replay whose last offsets are markers ends.
func (w *worker) moved(lab bool, next int64) {
	if lab {
		if next > w.nextLab {
			w.nextLab = next
			w.posLab.Store(next)
		}
		return
	}
	if next > w.nextIn {
		w.nextIn = next
		w.posIn.Store(next)
		w.markRestored()
	}
}

// readerEvent handles what a reader reports instead of records.
func (w *worker) readerEvent(s *side, ch kafkaio.Chunk) {
	topic := w.cfg.InputTopic
	if s.lab {
		topic = w.cfg.LabelsTopic
	}
	var loss *kafkaio.DataLoss
	switch {
	case errors.As(ch.Err, &loss):
		// The reader goes on from where the log diverged: the records
		// between were replaced (an unclean leader election). Nothing to
		// undo here; say so loudly, count it, and show it on /readyz.
		w.p.c.truncations.Add(1)
		w.p.noteTruncation(topic, w.part, loss.ConsumedTo, loss.ResetTo)
		w.log.Warn().Str("topic", topic).Int64("consumed_to", loss.ConsumedTo).Int64("resumed_at", loss.ResetTo).
			Msg("log truncation detected (KIP-320): records below the position were replaced or lost; reading goes on where the log diverged")
		s.next = loss.ResetTo
	case errors.Is(ch.Err, kafkaio.ErrOutOfRange):
		w.outOfRange(s, topic)
	default:
		// kgo stopped reading the partition (a non-retriable fetch error,
		// or a topic recreated under it): read again from the position
		// after a pause; a recreated topic then answers out of range.
		w.readEp(s).fail(ch.Err)
		s.resumeAt = time.Now().Add(backoffDelay(w.readEp(s).fails, 100*time.Millisecond, w.cfg.RetryBackoffMax))
	}
}

// outOfRange applies OffsetReset to a position the log no longer has.
func (w *worker) outOfRange(s *side, topic string) {
	r, err := w.rangeOf(topic)
	if err != nil {
		s.resumeAt = time.Now().Add(time.Second) // asked again: the range decides
		return
	}
	to, err := w.reset(topic, s.next, r)
	if err != nil {
		return // policy fail: the partition is failed
	}
	if s.lab {
		w.nextLab, w.groupLab = to, min(w.groupLab, to)
		w.posLab.Store(to)
	} else {
		w.nextIn, w.emitFrom, w.groupIn = to, to, min(w.groupIn, to)
		w.posIn.Store(to)
	}
	s.seek(to)
}

// readEp is the episode logger of a side's read failures.
func (w *worker) readEp(s *side) *episode {
	if s.ep == nil {
		what := "fetch " + w.cfg.InputTopic
		if s.lab {
			what = "fetch " + w.cfg.LabelsTopic
		}
		s.ep = newEpisode(w.log, what)
	}
	return s.ep
}

// retryReads moves a side whose reading kgo stopped back to its position,
// once its pause is over.
func (w *worker) retryReads(m *merger) {
	for _, s := range []*side{&m.in, m.lab} {
		if s == nil || s.resumeAt.IsZero() || time.Now().Before(s.resumeAt) {
			continue
		}
		s.resumeAt = time.Time{}
		s.seek(s.next)
	}
}

// backoffDelay is attempt^2 x min, capped at max.
func backoffDelay(attempt int, min, max time.Duration) time.Duration {
	d := time.Duration(attempt*attempt) * min
	if d > max || d <= 0 {
		d = max
	}
	return d
}
