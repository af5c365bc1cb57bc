// Package checkpoint is kernelstream's local state store: per input
// partition, the learners of its keys, its pending-label map and the offsets
// they correspond to, in Badger (github.com/dgraph-io/badger/v4).
//
// # Layout
//
// All keys start with a one-byte namespace and the partition number
// (4 bytes, big endian), so that one partition's data is one key range:
//
//	'm' part            -> partition meta (opaque to this package: offsets, watermark, ...)
//	'l' part key        -> learner blob of a routing key
//	'p' part key        -> one pending-label entry (key is the processor's composite key)
//	'i' part key        -> idle-key index: the event time of a routing key's last record (state.key_ttl)
//	'r' part            -> redo marker of a staged checkpoint (see below)
//	's' part seq(4)     -> staged operations of a checkpoint being committed
//
// # Atomic checkpoints, whatever their size
//
// Commit writes one checkpoint (its learners, its pending-map changes and its
// meta, which holds the next offset) so that after any crash a reader sees
// either all of it or none of it:
//
//  1. Fast path: if the whole checkpoint fits in one Badger transaction (and
//     under Options.MaxTxnBytes), it is one transaction; Badger makes it atomic.
//  2. Otherwise (ErrTxnTooBig, or the size estimate is above the cap) it goes
//     through a redo log:
//     a. stage: the operations (set key=value / delete key) are framed into
//     records of about 256 KiB (stageRecords), written under 's' part seq
//     in as many transactions as needed. Staged records are invisible to
//     readers, who only read 'm', 'l' and 'p'.
//     b. commit point: one small transaction writes the redo marker
//     'r' part = number of staged records. Before this point a crash leaves
//     the previous checkpoint intact (the orphan staging is deleted on
//     Open); after it, the new checkpoint is decided.
//     c. apply: the operations are applied to the live keys, again in as
//     many transactions as needed. Applying is idempotent (each operation
//     sets or deletes a whole key), so it can be repeated after a crash.
//     d. clean: the staged records are deleted, then the marker.
//     Open finishes every marked checkpoint (c and d) before anybody reads,
//     and deletes staging without a marker. Hence all-or-nothing.
//
// The processor never reads a key of a checkpoint while it is being applied:
// the learners in it are either in memory or held by the processor until
// Commit returns.
//
// Durability: Options.SyncWrites (default on in the processor) fsyncs every
// transaction; without it a process crash (SIGKILL) still loses nothing that
// Commit returned, a machine crash may.
package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/rs/zerolog"
)

// Namespaces of the key layout.
const (
	nsMeta    = 'm'
	nsLearner = 'l'
	nsPending = 'p'
	nsIdle    = 'i'
	nsRedo    = 'r'
	nsStage   = 's'
)

// MaxKeySuffixBytes is the longest key suffix (a learner's routing key, a
// pending entry's composite key) the store can write: Badger refuses keys
// above 65,000 bytes (maxKeySize in its txn.go), and every key starts with
// its namespace and partition (5 bytes). A longer one fails the commit, and
// with it every later commit of the partition: the processor's limits on
// keys and ids keep every suffix below it.
const MaxKeySuffixBytes = 65000 - 5

// DefaultMemTableBytes is Badger's memtable size unless Options.MemTableBytes
// says otherwise; MinMemTableBytes keeps Badger's transaction cap (15 % of
// it) above the 1 MiB value threshold, which Badger requires.
const (
	DefaultMemTableBytes = 16 << 20
	MinMemTableBytes     = 8 << 20

	maxValueThreshold = 1 << 20  // Badger's upper bound for ValueThreshold
	valueLogFileSize  = 64 << 20 // see Open
)

