package checkpoint

import (
	"errors"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Disk space. Every checkpoint overwrites the states of the learners it
// writes, so without maintenance the directory grows with the number of
// checkpoints, not with the state. Two mechanisms keep it bounded by the live
// state:
//
//   - states up to 1 MiB are kept in the LSM tree (Open's value threshold),
//     where Badger's compactions drop overwritten versions on their own;
//   - larger states go to the value log, which only garbage collection
//     reclaims: every GCInterval the store runs Badger's value-log GC until
//     no file is worth rewriting (a file is rewritten when at least half of
//     it is garbage).
//
// The same loop samples the directory's size and the bytes of live keys and
// values, exported as kernelstream_state_dir_bytes and
// kernelstream_state_live_bytes.

const (
	defaultGCInterval = 10 * time.Second
	gcDiscardRatio    = 0.5
	// liveScanEvery: the live-bytes scan reads every key (not values), so
	// it runs every few GC rounds rather than every one.
	liveScanEvery = 3
)

type space struct {
	stop      chan struct{}
	done      sync.WaitGroup
	diskBytes atomic.Int64
	liveBytes atomic.Int64
	gcFiles   atomic.Int64
}

// DiskBytes is the size of the store's directory at the last sample (0 in
// memory).
func (s *Store) DiskBytes() int64 { return s.space.diskBytes.Load() }

// LiveBytes is the size of the live keys and values at the last sample: what
// a perfectly compacted store would hold.
func (s *Store) LiveBytes() int64 { return s.space.liveBytes.Load() }

// GCFiles counts the value-log files rewritten by garbage collection.
func (s *Store) GCFiles() int64 { return s.space.gcFiles.Load() }

func (s *Store) startSpace() {
	interval := s.opts.GCInterval
	if interval == 0 {
		interval = defaultGCInterval
	}
	s.sample(true)
	if interval < 0 || s.opts.InMemory {
		return
	}
	s.space.stop = make(chan struct{})
	s.space.done.Add(1)
	go func() {
		defer s.space.done.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for round := 1; ; round++ {
			select {
			case <-s.space.stop:
				return
			case <-t.C:
			}
			s.CollectGarbage()
			s.sample(round%liveScanEvery == 0)
		}
	}()
}

func (s *Store) stopSpace() {
	if s.space.stop != nil {
		close(s.space.stop)
		s.space.done.Wait()
		s.space.stop = nil
	}
}

// CollectGarbage rewrites the value-log files that are mostly garbage, one
// at a time, until none is left; it returns how many it rewrote. The store
// runs it every GCInterval; it is exported for tests and tools.
func (s *Store) CollectGarbage() int {
	n := 0
	for n < 64 {
		err := s.db.RunValueLogGC(gcDiscardRatio)
		if err != nil {
			if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
				s.log.Warn().Err(err).Msg("checkpoint: value-log garbage collection")
			}
			break
		}
		n++
	}
	s.space.gcFiles.Add(int64(n))
	return n
}

// sample refreshes the directory size and, with live, the live bytes.
func (s *Store) sample(live bool) {
	if s.opts.InMemory {
		return
	}
	var total int64
	_ = filepath.WalkDir(s.opts.Dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			total += allocated(info)
		}
		return nil
	})
	s.space.diskBytes.Store(total)
	if !live {
		return
	}
	var sum int64
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			sum += int64(len(item.Key())) + item.ValueSize()
		}
		return nil
	})
	if err == nil {
		s.space.liveBytes.Store(sum)
	}
}
