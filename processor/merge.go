package processor

import (
	"context"
	"time"

	"github.com/segmentio/kafka-go"
)

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
	ch    <-chan chunk
	f     *fetcher // takes consumed chunks back (nil: dropped)
	gen   uint64   // chunks of another generation predate a SetOffset: dropped
	cur   []kafka.Message
	pos   int // cur[pos:] not yet taken (without a labels topic)
	lab   bool
	queue []arrived // records received, not yet taken: queue[head:]
	head  int
	next  int64 // offset after the last record received (the reader's start before any)

	// The high-water mark from the latest answer, and the arrival clock at
	// which its request was sent (valid for records that arrived up to it).
	hwm      int64
	hwmClock uint64
	asking   bool
	epoch    uint64    // counts resets: an answer asked before the latest is about the old log
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
	epoch uint64
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

// receiveChunk appends a chunk's records to its side's queue.
func (m *merger) receiveChunk(s *side, c chunk) {
	if c.gen == s.gen {
		for _, msg := range c.msgs {
			m.receive(s, msg)
		}
	}
	s.recycle(c.msgs)
}

func (s *side) recycle(msgs []kafka.Message) {
	if s.f != nil && msgs != nil {
		s.f.recycle(msgs)
	}
}

// seek moves s's fetcher to offset, dropping what s holds from before.
func (s *side) seek(offset int64) {
	s.reset(s.f.SetOffset(offset))
	s.next = offset
}

// reset drops what s holds from before its fetcher moved to generation
// gen: the records, and what the merge knew of the old log's end (its
// high-water mark, a mark assumed reached), including an answer in flight.
func (s *side) reset(gen uint64) {
	s.gen = gen
	s.recycle(s.cur)
	s.cur, s.pos = nil, 0
	clear(s.queue)
	s.queue, s.head = s.queue[:0], 0
	s.hwm, s.hwmClock, s.assumed, s.expired, s.retryAt = 0, 0, 0, 0, time.Time{}
	s.asking = false
	s.epoch++
}

// drain moves what is buffered in s's channel into its queue.
func (m *merger) drain(s *side) {
	for s.len() < mergeQueue {
		select {
		case c := <-s.ch:
			m.receiveChunk(s, c)
		default:
			return
		}
	}
}

// nextIn is next without a labels topic: the input's records in the order
// fetched, a chunk at a time.
func (m *merger) nextIn(ctx context.Context, tick <-chan time.Time) (kafka.Message, bool, bool, error) {
	s := &m.in
	for {
		if s.pos < len(s.cur) {
			msg := s.cur[s.pos]
			s.pos++
			return msg, false, true, nil
		}
		s.recycle(s.cur)
		s.cur, s.pos = nil, 0
		var c chunk
		select { // the common case under load, without the three-way select's cost
		case c = <-s.ch:
		default:
			select {
			case c = <-s.ch:
			case <-ctx.Done():
				return kafka.Message{}, false, false, ctx.Err()
			case <-tick:
				return kafka.Message{}, false, false, nil
			}
		}
		if c.gen != s.gen {
			s.recycle(c.msgs)
			continue
		}
		s.cur = c.msgs
	}
}

// ready reports whether next has a record at hand, so that the worker can
// tell whether it may wait for one (with a labels topic: one on each side,
// the case where the merge never waits).
func (m *merger) ready() bool {
	if m.lab == nil {
		return m.in.pos < len(m.in.cur) || len(m.in.ch) > 0
	}
	return m.in.len() > 0 && m.lab.len() > 0
}

// next returns the next record and whether it comes from the labels topic;
// ok is false when tick fired first.
func (m *merger) next(ctx context.Context, tick <-chan time.Time) (msg kafka.Message, lab, ok bool, err error) {
	if m.lab == nil {
		return m.nextIn(ctx, tick)
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
		case c := <-inCh:
			m.receiveChunk(a, c)
		case c := <-labCh:
			m.receiveChunk(b, c)
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
	clock, lab, epoch := m.clock, s.lab, s.epoch
	go func() {
		h, err := m.hwm(ctx, lab)
		select {
		case m.answers <- hwmAnswer{lab: lab, epoch: epoch, clock: clock, hwm: h, err: err}:
		case <-ctx.Done():
		}
	}()
}

func (m *merger) answer(a hwmAnswer) {
	s := &m.in
	if a.lab {
		s = m.lab
	}
	if a.epoch != s.epoch {
		return // about the log before a reset (which cleared asking)
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
// adds no latency to records; it was 250 ms while closing a kafka-go Reader
// waited for the fetch in flight, which the fetcher does not (it closes its
// connection). kafka-go uses it as the connection's read deadline while
// asking the broker to wait 3/4 of it: a broker that misses the remaining
// quarter (250 ms, 62 ms before) makes the fetcher log an i/o timeout and
// reconnect (nothing is lost; docs/pipeline.md, "Broker trouble"). An idle
// partition costs a fetch every 750 ms (every 187 ms with 250 ms).
const readerMaxWait = time.Second

func (w *worker) newFetcher(topic string, offset int64, rl *readerLog) *fetcher {
	return newFetcher(topic, w.part, offset, w.cfg.Brokers, w.cfg.Dialer, max(4*w.cfg.MaxValueBytes, 16<<20),
		readerMaxWait, 100*time.Millisecond, w.cfg.RetryBackoffMax, rl)
}