// Options configures Open.
type Options struct {
	// Dir is the Badger directory (created if missing).
	Dir string
	// SyncWrites fsyncs each transaction.
	SyncWrites bool
	// MaxTxnBytes caps the bytes written by one transaction (0 = only
	// Badger's own limit, 15 % of the memtable). Tests set it tiny to force
	// the staged path.
	MaxTxnBytes int
	// MemTableBytes is Badger's memtable size. Default DefaultMemTableBytes
	// (16 MiB); at least MinMemTableBytes. Larger memtables flush and
	// compact less often, which is most of the cost of a stream whose
	// learners are mostly on disk (docs/scale.md); the directory may hold
	// about 4 × this beyond the live state (two memtables, two level-0
	// tables) and the process about 2 × this in memory.
	MemTableBytes int
	// Logger receives Badger's warnings and errors and the recovery log.
	Logger zerolog.Logger
	// InMemory runs Badger without disk (tests of this package only).
	InMemory bool
	// GCInterval is how often the store reclaims value-log space and
	// samples its sizes (space.go). Default 10s; negative disables both.
	GCInterval time.Duration

	// failpoint, when set, is called after each stage of a staged commit
	// ("staged", "marked", "applied-part", "applied", "cleaned") and aborts
	// the commit when it returns an error: a simulated crash.
	failpoint func(stage string) error
	// tune, when set, adjusts the Badger options (benchmarks of this package).
	tune func(badger.Options) badger.Options
}

// Store is an open state store. Its methods are safe for concurrent use by
// different partitions; one partition must be written by one goroutine.
type Store struct {
	db   *badger.DB
	opts Options
	log  zerolog.Logger

	// txnCap estimates Badger's transaction cap (15 % of the memtable,
	// badger.DB's maxBatchSize), so that a checkpoint certainly too big
	// goes to the staged path without first filling a transaction that
	// would fail.
	txnCap int

	staged atomic.Int64 // commits that took the staged path
	space  space        // disk and live sizes, value-log GC (space.go)
}

// StagedCommits counts the commits that were too big for one transaction.
func (s *Store) StagedCommits() int64 { return s.staged.Load() }

// Op is one change of a checkpoint: Value nil deletes Key.
type Op struct {
	Key   []byte
	Value []byte
}

// Checkpoint is what Commit writes for one partition.
type Checkpoint struct {
	// Meta replaces the partition meta (the processor's offsets and watermark).
	Meta []byte
	// Learners: Key is the routing key, Value the blob (nil = delete).
	Learners []Op
	// Pending: Key is the pending entry's key, Value its encoding (nil = delete).
	Pending []Op
	// Idle: Key is the routing key, Value the event time of its last record
	// (the processor's encoding; nil = delete).
	Idle []Op
}

