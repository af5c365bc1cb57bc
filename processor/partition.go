package processor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// worker processes one input partition (and its co-partition of the labels
// topic) in offset order. Everything it owns is single-goroutine, but for
// what the probe goroutine reads (position) and the checkpoint goroutine's
// outcome channel. Its state is grouped by the file that owns it:
// position (offsets.go), output (send.go), checkpointState
// (checkpointing.go), restoreState (changelog.go), published (tally.go),
// failure (startup.go).
type worker struct {
	p     *Processor
	cfg   *Config
	part  int
	log   zerolog.Logger
	store *checkpoint.Store
	kio   kafkaio.Cluster
	cache *learnerCache
	pend  *pendingMap
	dec   *wire.Decoder
	idle  *idleIndex      // last-record times when KeyTTL is set (idle.go), else nil
	hard  context.Context // cancelled a bounded time after the worker's context

	watermark int64 // largest event time seen (ms; guard.go says how it moves)
	partIDs   []int // 0..n-1 of the input topic, for the partitioner check (guard.go)

	position
	output
	checkpointState
	restoreState
	published
	failure

	// Scratch of the record in hand (handle.go), and the rate of warnings.
	kbuf    []byte
	scores  []scored
	logGate map[string]time.Time
	stages  *StageTimes // the record in hand's stage timestamps, when TestHookStages is set
}

type scored struct {
	i int
	p models.Prediction
}

func newWorker(p *Processor, store *checkpoint.Store, kio kafkaio.Cluster, part int) *worker {
	wk := &worker{p: p, cfg: &p.cfg, part: part, log: p.log.With().Int("partition", part).Logger(),
		store: store, kio: kio, dec: wire.NewDecoder(p.cfg.Model.Dim, p.cfg.limits()), pend: newPendingMap(), watermark: math.MinInt64,
		logGate: map[string]time.Time{}}
	for i := 0; i < int(p.inParts.Load()); i++ {
		wk.partIDs = append(wk.partIDs, i)
	}
	wk.markerOffset.Store(-1)
	if TestHookStages != nil {
		wk.stages = &StageTimes{}
	}
	return wk
}

