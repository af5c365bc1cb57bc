package processor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/rs/zerolog"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/models"
)

// Per-record handling: one input or labels record through decode, the
// learner and the pending map (the worker calls handle in offset order).

// handle processes one record.
func (w *worker) handle(ctx context.Context, msg *kafkaio.Record, fromLabels bool) error {
	c := &w.p.c
	emit := true
	if fromLabels {
		w.nextLab = msg.Offset + 1
		w.posLab.Store(w.nextLab)
		if w.skip != nil && w.skipped(msg, true) {
			return nil
		}
	} else {
		emit = msg.Offset >= w.emitFrom
		if !emit {
			w.tally.replayed++
		}
		w.nextIn = msg.Offset + 1
		w.posIn.Store(w.nextIn)
		defer w.markRestored()
		if w.skip != nil && w.skipped(msg, false) {
			return nil // already in the key's restored state
		}
	}
	if len(msg.Value) > w.cfg.MaxValueBytes {
		return w.dead(ctx, msg, emit, fail(reasonOversized, fmt.Sprintf("value of %d bytes > MaxValueBytes %d", len(msg.Value), w.cfg.MaxValueBytes)))
	}
	if len(msg.Key) == 0 {
		return w.dead(ctx, msg, emit, fail(reasonNoKey, "the message key routes the record to its learner"))
	}
	if err := w.checkPartition(msg); err != nil {
		return w.dead(ctx, msg, emit, err)
	}
	r, err := w.dec.decode(msg.Value)
	if err != nil {
		return w.dead(ctx, msg, emit, err)
	}
	if fromLabels && r.kind != kindLabel {
		return w.dead(ctx, msg, emit, fail(reasonBadFields, "the labels topic carries id,y and id,reward records only"))
	}
	w.tally.records[r.kind]++
	ts := msg.Time.UnixMilli()
	if r.hasTs {
		if err := w.checkTs(msg, r.ts); err != nil {
			return w.dead(ctx, msg, emit, err)
		}
		ts = r.ts
	}
	if ts > w.watermark {
		w.watermark = ts
		if n := w.pend.expireTTL(w.watermark, w.cfg.LabelsTTL.Milliseconds()); n > 0 {
			c.expired[expiryTTL].Add(int64(n))
			w.tally.pending -= int64(n)
		}
		if w.idle != nil {
			w.expireIdle()
		}
	}
	if w.idle != nil && r.kind != kindDelete {
		// A label refreshes a known key's clock; only records that give a
		// key a learner put it in the index.
		w.idle.touch(msg.Key, w.watermark, r.kind != kindLabel)
	}
	switch r.kind {
	case kindFeatures, kindLabeled:
		return w.predict(ctx, msg, r, ts, emit)
	case kindDecision:
		return w.decide(ctx, msg, r, ts, emit)
	case kindLabel:
		return w.label(ctx, msg, r, emit)
	case kindDelete:
		w.erase(msg.Key)
	}
	return nil
}

// learner returns key's learner. A *decodeError (the key is quarantined)
// is for the record's dead letter; any other error is fatal.
func (w *worker) learner(key []byte) (*slot, error) {
	if cause, ok := w.quarantine[string(key)]; ok {
		return nil, fail(reasonCorruptState, cause.Error())
	}
	s, err := w.cache.get(key)
	if err != nil {
		var ce *corruptError
		if errors.As(err, &ce) {
			return nil, w.quarantineLearner(key, err)
		}
		return nil, fmt.Errorf("%w: %w", errStoreFailed, err)
	}
	return s, nil
}

// deadOr dead-letters msg when err is a record's fault (a *decodeError)
// and returns any other error.
func (w *worker) deadOr(ctx context.Context, msg *kafkaio.Record, emit bool, err error) error {
	var de *decodeError
	if errors.As(err, &de) {
		return w.dead(ctx, msg, emit, err)
	}
	return err
}

func (w *worker) predict(ctx context.Context, msg *kafkaio.Record, r *record, ts int64, emit bool) error {
	s, err := w.learner(msg.Key)
	if err != nil {
		return w.deadOr(ctx, msg, emit, err)
	}
	var p models.Prediction
	if err := contain("Predict", func() { p = s.l.Predict(r.x) }); err != nil {
		return w.deadOr(ctx, msg, emit, w.onPanic(s, err))
	}
	if p.Err != nil {
		// The learner refused x (e.g. ||x||^2 overflows its kernel): the
		// record is unusable, the learner untouched.
		return w.dead(ctx, msg, emit, fail(reasonNonFinite, "x: "+p.Err.Error()))
	}
	s.dirty = true
	if emit {
		out := prediction{id: r.id, key: msg.Key, model: w.cfg.Model.Algorithm, yhat: p.Value, std: p.Std, hasStd: p.Std != 0,
			label: classLabel(w.p.loss, p.Value), updates: s.updates, partition: w.part, offset: msg.Offset}
		if err := w.send(ctx, msg, &out); err != nil {
			return nil
		}
	}
	if r.kind == kindLabeled {
		if err := w.update(s, r.x, p, r.y, false, false); err != nil {
			return w.deadOr(ctx, msg, emit, err)
		}
		return nil
	}
	e := &pendingEntry{offset: msg.Offset, ts: ts, arms: []pendingArm{{x: append([]float64(nil), r.x...), p: p}}}
	w.putPending(msg.Key, r.id, e)
	return nil
}

func (w *worker) putPending(key, id []byte, e *pendingEntry) {
	c := &w.p.c
	w.kbuf = pendingKey(w.kbuf, key, id)
	e.key = string(w.kbuf)
	if w.pend.put(e) {
		c.expired[expiryReplaced].Add(1)
	} else {
		w.tally.pending++
	}
	if n := w.pend.expireCount(w.maxPending()); n > 0 {
		c.expired[expiryCount].Add(int64(n))
		w.tally.pending -= int64(n)
	}
}