// Open opens (or creates) the store and finishes or discards any checkpoint
// a crash interrupted.
func Open(opts Options) (*Store, error) {
	memTable := opts.MemTableBytes
	if memTable == 0 {
		memTable = DefaultMemTableBytes
	}
	if memTable < MinMemTableBytes {
		return nil, fmt.Errorf("checkpoint: MemTableBytes %d below the minimum %d", memTable, MinMemTableBytes)
	}
	bo := badger.DefaultOptions(opts.Dir).
		WithSyncWrites(opts.SyncWrites).
		WithLogger(badgerLogger{opts.Logger}).
		// The LSM's overhead over the live state is bounded by its memtables
		// (each also a file on disk) and the level-0 tables waiting for
		// compaction; every checkpoint overwrites its learners, so these
		// are mostly garbage. Two memtables and compaction from two level-0
		// tables keep it within about 4 memtables, 64 MiB by default
		// (docs/soak.md); a 64 MiB base level (and bulk loads in key order,
		// Load) keeps the restore of 100,000 keys from the changelog at 14 s
		// instead of 36. The price: Badger caps a transaction at 15 % of the
		// memtable (2.4 MiB by default), so bigger checkpoints take the
		// staged path. A stream whose every record dirties a learner on
		// disk pays mostly for flushes and compactions, which a larger
		// memtable makes rarer (MemTableBytes).
		WithMemTableSize(int64(memTable)).
		// Each partition is written by one goroutine, and checkpoint
		// transactions only write: no conflict to detect.
		WithDetectConflicts(false).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithBaseLevelSize(64 << 20).
		// Tables of a memtable's size below level 0 too (Badger's default
		// is 2 MiB): Badger splits a compaction into up to five key ranges
		// by the tables of the level below, each merged by a goroutine of
		// its own, and finishes each table it writes in another. With
		// 2 MiB tables a level-0 compaction of the decision benchmark's
		// 25 MiB of state ran as five CPU-bound goroutines at once, which
		// on two cores held the workers off their Ps (the Go scheduler's
		// 10 ms slices) for 50-100 ms (docs/scale.md, "Decision latency");
		// with memtable-sized ones it runs as one or two.
		WithBaseTableSize(int64(memTable)).
		WithNumCompactors(2).
		// No block cache: with uncompressed tables a block is read in place
		// from the memory map, and the cache's bookkeeping cost more than
		// it saved on random point reads (BenchmarkReadLearner: about 6 µs
		// instead of 7.5 per read).
		WithBlockCacheSize(0).
		// States up to 1 MiB (Badger's maximum) live in the LSM tree, where
		// compaction drops the versions each checkpoint overwrites; only
		// larger ones go to the value log, which space.go garbage-collects.
		// At 4 KiB every learner state was rewritten into the value log at
		// each checkpoint and nothing reclaimed it (gigabytes a minute).
		WithValueThreshold(maxValueThreshold).
		// Small value-log files: GC rewrites one file at a time and never the
		// one being written, so the garbage it cannot yet reach is at most
		// about one file (and each file is memory-mapped).
		WithValueLogFileSize(valueLogFileSize).
		// Uncompressed tables: a cold-learner read then decodes its value
		// straight from the memory-mapped table instead of decompressing a
		// whole block (Snappy was half the cost of a point read,
		// BenchmarkReadLearner); the price is a larger directory.
		WithCompression(options.None).
		WithNumVersionsToKeep(1)
	if opts.tune != nil {
		bo = opts.tune(bo)
	}
	if opts.InMemory {
		bo = bo.WithInMemory(true).WithDir("").WithValueDir("")
	}
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open badger in %q: %w", opts.Dir, err)
	}
	s := &Store{db: db, opts: opts, log: opts.Logger, txnCap: memTable * 15 / 100}
	if err := s.recover(); err != nil {
		db.Close()
		return nil, err
	}
	s.startSpace()
	return s, nil
}

// Close stops the store's maintenance and closes Badger.
func (s *Store) Close() error {
	s.stopSpace()
	return s.db.Close()
}

func partKey(ns byte, part int, suffix []byte) []byte {
	k := make([]byte, 5, 5+len(suffix))
	k[0] = ns
	binary.BigEndian.PutUint32(k[1:], uint32(part))
	return append(k, suffix...)
}

func stageKey(part int, seq uint32) []byte {
	k := partKey(nsStage, part, nil)
	return binary.BigEndian.AppendUint32(k, seq)
}

