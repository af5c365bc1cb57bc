package processor

// Scoring on request (docs/bandits.md, "Scoring on request"): the answer a
// key's live state gives to an x or a set of arms, without changing the
// state and without emitting anything.
//
// Safe by construction: the caller's goroutine never touches a learner. It
// sends the key over a channel to the worker goroutine of the key's
// partition, which answers between two records with the key's state bytes
// (the stored value a checkpoint would write: n_updates and the learner's
// versioned blob) and its partition's offsets. The caller decodes them into
// a learner of its own, built by the factory as the worker builds the key's
// learner, and predicts, chooses or ranks on that copy. Predict and Choose
// may advance the copy's PRNG; the live learner never sees it.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/sticky"
	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// ScoreOutcome classifies a scoring request the processor did not answer.
type ScoreOutcome uint8

const (
	// ScoreUnavailable: the key's partition is being restored, moved or
	// rebalanced, or its worker did not answer in time. Retryable.
	ScoreUnavailable ScoreOutcome = iota
	// ScoreElsewhere: another member owns the key's partition
	// (ScoreError.Owner is its scoring address when it announced one).
	ScoreElsewhere
	// ScoreRefused: the learner refused the query's x (a number its kernel
	// cannot take). The client's fault, not retryable.
	ScoreRefused
	// ScoreFailed: the key's stored state cannot be decoded (quarantined),
	// the store failed or the learner panicked. Not retryable.
	ScoreFailed
)

// ScoreError is the answer to a scoring request that Score did not answer
// with a score.
type ScoreError struct {
	Outcome   ScoreOutcome
	Msg       string
	Partition int    // the key's partition, -1 when not known yet
	Owner     string // ScoreElsewhere: the owner's scoring address ("" if none announced)
	OwnerID   string // ScoreElsewhere: the owner's identity (or member ID)
}

func (e *ScoreError) Error() string { return e.Msg }

// Retryable reports whether the same request may succeed later.
func (e *ScoreError) Retryable() bool { return e.Outcome == ScoreUnavailable }

func unavailable(part int, format string, a ...any) error {
	return &ScoreError{Outcome: ScoreUnavailable, Partition: part, Msg: fmt.Sprintf(format, a...)}
}

// scoreReq is one request to a worker; reply has room for the answer, so
// the worker never waits for a caller that gave up.
type scoreReq struct {
	key   string
	reply chan scoreReply
}

type scoreReply struct {
	restoring bool   // the partition is replaying its gap: no state to show yet
	blob      []byte // the key's stored value (uvarint n_updates | learner blob), nil = no state
	err       error  // quarantined key, store failure
	offset    int64  // the partition's next input offset: the state holds every record before it
	labOffset int64  // the same for the labels topic
}

// scorer is the way to one running worker.
type scorer struct {
	ch   chan *scoreReq
	done chan struct{} // closed when the worker stops answering
	once sync.Once
}

var reqPool = sync.Pool{New: func() any { return &scoreReq{reply: make(chan scoreReply, 1)} }}

// Scoring reports whether scoring requests are on (Config.Scoring.Addr).
func (p *Processor) Scoring() bool { return p.cfg.Scoring.Addr != "" }

// openScoring makes the worker answer scoring requests while m waits for
// or between records; the returned func stops that (idempotent).
func (w *worker) openScoring(m *merger) func() {
	if !w.p.Scoring() {
		return func() {}
	}
	sc := &scorer{ch: make(chan *scoreReq), done: make(chan struct{})}
	m.score, m.onScore = sc.ch, w.answerScore
	w.cache.meanwhile = m.serveWaiting
	w.p.scoreMu.Lock()
	if w.p.scorers == nil {
		w.p.scorers = map[int]*scorer{}
	}
	w.p.scorers[w.part] = sc
	w.p.scoreMu.Unlock()
	return func() {
		sc.once.Do(func() {
			w.p.scoreMu.Lock()
			if w.p.scorers[w.part] == sc {
				delete(w.p.scorers, w.part)
			}
			w.p.scoreMu.Unlock()
			close(sc.done)
			m.score = nil
			w.cache.meanwhile = nil
		})
	}
}