// run restores the partition, processes records until ctx ends, then
// checkpoints and commits. It returns an error only when the store fails.
func (w *worker) run(ctx context.Context, gen *kafka.Generation, groupIn, groupLab int64) (err error) {
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
	if w.cfg.Changelog.Topic != "" {
		if err := w.p.changelogPartition(ctx, w.part); err != nil {
			return nil // ctx ended
		}
		// Before the restore reads the changelog: the partition's former
		// owner is fenced and its open transaction aborted by then.
		if err := w.openTxn(ctx); err != nil {
			if w.failedErr != nil {
				<-ctx.Done() // not ready until revoked or stopped
			}
			return nil
		}
		defer func() {
			if !errors.Is(err, errRestartPartition) {
				w.txn.Close()
			} // else the restarted worker goes on with it (openTxn)
		}()
	}
	if err := w.restore(groupIn, groupLab); err != nil {
		switch {
		case w.failedErr != nil: // a Kafka step that cannot succeed: the partition holds, not ready
			<-ctx.Done()
			return nil
		case w.hard.Err() != nil: // revoked, and past the bound, while Kafka was unavailable
			return nil
		}
		return fmt.Errorf("%w: restore partition %d: %w", errStoreFailed, w.part, err)
	}
	defer func() {
		// However the partition stops (revoked, shutting down, a final
		// checkpoint that failed, an exactly-once checkpoint that did not
		// commit), Badger takes the checkpoints that went to the changelog
		// only (backlog.go): the partition's next run, here or after a
		// restart, starts from them without reading the changelog, and a
		// changelog recreated meanwhile cannot take the backlog with it.
		// Not after a store failure, nor under a checkpoint still writing.
		if !w.cfg.crashOnStop && !w.ckptBusy && !errors.Is(err, errStoreFailed) {
			if ferr := w.flushBacklog(); ferr != nil && err == nil {
				err = ferr
			}
		}
		w.publish()
		w.p.c.pending.Add(-int64(w.pend.len()))
		w.cache.release()
		part := strconv.Itoa(w.part)
		w.p.c.lag.Add(-w.lag)
		w.p.m.lag.DeleteLabelValues(part)
		w.p.m.onDisk.DeleteLabelValues(part)
		w.p.m.position.DeleteLabelValues(part)
		w.p.m.end.DeleteLabelValues(part)
		w.p.m.checkpointed.DeleteLabelValues(part)
	}()
	if err := w.resolveOffsets(ctx); err != nil {
		if w.failedErr != nil { // OffsetReset fail: hold the partition, not ready
			<-ctx.Done()
		}
		return nil
	}
	var out producer = w.kio
	if w.exactlyOnce() {
		// The outputs go into the partition's transaction, committed with
		// each checkpoint's changelog records.
		if err := w.beginTxn(); err != nil {
			w.fail(err)
			<-ctx.Done()
			return nil
		}
		out = w.txn
	}
	w.em = newEmitter(out, w.log, w.p.m)
	// The loop below flushes whenever it would wait and when it ends; a
	// fatal return emits what it queued too, and a snapshot flushes before
	// it cuts, so a transaction's outputs are all in it before it commits.
	w.em.batch = emitBatch
	defer w.em.flush(w.hard)
	if w.stages != nil {
		w.em.cur, w.em.trace, w.em.hook = w.stages, make([]StageTimes, emitWindow), TestHookStages
	}
	w.em.onAcked = func(n int) { w.p.c.acked.Add(int64(n)) }

	m := w.newMerger()
	stopScoring := w.openScoring(m)
	defer stopScoring()
	defer func() {
		m.in.r.Close()
		if m.lab != nil {
			m.lab.r.Close()
		}
	}()
	w.markRestored()
	w.lastCkpt = time.Now().Add(-checkpointPhase(w.part, w.cfg.CheckpointInterval))
	// Three quarters of one transaction: the estimate counts each learner
	// at its last encoded size, and learners grow.
	w.ckptBytes = w.store.TxnCap() * 3 / 4
	w.ckptDone = make(chan ckptResult, 1)
	defer func() {
		if w.ckptBusy { // a fatal return: the store must not close under it
			<-w.ckptDone
			w.ckptBusy = false
		}
	}()
	probes := make(chan probe, 1)
	pctx, pcancel := context.WithCancel(ctx) // outlives the fetchers of a failed partition
	probing := make(chan struct{})
	go func() {
		defer close(probing)
		w.runProbe(pctx, probes)
	}()
	defer func() {
		pcancel()
		<-probing // it sets the partition's gauges, deleted when the worker ends
	}()
	tick := time.NewTicker(min(w.cfg.CheckpointInterval, time.Second))
	defer tick.Stop()
	for ctx.Err() == nil {
		if h := w.cfg.loopHook; h != nil {
			h(w)
		}
		if w.failedErr != nil {
			break
		}
		if err := w.em.failed(); err != nil {
			w.fail(err)
			continue // the partition stops reading and waits for revoke or shutdown
		}
		if w.diskIn--; w.diskIn < 0 && !w.p.diskOK() {
			// Nothing to write the state with: hold still (disk.go).
			w.diskIn = 0 // asked again next time round
			w.em.flush(w.hard)
			w.publish()
			if err := w.pollCheckpoint(); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
			continue
		}
		if w.diskIn < 0 {
			w.diskIn = diskEveryRecords
		}
		msg, fromLabels, err := w.nextOrTick(ctx, m, tick.C)
		if err != nil {
			break
		}
		if msg == nil {
			w.diskIn = 0 // idle: the next time round asks
		} else {
			if w.stages != nil {
				*w.stages = StageTimes{Partition: w.part, Offset: msg.Offset, Kafka: msg.Time.UnixNano(), Polled: m.in.cur.Polled, Started: nowNano()}
			}
			if err := w.handle(ctx, msg, fromLabels); err != nil {
				return err
			}
			w.sinceCkpt++
			w.tally.n++
			if !fromLabels {
				w.tally.lag = w.lagAt(m.in.hw)
			}
		}
		if msg == nil || !m.ready() {
			w.em.flush(w.hard)
			w.publish()
		} else if w.tally.n >= publishEvery {
			w.publish()
		}
		select {
		case pr := <-probes:
			w.applyProbe(pr, m)
		default:
		}
		w.retryReads(m)
		if err := w.pollCheckpoint(); err != nil {
			return err
		}
		if w.ckptBusy && w.cache.held() >= 2*w.cfg.CheckpointMaxRecords {
			if err := w.awaitCheckpoint(ctx); err != nil {
				return err
			}
		}
		if !w.ckptBusy && (w.sinceCkpt >= w.cfg.CheckpointMaxRecords || w.checkpointFull() || (w.checkpointDue() && time.Since(w.lastCkpt) >= w.cfg.CheckpointInterval)) && w.diskRoom() {
			if err := w.startCheckpoint(ctx, gen); err != nil {
				return err
			}
		}
	}
	w.em.flush(w.hard) // the records in hand are emitted
	stopScoring()      // revoked, failed or shutting down: requests get "unavailable" at once
	if w.failedErr != nil {
		// Failed: nothing past the failed output may be checkpointed; the
		// partition holds still until revoked or shut down, its lag shown,
		// and reads nothing meanwhile.
		m.in.r.Close()
		if m.lab != nil {
			m.lab.r.Close()
		}
		w.publish()
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

func (w *worker) nextOrTick(ctx context.Context, m *merger, tick <-chan time.Time) (*kafkaio.Record, bool, error) {
	msg, lab, ok, err := m.next(ctx, tick)
	if err != nil || !ok {
		return nil, false, err
	}
	return msg, lab, nil
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

// rateLog logs at most once per second per kind of event (per partition).
func (w *worker) rateLog(kind string, f func(*zerolog.Event)) {
	now := time.Now()
	if t, ok := w.logGate[kind]; ok && now.Sub(t) < time.Second {
		return
	}
	w.logGate[kind] = now
	f(w.log.Warn())
}