// Meta returns the partition meta, or ok=false when the partition has never
// been checkpointed.
func (s *Store) Meta(part int) (meta []byte, ok bool, err error) {
	ok, err = s.get(partKey(nsMeta, part, nil), func(v []byte) error {
		meta = append([]byte(nil), v...)
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("checkpoint: read meta of partition %d: %w", part, err)
	}
	return meta, ok, nil
}

// Learner returns the stored blob of key in partition part, or ok=false.
func (s *Store) Learner(part int, key []byte) (blob []byte, ok bool, err error) {
	ok, err = s.get(partKey(nsLearner, part, key), func(v []byte) error {
		blob = append([]byte(nil), v...)
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("checkpoint: read learner of partition %d: %w", part, err)
	}
	return blob, ok, nil
}

// ReadLearner calls fn with the stored blob of key in partition part, if
// any, and reports whether it exists. The blob is valid only during fn (it
// may point into Badger's memory-mapped tables): fn must decode it, not keep
// it. It saves the copy of Learner on the cold path.
func (s *Store) ReadLearner(part int, key []byte, fn func(blob []byte) error) (ok bool, err error) {
	ok, err = s.get(partKey(nsLearner, part, key), fn)
	if err != nil {
		return false, fmt.Errorf("checkpoint: read learner of partition %d: %w", part, err)
	}
	return ok, nil
}

// get calls fn with the stored value of key, if any (the value is valid only
// during fn), and reports whether it exists.
func (s *Store) get(key []byte, fn func(v []byte) error) (ok bool, err error) {
	err = s.db.View(func(txn *badger.Txn) error {
		it, e := txn.Get(key)
		if errors.Is(e, badger.ErrKeyNotFound) {
			return nil
		}
		if e != nil {
			return e
		}
		ok = true
		return it.Value(fn)
	})
	return ok, err
}

// scan calls fn for every stored item whose key starts with prefix, in key
// order, in one read transaction; values says whether to prefetch values
// (false when fn reads keys only). The item is valid only during fn.
func (s *Store) scan(prefix []byte, values bool, fn func(item *badger.Item) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.PrefetchValues = values
		o.Prefix = prefix
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := fn(it.Item()); err != nil {
				return err
			}
		}
		return nil
	})
}

// EachLearnerKey calls fn with the routing key of every stored learner of
// partition part, in key order, reading keys only (no values). The key is
// valid only during fn.
func (s *Store) EachLearnerKey(part int, fn func(key []byte)) error {
	prefix := partKey(nsLearner, part, nil)
	return s.scan(prefix, false, func(item *badger.Item) error {
		fn(item.Key()[len(prefix):])
		return nil
	})
}

// EachLearner calls fn for every stored learner of partition part, in key order.
func (s *Store) EachLearner(part int, fn func(key, blob []byte) error) error {
	return s.each(nsLearner, part, fn)
}

// EachPending calls fn for every stored pending entry of partition part, in key order.
func (s *Store) EachPending(part int, fn func(key, value []byte) error) error {
	return s.each(nsPending, part, fn)
}

// EachIdle calls fn for every idle-index entry of partition part, in key order.
func (s *Store) EachIdle(part int, fn func(key, value []byte) error) error {
	return s.each(nsIdle, part, fn)
}

// CountLearners counts the stored learners of partition part (keys only).
func (s *Store) CountLearners(part int) (int, error) {
	n := 0
	err := s.EachLearnerKey(part, func([]byte) { n++ })
	return n, err
}

func (s *Store) each(ns byte, part int, fn func(key, value []byte) error) error {
	prefix := partKey(ns, part, nil)
	return s.scan(prefix, true, func(item *badger.Item) error {
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		return fn(item.KeyCopy(nil)[len(prefix):], v)
	})
}

// ops flattens a checkpoint into live-key operations, meta last.
func (cp *Checkpoint) ops(part int) []Op {
	out := make([]Op, 0, len(cp.Learners)+len(cp.Pending)+len(cp.Idle)+1)
	for _, o := range cp.Learners {
		out = append(out, Op{Key: partKey(nsLearner, part, o.Key), Value: o.Value})
	}
	for _, o := range cp.Pending {
		out = append(out, Op{Key: partKey(nsPending, part, o.Key), Value: o.Value})
	}
	for _, o := range cp.Idle {
		out = append(out, Op{Key: partKey(nsIdle, part, o.Key), Value: o.Value})
	}
	return append(out, Op{Key: partKey(nsMeta, part, nil), Value: cp.Meta})
}

func opSize(o Op) int { return len(o.Key) + len(o.Value) + 16 }

// errCapped is the fast path giving way to the staged path under MaxTxnBytes.
var errCapped = errors.New("checkpoint: above MaxTxnBytes")

