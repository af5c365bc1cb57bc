package processor

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/models"
)

// worker processes one input partition (and its co-partition of the labels
// topic) in offset order. Everything it owns is single-goroutine.
type worker struct {
	p     *Processor
	cfg   *Config
	part  int
	log   zerolog.Logger
	store *checkpoint.Store
	w     *kafka.Writer
	cache *learnerCache
	pend  *pendingMap
	dec   *decoder
	em    *emitter

	nextIn, nextLab   int64 // next offsets to read (kafka.FirstOffset/LastOffset before the first record)
	groupIn, groupLab int64 // the group's committed offsets at assignment
	emitFrom          int64 // input records below it are replayed without emitting
	watermark         int64 // largest event time seen (ms)
	seq               uint64
	sinceCkpt         int
	lastCkpt          time.Time
	lag               int64           // last lag published to the counters
	ckptBusy          bool            // a checkpoint is in flight (at most one per partition)
	ckptDone          chan ckptResult // its outcome, read by the worker
	carry             *snapshot       // the changes of an abandoned checkpoint, written by the next one
	lastUpdated       *slot
	restored          bool
	ckptSeq           uint64                   // sequence number of the last checkpoint (the changelog's markers)
	skip              map[string]changelogSkip // keys whose restored state is ahead of the resume offsets
	tombstones        []string                 // erased keys whose empty bundle a completed checkpoint wrote: tombstoned next
	lagGauge          prometheus.Gauge
	onDiskGauge       prometheus.Gauge
	hard              context.Context // cancelled a bounded time after the worker's context
	lost              bool            // an output was given up: no checkpoint may pass it

	kbuf    []byte
	scores  []scored
	logGate map[string]time.Time

	quarantine map[string]error // keys whose stored learner is corrupt (quarantine.go)
	failedErr  error            // the non-retriable error that stopped the partition (fail)
	// posIn and posLab mirror nextIn and nextLab for the probe goroutine (offsets.go).
	posIn, posLab atomic.Int64
	partIDs       []int // 0..n-1 of the input topic, for the partitioner check (guard.go)
}

type scored struct {
	i int
	p models.Prediction
}

func newWorker(p *Processor, store *checkpoint.Store, w *kafka.Writer, part int) *worker {
	wk := &worker{p: p, cfg: &p.cfg, part: part, log: p.log.With().Int("partition", part).Logger(),
		store: store, w: w, dec: newDecoder(p.cfg.Model.Dim), pend: newPendingMap(), watermark: math.MinInt64,
		logGate: map[string]time.Time{}}
	for i := 0; i < p.inParts; i++ {
		wk.partIDs = append(wk.partIDs, i)
	}
	return wk
}

// Partition meta (version 2): 2 | varint nextIn | varint nextLab | varint
// watermark | varint checkpoint sequence number | spec hash (8, LE). Version
// 1 had no sequence number (read as 0).
func (w *worker) encodeMeta() []byte {
	b := []byte{2}
	b = binary.AppendVarint(b, w.nextIn)
	b = binary.AppendVarint(b, w.nextLab)
	b = binary.AppendVarint(b, w.watermark)
	b = binary.AppendVarint(b, int64(w.ckptSeq))
	return binary.LittleEndian.AppendUint64(b, w.p.specHash)
}

func (w *worker) decodeMeta(b []byte) error {
	if len(b) < 1 || (b[0] != 1 && b[0] != 2) {
		return errors.New("unknown partition meta version")
	}
	fields := 3
	if b[0] == 2 {
		fields = 4
	}
	b = b[1:]
	var vals [4]int64
	for i := range vals[:fields] {
		v, n := binary.Varint(b)
		if n <= 0 {
			return errors.New("corrupt partition meta")
		}
		vals[i], b = v, b[n:]
	}
	if len(b) != 8 {
		return errors.New("corrupt partition meta")
	}
	if binary.LittleEndian.Uint64(b) != w.p.specHash {
		return fmt.Errorf("CheckpointDir holds state of another model spec for partition %d (use a new directory for a new model)", w.part)
	}
	w.nextIn, w.nextLab, w.watermark, w.ckptSeq = vals[0], vals[1], vals[2], uint64(vals[3])
	return nil
}

