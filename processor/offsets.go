package processor

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// Offsets out of range and lag (docs/pipeline.md, "Offsets out of range"
// and "Lag"). The log range of the partition is asked of the brokers
// (ListOffsets) when the partition starts, and then every lagInterval by a
// probe goroutine, so that
//   - a resume offset outside [log start, log end] (the topic was recreated,
//     retention passed it) is decided by OffsetReset, logged and counted,
//     instead of a reader retrying for ever past the end with lag 0;
//   - the lag gauge follows the high-water mark even when no record comes
//     (a stalled partition shows its lag growing).

// lagInterval is how often the probe asks for the log range.
const lagInterval = time.Second

// logRange is a partition's [first, last) offsets (last = high-water mark).
type logRange struct{ first, last int64 }

func (p *Processor) listRanges(ctx context.Context, req *kafka.ListOffsetsRequest) (map[string]logRange, error) {
	res, err := p.admin.ListOffsets(ctx, req)
	if err != nil {
		return nil, err
	}
	out := map[string]logRange{}
	for t, ps := range res.Topics {
		for _, po := range ps {
			if po.Error != nil {
				return nil, fmt.Errorf("list offsets of %s/%d: %w", t, po.Partition, po.Error)
			}
			out[t] = logRange{po.FirstOffset, po.LastOffset}
		}
	}
	return out, nil
}

func (w *worker) rangeRequest() *kafka.ListOffsetsRequest {
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		w.cfg.InputTopic: {kafka.FirstOffsetOf(w.part), kafka.LastOffsetOf(w.part)}}}
	if w.cfg.LabelsTopic != "" {
		req.Topics[w.cfg.LabelsTopic] = []kafka.OffsetRequest{kafka.FirstOffsetOf(w.part), kafka.LastOffsetOf(w.part)}
	}
	return req
}

// ranges asks for the partition's log ranges, retrying with backoff until
// ctx ends.
func (w *worker) ranges(ctx context.Context) (map[string]logRange, error) {
	ep := newEpisode(w.log, "list offsets")
	backoff := 100 * time.Millisecond
	for {
		r, err := w.p.listRanges(ctx, w.rangeRequest())
		if err == nil {
			ep.ok()
			return r, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		ep.fail(err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, w.cfg.RetryBackoffMax)
	}
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
	if w.outOfRange(w.nextIn, in) || w.groupIn > in.last {
		to, err := w.reset(w.cfg.InputTopic, max(w.nextIn, w.groupIn), in)
		if err != nil {
			return err
		}
		w.nextIn, w.emitFrom = to, to
		if w.groupIn >= to && w.groupIn <= in.last {
			w.emitFrom = w.groupIn // already emitted by another member
		} else {
			w.groupIn = min(w.groupIn, to)
		}
	} else {
		w.nextIn = concrete(w.nextIn, in)
	}
	if w.cfg.LabelsTopic != "" {
		lab := rs[w.cfg.LabelsTopic]
		if w.outOfRange(w.nextLab, lab) || w.groupLab > lab.last {
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
	return nil
}

func (w *worker) outOfRange(off int64, r logRange) bool {
	return off >= 0 && (off < r.first || off > r.last)
}

// concrete maps kafka.FirstOffset/LastOffset onto the log's offsets.
func concrete(off int64, r logRange) int64 {
	switch off {
	case kafka.FirstOffset:
		return r.first
	case kafka.LastOffset:
		return r.last
	}
	return off
}

// reset applies OffsetReset to offset off of topic, out of the log range r:
// logged, counted, and the offset to read from returned (an error for
// policy fail, after failing the partition).
func (w *worker) reset(topic string, off int64, r logRange) (int64, error) {
	policy := w.cfg.OffsetReset
	ev := w.log.Warn()
	if policy == "fail" {
		ev = w.log.Error()
	}
	ev.Str("topic", topic).Int64("offset", off).Int64("log_start", r.first).Int64("log_end", r.last).Str("policy", policy).
		Msg("offset out of the log's range (topic recreated, or retention passed it): kafka.offset_reset applied")
	switch policy {
	case "earliest":
		w.p.c.resets[resetEarliest].Add(1)
		return r.first, nil
	case "latest":
		w.p.c.resets[resetLatest].Add(1)
		return r.last, nil
	}
	w.p.c.resets[resetFail].Add(1)
	err := fmt.Errorf("topic %q partition %d: offset %d out of the log's range [%d, %d] and kafka.offset_reset is fail",
		topic, w.part, off, r.first, r.last)
	w.fail(err)
	return 0, err
}

// probe is one answer of the probe goroutine: the log ranges and the
// positions the worker had when the question was asked.
type probe struct {
	ranges        map[string]logRange
	posIn, posLab int64
}

// runProbe asks for the log ranges every lagInterval until ctx ends and
// hands the answers to the worker (the latest only).
func (w *worker) runProbe(ctx context.Context, out chan<- probe) {
	t := time.NewTicker(lagInterval)
	defer t.Stop()
	req := w.rangeRequest()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pr := probe{posIn: w.posIn.Load(), posLab: w.posLab.Load()}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rs, err := w.p.listRanges(qctx, req)
		cancel()
		if err != nil {
			continue // the fetchers report outages; the lag keeps its last value
		}
		pr.ranges = rs
		select {
		case out <- pr:
		default:
		}
	}
}

// applyProbe publishes the lag from the high-water mark, and applies
// OffsetReset when a log shrank below the position the worker had when the
// probe was asked (the topic was deleted and recreated while read): the
// reader then moves to the offset the policy gives.
func (w *worker) applyProbe(pr probe, m *merger) {
	in, ok := pr.ranges[w.cfg.InputTopic]
	if !ok {
		return
	}
	if pr.posIn > in.last {
		to, err := w.reset(w.cfg.InputTopic, pr.posIn, in)
		if err != nil {
			return
		}
		w.nextIn, w.emitFrom, w.groupIn = to, to, min(w.groupIn, to)
		w.posIn.Store(to)
		m.in.seek(to)
	}
	if lab, ok := pr.ranges[w.cfg.LabelsTopic]; ok && m.lab != nil && pr.posLab > lab.last {
		to, err := w.reset(w.cfg.LabelsTopic, pr.posLab, lab)
		if err != nil {
			return
		}
		w.nextLab, w.groupLab = to, min(w.groupLab, to)
		w.posLab.Store(to)
		m.lab.seek(to)
	}
	w.setLag(in.last)
}

// setLag publishes high-water mark minus next offset (and the rest of the tally).
func (w *worker) setLag(hwm int64) {
	w.tally.lag = w.lagAt(hwm)
	w.publish()
}

// lagAt is the partition's lag when its log ends at hwm.
func (w *worker) lagAt(hwm int64) int64 {
	if w.nextIn < 0 {
		return 0
	}
	return max(hwm-w.nextIn, 0)
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
				w.setLag(in.last)
			}
		}
	}
}
