package processor

import (
	"fmt"
	"strconv"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
)

// restore loads the partition's checkpoint and decides where to read from
// and from where to emit (docs/pipeline.md, "Checkpoints and recovery").
func (w *worker) restore(groupIn, groupLab int64) error {
	cfg := w.cfg
	start := kafkaio.Start
	if cfg.StartOffset == "latest" {
		start = kafkaio.End
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
	w.backlog.inBadger = ok
	if w.restoredMeta != nil { // restored from the changelog: Badger has no meta until its learners are in
		meta, ok = w.restoredMeta, true
		w.restoredMeta = nil
	}
	if ok {
		if err := w.decodeMeta(meta); err != nil {
			return err
		}
		// Labels past our checkpoint are re-read from it: they rebuild the same state.
		w.emitFrom = max(w.nextIn, groupIn)
		// A kill between the Badger commit and the group commit leaves the
		// group behind; with no new record nothing else would advance it,
		// and its lag would show records that are done.
		w.groupBehind = (w.nextIn >= 0 && groupIn < w.nextIn) ||
			(cfg.LabelsTopic != "" && w.nextLab >= 0 && groupLab < w.nextLab)
	} else {
		// No local state: rebuild it from the start of the log up to the
		// group's offset (if any) without emitting.
		w.nextIn, w.nextLab, w.emitFrom = start, start, 0
		if groupIn >= 0 {
			w.nextIn, w.emitFrom = kafkaio.Start, groupIn
		}
		if groupLab >= 0 {
			w.nextLab = kafkaio.Start
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
	w.cache = newLearnerCache(w.part, w.p.factory, w.store, cfg.MaxLearners, &w.p.c.inMemory, &w.p.c.onDisk)
	if err := w.cache.loadStored(); err != nil {
		return err
	}
	w.cache.warm.idle, w.warm = w.warm, nil
	if err := w.loadIdle(); err != nil {
		return err
	}
	w.onDiskGauge = w.p.m.onDisk.WithLabelValues(strconv.Itoa(w.part))
	w.onDiskGauge.Set(float64(w.cache.onDisk))
	w.lagGauge = w.p.m.lag.WithLabelValues(strconv.Itoa(w.part))
	w.ckptGauge = w.p.m.checkpointed.WithLabelValues(strconv.Itoa(w.part))
	w.ckptGauge.Set(float64(max(w.nextIn, 0))) // the checkpoint's offset; 0 before the first
	w.log.Info().Int64("next_offset", w.nextIn).Int64("group_offset", groupIn).Int64("emit_from", w.emitFrom).
		Int("pending", len(entries)).Bool("checkpoint", ok).Msg("partition restored")
	return nil
}