func (w *worker) decide(ctx context.Context, msg *kafkaio.Record, r *record, ts int64, emit bool) error {
	s, err := w.learner(msg.Key)
	if err != nil {
		return w.deadOr(ctx, msg, emit, err)
	}
	s.dirty = true
	out := prediction{id: r.id, key: msg.Key, model: w.cfg.Model.Algorithm, updates: s.updates, partition: w.part, offset: msg.Offset}
	e := &pendingEntry{offset: msg.Offset, ts: ts, decision: true}
	if b, ok := s.l.(models.Bandit); ok {
		var d models.Decision
		if err := contain("Choose", func() { d = b.Choose(r.arms) }); err != nil {
			return w.deadOr(ctx, msg, emit, w.onPanic(s, err))
		}
		if d.Arm < 0 || d.Arm >= len(r.arms) {
			w.log.Error().Int("arm", d.Arm).Int("arms", len(r.arms)).Msg("bandit chose an arm out of range; record skipped")
			return nil
		}
		out.yhat, out.std, out.hasStd, out.arm, out.mean, out.ucb = d.Mean, d.Std, true, r.armIDs[d.Arm], d.Mean, d.UCB
		e.bandit = true
		e.arms = []pendingArm{{id: bytes.Clone(r.armIDs[d.Arm]), x: append([]float64(nil), r.arms[d.Arm]...),
			p: models.Prediction{Value: d.Mean, Std: d.Std, Choice: d.Arm, Prob: 1}}}
	} else {
		w.scores = w.scores[:0]
		if err := contain("Predict", func() {
			for i, x := range r.arms {
				w.scores = append(w.scores, scored{i, s.l.Predict(x)})
			}
		}); err != nil {
			return w.deadOr(ctx, msg, emit, w.onPanic(s, err))
		}
		for _, sc := range w.scores {
			if sc.p.Err != nil {
				return w.dead(ctx, msg, emit, fail(reasonNonFinite, fmt.Sprintf("arms[%d].x: %v", sc.i, sc.p.Err)))
			}
		}
		sort.SliceStable(w.scores, func(a, b int) bool { return w.scores[a].p.Value > w.scores[b].p.Value })
		k := min(w.cfg.TopK, len(w.scores))
		out.yhat = w.scores[0].p.Value
		out.ranking = make([][]byte, k)
		e.arms = make([]pendingArm, k)
		for j := 0; j < k; j++ {
			sc := w.scores[j]
			out.ranking[j] = r.armIDs[sc.i]
			e.arms[j] = pendingArm{id: bytes.Clone(r.armIDs[sc.i]), x: append([]float64(nil), r.arms[sc.i]...), p: sc.p}
		}
	}
	if emit {
		w.tally.decisions++
		if err := w.send(ctx, msg, &out); err != nil {
			return nil
		}
	}
	w.putPending(msg.Key, r.id, e)
	return nil
}

func (w *worker) label(ctx context.Context, msg *kafkaio.Record, r *record, emit bool) error {
	c := &w.p.c
	w.kbuf = pendingKey(w.kbuf, msg.Key, r.id)
	e, ok := w.pend.m[string(w.kbuf)]
	if !ok {
		c.unknown.Add(1)
		w.rateLog("unknown_label", func(ev *zerolog.Event) {
			ev.Bytes("key", msg.Key).Bytes("id", r.id).Int64("offset", msg.Offset).Msg("label for an id that is not pending (expired, never seen, or already labelled); dropped")
		})
		return nil
	}
	arm := &e.arms[0]
	if r.arm != nil {
		if !e.decision {
			return w.dead(ctx, msg, emit, fail(reasonBadFields, "arm given for a prediction that was not a decision"))
		}
		arm = nil
		for i := range e.arms {
			if bytes.Equal(e.arms[i].id, r.arm) {
				arm = &e.arms[i]
				break
			}
		}
		if arm == nil {
			return w.dead(ctx, msg, emit, fail(reasonUnknownArm, "reward names an arm that was not offered (or not in the top-k kept)"))
		}
	}
	w.pend.remove(e)
	w.tally.pending--
	s, err := w.learner(msg.Key)
	if err != nil {
		return w.deadOr(ctx, msg, emit, err)
	}
	if err := w.update(s, arm.x, arm.p, r.y, e.decision, e.bandit); err != nil {
		return w.deadOr(ctx, msg, emit, err)
	}
	return nil
}

// update applies a label (or reward) and keeps the numerical guard's
// promise. It returns an error only when the learner panicked (onPanic).
func (w *worker) update(s *slot, x []float64, p models.Prediction, y float64, decision, bandit bool) error {
	c := &w.p.c
	var err error
	if perr := contain("Update", func() {
		switch {
		case bandit:
			err = s.l.(models.Bandit).Observe(x, y)
		default:
			if !decision && w.p.loss.Classification() {
				y = models.Label(y)
			}
			err = s.l.Update(x, p, y)
		}
	}); perr != nil {
		return w.onPanic(s, perr)
	}
	if err != nil {
		if errors.Is(err, models.ErrNumerical) {
			c.numerical.Add(1)
		}
		w.rateLog("update", func(ev *zerolog.Event) {
			ev.Err(err).Str("key", s.key).Msg("update rejected; learner state kept")
		})
		return nil
	}
	s.updates++
	s.dirty = true
	w.lastUpdated = s
	t := &w.tally
	t.updates++
	if decision {
		t.rewards++
		t.reward += y
	} else {
		t.lossCount++
		t.loss += w.p.loss.Value(p.Value, y)
	}
	return nil
}
