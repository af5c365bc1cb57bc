package processor

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
)

// Offsets out of range and lag (docs/pipeline.md, "Offsets out of range"
// and "Lag"). The log range of the partition is asked of the brokers
// (ListOffsets) when the partition starts, and then every lagInterval by a
// probe goroutine, so that
//   - a resume offset outside [log start, log end] (the topic was recreated,
//     retention passed it) is decided by OffsetReset, logged and counted,
//     instead of a reader retrying for ever past the end with lag 0;
//   - the lag gauge follows the log's end even when no record comes (a
//     stalled partition shows its lag growing).
//
// A position that leaves the log while it is read comes back from the
// reader as kafkaio.ErrOutOfRange and is decided the same way (read.go).

// position is where the worker reads and emits from, and how the group's
// committed offsets relate to it.
type position struct {
	nextIn, nextLab   int64 // next offsets to read (kafkaio.Start/End before the first record)
	groupIn, groupLab int64 // the group's committed offsets at assignment
	groupBehind       bool  // they lag the restored checkpoint: the next checkpoint commits even with no change
	emitFrom          int64 // input records below it are replayed without emitting
	restored          bool  // the replay up to emitFrom is done (markRestored)
	// posIn and posLab mirror nextIn and nextLab for the probe goroutine.
	posIn, posLab atomic.Int64
}

// lagInterval is how often the probe asks for the log range.
const lagInterval = time.Second

// rangeOf asks for topic's range of the worker's partition.
func (w *worker) rangeOf(topic string) (kafkaio.Range, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return w.kio.Offsets(ctx, topic, int32(w.part))
}

// listRanges asks for the ranges of the input and, if configured, labels
// topic's partition.
func (w *worker) listRanges(ctx context.Context) (map[string]kafkaio.Range, error) {
	out := map[string]kafkaio.Range{}
	for _, t := range []string{w.cfg.InputTopic, w.cfg.LabelsTopic} {
		if t == "" {
			continue
		}
		r, err := w.kio.Offsets(ctx, t, int32(w.part))
		if err != nil {
			return nil, err
		}
		out[t] = r
	}
	return out, nil
}

// ranges asks for the partition's log ranges, retrying with backoff until
// ctx ends.
func (w *worker) ranges(ctx context.Context) (map[string]kafkaio.Range, error) {
	var r map[string]kafkaio.Range
	err := retry(ctx, w.log, "list offsets", w.cfg.RetryBackoffMax, func() (err error) {
		r, err = w.listRanges(ctx)
		return err
	})
	return r, err
}

// resolveOffsets turns the restored resume offsets into concrete offsets
// inside the logs, applying OffsetReset to one out of range. It returns an
// error only with policy "fail" (the partition is then failed) or when ctx
// ends.
func (w *worker) resolveOffsets(ctx context.Context) error {
	rs, err := w.ranges(ctx)
	if err != nil {
		return err
	}
	in := rs[w.cfg.InputTopic]
	// A group offset past the log end is as stale as a local one.
	if w.offRange(w.nextIn, in) || w.groupIn > in.End {
		to, err := w.reset(w.cfg.InputTopic, max(w.nextIn, w.groupIn), in)
		if err != nil {
			return err
		}
		w.nextIn, w.emitFrom = to, to
		if w.groupIn >= to && w.groupIn <= in.End {
			w.emitFrom = w.groupIn // already emitted by another member
		} else {
			w.groupIn = min(w.groupIn, to)
		}
	} else {
		w.nextIn = concrete(w.nextIn, in)
	}
	if w.cfg.LabelsTopic != "" {
		lab := rs[w.cfg.LabelsTopic]
		if w.offRange(w.nextLab, lab) || w.groupLab > lab.End {
			to, err := w.reset(w.cfg.LabelsTopic, max(w.nextLab, w.groupLab), lab)
			if err != nil {
				return err
			}
			w.nextLab, w.groupLab = to, min(w.groupLab, to)
		} else {
			w.nextLab = concrete(w.nextLab, lab)
		}
	}
	w.posIn.Store(w.nextIn)
	w.posLab.Store(w.nextLab)
	// The lag from the start: the worker publishes next when it may wait
	// for records or after publishEvery of them, and the probe a second
	// from now, so a partition with a backlog showed lag 0 until then.
	w.setLag(in.End)
	return nil
}

// offRange reports whether off (a concrete offset) is outside r.
func (w *worker) offRange(off int64, r kafkaio.Range) bool {
	return off >= 0 && (off < r.Start || off > r.End)
}

// concrete maps kafkaio.Start/End onto the log's offsets.
func concrete(off int64, r kafkaio.Range) int64 {
	switch off {
	case kafkaio.Start:
		return r.Start
	case kafkaio.End:
		return r.End
	}
	return off
}

