package processor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/rs/zerolog"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// Per-record handling: one input or labels record through decode, the
// learner and the pending map (the worker calls handle in offset order).

// handle processes one record. Each record is counted once, in one
// outcome: its kind in records_total when it was used, "dead" (and its
// reason) when it was dead-lettered, wherever it was found unusable.
func (w *worker) handle(ctx context.Context, msg *kafkaio.Record, fromLabels bool) error {
	emit := true
	if fromLabels {
		w.nextLab = msg.Offset + 1
		w.posLab.Store(w.nextLab)
		if w.skip != nil && w.skipped(msg, true) {
			w.skipRecord(msg, true)
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
			w.skipRecord(msg, false)
			return nil // already in the key's restored state
		}
	}
	kind, err := w.apply(ctx, msg, fromLabels, emit)
	if wire.IsBad(err) {
		return w.dead(ctx, msg, emit, err)
	}
	if err == nil {
		w.tally.records[kind]++
	}
	return err
}

// apply decodes one record and applies it to the learner and the pending
// map. A *wire.BadRecord error means the record is for the dead-letter
// topic and left the state as it was; any other error is fatal.
func (w *worker) apply(ctx context.Context, msg *kafkaio.Record, fromLabels, emit bool) (wire.Kind, error) {
	r, ts, err := w.decode(msg, fromLabels)
	if err != nil {
		return 0, err
	}
	if w.stages != nil {
		w.stageMark(&w.stages.Decoded)
	}
	w.advanceWatermark(msg, ts)
	if w.idle != nil && r.Kind != wire.KindDelete {
		// A label refreshes a known key's clock; only records that give a
		// key a learner put it in the index.
		w.idle.touch(msg.Key, w.watermark, r.Kind != wire.KindLabel)
	}
	switch r.Kind {
	case wire.KindFeatures, wire.KindLabeled:
		return r.Kind, w.predict(ctx, msg, r, ts, emit)
	case wire.KindDecision:
		return r.Kind, w.decide(ctx, msg, r, ts, emit)
	case wire.KindLabel:
		return r.Kind, w.label(msg, r)
	case wire.KindDelete:
		w.erase(msg.Key)
	}
	return r.Kind, nil
}

// skipRecord is what a record already in its key's restored state still
// does: it moves the event-time watermark as it did in the run that wrote
// that state, so that the other keys' pending entries and idle clocks
// expire at the same records (a bad record moved nothing then either).
func (w *worker) skipRecord(msg *kafkaio.Record, fromLabels bool) {
	if _, ts, err := w.decode(msg, fromLabels); err == nil {
		w.advanceWatermark(msg, ts)
	}
}

// decode checks and decodes msg and returns its event time. A
// *wire.BadRecord error is the record's dead letter.
func (w *worker) decode(msg *kafkaio.Record, fromLabels bool) (*wire.Record, int64, error) {
	if err := w.dec.Limits().Admit(msg.Key, msg.Value); err != nil {
		return nil, 0, err
	}
	if err := w.checkPartition(msg); err != nil {
		return nil, 0, err
	}
	r, err := w.dec.Decode(msg.Value)
	if err != nil {
		return nil, 0, err
	}
	if fromLabels && r.Kind != wire.KindLabel {
		return nil, 0, wire.Bad(wire.ReasonBadFields, "the labels topic carries id,y and id,reward records only")
	}
	ts := msg.Time.UnixMilli()
	if r.HasTs {
		if err := w.checkTs(msg, r.Ts); err != nil {
			return nil, 0, err
		}
		ts = r.Ts
	}
	return r, ts, nil
}

// advanceWatermark moves the partition's event-time watermark with a record
// of event time ts, and expires the pending entries and idle keys it
// leaves behind.
func (w *worker) advanceWatermark(msg *kafkaio.Record, ts int64) {
	t := watermarkTime(msg, ts)
	if t <= w.watermark {
		return
	}
	w.watermark = t
	if n := w.pend.expireTTL(w.watermark, w.cfg.LabelsTTL.Milliseconds()); n > 0 {
		w.p.c.expired[expiryTTL].Add(int64(n))
		w.tally.pending -= int64(n)
	}
	if w.idle != nil {
		w.expireIdle()
	}
}

