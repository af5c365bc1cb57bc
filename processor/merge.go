package processor

import (
	"context"
	"math"
	"time"

	"github.com/segmentio/kafka-go"
)

// fetch pumps a reader into ch until ctx ends.
func fetch(ctx context.Context, r *kafka.Reader, rl *readerLog, ch chan<- kafka.Message) {
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			rl.Printf("fetch: %v", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		rl.ok()
		select {
		case ch <- m:
			continue
		default:
		}
		select {
		case ch <- m:
		case <-ctx.Done():
			return
		}
	}
}

// The merge of the input and labels topics (docs/pipeline.md, "Labels
// topic"). The merged order is the order of the Kafka timestamps, input
// first on ties, so that a replay of the two logs gives the same state as
// the live run. When both sides have a record buffered the choice is
// immediate. When only one side A has one (head H), the other side B may
// still hold an older record that is not fetched yet; the merger decides
// from data, not from timing: it asks the brokers for B's high-water mark
// in a request sent after H was received, and takes H only when B has been
// read up to that mark (B's records appended before H was read are then
// all merged before or after H by timestamp, whatever the fetch timing).
// If B's records below the mark do not come within MergeWait (the tail of
// B is transaction markers, or B's fetch is failing), or no mark can be
// had, H is taken and the mark is considered reached.
//
// One answer covers every record of A received before the request: the
// merger keeps up to mergeQueue records of each side in memory, so that a
// steady stream pays one round trip per batch, not per record.

// mergeQueue bounds the records buffered per side by the merger.
const mergeQueue = 512

// side is one topic of the merge.
type side struct {
	ch    <-chan kafka.Message
	lab   bool
	queue []arrived // records received, not yet taken: queue[head:]
	head  int
	next  int64 // offset after the last record received (the reader's start before any)

	// The high-water mark from the latest answer, and the arrival clock at
	// which its request was sent (valid for records that arrived up to it).
	hwm      int64
	hwmClock uint64
	asking   bool
	assumed  int64     // a mark given up on after MergeWait: treated as reached
	expired  uint64    // records of the other side that arrived up to this clock waited MergeWait: settled
	retryAt  time.Time // after a failed request, the earliest next one
}

type arrived struct {
	msg   kafka.Message
	clock uint64
}

type hwmAnswer struct {
	lab   bool
	clock uint64
	hwm   int64
	err   error
}

// merger yields the records of the input topic and, when set, the labels
// topic in the order above.
type merger struct {
	in  side
	lab *side
	// hwm asks for the high-water mark of the labels (lab) or input topic's partition.
	hwm  func(ctx context.Context, lab bool) (int64, error)
	wait time.Duration

	clock    uint64 // counts records received
	answers  chan hwmAnswer
	deadline time.Time // end of the bounded wait for the head in question
	timer    *time.Timer
}

func (s *side) len() int { return len(s.queue) - s.head }

func (s *side) front() *arrived { return &s.queue[s.head] }

// receive appends a record to its side's queue.
func (m *merger) receive(s *side, msg kafka.Message) {
	m.clock++
	s.queue = append(s.queue, arrived{msg: msg, clock: m.clock})
	s.next = msg.Offset + 1
}

// drain moves what is buffered in s's channel into its queue.
func (m *merger) drain(s *side) {
	for s.len() < mergeQueue {
		select {
		case msg := <-s.ch:
			m.receive(s, msg)
		default:
			return
		}
	}
}

// next returns the next record and whether it comes from the labels topic;
// ok is false when tick fired first.
func (m *merger) next(ctx context.Context, tick <-chan time.Time) (msg kafka.Message, lab, ok bool, err error) {
	if m.lab == nil {
		if m.in.len() > 0 {
			return m.take(&m.in)
		}
		select { // the common case under load, without the three-way select's cost
		case msg := <-m.in.ch:
			return msg, false, true, nil
		default:
		}
		select {
		case msg := <-m.in.ch:
			return msg, false, true, nil
		case <-ctx.Done():
			return kafka.Message{}, false, false, ctx.Err()
		case <-tick:
			return kafka.Message{}, false, false, nil
		}
	}
	if m.answers == nil {
		m.answers = make(chan hwmAnswer, 2)
	}
	for {
		m.drain(&m.in)
		m.drain(m.lab)
		a, b := &m.in, m.lab
		switch {
		case a.len() > 0 && b.len() > 0:
			if b.front().msg.Time.Before(a.front().msg.Time) {
				return m.take(b)
			}
			return m.take(a)
		case a.len() > 0:
			if m.settled(ctx, b, a.front().clock) {
				return m.take(a)
			}
		case b.len() > 0:
			if m.settled(ctx, a, b.front().clock) {
				return m.take(b)
			}
		default:
			m.deadline = time.Time{}
		}
		var expire <-chan time.Time
		if !m.deadline.IsZero() {
			if m.timer == nil {
				m.timer = time.NewTimer(time.Until(m.deadline))
			} else {
				m.timer.Reset(time.Until(m.deadline))
			}
			expire = m.timer.C
		}
		inCh, labCh := a.ch, b.ch
		if a.len() >= mergeQueue {
			inCh = nil
		}
		if b.len() >= mergeQueue {
			labCh = nil
		}
		select {
		case <-ctx.Done():
			return kafka.Message{}, false, false, ctx.Err()
		case <-tick:
			return kafka.Message{}, false, false, nil
		case msg := <-inCh:
			m.receive(a, msg)
		case msg := <-labCh:
			m.receive(b, msg)
		case ans := <-m.answers:
			m.answer(ans)
		case <-expire:
			// Bounded wait over: the other side's mark counts as reached.
			for _, s := range []*side{a, b} {
				if s.len() == 0 {
					s.assumed = max(s.assumed, s.hwm)
					s.expired = m.clock
				}
			}
			m.deadline = time.Time{}
		}
		if m.timer != nil && !m.timer.Stop() {
			select {
			case <-m.timer.C:
			default:
			}
		}
	}
}