// answerScore runs on the worker's goroutine, between records: it reads
// the key's state without touching the learner's cache order, and hands a
// copy of its bytes to the caller.
func (w *worker) answerScore(r *scoreReq) {
	rep := scoreReply{offset: w.nextIn, labOffset: w.nextLab}
	if cause, bad := w.quarantine[r.key]; bad {
		rep.err = &ScoreError{Outcome: ScoreFailed, Partition: w.part, Msg: "the key's stored state is corrupt (quarantined): " + cause.Error()}
	} else if !w.restored {
		rep.restoring = true
	} else if blob, err := w.cache.peek(r.key); err != nil {
		rep.err = &ScoreError{Outcome: ScoreFailed, Partition: w.part, Msg: "reading the key's state: " + err.Error()}
	} else {
		rep.blob = blob
	}
	r.reply <- rep
}

// peek is key's current stored value (uvarint n_updates | blob), a copy
// the caller owns, nil when the key has no state (never seen, or erased):
// value's answer, but for the keys erased since the last checkpoint, whose
// older version value would still find.
func (c *learnerCache) peek(k string) ([]byte, error) {
	if _, live := c.live[k]; !live && c.deleted[k] {
		return nil, nil
	}
	b, err := c.value(k)
	if _, live := c.live[k]; live || b == nil || err != nil {
		return b, err // encoded now, or read from Badger: already a copy
	}
	return append([]byte(nil), b...), nil
}

// scorerOf returns the running worker of part, nil when none answers.
func (p *Processor) scorerOf(part int) *scorer {
	p.scoreMu.Lock()
	defer p.scoreMu.Unlock()
	return p.scorers[part]
}

// partitionOfKey is key's input partition under murmur2 (as the producers
// partition, guard.go), -1 before the partition count is known.
func (p *Processor) partitionOfKey(key []byte) int {
	ids := p.partIDs.Load()
	if n := int(p.inParts.Load()); ids == nil || len(*ids) != n {
		if n == 0 {
			return -1
		}
		s := make([]int, n)
		for i := range s {
			s[i] = i
		}
		ids = &s
		p.partIDs.Store(ids)
	}
	return murmur2.Balance(kafka.Message{Key: key}, (*ids)...)
}

// Score answers q from its key's live state: the output record's fields
// (wire.AppendScore) appended to dst, as the worker would emit them for a
// record with q's x or arms at the partition's current offset, without
// changing the state or emitting anything. A key without state gets a
// fresh learner's answer, marked fresh. Any other outcome is a
// *ScoreError: the key's partition is elsewhere (ScoreElsewhere, with the
// owner's address when known), or not answerable now (ScoreUnavailable),
// or the learner refused x (ScoreRefused), or the state is unreadable
// (ScoreFailed). Safe for concurrent use.
func (p *Processor) Score(ctx context.Context, q *wire.Query, dst []byte) ([]byte, error) {
	if !p.Scoring() {
		return nil, &ScoreError{Outcome: ScoreFailed, Partition: -1, Msg: "scoring is off (Config.Scoring.Addr)"}
	}
	part := p.partitionOfKey(q.Key)
	if part < 0 {
		return nil, unavailable(part, "starting: the input's partitions are not known yet")
	}
	p.mu.Lock()
	inGen := p.inGen
	restored, assigned := p.assigned[part]
	_, failed := p.failed[part]
	p.mu.Unlock()
	switch {
	case !inGen:
		return nil, unavailable(part, "the group is rebalancing")
	case failed:
		return nil, unavailable(part, "partition %d is stopped by an error on this member until it moves (see /readyz)", part)
	case !assigned:
		return nil, p.elsewhere(part)
	case !restored:
		return nil, unavailable(part, "partition %d is being restored", part)
	}
	sc := p.scorerOf(part)
	if sc == nil {
		return nil, unavailable(part, "partition %d is being restored", part)
	}
	req := reqPool.Get().(*scoreReq)
	req.key = string(q.Key)
	t := time.NewTimer(p.cfg.Scoring.Timeout)
	defer t.Stop()
	select {
	case sc.ch <- req:
	case <-sc.done:
		reqPool.Put(req)
		return nil, unavailable(part, "partition %d is moving (revoked)", part)
	case <-t.C:
		reqPool.Put(req)
		return nil, unavailable(part, "partition %d did not take the request within %v (busy: a checkpoint, an outage)", part, p.cfg.Scoring.Timeout)
	case <-ctx.Done():
		reqPool.Put(req)
		return nil, unavailable(part, "request cancelled: %v", ctx.Err())
	}
	var rep scoreReply
	select {
	case rep = <-req.reply:
		reqPool.Put(req) // answered: its reply channel is empty again
	case <-t.C: // the worker answers into the buffer; req is not reused
		return nil, unavailable(part, "partition %d did not answer within %v", part, p.cfg.Scoring.Timeout)
	case <-ctx.Done():
		return nil, unavailable(part, "request cancelled: %v", ctx.Err())
	}
	switch {
	case rep.err != nil:
		return nil, rep.err
	case rep.restoring:
		return nil, unavailable(part, "partition %d is being restored (replaying its gap)", part)
	}
	return p.scoreState(q, part, rep, dst)
}

