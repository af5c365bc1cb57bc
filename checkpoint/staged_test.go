package checkpoint

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

func TestStageRecords(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte{7}, 5000)
	for _, tc := range []struct {
		name    string
		ops     []Op
		limit   int
		records int // 0: not checked (the invariants below are)
	}{
		{"one set", []Op{{Key: []byte("l0000key"), Value: []byte("v")}}, 1024, 1},
		{"delete", []Op{{Key: []byte("l0000key")}}, 1024, 1},
		{"empty value is a set", []Op{{Key: []byte("l0000key"), Value: []byte{}}}, 1024, 1},
		{"split at the limit", opsOf(100, 40), 1000, 0},
		{"an op above the limit is a record of its own", []Op{{Key: []byte("a0000"), Value: []byte("x")}, {Key: []byte("b0000"), Value: big}, {Key: []byte("c0000")}}, 1000, 3},
		{"mixed", append(opsOf(50, 10), Op{Key: []byte("gone0")}, Op{Key: []byte("m0000"), Value: []byte("meta")}), 256, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := stageRecords(tc.ops, tc.limit)
			if tc.records > 0 && len(recs) != tc.records {
				t.Errorf("%d records, want %d", len(recs), tc.records)
			}
			var got []Op
			for i, r := range recs {
				ops := decodeAll(t, r)
				if len(r) > tc.limit && len(ops) != 1 {
					t.Errorf("record %d is %d bytes (limit %d) with %d operations", i, len(r), tc.limit, len(ops))
				}
				if i > 0 && len(recs[i-1])+len(stageRecords(ops[:1], 1<<30)[0])-1 <= tc.limit-2*binary.MaxVarintLen32 {
					t.Errorf("record %d (%d bytes) could have taken the first operation of record %d", i-1, len(recs[i-1]), i)
				}
				got = append(got, ops...)
			}
			if len(got) != len(tc.ops) {
				t.Fatalf("%d operations back, want %d", len(got), len(tc.ops))
			}
			for i, o := range tc.ops {
				g := got[i]
				if !bytes.Equal(g.Key, o.Key) || !bytes.Equal(g.Value, o.Value) || (g.Value == nil) != (o.Value == nil) {
					t.Fatalf("op %d = %q/%q (nil %v), want %q/%q (nil %v)", i, g.Key, g.Value, g.Value == nil, o.Key, o.Value, o.Value == nil)
				}
			}
		})
	}
}

