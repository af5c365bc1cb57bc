package processor

import (
	"sync/atomic"
	"time"

	"github.com/kernelstream/kernelstream/checkpoint"
)

// The checkpoint directory's free space. Badger writes its memtables and
// value log through memory-mapped files that it extends sparsely: on a full
// disk a write to such a page is not an error but SIGBUS, and the process
// dies (with the exit code of a configuration error, again on every
// restart while the disk stays full). So the partitions stop reading and
// checkpointing while the free space is below CheckpointMinFreeMiB: nothing
// is written, the processor is not ready, kernelstream_state_disk_free_bytes
// shows it, and everything resumes once space is freed.

// diskCheckEvery bounds how often the free space is asked of the kernel.
const diskCheckEvery = time.Second

// diskEveryRecords: a busy worker asks diskOK once per so many records (and
// whenever it idles, and before each checkpoint), not at every record: the
// clock read diskOK starts with was 1.6% of make bench-e2e's CPU profile,
// and a disk that fills is noticed a few milliseconds later at most, the
// checkpoint (the only write) still asking first.
const diskEveryRecords = 64

type diskGuard struct {
	free    atomic.Int64 // bytes free at the last check; -1 unknown
	low     atomic.Bool
	checked atomic.Int64 // unix nanos of the last check
}

// minFreeBytes is the free space below which the disk counts as full.
func (cfg *Config) minFreeBytes() int64 {
	if cfg.CheckpointMinFreeMiB != 0 {
		return int64(cfg.CheckpointMinFreeMiB) << 20
	}
	return int64(256+4*cfg.CheckpointMemTableMiB) << 20
}

// diskOK reports whether the checkpoint directory has room for Badger to
// write (asked at most every diskCheckEvery; safe from any goroutine).
func (p *Processor) diskOK() bool {
	min := p.cfg.minFreeBytes()
	if min < 0 {
		return true
	}
	now := time.Now().UnixNano()
	last := p.c.disk.checked.Load()
	if now-last < int64(diskCheckEvery) || !p.c.disk.checked.CompareAndSwap(last, now) {
		return !p.c.disk.low.Load()
	}
	free, err := checkpoint.FreeBytes(p.cfg.CheckpointDir)
	if err != nil {
		p.c.disk.free.Store(-1)
		return !p.c.disk.low.Load()
	}
	p.c.disk.free.Store(free)
	low := free < min
	if p.c.disk.low.Swap(low) != low {
		if low {
			p.log.Error().Int64("free_bytes", free).Int64("min_free_bytes", min).Str("dir", p.cfg.CheckpointDir).
				Msg("checkpoint directory nearly full: partitions stopped (not ready) until space is freed")
		} else {
			p.log.Info().Int64("free_bytes", free).Msg("checkpoint directory has room again: partitions resume")
		}
	}
	return !low
}

// diskRoom is diskOK for a worker about to checkpoint; a full disk makes its
// loop ask again at once (and hold still).
func (w *worker) diskRoom() bool {
	if w.p.diskOK() {
		return true
	}
	w.diskIn = 0
	return false
}