// settled reports whether the empty side s cannot hold a record to merge
// before the other side's head, which arrived at clock c: an answer asked
// after c shows s read up to its high-water mark. Otherwise it asks (once
// at a time) and starts the bounded wait.
func (m *merger) settled(ctx context.Context, s *side, c uint64) bool {
	if (s.hwmClock >= c && (s.next >= s.hwm || s.assumed >= s.hwm)) || s.expired >= c {
		m.deadline = time.Time{}
		return true
	}
	if !s.asking && s.hwmClock < c && !time.Now().Before(s.retryAt) { // no answer covers c yet
		m.ask(ctx, s)
	}
	if m.deadline.IsZero() {
		m.deadline = time.Now().Add(m.wait)
	}
	return false
}

// ask sends one high-water-mark request for s in the background.
func (m *merger) ask(ctx context.Context, s *side) {
	if s.asking {
		return
	}
	s.asking = true
	clock, lab := m.clock, s.lab
	go func() {
		h, err := m.hwm(ctx, lab)
		select {
		case m.answers <- hwmAnswer{lab: lab, clock: clock, hwm: h, err: err}:
		case <-ctx.Done():
		}
	}()
}

func (m *merger) answer(a hwmAnswer) {
	s := &m.in
	if a.lab {
		s = m.lab
	}
	s.asking = false
	if a.err != nil {
		// Asked again after a pause (the next tick or record); the
		// bounded wait still runs.
		s.retryAt = time.Now().Add(100 * time.Millisecond)
		return
	}
	s.hwm, s.hwmClock = a.hwm, a.clock
}

func (m *merger) take(s *side) (kafka.Message, bool, bool, error) {
	msg := s.front().msg
	*s.front() = arrived{}
	s.head++
	if s.head == len(s.queue) {
		s.queue, s.head = s.queue[:0], 0
	}
	m.deadline = time.Time{}
	return msg, s.lab, true, nil
}

// hwm asks for the high-water mark of the input (lab false) or labels
// topic's partition of w.
func (w *worker) hwm(ctx context.Context, lab bool) (int64, error) {
	topic := w.cfg.InputTopic
	if lab {
		topic = w.cfg.LabelsTopic
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rs, err := w.p.listRanges(qctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: {kafka.LastOffsetOf(w.part)}}})
	if err != nil {
		return 0, err
	}
	return rs[topic].last, nil
}

// readerMaxWait is how long a fetch may wait on the broker for data. With
// MinBytes 1 the broker answers as soon as a record exists, so a longer wait
// adds no latency to records, but closing a reader (revoke, shutdown) waits
// for the fetch in flight: 1 s made every test restart measurably slower.
// The cost of 250 ms: kafka-go uses it as the connection's read deadline
// while asking the broker to wait 3/4 of it, so a heavily loaded broker can
// miss the remaining 62 ms; the reader then logs an i/o timeout and retries
// with backoff (nothing is lost; docs/pipeline.md, "Broker trouble").
const readerMaxWait = 250 * time.Millisecond

func (w *worker) newReader(topic string, offset int64, rl *readerLog) *kafka.Reader {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: w.cfg.Brokers, Topic: topic, Partition: w.part, Dialer: w.cfg.Dialer,
		MinBytes: 1, MaxBytes: max(4*w.cfg.MaxValueBytes, 16<<20), MaxWait: readerMaxWait,
		QueueCapacity: 1024, ReadBackoffMin: 100 * time.Millisecond, ReadBackoffMax: w.cfg.RetryBackoffMax,
		ReadLagInterval: -1, ErrorLogger: rl, MaxAttempts: math.MaxInt32,
	})
	r.SetOffset(offset)
	return r
}
