package processor

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/internal/wire"
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
	kio   kafkaio.Cluster
	cache *learnerCache
	pend  *pendingMap
	dec   *wire.Decoder
	em    *emitter

	nextIn, nextLab   int64 // next offsets to read (kafkaio.Start/End before the first record)
	groupIn, groupLab int64 // the group's committed offsets at assignment
	groupBehind       bool  // they lag the restored checkpoint: the next checkpoint commits even with no change
	emitFrom          int64 // input records below it are replayed without emitting
	watermark         int64 // largest event time seen (ms)
	seq               uint64
	outSlab           slab // the values of predictions (send.go)
	sinceCkpt         int
	lastCkpt          time.Time
	lag               int64           // last lag published to the counters
	tally             tally           // per-record counts not yet published (tally.go)
	ckptBusy          bool            // a checkpoint is in flight (at most one per partition)
	ckptDone          chan ckptResult // its outcome, read by the worker
	carry             *snapshot       // the changes of an abandoned checkpoint, written by the next one
	lastUpdated       *slot
	restored          bool
	ckptSeq           uint64                   // sequence number of the last checkpoint (the changelog's markers)
	skip              map[string]changelogSkip // keys whose restored state is ahead of the resume offsets
	idle              *idleIndex               // last-record times when KeyTTL is set (idle.go), else nil
	tombstones        []string                 // erased keys whose empty bundle a completed checkpoint wrote: tombstoned next
	warm              map[string][]byte        // learners the changelog restore read, for the cache (warm.go)
	restoredMeta      []byte                   // the meta of the changelog's last marker, when restored from it
	lagGauge          prometheus.Gauge
	onDiskGauge       prometheus.Gauge
	hard              context.Context // cancelled a bounded time after the worker's context
	lost              bool            // an output was given up: no checkpoint may pass it

	out     kafkaio.Record   // the output being handed to the emitter
	hdrs    []kafkaio.Header // its propagated headers
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

func newWorker(p *Processor, store *checkpoint.Store, kio kafkaio.Cluster, part int) *worker {
	wk := &worker{p: p, cfg: &p.cfg, part: part, log: p.log.With().Int("partition", part).Logger(),
		store: store, kio: kio, dec: wire.NewDecoder(p.cfg.Model.Dim, p.cfg.limits()), pend: newPendingMap(), watermark: math.MinInt64,
		logGate: map[string]time.Time{}}
	for i := 0; i < p.inParts; i++ {
		wk.partIDs = append(wk.partIDs, i)
	}
	return wk
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
		w.publish()
		w.p.c.pending.Add(-int64(w.pend.len()))
		w.cache.release()
		part := strconv.Itoa(w.part)
		w.p.c.lag.Add(-w.lag)
		w.p.m.lag.DeleteLabelValues(part)
		w.p.m.onDisk.DeleteLabelValues(part)
	}()
	if err := w.resolveOffsets(ctx); err != nil {
		if w.failedErr != nil { // OffsetReset fail: hold the partition, not ready
			<-ctx.Done()
		}
		return nil
	}
	w.em = newEmitter(w.kio, w.log, w.p.m)
	w.em.onAcked = func(n int) { w.p.c.acked.Add(int64(n)) }

	m := w.newMerger()
	defer func() {
		m.in.r.Close()
		if m.lab != nil {
			m.lab.r.Close()
		}
	}()
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
			continue // the partition stops reading and waits for revoke or shutdown
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
			w.tally.n++
			if !fromLabels {
				w.tally.lag = w.lagAt(m.in.hw)
			}
		}
		if msg == nil || w.tally.n >= publishEvery || !m.ready() {
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
		due := w.sinceCkpt > 0 || len(w.cache.warm.idle) > 0 || w.groupBehind
		if !w.ckptBusy && (w.sinceCkpt >= w.cfg.CheckpointMaxRecords || (due && time.Since(w.lastCkpt) >= w.cfg.CheckpointInterval)) {
			if err := w.startCheckpoint(ctx, gen); err != nil {
				return err
			}
		}
	}
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