// TxnCap is about the largest checkpoint (the sum of its keys and values,
// plus 16 bytes an operation) that Commit writes in one transaction; larger
// ones take the staged path.
func (s *Store) TxnCap() int {
	if m := s.opts.MaxTxnBytes; m > 0 && m < s.txnCap {
		return m
	}
	return s.txnCap
}

// Commit writes cp for partition part atomically (see the package comment).
func (s *Store) Commit(part int, cp *Checkpoint) error {
	ops := cp.ops(part)
	total := 0
	for _, o := range ops {
		total += opSize(o)
	}
	if total > s.txnCap {
		return s.commitStaged(part, ops)
	}
	err := s.db.Update(func(txn *badger.Txn) error {
		size := 0
		for _, o := range ops {
			size += opSize(o)
			if s.opts.MaxTxnBytes > 0 && size > s.opts.MaxTxnBytes {
				return errCapped
			}
			if err := apply(txn, o); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errCapped), errors.Is(err, badger.ErrTxnTooBig):
		return s.commitStaged(part, ops)
	}
	return fmt.Errorf("checkpoint: commit partition %d: %w", part, err)
}

func apply(txn *badger.Txn, o Op) error {
	if o.Value == nil {
		return txn.Delete(o.Key)
	}
	return txn.Set(o.Key, o.Value)
}

func (s *Store) fail(stage string) error {
	if s.opts.failpoint != nil {
		return s.opts.failpoint(stage)
	}
	return nil
}

// Staged records. A staged checkpoint's operations are framed into records
// of about stageRecordBytes each, so that staging 10,000 learners writes
// about a dozen Badger entries, not 10,000, and cleaning deletes as many
// (BenchmarkCommit, 10,000 learners of 336 bytes: 27-31 CPU-µs per learner
// with a Badger entry per operation, 14-16 with records; 9-10 for the same
// learners in checkpoints that fit in one transaction). Records at or above
// the 1 MiB value threshold would go to the value log and cost 9-11 in that
// benchmark, but not less in the 500,000-key run of docs/scale.md (49 against
// 47-48 µs per record), with 45 MiB more on disk until garbage collection.
// A record is
//
//	0x00 | frame...,  frame = uvarint len(key) | key | 0              (delete)
//	                        | uvarint len(key) | key | 1 | uvarint len(value) | value
//
// Records written before this layout hold one operation each,
// uvarint len(key) | key | flag | value (to the end): a live key is at least
// 5 bytes long, so such a record never starts with 0x00, and Open still
// finishes a checkpoint staged that way.
const stageRecordBytes = 256 << 10 // under the value threshold: staged records stay in the LSM tree

// stageRecords frames ops into staged records of about limit bytes (a
// record holds at least one operation, whatever its size).
func stageRecords(ops []Op, limit int) [][]byte {
	frame := func(o Op) int { return len(o.Key) + len(o.Value) + 2*binary.MaxVarintLen32 + 1 }
	left := 0 // bytes of the operations not yet framed (an upper bound)
	for _, o := range ops {
		left += frame(o)
	}
	var recs [][]byte
	var rec []byte
	for _, o := range ops {
		n := frame(o)
		if rec != nil && len(rec)+n > limit {
			recs = append(recs, rec)
			rec = nil
		}
		if rec == nil {
			rec = append(make([]byte, 0, 1+max(min(limit, left), n)), 0)
		}
		left -= n
		rec = binary.AppendUvarint(rec, uint64(len(o.Key)))
		rec = append(rec, o.Key...)
		if o.Value == nil {
			rec = append(rec, 0)
			continue
		}
		rec = append(rec, 1)
		rec = binary.AppendUvarint(rec, uint64(len(o.Value)))
		rec = append(rec, o.Value...)
	}
	if rec != nil {
		recs = append(recs, rec)
	}
	return recs
}

var errCorruptStaged = errors.New("checkpoint: corrupt staged record")

// appendStaged decodes a staged record, either layout, appending its
// operations to ops; their keys and values point into b.
func appendStaged(ops []Op, b []byte) ([]Op, error) {
	if len(b) == 0 {
		return ops, errCorruptStaged
	}
	if b[0] != 0 {
		o, rest, err := stagedFrame(b, false)
		if err != nil || len(rest) != 0 {
			return ops, errCorruptStaged
		}
		return append(ops, o), nil
	}
	for b = b[1:]; len(b) > 0; {
		o, rest, err := stagedFrame(b, true)
		if err != nil {
			return ops, err
		}
		ops, b = append(ops, o), rest
	}
	return ops, nil
}

// stagedFrame reads one operation; sized says whether a value carries its
// length (the record layout) or runs to the end (the one-operation layout).
func stagedFrame(b []byte, sized bool) (Op, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n >= uint64(len(b)-k) { // the key and the flag byte must fit (no n+1: n may be 2^64-1)
		return Op{}, nil, errCorruptStaged
	}
	key := b[k : k+int(n)]
	b = b[k+int(n):]
	flag := b[0]
	b = b[1:]
	switch {
	case flag == 0:
		return Op{Key: key}, b, nil
	case flag != 1:
		return Op{}, nil, errCorruptStaged
	case !sized:
		return Op{Key: key, Value: b}, nil, nil
	}
	n, k = binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return Op{}, nil, errCorruptStaged
	}
	return Op{Key: key, Value: b[k : k+int(n)]}, b[k+int(n):], nil
}

