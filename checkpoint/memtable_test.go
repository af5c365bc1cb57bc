package checkpoint

import (
	"strings"
	"testing"
)

// TestMemTableBytes: the memtable size sets the largest checkpoint that is one
// transaction (15 % of it), a store reopens under another size with its
// state intact, and a size below Badger's minimum is an error that names it.
func TestMemTableBytes(t *testing.T) {
	t.Parallel()
	if _, err := Open(Options{Dir: t.TempDir(), MemTableBytes: MinMemTableBytes - 1}); err == nil || !strings.Contains(err.Error(), "MemTableBytes") {
		t.Fatalf("memtable below the minimum: err = %v", err)
	}
	dir := t.TempDir()
	cp := bigCheckpoint(3000, 1000, 2) // 3 MB: above 15 % of 16 MiB, below 15 % of 64 MiB
	cases := []struct {
		memTable, staged int
	}{
		{0, 1},        // the default, 16 MiB: staged
		{64 << 20, 0}, // one transaction
		{MinMemTableBytes, 1},
	}
	for i, c := range cases {
		s, err := Open(Options{Dir: dir, MemTableBytes: c.memTable})
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			if n, _ := s.CountLearners(1); n != 3000 {
				t.Errorf("memtable %d: reopened with %d learners, want 3000", c.memTable, n)
			}
		}
		cp.Meta[1] = byte(i)
		if err := s.Commit(1, cp); err != nil {
			t.Fatal(err)
		}
		if got := s.StagedCommits(); got != int64(c.staged) {
			t.Errorf("memtable %d: %d staged commits, want %d", c.memTable, got, c.staged)
		}
		if meta, _, _ := s.Meta(1); meta[1] != byte(i) {
			t.Errorf("memtable %d: meta %q", c.memTable, meta)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
