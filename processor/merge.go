package processor

import (
	"context"
	"time"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
)

// The merge of the input and labels topics (docs/pipeline.md, "Labels
// topic"). The merged order is the order of the Kafka timestamps, input
// first on ties, so that a replay of the two logs gives the same state as
// the live run. When both sides have a record buffered the choice is
// immediate. When only one side A has one (head H), the other side B may
// still hold an older record that is not fetched yet; the merger decides
// from data, not from timing: it asks the brokers for B's last stable
// offset in a request sent after H was received, and takes H only when B
// has been read up to that offset (B's records appended before H was read
// are then all merged before or after H by timestamp, whatever the fetch
// timing). The position counts transaction markers and aborted records
// (the reader's Chunk.Next), so a side whose tail is a marker is read to
// its end. If B's records below the offset do not come within MergeWait
// (B's fetch is failing), or no offset can be had, H is taken and the
// offset is considered reached.
//
// One answer covers every record of A received before the request: the
// merger keeps up to mergeQueue records of each side in memory, so that a
// steady stream pays one round trip per batch, not per record.

// mergeQueue bounds the records buffered per side by the merger.
const mergeQueue = 512

// side is one topic of the merge.
type side struct {
	r     kafkaio.Reader
	gen   uint64 // chunks of another generation predate a SetOffset: dropped
	cur   kafkaio.Chunk
	pos   int // cur.Records[pos:] not yet taken (without a labels topic)
	lab   bool
	queue []arrived // records received, not yet taken: queue[head:]
	head  int
	next  int64 // the reader's position: offset after the last record or marker received
	hw    int64 // the high-water mark of the latest chunk (lag)

	// The end offset from the latest answer, and the arrival clock at
	// which its request was sent (valid for records that arrived up to it).
	hwm      int64
	hwmClock uint64
	asking   bool
	epoch    uint64    // counts resets: an answer asked before the latest is about the old log
	assumed  int64     // an end given up on after MergeWait: treated as reached
	expired  uint64    // records of the other side that arrived up to this clock waited MergeWait: settled
	retryAt  time.Time // after a failed request, the earliest next one
	advance  int64     // a position to report once the records before it are handled (-1: none)
	resumeAt time.Time // kgo stopped reading the partition: read again from next at this time
	ep       *episode  // read failures, logged once per episode
}

type arrived struct {
	msg   kafkaio.Record
	clock uint64
	after int64 // the position after this record when it ended its chunk (markers followed), else -1
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
	// hwm asks for the end offset of the labels (lab) or input topic's partition.
	hwm  func(ctx context.Context, lab bool) (int64, error)
	wait time.Duration
	// event is told of a reader's events (Chunk.Err) as they arrive; it
	// may move the side (seek).
	event func(s *side, ch kafkaio.Chunk)
	// moved is told that a side's records are handled up to offset next
	// (transaction markers or aborted records followed the last one).
	moved func(lab bool, next int64)

	// score brings scoring requests, answered by onScore between records
	// and while waiting for them (score.go); nil when scoring is off.
	score   <-chan *scoreReq
	onScore func(*scoreReq)

	clock    uint64 // counts records received
	answers  chan hwmAnswer
	deadline time.Time // end of the bounded wait for the head in question
	timer    *time.Timer
}

func newSide(r kafkaio.Reader, next int64, lab bool) side {
	return side{r: r, next: next, lab: lab, advance: -1}
}

func (s *side) len() int { return len(s.queue) - s.head }

func (s *side) front() *arrived { return &s.queue[s.head] }

// accept takes a chunk of s's reader: false when it is stale (an older
// generation) or an event, which it hands on.
func (m *merger) accept(s *side, ch kafkaio.Chunk) bool {
	if ch.Gen != s.gen {
		s.r.Recycle(ch)
		return false
	}
	if ch.Err != nil {
		if m.event != nil {
			m.event(s, ch)
		}
		return false
	}
	s.hw = max(s.hw, ch.HighWatermark)
	if s.ep != nil && s.ep.fails > 0 {
		s.ep.ok()
	}
	return true
}

// receiveChunk appends a chunk's records to its side's queue.
func (m *merger) receiveChunk(s *side, ch kafkaio.Chunk) {
	if !m.accept(s, ch) {
		return
	}
	for i := range ch.Records {
		m.clock++
		s.queue = append(s.queue, arrived{msg: ch.Records[i], clock: m.clock, after: -1})
		s.next = ch.Records[i].Offset + 1
	}
	if ch.Next > s.next {
		s.next = ch.Next
		if s.len() > 0 {
			s.queue[len(s.queue)-1].after = ch.Next
		} else {
			m.report(s, ch.Next)
		}
	}
	s.r.Recycle(ch) // the records were copied; their bytes stay valid
}

func (m *merger) report(s *side, next int64) {
	if m.moved != nil {
		m.moved(s.lab, next)
	}
}

// seek moves s's reader to offset, dropping what s holds from before.
func (s *side) seek(offset int64) {
	s.reset(s.r.SetOffset(offset))
	s.next = offset
}