// learner returns key's learner. A *wire.BadRecord (the key is quarantined)
// is for the record's dead letter; any other error is fatal.
func (w *worker) learner(key []byte) (*slot, error) {
	if cause, ok := w.quarantine[string(key)]; ok {
		return nil, wire.Bad(wire.ReasonCorruptState, cause.Error())
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

func (w *worker) predict(ctx context.Context, msg *kafkaio.Record, r *wire.Record, ts int64, emit bool) error {
	s, err := w.learner(msg.Key)
	if err != nil {
		return err
	}
	var p models.Prediction
	if err := contain("Predict", func() { p = s.l.Predict(r.X) }); err != nil {
		return w.onPanic(s, err)
	}
	if w.stages != nil {
		w.stageMark(&w.stages.Decided)
	}
	if p.Err != nil {
		// The learner refused x (e.g. ||x||^2 overflows its kernel): the
		// record is unusable, the learner untouched.
		return wire.Bad(wire.ReasonNonFinite, "x: "+p.Err.Error())
	}
	w.markDirty(s)
	if emit {
		out := wire.Prediction{ID: r.ID, Key: msg.Key, Model: w.cfg.Model.Algorithm, YHat: p.Value, Std: p.Std, HasStd: p.Std != 0,
			Label: classLabel(w.p.loss, p.Value), Updates: s.updates, Partition: w.part, Offset: msg.Offset}
		if err := w.send(ctx, msg, &out); err != nil {
			return nil
		}
	}
	if r.Kind == wire.KindLabeled {
		// Its prediction is out (predict first), so a y the numerical guard
		// refuses dead-letters the record after it.
		return w.update(s, r.X, p, r.Y, "y", false, false)
	}
	e := &pendingEntry{offset: msg.Offset, ts: ts, arms: []pendingArm{{x: append([]float64(nil), r.X...), p: p}}}
	w.putPending(msg.Key, r.ID, e)
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

func (w *worker) decide(ctx context.Context, msg *kafkaio.Record, r *wire.Record, ts int64, emit bool) error {
	s, err := w.learner(msg.Key)
	if err != nil {
		return err
	}
	w.markDirty(s)
	out := wire.Prediction{ID: r.ID, Key: msg.Key, Model: w.cfg.Model.Algorithm, Updates: s.updates, Partition: w.part, Offset: msg.Offset}
	e := &pendingEntry{offset: msg.Offset, ts: ts, decision: true}
	if b, ok := s.l.(models.Bandit); ok {
		var d models.Decision
		if err := contain("Choose", func() { d = b.Choose(r.Arms) }); err != nil {
			return w.onPanic(s, err)
		}
		if w.stages != nil {
			w.stageMark(&w.stages.Decided)
		}
		if d.Arm < 0 || d.Arm >= len(r.Arms) {
			w.log.Error().Int("arm", d.Arm).Int("arms", len(r.Arms)).Msg("bandit chose an arm out of range; record skipped")
			return nil
		}
		out.YHat, out.Std, out.HasStd, out.Arm, out.Mean, out.UCB = d.Mean, d.Std, true, r.ArmIDs[d.Arm], d.Mean, d.UCB
		e.bandit = true
		e.arms = []pendingArm{{id: bytes.Clone(r.ArmIDs[d.Arm]), x: append([]float64(nil), r.Arms[d.Arm]...),
			p: models.Prediction{Value: d.Mean, Std: d.Std, Choice: d.Arm, Prob: 1}}}
	} else {
		w.scores = w.scores[:0]
		if err := contain("Predict", func() {
			for i, x := range r.Arms {
				w.scores = append(w.scores, scored{i, s.l.Predict(x)})
			}
		}); err != nil {
			return w.onPanic(s, err)
		}
		for _, sc := range w.scores {
			if sc.p.Err != nil {
				return wire.Bad(wire.ReasonNonFinite, fmt.Sprintf("arms[%d].x: %v", sc.i, sc.p.Err))
			}
		}
		sort.SliceStable(w.scores, func(a, b int) bool { return w.scores[a].p.Value > w.scores[b].p.Value })
		k := min(w.cfg.TopK, len(w.scores))
		out.YHat = w.scores[0].p.Value
		out.Ranking = make([][]byte, k)
		e.arms = make([]pendingArm, k)
		for j := 0; j < k; j++ {
			sc := w.scores[j]
			out.Ranking[j] = r.ArmIDs[sc.i]
			e.arms[j] = pendingArm{id: bytes.Clone(r.ArmIDs[sc.i]), x: append([]float64(nil), r.Arms[sc.i]...), p: sc.p}
		}
	}
	if emit {
		w.tally.decisions++
		if err := w.send(ctx, msg, &out); err != nil {
			return nil
		}
	}
	w.putPending(msg.Key, r.ID, e)
	return nil
}

// label applies a label or reward to its pending prediction. The entry
// leaves the pending map only once the update is applied: a label the
// learner refuses is dead-lettered with the entry still pending.
func (w *worker) label(msg *kafkaio.Record, r *wire.Record) error {
	c := &w.p.c
	w.kbuf = pendingKey(w.kbuf, msg.Key, r.ID)
	e, ok := w.pend.m[string(w.kbuf)]
	if !ok {
		c.unknown.Add(1)
		w.rateLog("unknown_label", func(ev *zerolog.Event) {
			ev.Bytes("key", msg.Key).Bytes("id", r.ID).Int64("offset", msg.Offset).Msg("label for an id that is not pending (expired, never seen, or already labelled); dropped")
		})
		return nil
	}
	arm := &e.arms[0]
	if r.Arm != nil {
		if !e.decision {
			return wire.Bad(wire.ReasonBadFields, "arm given for a prediction that was not a decision")
		}
		arm = nil
		for i := range e.arms {
			if bytes.Equal(e.arms[i].id, r.Arm) {
				arm = &e.arms[i]
				break
			}
		}
		if arm == nil {
			return wire.Bad(wire.ReasonUnknownArm, "reward names an arm that was not offered (or not in the top-k kept)")
		}
	}
	s, err := w.learner(msg.Key)
	if err != nil {
		return err
	}
	field := "y"
	if r.Reward {
		field = "reward"
	}
	if err := w.update(s, arm.x, arm.p, r.Y, field, e.decision, e.bandit); err != nil {
		return err
	}
	w.pend.remove(e)
	w.tally.pending--
	return nil
}

// update applies a label (or reward, as field names it) and keeps the
// numerical guard's promise. An update the guard refuses leaves the state
// as it was and dead-letters its record (non_finite), as the learner's
// refusal of an x does; a panic dead-letters it too (onPanic). Other
// refusals (a learner's capacity reached) are logged: the label is used up.
func (w *worker) update(s *slot, x []float64, p models.Prediction, y float64, field string, decision, bandit bool) error {
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
		w.rateLog("update", func(ev *zerolog.Event) {
			ev.Err(err).Str("key", s.key).Msg("update rejected; learner state kept")
		})
		if errors.Is(err, models.ErrNumerical) {
			c.numerical.Add(1)
			return wire.Bad(wire.ReasonNonFinite, field+": "+err.Error()+"; learner state kept")
		}
		return nil
	}
	s.updates++
	w.markDirty(s)
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