func decodeAll(t *testing.T, r []byte) []Op {
	t.Helper()
	ops, err := appendStaged(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

func opsOf(n, size int) []Op {
	ops := make([]Op, n)
	for i := range ops {
		ops[i] = Op{Key: []byte(fmt.Sprintf("l%04d", i)), Value: bytes.Repeat([]byte{byte(i)}, size)}
	}
	return ops
}

// legacyStaged is the one-operation record that versions before the
// record layout wrote: uvarint len(key) | key | flag | value.
func legacyStaged(o Op) []byte {
	b := binary.AppendUvarint(nil, uint64(len(o.Key)))
	b = append(b, o.Key...)
	if o.Value == nil {
		return append(b, 0)
	}
	return append(append(b, 1), o.Value...)
}

func TestAppendStagedRejectsCorrupt(t *testing.T) {
	t.Parallel()
	good := stageRecords([]Op{{Key: []byte("l0000k"), Value: []byte("value")}}, 1024)[0]
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"bare layout byte is fine", []byte{0}}, // no operation: not an error
		{"key longer than the record", []byte{0, 50, 'a'}},
		{"missing flag", []byte{0, 1, 'a'}},
		{"unknown flag", []byte{0, 1, 'a', 7}},
		{"value longer than the record", []byte{0, 1, 'a', 1, 9, 'x'}},
		{"truncated", good[:len(good)-1]},
		{"legacy key longer than the record", []byte{50, 'a'}},
		{"legacy unknown flag", []byte{1, 'a', 3}},
		{"key length 2^64-1", []byte{0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 'a'}},
		{"legacy key length 2^64-1", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 'a'}},
		{"value length 2^64-1", []byte{0, 1, 'a', 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 'x'}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := appendStaged(nil, tc.b)
			if wantOK := tc.name == "bare layout byte is fine"; (err == nil) != wantOK {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// FuzzAppendStaged: any bytes decode to operations inside them or to an
// error, never a panic; what stageRecords writes decodes to what it was given.
func FuzzAppendStaged(f *testing.F) {
	f.Add(stageRecords(opsOf(3, 4), 1024)[0])
	f.Add(legacyStaged(Op{Key: []byte("l0000k"), Value: []byte("v")}))
	f.Add([]byte{0, 1, 'a', 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ops, err := appendStaged(nil, b)
		if err != nil {
			return
		}
		for _, o := range ops {
			if len(o.Key)+len(o.Value) > len(b) {
				t.Fatalf("operation larger than its record")
			}
		}
		recs := stageRecords(ops, 1<<30)
		var back []Op
		for _, r := range recs {
			if back, err = appendStaged(back, r); err != nil {
				t.Fatal(err)
			}
		}
		if len(back) != len(ops) {
			t.Fatalf("%d operations re-read as %d", len(ops), len(back))
		}
		for i := range ops {
			if !bytes.Equal(back[i].Key, ops[i].Key) || !bytes.Equal(back[i].Value, ops[i].Value) || (back[i].Value == nil) != (ops[i].Value == nil) {
				t.Fatalf("op %d changed in a round trip", i)
			}
		}
	})
}

// TestRecoverLegacyStaging: a checkpoint staged by an earlier version (one
// operation per record) and interrupted after its commit point is
// finished by Open.
func TestRecoverLegacyStaging(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cp := bigCheckpoint(50, 20, 2)
	ops := cp.ops(3)
	err = s.db.Update(func(txn *badger.Txn) error {
		for i, o := range ops {
			if err := txn.Set(stageKey(3, uint32(i)), legacyStaged(o)); err != nil {
				return err
			}
		}
		return txn.Set(partKey(nsRedo, 3, nil), binary.BigEndian.AppendUint32(nil, uint32(len(ops))))
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ref := openTemp(t)
	if err := ref.Commit(3, cp); err != nil {
		t.Fatal(err)
	}
	if got, want := snapshot(t, s, 3), snapshot(t, ref, 3); got != want {
		t.Fatalf("recovered partition:\n%s\nwant:\n%s", got, want)
	}
	noStaging(t, s, 3)
}

// TestStagedCommitWritesFewRecords: a staged checkpoint of 10,000 learners
// goes through a handful of staged records, not one per operation.
func TestStagedCommitWritesFewRecords(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	r := rand.New(rand.NewPCG(5, 6))
	cp := &Checkpoint{Meta: []byte{9}}
	for i := 0; i < 10000; i++ {
		v := make([]byte, 336)
		for j := range v {
			v[j] = byte(r.Uint32())
		}
		cp.Learners = append(cp.Learners, Op{Key: benchKey(i), Value: v})
	}
	records := 0
	s.opts.failpoint = func(stage string) error {
		if stage == "staged" {
			return s.scan(partKey(nsStage, 0, nil), false, func(*badger.Item) error { records++; return nil })
		}
		return nil
	}
	if err := s.Commit(0, cp); err != nil {
		t.Fatal(err)
	}
	if s.StagedCommits() != 1 {
		t.Fatalf("StagedCommits = %d", s.StagedCommits())
	}
	if records == 0 || records > 20 {
		t.Fatalf("%d staged records for 10,001 operations, want 1 to 20", records)
	}
	if n, _ := s.CountLearners(0); n != 10000 {
		t.Fatalf("CountLearners = %d", n)
	}
}