// reset drops what s holds from before its reader moved to generation
// gen: the records, and what the merge knew of the old log's end (its
// end offset, an end assumed reached), including an answer in flight.
func (s *side) reset(gen uint64) {
	s.gen = gen
	if s.cur.Records != nil {
		s.r.Recycle(s.cur)
	}
	s.cur, s.pos, s.advance = kafkaio.Chunk{}, 0, -1
	clear(s.queue)
	s.queue, s.head = s.queue[:0], 0
	s.hwm, s.hwmClock, s.assumed, s.expired, s.retryAt = 0, 0, 0, 0, time.Time{}
	s.asking = false
	s.epoch++
}

// drain moves what s's reader has queued into s's queue.
func (m *merger) drain(s *side) {
	for s.len() < mergeQueue {
		ch, ok := s.r.Next()
		if !ok {
			return
		}
		m.receiveChunk(s, ch)
	}
}

// nextIn is next without a labels topic: the input's records in the order
// fetched, a chunk at a time.
func (m *merger) nextIn(ctx context.Context, tick <-chan time.Time) (*kafkaio.Record, bool, bool, error) {
	s := &m.in
	for !m.fill() {
		select {
		case <-s.r.Ready():
		case r := <-m.score:
			m.onScore(r)
		case <-ctx.Done():
			return nil, false, false, ctx.Err()
		case <-tick:
			return nil, false, false, nil
		}
	}
	s.pos++
	return &s.cur.Records[s.pos-1], false, true, nil
}

// fill makes the input side's current chunk hold a record not yet taken,
// if its reader has one queued. Every record of the chunk it replaces has
// been handled by then, so the position that chunk reached is reported.
func (m *merger) fill() bool {
	s := &m.in
	for s.pos >= len(s.cur.Records) {
		if s.advance >= 0 {
			m.report(s, s.advance)
			s.advance = -1
		}
		if s.cur.Records != nil {
			s.r.Recycle(s.cur)
		}
		s.cur, s.pos = kafkaio.Chunk{}, 0
		ch, ok := s.r.Next()
		if !ok {
			return false
		}
		if !m.accept(s, ch) {
			continue
		}
		if n := len(ch.Records); n > 0 {
			s.next = ch.Records[n-1].Offset + 1
		}
		if ch.Next > s.next {
			s.next, s.advance = ch.Next, ch.Next
		}
		s.cur = ch
	}
	return true
}

// ready reports whether next has a record at hand, so that the worker can
// tell whether it may wait for one (with a labels topic: one on each side,
// the case where the merge never waits).
func (m *merger) ready() bool {
	if m.lab == nil {
		return m.fill()
	}
	return m.in.len() > 0 && m.lab.len() > 0
}

// next returns the next record and whether it comes from the labels topic;
// ok is false when tick fired first. The record is valid until the next
// call.
func (m *merger) next(ctx context.Context, tick <-chan time.Time) (msg *kafkaio.Record, lab, ok bool, err error) {
	m.serveWaiting()
	if m.lab == nil {
		return m.nextIn(ctx, tick)
	}
	if m.answers == nil {
		m.answers = make(chan hwmAnswer, 2)
	}
	for _, s := range []*side{&m.in, m.lab} {
		if s.advance >= 0 { // the record taken last ended its chunk
			m.report(s, s.advance)
			s.advance = -1
		}
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
		inReady, labReady := a.r.Ready(), b.r.Ready()
		if a.len() >= mergeQueue {
			inReady = nil
		}
		if b.len() >= mergeQueue {
			labReady = nil
		}
		select {
		case <-ctx.Done():
			return nil, false, false, ctx.Err()
		case <-tick:
			return nil, false, false, nil
		case <-inReady:
		case <-labReady:
		case ans := <-m.answers:
			m.answer(ans)
		case r := <-m.score:
			m.onScore(r)
		case <-expire:
			// Bounded wait over: the other side's end counts as reached.
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

// serveWaiting answers the scoring requests already waiting, so that a
// busy partition, whose next record is always at hand, answers them too.
func (m *merger) serveWaiting() {
	for m.score != nil {
		select {
		case r := <-m.score:
			m.onScore(r)
		default:
			return
		}
	}
}

// settled reports whether the empty side s cannot hold a record to merge
// before the other side's head, which arrived at clock c: an answer asked
// after c shows s read up to its end. Otherwise it asks (once at a time)
// and starts the bounded wait.
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

// ask sends one end-offset request for s in the background.
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

// take hands out s's head. The record stays in the queue's array until
// the next call of next, which is when the worker is done with it (a
// receive may then write over it).
func (m *merger) take(s *side) (*kafkaio.Record, bool, bool, error) {
	f := s.front()
	if f.after >= 0 {
		s.advance = f.after
	}
	s.head++
	if s.head == len(s.queue) {
		s.queue, s.head = s.queue[:0], 0
	}
	m.deadline = time.Time{}
	return &f.msg, s.lab, true, nil
}

// hwm asks for the end offset (the last stable offset under
// read_committed) of the input (lab false) or labels topic's partition.
func (w *worker) hwm(ctx context.Context, lab bool) (int64, error) {
	topic := w.cfg.InputTopic
	if lab {
		topic = w.cfg.LabelsTopic
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := w.kio.Offsets(qctx, topic, int32(w.part))
	if err != nil {
		return 0, err
	}
	return r.End, nil
}