// batches runs fn over ops in as few transactions as Badger and MaxTxnBytes
// allow, starting a new transaction whenever one is full.
func (s *Store) batches(n int, op func(i int) Op, after func(i int) error) error {
	i := 0
	for i < n {
		start := i
		err := s.db.Update(func(txn *badger.Txn) error {
			size := 0
			for ; i < n; i++ {
				o := op(i)
				size += opSize(o)
				if s.opts.MaxTxnBytes > 0 && size > s.opts.MaxTxnBytes && i > start {
					return nil
				}
				if err := apply(txn, o); err != nil {
					if errors.Is(err, badger.ErrTxnTooBig) && i > start {
						return nil // commit what fits; the rest goes in the next txn
					}
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if after != nil {
			if err := after(i); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Store) commitStaged(part int, ops []Op) error {
	s.staged.Add(1)
	// a. stage
	limit := stageRecordBytes
	if s.opts.MaxTxnBytes > 0 {
		limit = min(limit, s.opts.MaxTxnBytes/2)
	}
	recs := stageRecords(ops, limit)
	if err := s.batches(len(recs), func(i int) Op { return Op{Key: stageKey(part, uint32(i)), Value: recs[i]} }, nil); err != nil {
		return fmt.Errorf("checkpoint: stage partition %d: %w", part, err)
	}
	if err := s.fail("staged"); err != nil {
		return err
	}
	// b. commit point: the marker holds the number of staged records.
	marker := binary.BigEndian.AppendUint32(nil, uint32(len(recs)))
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(partKey(nsRedo, part, nil), marker) }); err != nil {
		return fmt.Errorf("checkpoint: mark partition %d: %w", part, err)
	}
	if err := s.fail("marked"); err != nil {
		return err
	}
	// c, d.
	return s.applyStaged(part, ops)
}

// applyStaged applies ops to the live keys, then deletes the staging and the marker.
func (s *Store) applyStaged(part int, ops []Op) error {
	first := true
	err := s.batches(len(ops), func(i int) Op { return ops[i] }, func(int) error {
		if first {
			first = false
			return s.fail("applied-part")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("checkpoint: apply partition %d: %w", part, err)
	}
	if err := s.fail("applied"); err != nil {
		return err
	}
	if err := s.dropStaging(part); err != nil {
		return err
	}
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(partKey(nsRedo, part, nil)) }); err != nil {
		return fmt.Errorf("checkpoint: unmark partition %d: %w", part, err)
	}
	return s.fail("cleaned")
}

// dropStaging deletes every staged record of part.
func (s *Store) dropStaging(part int) error {
	var keys [][]byte
	prefix := partKey(nsStage, part, nil)
	err := s.scan(prefix, false, func(item *badger.Item) error {
		keys = append(keys, item.KeyCopy(nil))
		return nil
	})
	if err == nil {
		err = s.batches(len(keys), func(i int) Op { return Op{Key: keys[i]} }, nil)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: drop staging of partition %d: %w", part, err)
	}
	return nil
}

// recover finishes marked checkpoints and drops unmarked staging.
func (s *Store) recover() error {
	parts := map[int]int{} // partition -> staged record count, -1 when unmarked
	for _, ns := range []byte{nsRedo, nsStage} {
		err := s.scan([]byte{ns}, true, func(item *badger.Item) error {
			k := item.Key()
			if len(k) < 5 {
				return nil
			}
			p := int(binary.BigEndian.Uint32(k[1:5]))
			if ns == nsRedo {
				v, err := item.ValueCopy(nil)
				if err != nil || len(v) != 4 {
					return fmt.Errorf("checkpoint: corrupt redo marker of partition %d", p)
				}
				parts[p] = int(binary.BigEndian.Uint32(v))
			} else if _, ok := parts[p]; !ok {
				parts[p] = -1
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for p, n := range parts {
		if n < 0 {
			s.log.Warn().Int("partition", p).Msg("checkpoint: dropping staging of a checkpoint interrupted before its commit point")
			if err := s.dropStaging(p); err != nil {
				return err
			}
			continue
		}
		var ops []Op
		err := s.db.View(func(txn *badger.Txn) error {
			for i := 0; i < n; i++ {
				it, err := txn.Get(stageKey(p, uint32(i)))
				if err != nil {
					return fmt.Errorf("staged record %d/%d: %w", i, n, err)
				}
				v, err := it.ValueCopy(nil)
				if err != nil {
					return err
				}
				if ops, err = appendStaged(ops, v); err != nil {
					return fmt.Errorf("staged record %d/%d: %w", i, n, err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("checkpoint: recover partition %d: %w", p, err)
		}
		s.log.Warn().Int("partition", p).Int("ops", len(ops)).Msg("checkpoint: finishing a checkpoint interrupted after its commit point")
		if err := s.applyStaged(p, ops); err != nil {
			return err
		}
	}
	return nil
}

// badgerLogger adapts zerolog to Badger's logger (info and debug dropped).
type badgerLogger struct{ l zerolog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Error().Msgf("badger: "+f, a...) }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warn().Msgf("badger: "+f, a...) }
func (b badgerLogger) Infof(string, ...any)        {}
func (b badgerLogger) Debugf(string, ...any)       {}

// nsHeld keys the list of partitions of this member's last generation.
const nsHeld = 'h'

// Load writes cp for partition part in bulk: the learners and pending
// entries through Badger's batched writer (no transaction size limit, no
// staging), then the meta, if any, in a transaction of its own. It is not
// all-or-nothing like Commit; it is for restores whose source can be read
// again: until the meta is written, the partition has no meta and counts as
// holding no state, so a crash midway means restoring again.
func (s *Store) Load(part int, cp *Checkpoint) error {
	// In key order, each flushed table covers its own key range, which
	// compaction moves down instead of merging (a random order made the
	// restore of 100,000 keys several times slower).
	sortOps(cp.Learners)
	sortOps(cp.Pending)
	sortOps(cp.Idle)
	wb := s.db.NewWriteBatch()
	for _, group := range []struct {
		ns  byte
		ops []Op
	}{{nsLearner, cp.Learners}, {nsPending, cp.Pending}, {nsIdle, cp.Idle}} {
		ns := group.ns
		for _, o := range group.ops {
			if o.Value == nil {
				continue
			}
			if err := wb.Set(partKey(ns, part, o.Key), o.Value); err != nil {
				wb.Cancel()
				return fmt.Errorf("checkpoint: load partition %d: %w", part, err)
			}
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("checkpoint: load partition %d: %w", part, err)
	}
	if cp.Meta == nil {
		return nil
	}
	return s.db.Update(func(txn *badger.Txn) error { return txn.Set(partKey(nsMeta, part, nil), cp.Meta) })
}

// Apply writes cp for partition part in as many transactions as it needs,
// not atomically: the partition's meta is deleted first and written last,
// so that until Apply returns the partition has no meta, and a crash
// meanwhile leaves it as a partition without local state (whose learners
// and entries a restore replaces). For a writer whose every change is
// durable elsewhere first (the processor's changelog), which a restore reads
// instead: it spares the staged path's second write of a checkpoint larger
// than a transaction. Values nil delete, as in Commit; cp.Meta nil leaves
// the partition without a meta.
func (s *Store) Apply(part int, cp *Checkpoint) error {
	ops := cp.ops(part)
	meta := ops[len(ops)-1]
	err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(meta.Key) })
	if err == nil {
		err = s.batches(len(ops), func(i int) Op { return ops[i] }, func(i int) error {
			if i < len(ops) {
				return s.fail("apply-part")
			}
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("checkpoint: apply partition %d: %w", part, err)
	}
	return nil
}

func sortOps(ops []Op) {
	sort.Slice(ops, func(i, j int) bool { return bytes.Compare(ops[i].Key, ops[j].Key) < 0 })
}

// ResetPartition deletes everything stored for partition part (its meta,
// learners, pending entries and any staging), before a restore from the
// changelog writes the partition's state anew.
//
// The meta goes first, so a reset cut short by a crash leaves a partition
// without meta, which the processor treats as having no local state. Keys
// are deleted in batches (Badger's DropPrefix would block the writes of
// every other partition meanwhile).
func (s *Store) ResetPartition(part int) error {
	for _, ns := range []byte{nsMeta, nsRedo, nsStage, nsLearner, nsPending, nsIdle} {
		if err := s.dropNamespace(ns, part); err != nil {
			return fmt.Errorf("checkpoint: reset partition %d: %w", part, err)
		}
	}
	return nil
}

// DropIdle deletes partition part's idle-key index (idle-key expiry was
// turned off: a stale index must not expire keys when it is turned on again).
func (s *Store) DropIdle(part int) error {
	if err := s.dropNamespace(nsIdle, part); err != nil {
		return fmt.Errorf("checkpoint: drop the idle-key index of partition %d: %w", part, err)
	}
	return nil
}

func (s *Store) dropNamespace(ns byte, part int) error {
	var keys [][]byte
	err := s.scan(partKey(ns, part, nil), false, func(item *badger.Item) error {
		keys = append(keys, item.KeyCopy(nil))
		return nil
	})
	if err != nil || len(keys) == 0 {
		return err
	}
	wb := s.db.NewWriteBatch()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			wb.Cancel()
			return err
		}
	}
	return wb.Flush()
}

// SetHeld records the input partitions assigned to this member in its
// current generation, so that after a restart (even a SIGKILL) it can claim
// back the partitions whose state it holds (the sticky balancer's restored
// claims).
func (s *Store) SetHeld(parts []int) error {
	b := make([]byte, 0, 4*len(parts))
	for _, p := range parts {
		b = binary.BigEndian.AppendUint32(b, uint32(p))
	}
	return s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte{nsHeld}, b) })
}

// Held returns what SetHeld last recorded (nil if never).
func (s *Store) Held() ([]int, error) {
	var parts []int
	_, err := s.get([]byte{nsHeld}, func(v []byte) error {
		for i := 0; i+4 <= len(v); i += 4 {
			parts = append(parts, int(binary.BigEndian.Uint32(v[i:])))
		}
		return nil
	})
	return parts, err
}