// scoreState answers q on a learner of its own decoded from rep.
func (p *Processor) scoreState(q *wire.Query, part int, rep scoreReply, dst []byte) ([]byte, error) {
	failed := func(format string, a ...any) error {
		return &ScoreError{Outcome: ScoreFailed, Partition: part, Msg: fmt.Sprintf(format, a...)}
	}
	refused := func(format string, a ...any) error {
		return &ScoreError{Outcome: ScoreRefused, Partition: part, Msg: fmt.Sprintf(format, a...)}
	}
	var updates uint64
	var blob []byte
	if rep.blob != nil {
		n, w := binary.Uvarint(rep.blob)
		if w <= 0 {
			return nil, failed("the key's stored state is corrupt: n_updates")
		}
		updates, blob = n, rep.blob[w:]
	}
	l, keep, err := p.scoreCopy(q.Key, blob)
	if err != nil {
		return nil, failed("%v", err)
	}
	id := q.ID
	if id == nil {
		id = []byte("null")
	}
	out := wire.Prediction{ID: id, Key: q.Key, Model: p.cfg.Model.Algorithm, Updates: updates, Partition: part, Offset: rep.offset}
	switch b, bandit := l.(models.Bandit); {
	case q.Arms == nil:
		var pr models.Prediction
		if err := contain("Predict", func() { pr = l.Predict(q.X) }); err != nil {
			return nil, failed("%v", err)
		}
		if pr.Err != nil {
			return nil, refused("x: %v", pr.Err)
		}
		out.YHat, out.Std, out.HasStd, out.Label = pr.Value, pr.Std, pr.Std != 0, classLabel(p.loss, pr.Value)
	case bandit:
		var d models.Decision
		if err := contain("Choose", func() { d = b.Choose(q.Arms) }); err != nil {
			return nil, failed("%v", err)
		}
		if d.Arm < 0 || d.Arm >= len(q.Arms) {
			return nil, failed("the bandit chose arm %d of %d", d.Arm, len(q.Arms))
		}
		out.YHat, out.Std, out.HasStd, out.Arm, out.Mean, out.UCB = d.Mean, d.Std, true, q.ArmIDs[d.Arm], d.Mean, d.UCB
	default:
		scores, err := rankArms(l, q.Arms)
		if err != nil {
			return nil, failed("%v", err)
		}
		for _, sc := range scores {
			if sc.p.Err != nil {
				return nil, refused("arms[%d].x: %v", sc.i, sc.p.Err)
			}
		}
		k := min(p.cfg.TopK, len(scores))
		out.YHat = scores[0].p.Value
		out.Ranking = make([][]byte, k)
		for j := range k {
			out.Ranking[j] = q.ArmIDs[scores[j].i]
		}
	}
	lab := int64(-1)
	if p.cfg.LabelsTopic != "" {
		lab = rep.labOffset
	}
	if keep {
		p.scoreCopies.Put(l) // only after an answer: a panic contained above may have left it half-changed
	}
	return wire.AppendScore(dst, &out, rep.blob == nil, lab), nil
}

// scoreCopy returns a learner holding blob's state (a fresh learner of key
// when blob is nil), and whether the next request may reload it. A learner
// that takes any key's state in place (models.Reloader: bkb) is reloaded
// from scoreCopies rather than built and decoded into: 68 against 130 µs
// and 9 against 245 KB of garbage at 500 stored arms and m = 128
// (BenchmarkReload, BenchmarkBKBRestore). A fresh learner is always built
// for its key, whose seed it takes.
func (p *Processor) scoreCopy(key, blob []byte) (models.Learner, bool, error) {
	if blob != nil {
		if rl, _ := p.scoreCopies.Get().(models.Reloader); rl != nil {
			if err := decodeSafely(rl.Reload, blob); err != nil {
				return nil, false, fmt.Errorf("the key's stored state is corrupt: %w", err) // rl is dropped
			}
			return rl, true, nil
		}
	}
	l, err := p.factory.New(string(key))
	if err != nil {
		return nil, false, fmt.Errorf("new learner: %w", err)
	}
	if blob != nil {
		if err := unmarshalSafely(l, blob); err != nil {
			return nil, false, fmt.Errorf("the key's stored state is corrupt: %w", err)
		}
	}
	_, keep := l.(models.Reloader)
	return l, keep, nil
}