// restore loads the partition's checkpoint and decides where to read from
// and from where to emit (DESIGN.md, "On assignment").
func (w *worker) restore(groupIn, groupLab int64) error {
	cfg := w.cfg
	start := kafka.FirstOffset
	if cfg.StartOffset == "latest" {
		start = kafka.LastOffset
	}
	w.groupIn, w.groupLab = groupIn, groupLab
	if cfg.Changelog.Topic != "" {
		if err := w.restoreChangelog(w.hard); err != nil {
			return fmt.Errorf("changelog: %w", err)
		}
	}
	meta, ok, err := w.store.Meta(w.part)
	if err != nil {
		return err
	}
	if ok {
		if err := w.decodeMeta(meta); err != nil {
			return err
		}
		// Labels past our checkpoint are re-read from it: they rebuild the same state.
		w.emitFrom = max(w.nextIn, groupIn)
	} else {
		// No local state: rebuild it from the start of the log up to the
		// group's offset (if any) without emitting.
		w.nextIn, w.nextLab, w.emitFrom = start, start, 0
		if groupIn >= 0 {
			w.nextIn, w.emitFrom = kafka.FirstOffset, groupIn
		}
		if groupLab >= 0 {
			w.nextLab = kafka.FirstOffset
		}
	}
	var entries []*pendingEntry
	err = w.store.EachPending(w.part, func(k, v []byte) error {
		e, err := decodePending(string(k), v, cfg.Model.Dim)
		if err != nil {
			w.quarantinePending(k, fmt.Errorf("pending entry of partition %d: %w", w.part, err))
			return nil
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return err
	}
	w.pend.load(entries)
	w.p.c.pending.Add(int64(len(entries)))
	w.cache = newLearnerCache(w.part, cfg.Model, w.store, cfg.MaxLearners, &w.p.c.inMemory, &w.p.c.onDisk)
	if err := w.cache.loadStored(); err != nil {
		return err
	}
	w.onDiskGauge = w.p.m.onDisk.WithLabelValues(strconv.Itoa(w.part))
	w.onDiskGauge.Set(float64(w.cache.onDisk))
	w.lagGauge = w.p.m.lag.WithLabelValues(strconv.Itoa(w.part))
	w.log.Info().Int64("next_offset", w.nextIn).Int64("group_offset", groupIn).Int64("emit_from", w.emitFrom).
		Int("pending", len(entries)).Bool("checkpoint", ok).Msg("partition restored")
	return nil
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

// run restores the partition, processes records until ctx ends, then
// checkpoints and commits. It returns an error only when the store fails.
func (w *worker) run(ctx context.Context, gen *kafka.Generation, groupIn, groupLab int64) error {
	defer w.p.setAssigned(w.part, false)
	// On shutdown the grace period bounds the final emission and
	// checkpoint; on revoke the session timeout does (after it the
	// partition belongs to someone else anyway).
	bound := min(w.cfg.ShutdownGrace, w.cfg.SessionTimeout)
	hard, hardCancel := context.WithCancel(context.Background())
	defer hardCancel()
	w.hard = hard
	go func() {
		select {
		case <-ctx.Done():
			t := time.NewTimer(bound)
			defer t.Stop()
			select {
			case <-t.C:
				hardCancel()
			case <-hard.Done():
			}
		case <-hard.Done():
		}
	}()
	if err := w.restore(groupIn, groupLab); err != nil {
		return fmt.Errorf("%w: restore partition %d: %w", errStoreFailed, w.part, err)
	}
	defer func() {
		w.p.c.pending.Add(-int64(w.pend.len()))
		w.cache.release()
		part := strconv.Itoa(w.part)
		w.p.c.lag.Add(-w.lag)
		w.p.m.lag.DeleteLabelValues(part)
		w.p.m.onDisk.DeleteLabelValues(part)
	}()
	emCtx, emCancel := context.WithCancel(context.Background())
	defer emCancel()
	if err := w.resolveOffsets(ctx); err != nil {
		if w.failedErr != nil { // OffsetReset fail: hold the partition, not ready
			<-ctx.Done()
		}
		return nil
	}
	w.em = newEmitter(w.w, w.log, w.p.m, w.cfg.RetryBackoffMax)
	w.em.onAcked = func(n int) { w.p.c.acked.Add(int64(n)) }
	go w.em.run(emCtx)

	// The fetchers stop before their readers close (else a closed reader's
	// EOF would read as an outage).
	fctx, fcancel := context.WithCancel(ctx)
	var readers []*kafka.Reader
	defer func() {
		fcancel()
		for _, r := range readers {
			r.Close()
		}
	}()
	rlIn := &readerLog{ep: newEpisode(w.log, "fetch "+w.cfg.InputTopic)}
	inR := w.newReader(w.cfg.InputTopic, w.nextIn, rlIn)
	readers = append(readers, inR)
	inCh := make(chan kafka.Message, 256)
	go fetch(fctx, inR, rlIn, inCh)
	m := &merger{in: side{ch: inCh, next: w.nextIn}}
	var labR *kafka.Reader
	if w.cfg.LabelsTopic != "" {
		rlLab := &readerLog{ep: newEpisode(w.log, "fetch "+w.cfg.LabelsTopic)}
		labR = w.newReader(w.cfg.LabelsTopic, w.nextLab, rlLab)
		readers = append(readers, labR)
		labCh := make(chan kafka.Message, 256)
		go fetch(fctx, labR, rlLab, labCh)
		m.lab = &side{ch: labCh, next: w.nextLab, lab: true}
		m.hwm, m.wait = w.hwm, w.cfg.MergeWait
	}
	w.markRestored()
	w.lastCkpt = time.Now()
	w.ckptDone = make(chan ckptResult, 1)
	defer func() {
		if w.ckptBusy { // a fatal return: the store must not close under it
			<-w.ckptDone
			w.ckptBusy = false
		}
	}()
	probes := make(chan probe, 1)
	pctx, pcancel := context.WithCancel(ctx) // outlives the fetchers of a failed partition
	defer pcancel()
	go w.runProbe(pctx, probes)
	tick := time.NewTicker(min(w.cfg.CheckpointInterval, time.Second))
	defer tick.Stop()
	for ctx.Err() == nil {
		if w.failedErr != nil {
			break
		}
		if err := w.em.failed(); err != nil {
			w.fail(err)
			fcancel() // stop fetching; the partition waits for revoke or shutdown
			continue
		}
		msg, fromLabels, err := w.nextOrTick(ctx, m, tick.C)
		if err != nil {
			break
		}
		if msg != nil {
			if err := w.handle(ctx, msg, fromLabels); err != nil {
				return err
			}
			w.sinceCkpt++
		}
		select {
		case pr := <-probes:
			w.applyProbe(pr, inR, labR, m)
		default:
		}
		if err := w.pollCheckpoint(); err != nil {
			return err
		}
		if !w.ckptBusy && (w.sinceCkpt >= w.cfg.CheckpointMaxRecords || (w.sinceCkpt > 0 && time.Since(w.lastCkpt) >= w.cfg.CheckpointInterval)) {
			if err := w.startCheckpoint(ctx, gen); err != nil {
				return err
			}
		}
	}
	if w.failedErr != nil {
		// Failed: nothing past the failed output may be checkpointed; the
		// partition holds still until revoked or shut down, its lag shown.
		w.holdFailed(ctx, probes)
	}
	// Revoked or shutting down: let the checkpoint in flight finish, then
	// checkpoint what was processed since, within the hard deadline.
	if w.cfg.crashOnStop {
		if w.ckptBusy {
			<-w.ckptDone // the store closes after Run: no write may be left running
			w.ckptBusy = false
		}
		return nil
	}
	if err := w.finalCheckpoint(gen); err != nil {
		return err
	}
	return nil
}

func (w *worker) nextOrTick(ctx context.Context, m *merger, tick <-chan time.Time) (*kafka.Message, bool, error) {
	msg, lab, ok, err := m.next(ctx, tick)
	if err != nil || !ok {
		return nil, false, err
	}
	return &msg, lab, nil
}

func (w *worker) markRestored() {
	if w.restored {
		return
	}
	if w.emitFrom <= 0 || w.nextIn >= w.emitFrom {
		w.restored = true
		w.p.setAssigned(w.part, true)
	}
}

// handle processes one record.
func (w *worker) handle(ctx context.Context, msg *kafka.Message, fromLabels bool) error {
	c := &w.p.c
	emit := true
	if fromLabels {
		w.nextLab = msg.Offset + 1
		w.posLab.Store(w.nextLab)
		if w.skip != nil && w.skipped(msg, true) {
			return nil
		}
	} else {
		if w.nextIn >= 0 && msg.Offset > w.nextIn {
			w.rateLog("offset_gap", func(ev *zerolog.Event) {
				ev.Int64("expected", w.nextIn).Int64("got", msg.Offset).
					Msg("input offsets skipped (retention deleted them, or transaction markers): state rebuilt from here may differ")
			})
		}
		emit = msg.Offset >= w.emitFrom
		if !emit {
			c.replayed.Add(1)
		}
		w.nextIn = msg.Offset + 1
		w.posIn.Store(w.nextIn)
		w.setLag(msg.HighWaterMark)
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
	c.records[r.kind].Add(1)
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
			c.pending.Add(-int64(n))
		}
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
func (w *worker) deadOr(ctx context.Context, msg *kafka.Message, emit bool, err error) error {
	var de *decodeError
	if errors.As(err, &de) {
		return w.dead(ctx, msg, emit, err)
	}
	return err
}

func (w *worker) predict(ctx context.Context, msg *kafka.Message, r *record, ts int64, emit bool) error {
	s, err := w.learner(msg.Key)
	if err != nil {
		return w.deadOr(ctx, msg, emit, err)
	}
	var p models.Prediction
	if err := contain("Predict", func() { p = s.l.Predict(r.x) }); err != nil {
		return w.deadOr(ctx, msg, emit, w.onPanic(s, err))
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
		c.pending.Add(1)
	}
	if n := w.pend.expireCount(w.maxPending()); n > 0 {
		c.expired[expiryCount].Add(int64(n))
		c.pending.Add(-int64(n))
	}
}

func (w *worker) decide(ctx context.Context, msg *kafka.Message, r *record, ts int64, emit bool) error {
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
		w.p.c.decisions.Add(1)
		if err := w.send(ctx, msg, &out); err != nil {
			return nil
		}
	}
	w.putPending(msg.Key, r.id, e)
	return nil
}

func (w *worker) label(ctx context.Context, msg *kafka.Message, r *record, emit bool) error {
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
	c.pending.Add(-1)
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
	c.updates.Add(1)
	if decision {
		c.rewards.Add(1)
		addFloat(&c.rewardBits, y)
	} else {
		c.lossCount.Add(1)
		addFloat(&c.lossBits, w.p.loss.Value(p.Value, y))
	}
	return nil
}

// send queues a prediction for the output topic.
func (w *worker) send(ctx context.Context, in *kafka.Message, out *prediction) error {
	value := appendPrediction(make([]byte, 0, 192), out)
	w.p.c.predictions.Add(1)
	return w.enqueue(ctx, outMsg{msg: kafka.Message{Topic: w.cfg.OutputTopic, Key: in.Key, Value: value, Headers: w.propagated(in.Headers)}, input: in.Time, output: true})
}

// enqueue hands m to the emitter. It gives up only at the hard deadline
// (the record in hand at shutdown is still emitted); a message given up
// makes the final checkpoint impossible, so the records since the last one
// are replayed by the next owner.
func (w *worker) enqueue(_ context.Context, m outMsg) error {
	w.seq++
	m.seq = w.seq
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
	rs := reasonOf(err)
	c.dead[rs].Add(1)
	c.records[kindDead].Add(1)
	w.rateLog("dead_"+reasonNames[rs], func(ev *zerolog.Event) {
		ev.Str("reason", reasonNames[rs]).Str("error", err.Error()).Str("topic", msg.Topic).Int64("offset", msg.Offset).Msg("dead letter")
	})
	if !emit {
		return nil
	}
	headers := make([]kafka.Header, 0, len(msg.Headers)+5)
	headers = append(headers, msg.Headers...)
	headers = append(headers,
		kafka.Header{Key: headerReason, Value: []byte(reasonNames[rs])},
		kafka.Header{Key: headerError, Value: []byte(err.Error())},
		kafka.Header{Key: headerTopic, Value: []byte(msg.Topic)},
		kafka.Header{Key: headerPartition, Value: []byte(strconv.Itoa(msg.Partition))},
		kafka.Header{Key: headerOffset, Value: []byte(strconv.FormatInt(msg.Offset, 10))})
	_ = w.enqueue(ctx, outMsg{msg: kafka.Message{Topic: w.cfg.DLQTopic, Key: msg.Key, Value: msg.Value, Headers: headers, Time: msg.Time}})
	return nil
}

// rateLog logs at most once per second per kind of event (per partition).
func (w *worker) rateLog(kind string, f func(*zerolog.Event)) {
	now := time.Now()
	if t, ok := w.logGate[kind]; ok && now.Sub(t) < time.Second {
		return
	}
	w.logGate[kind] = now
	f(w.log.Warn())
}