// reset applies OffsetReset to offset off of topic, out of the log range r:
// logged, counted, and the offset to read from returned (an error for
// policy fail, after failing the partition).
func (w *worker) reset(topic string, off int64, r kafkaio.Range) (int64, error) {
	policy := w.cfg.OffsetReset
	ev := w.log.Warn()
	if policy == "fail" {
		ev = w.log.Error()
	}
	ev.Str("topic", topic).Int64("offset", off).Int64("log_start", r.Start).Int64("log_end", r.End).Str("policy", policy).
		Msg("offset out of the log's range (topic recreated, retention passed it, or the log was truncated): kafka.offset_reset applied")
	w.p.noteReset(topic, w.part, off, r, policy)
	switch policy {
	case "earliest":
		w.p.c.resets[resetEarliest].Add(1)
		return r.Start, nil
	case "latest":
		w.p.c.resets[resetLatest].Add(1)
		return r.End, nil
	}
	w.p.c.resets[resetFail].Add(1)
	err := fmt.Errorf("topic %q partition %d: offset %d out of the log's range [%d, %d] and kafka.offset_reset is fail",
		topic, w.part, off, r.Start, r.End)
	w.fail(err)
	return 0, err
}

// probe is one answer of the probe goroutine: the log ranges and the
// positions the worker had when the question was asked.
type probe struct {
	ranges        map[string]kafkaio.Range
	posIn, posLab int64
	// marker is the offset of the partition's last changelog marker when
	// the question was asked (-1 none), changelogEnd the changelog
	// partition's end in the answer (-1 not asked): a log that ends at or
	// below its own last marker was recreated.
	marker, changelogEnd int64
}

// runProbe asks for the log ranges every lagInterval until ctx ends and
// hands the answers to the worker (the latest only).
func (w *worker) runProbe(ctx context.Context, out chan<- probe) {
	t := time.NewTicker(lagInterval)
	defer t.Stop()
	pos := w.p.m.position.WithLabelValues(strconv.Itoa(w.part))
	end := w.p.m.end.WithLabelValues(strconv.Itoa(w.part))
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pr := probe{posIn: w.posIn.Load(), posLab: w.posLab.Load(), marker: w.markerOffset.Load(), changelogEnd: -1}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rs, err := w.listRanges(qctx)
		if err == nil && w.cfg.Changelog.Topic != "" && pr.marker >= 0 {
			var r kafkaio.Range
			if r, err = w.kio.Offsets(qctx, w.cfg.Changelog.Topic, int32(w.part)); err == nil {
				pr.changelogEnd = r.End
			}
		}
		cancel()
		if err != nil {
			continue // the readers report outages; the lag keeps its last value
		}
		if in, ok := rs[w.cfg.InputTopic]; ok && pr.posIn >= 0 {
			// From here, not from the worker: a worker that is stuck
			// still shows a position that stands while the end moves.
			pos.Set(float64(pr.posIn))
			end.Set(float64(in.End))
		}
		pr.ranges = rs
		select {
		case out <- pr:
		default:
		}
	}
}

// applyProbe publishes the lag from the log's end, and applies OffsetReset
// when a log shrank below the position the worker had when the probe was
// asked (the topic was deleted and recreated while read): the reader then
// moves to the offset the policy gives.
func (w *worker) applyProbe(pr probe, m *merger) {
	in, ok := pr.ranges[w.cfg.InputTopic]
	if !ok {
		return
	}
	if pr.changelogEnd >= 0 && pr.changelogEnd <= pr.marker && !w.rebuildChangelog {
		w.log.Warn().Int64("changelog_end", pr.changelogEnd).Int64("last_marker", pr.marker).
			Msg("the changelog partition ends below its last marker (the topic was recreated): the next checkpoint writes all of the partition's state")
		w.rebuildChangelog = true
		w.markerOffset.Store(-1)
	}
	if pr.posIn > in.End {
		to, err := w.reset(w.cfg.InputTopic, pr.posIn, in)
		if err != nil {
			return
		}
		w.nextIn, w.emitFrom, w.groupIn = to, to, min(w.groupIn, to)
		w.posIn.Store(to)
		m.in.seek(to)
	}
	if lab, ok := pr.ranges[w.cfg.LabelsTopic]; ok && m.lab != nil && pr.posLab > lab.End {
		to, err := w.reset(w.cfg.LabelsTopic, pr.posLab, lab)
		if err != nil {
			return
		}
		w.nextLab, w.groupLab = to, min(w.groupLab, to)
		w.posLab.Store(to)
		m.lab.seek(to)
	}
	w.setLag(in.End)
}

// setLag publishes the log's end minus next offset (and the rest of the tally).
func (w *worker) setLag(end int64) {
	w.tally.lag = w.lagAt(end)
	w.publish()
}

// lagAt is the partition's lag when its log ends at end.
func (w *worker) lagAt(end int64) int64 {
	if w.nextIn < 0 {
		return 0
	}
	return max(end-w.nextIn, 0)
}

// holdFailed waits for the end of a failed partition's assignment while
// publishing its lag, which grows as records arrive unread.
func (w *worker) holdFailed(ctx context.Context, probes <-chan probe) {
	for {
		select {
		case <-ctx.Done():
			return
		case pr := <-probes:
			if in, ok := pr.ranges[w.cfg.InputTopic]; ok {
				w.setLag(in.End)
			}
		}
	}
}