// rankArms predicts every arm in order (as the worker's decide does: the
// PRNG of a sampling learner advances arm by arm) and sorts them by score,
// highest first, ties in arm order.
func rankArms(l models.Learner, arms [][]float64) ([]scored, error) {
	scores := make([]scored, 0, len(arms))
	err := contain("Predict", func() {
		for i, x := range arms {
			scores = append(scores, scored{i, l.Predict(x)})
		}
	})
	sort.SliceStable(scores, func(a, b int) bool { return scores[a].p.Value > scores[b].p.Value })
	return scores, err
}

// Owners of the partitions, as the group's coordinator describes them.

// owner is a member as the others see it.
type owner struct {
	id   string // identity (sticky user data), else the member ID
	addr string // scoring address, "" when it serves none
}

// elsewhere is the answer for a partition this member does not own.
func (p *Processor) elsewhere(part int) error {
	om := p.owners.Load()
	if om == nil {
		return unavailable(part, "partition %d: its owner is not known yet (the group's assignment is being read)", part)
	}
	o, ok := (*om)[part]
	if !ok {
		return unavailable(part, "partition %d is not assigned in this generation", part)
	}
	msg := fmt.Sprintf("partition %d is owned by member %s", part, o.id)
	if o.addr == "" {
		msg += ", which serves no scoring requests (serve.addr)"
	}
	return &ScoreError{Outcome: ScoreElsewhere, Partition: part, Owner: o.addr, OwnerID: o.id, Msg: msg}
}

// learnOwners reads the generation's assignment of the input partitions
// and the members' scoring addresses through DescribeGroups, until it has
// a Stable description that gives this member the partitions gen gives
// it (so the description is of gen, or of a later generation that would
// end gen anyway), or ctx ends with the generation. kafka-go passes the
// assignment but not the other members' user data to a non-leader, so
// every member asks the coordinator, as Kafka Streams' members learn each
// other's application.server from the assignment. It runs under
// gen.Start, so it returns only when the generation ends.
func (p *Processor) learnOwners(ctx context.Context, gen *kafka.Generation) {
	p.owners.Store(nil)
	var mine []int
	for _, a := range gen.Assignments[p.cfg.InputTopic] {
		mine = append(mine, a.ID)
	}
	slices.Sort(mine)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		om, err := p.describeOwners(ctx, gen.MemberID, mine)
		if err == nil {
			p.owners.Store(&om)
			p.log.Debug().Int32("generation", gen.ID).Int("partitions", len(om)).Msg("partition owners known for scoring requests")
			<-ctx.Done() // a function of gen.Start that returns ends the generation
			return
		}
		p.log.Debug().Err(err).Msg("partition owners not known yet")
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (p *Processor) describeOwners(ctx context.Context, memberID string, mine []int) (map[int]owner, error) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := p.admin.DescribeGroups(qctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{p.cfg.Group}})
	if err != nil {
		return nil, err
	}
	if len(resp.Groups) != 1 {
		return nil, fmt.Errorf("describe group %s: %d groups", p.cfg.Group, len(resp.Groups))
	}
	g := resp.Groups[0]
	if g.Error != nil {
		return nil, g.Error
	}
	if g.GroupState != "Stable" {
		return nil, fmt.Errorf("group %s is %s", p.cfg.Group, g.GroupState)
	}
	om := map[int]owner{}
	found := false
	for _, m := range g.Members {
		o := owner{id: m.MemberID}
		if c, err := sticky.ParseUserData(m.MemberMetadata.UserData); err == nil {
			o.addr = c.Addr
			if c.Identity != "" {
				o.id = c.Identity
			}
		}
		var parts []int
		for _, tp := range m.MemberAssignments.Topics {
			if tp.Topic == p.cfg.InputTopic {
				parts = append(parts, tp.Partitions...)
			}
		}
		for _, part := range parts {
			om[part] = o
		}
		if m.MemberID == memberID {
			slices.Sort(parts)
			found = slices.Equal(parts, mine)
		}
	}
	if !found {
		return nil, errors.New("the description does not show this member's assignment yet")
	}
	return om, nil
}
