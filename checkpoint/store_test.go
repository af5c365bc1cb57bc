package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

var errCrash = errors.New("simulated crash")

// bigCheckpoint is a checkpoint of n learners of size bytes plus pending
// changes; version v changes every value.
func bigCheckpoint(n, size int, v byte) *Checkpoint {
	cp := &Checkpoint{Meta: []byte{'v', v}}
	for i := 0; i < n; i++ {
		cp.Learners = append(cp.Learners, Op{Key: []byte(fmt.Sprintf("key-%04d", i)), Value: bytes.Repeat([]byte{v}, size)})
		if v%2 == 0 {
			cp.Pending = append(cp.Pending, Op{Key: []byte(fmt.Sprintf("pend-%04d", i)), Value: []byte{v}})
		} else {
			cp.Pending = append(cp.Pending, Op{Key: []byte(fmt.Sprintf("pend-%04d", i))}) // delete
		}
	}
	return cp
}

// snapshot reads everything a reader of partition part can see.
func snapshot(t *testing.T, s *Store, part int) string {
	t.Helper()
	var b bytes.Buffer
	meta, ok, err := s.Meta(part)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "meta %v %q\n", ok, meta)
	if err := s.EachLearner(part, func(k, v []byte) error { fmt.Fprintf(&b, "l %s %x\n", k, v[:1]); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.EachPending(part, func(k, v []byte) error { fmt.Fprintf(&b, "p %s %x\n", k, v); return nil }); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// noStaging fails if partition part has staged records or a redo marker
// left behind.
func noStaging(t *testing.T, s *Store, part int) {
	t.Helper()
	for _, ns := range []byte{nsRedo, nsStage} {
		if err := s.each(ns, part, func(k, v []byte) error { return fmt.Errorf("leftover %c key", ns) }); err != nil {
			t.Fatal(err)
		}
	}
}

// openTemp opens a store in a test's temporary directory, closed at its end.
func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openVersion1 opens a store in dir whose transactions hold 2,000 bytes,
// with version 1 of a 200-learner checkpoint committed (staged).
func openVersion1(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, MaxTxnBytes: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(0, bigCheckpoint(200, 100, 1)); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCommitFastPath(t *testing.T) {
	s := openTemp(t)
	if _, ok, _ := s.Meta(3); ok {
		t.Fatal("fresh store has meta")
	}
	if err := s.Commit(3, bigCheckpoint(5, 10, 2)); err != nil {
		t.Fatal(err)
	}
	blob, ok, err := s.Learner(3, []byte("key-0004"))
	if err != nil || !ok || !bytes.Equal(blob, bytes.Repeat([]byte{2}, 10)) {
		t.Fatalf("learner = %x %v %v", blob, ok, err)
	}
	if _, ok, _ := s.Learner(4, []byte("key-0004")); ok {
		t.Fatal("partitions leak into each other")
	}
	if n, _ := s.CountLearners(3); n != 5 {
		t.Fatalf("CountLearners = %d", n)
	}
}

// TestStagedCommitAtomic forces checkpoints larger than one transaction
// (MaxTxnBytes tiny, and Badger's own limit with a real big checkpoint) and
// crashes at every stage of the staged protocol: after reopening, the store
// shows exactly the old checkpoint or exactly the new one.
func TestStagedCommitAtomic(t *testing.T) {
	t.Parallel()
	stages := []struct {
		stage string
		want  byte // version visible after the crash
	}{{"staged", 1}, {"marked", 2}, {"applied-part", 2}, {"applied", 2}, {"cleaned", 2}, {"", 2}}
	for _, tc := range stages {
		t.Run("crash-after-"+tc.stage, func(t *testing.T) {
			dir := t.TempDir()
			s := openVersion1(t, dir)
			// The reference stores (same checkpoints, no crash) to compare with.
			ref := map[byte]string{}
			for _, v := range []byte{1, 2} {
				r, err := Open(Options{Dir: t.TempDir()})
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Commit(0, bigCheckpoint(200, 100, v)); err != nil {
					t.Fatal(err)
				}
				ref[v] = snapshot(t, r, 0)
				r.Close()
			}
			if got := snapshot(t, s, 0); got != ref[1] {
				t.Fatal("staged commit of version 1 differs from a one-transaction commit")
			}
			crashed := false
			s.opts.failpoint = func(stage string) error {
				if stage == tc.stage {
					crashed = true
					return errCrash
				}
				return nil
			}
			err := s.Commit(0, bigCheckpoint(200, 100, 2))
			if tc.stage != "" && (!crashed || !errors.Is(err, errCrash)) {
				t.Fatalf("failpoint %q not reached: %v", tc.stage, err)
			}
			s.Close()
			s, err = Open(Options{Dir: dir, MaxTxnBytes: 2000})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := snapshot(t, s, 0); got != ref[tc.want] {
				t.Fatalf("after a crash at %q the store shows neither the old nor the new checkpoint as expected (want version %d)", tc.stage, tc.want)
			}
			noStaging(t, s, 0)
		})
	}
}

// TestApply writes a checkpoint larger than a transaction with Apply: the
// store then shows what Commit would have, without the staged path; cut
// short after its first transaction, the partition has no meta (a
// partition without local state), whatever else it holds.
func TestApply(t *testing.T) {
	t.Parallel()
	ref := openTemp(t)
	if err := ref.Commit(0, bigCheckpoint(200, 100, 2)); err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, ref, 0)
	for _, crash := range []bool{false, true} {
		dir := t.TempDir()
		s := openVersion1(t, dir)
		staged := s.StagedCommits()
		if crash {
			s.opts.failpoint = func(stage string) error {
				if stage == "apply-part" {
					return errCrash
				}
				return nil
			}
		}
		err := s.Apply(0, bigCheckpoint(200, 100, 2))
		if crash != errors.Is(err, errCrash) {
			t.Fatalf("crash %v: Apply = %v", crash, err)
		}
		if s.StagedCommits() != staged {
			t.Fatal("Apply took the staged path")
		}
		s.Close()
		if s, err = Open(Options{Dir: dir, MaxTxnBytes: 2000}); err != nil {
			t.Fatal(err)
		}
		got := snapshot(t, s, 0)
		_, hasMeta, _ := s.Meta(0)
		switch {
		case !crash && got != want:
			t.Fatalf("Apply left\n%s\nCommit leaves\n%s", got, want)
		case staged != 1:
			t.Fatalf("%d staged commits before Apply, want 1 (MaxTxnBytes too large for the test)", staged)
		case crash && hasMeta:
			t.Fatal("Apply cut short left a meta")
		}
		noStaging(t, s, 0)
		s.Close()
	}
}

// TestBadgerTxnLimit commits a checkpoint above Badger's own transaction
// limit (15% of the 32 MiB memtable) through the staged path.
func TestBadgerTxnLimit(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	cp := bigCheckpoint(8000, 1000, 2) // ~8 MB of values under the 4 KiB value threshold
	if err := s.Commit(1, cp); err != nil {
		t.Fatal(err)
	}
	if s.StagedCommits() != 1 {
		t.Fatalf("StagedCommits = %d: the checkpoint fit in one transaction", s.StagedCommits())
	}
	if n, _ := s.CountLearners(1); n != 8000 {
		t.Fatalf("CountLearners = %d, want 8000", n)
	}
	meta, _, _ := s.Meta(1)
	if !bytes.Equal(meta, cp.Meta) {
		t.Fatalf("meta = %q", meta)
	}
}

// TestBadgerTxnCountLimit commits a checkpoint whose bytes fit under the
// size estimate of Commit but whose entry count is above Badger's own cap
// (15 % of the memtable over 96-byte skiplist nodes: about 26,000 entries at
// the default 16 MiB, 105,000 at 64): Badger's ErrTxnTooBig must
// send it to the staged path, all of it applied.
func TestBadgerTxnCountLimit(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	const n = 60000
	cp := &Checkpoint{Meta: []byte("count")}
	for i := 0; i < n; i++ {
		cp.Learners = append(cp.Learners, Op{Key: []byte(fmt.Sprintf("k%06d", i)), Value: []byte{byte(i)}})
	}
	if err := s.Commit(2, cp); err != nil {
		t.Fatal(err)
	}
	if s.StagedCommits() != 1 {
		t.Fatalf("StagedCommits = %d: the checkpoint fit in one transaction", s.StagedCommits())
	}
	keys := 0
	if err := s.EachLearnerKey(2, func([]byte) { keys++ }); err != nil || keys != n {
		t.Fatalf("EachLearnerKey: %d keys, err %v; want %d", keys, err, n)
	}
	ok, err := s.ReadLearner(2, []byte("k012345"), func(b []byte) error {
		if !bytes.Equal(b, []byte{12345 % 256}) {
			t.Errorf("ReadLearner = %v", b)
		}
		return nil
	})
	if err != nil || !ok {
		t.Fatalf("ReadLearner: ok %v, err %v", ok, err)
	}
	if ok, err := s.ReadLearner(2, []byte("absent"), func([]byte) error { return nil }); ok || err != nil {
		t.Fatalf("ReadLearner of an absent key: ok %v, err %v", ok, err)
	}
}

// TestMaxKeySuffixBytes: a pending key of MaxKeySuffixBytes commits, one
// byte more is refused by Badger (the bound the processor's limits on keys
// and ids are checked against).
func TestMaxKeySuffixBytes(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	ok := &Checkpoint{Meta: []byte("m"), Pending: []Op{{Key: bytes.Repeat([]byte("k"), MaxKeySuffixBytes), Value: []byte("v")}}}
	if err := s.Commit(0, ok); err != nil {
		t.Fatalf("a %d-byte suffix: %v", MaxKeySuffixBytes, err)
	}
	long := &Checkpoint{Meta: []byte("m"), Pending: []Op{{Key: bytes.Repeat([]byte("k"), MaxKeySuffixBytes+1), Value: []byte("v")}}}
	if err := s.Commit(0, long); err == nil {
		t.Fatalf("a %d-byte suffix committed", MaxKeySuffixBytes+1)
	}
}
