package processor

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/internal/kafkaio/kafkaiotest"
	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// ptestPanic is ptestLMS whose Update half-updates its weights and then
// panics when the label is 999 (a learner bug on one record).
type ptestPanic struct{ ptestLMS }

func init() {
	models.Register(models.Algorithm{Name: "ptest-panic", Losses: []string{"square"}, Summary: "processor test learner that panics on y=999",
		New: func(s *models.Setup) (models.Learner, error) {
			l := &ptestPanic{ptestLMS{dim: s.Dim, eta: 0.1, w: make([]float64, s.Dim)}}
			l.rng.Seed(s.Seed)
			return l, nil
		}})
}

func (l *ptestPanic) Update(x []float64, p models.Prediction, y float64) error {
	if y == 999 {
		l.w[0] += 1e6
		panic("test learner bug")
	}
	return l.ptestLMS.Update(x, p, y)
}

// handleWorker is a worker without a broker: records go through handle,
// outputs are collected by an in-memory cluster.
type handleWorker struct {
	*worker
	store *checkpoint.Store
	kio   *kafkaiotest.Cluster
	read  int // outputs returned by next
}

func newHandleWorker(t *testing.T, algo string, mod func(*Config), seed func(*checkpoint.Store)) *handleWorker {
	t.Helper()
	store, err := checkpoint.Open(checkpoint.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg := Config{Brokers: []string{"x:1"}, Group: "g", InputTopic: "in", OutputTopic: "out", DLQTopic: "dlq",
		CheckpointDir: "unused", Model: models.Spec{Algorithm: algo, Dim: 2, Seed: 1}}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kio := &kafkaiotest.Cluster{}
	w := newWorker(p, store, kio, 0)
	if seed != nil {
		seed(store)
	}
	if err := w.restore(-1, -1); err != nil {
		t.Fatalf("restore: %v", err)
	}
	w.em = newEmitter(kio, w.log, p.m)
	w.hard = context.Background()
	return &handleWorker{worker: w, store: store, kio: kio}
}

var handleBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (h *handleWorker) feed(t *testing.T, key, value string) {
	t.Helper()
	off := max(h.nextIn, 0)
	m := &kafkaio.Record{Topic: "in", Partition: int32(h.part), Key: []byte(key), Value: []byte(value), Offset: off,
		Time: handleBase.Add(time.Duration(off) * time.Millisecond)}
	if err := h.handle(context.Background(), m, false); err != nil {
		t.Fatalf("handle %s %s: %v", key, value, err)
	}
}

// next returns the next emitted message (prediction or dead letter).
func (h *handleWorker) next(t *testing.T) kafkaio.Record {
	t.Helper()
	out := h.kio.Produced()
	if h.read >= len(out) {
		t.Fatal("nothing emitted")
	}
	h.read++
	return out[h.read-1]
}

// drain forgets what was emitted so far.
func (h *handleWorker) drain() { h.read = len(h.kio.Produced()) }

func reasonHeader(m kafkaio.Record) string {
	for _, hd := range m.Headers {
		if hd.Key == wire.HeaderReason {
			return string(hd.Value)
		}
	}
	return ""
}

func TestTsSkew(t *testing.T) {
	t.Parallel()
	kms := handleBase.UnixMilli()
	for _, tc := range []struct {
		name string
		skew time.Duration
		ts   int64
		dead bool
	}{
		{"milliseconds", 0, kms + 1000, false},
		{"microseconds", 0, kms * 1000, true},
		{"seconds", 0, kms / 1000, true},
		{"within a custom bound", time.Minute, kms - 59_000, false},
		{"beyond a custom bound", time.Minute, kms - 61_000, true},
		{"check off", -1, kms * 1000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandleWorker(t, "ptest-lms", func(c *Config) { c.MaxTsSkew = tc.skew }, nil)
			h.feed(t, "k", fmt.Sprintf(`{"id":"1","x":[1,2],"ts":%d}`, tc.ts))
			m := h.next(t)
			if got := reasonHeader(m) == "bad_timestamp"; got != tc.dead {
				t.Fatalf("dead-lettered %v, want %v (topic %s)", got, tc.dead, m.Topic)
			}
			if tc.dead && h.watermark != math.MinInt64 {
				t.Errorf("watermark moved to %d by a rejected ts", h.watermark)
			}
			if n := h.p.c.dead[wire.ReasonBadTimestamp].Load(); (n == 1) != tc.dead {
				t.Errorf("bad_timestamp count %d", n)
			}
		})
	}
}

func TestWrongPartition(t *testing.T) {
	t.Parallel()
	// Keys of partition 0 and of other partitions under murmur2 over 3 partitions.
	var own, other string
	parts := []int{0, 1, 2}
	for i := 0; own == "" || other == ""; i++ {
		k := fmt.Sprintf("key-%d", i)
		if partitionOf(&kafkaio.Record{Key: []byte(k)}, parts) == 0 {
			own = k
		} else {
			other = k
		}
	}
	for _, policy := range []string{"count", "dead_letter"} {
		t.Run(policy, func(t *testing.T) {
			h := newHandleWorker(t, "ptest-lms", func(c *Config) { c.WrongPartition = policy }, nil)
			h.partIDs = parts
			h.feed(t, own, `{"id":"1","x":[1,2]}`)
			if m := h.next(t); m.Topic != "out" {
				t.Fatalf("own key went to %s", m.Topic)
			}
			h.feed(t, other, `{"id":"2","x":[1,2]}`)
			m := h.next(t)
			if n := h.p.c.wrongPart.Load(); n != 1 {
				t.Errorf("wrong-partition count %d, want 1", n)
			}
			wantTopic := map[string]string{"count": "out", "dead_letter": "dlq"}[policy]
			if m.Topic != wantTopic {
				t.Errorf("wrong-partition record went to %s, want %s", m.Topic, wantTopic)
			}
		})
	}
}

func BenchmarkCheckPartition(b *testing.B) {
	p, err := New(Config{Brokers: []string{"x:1"}, Group: "g", InputTopic: "in", OutputTopic: "out", DLQTopic: "dlq",
		CheckpointDir: "unused", Model: models.Spec{Algorithm: "ptest-lms", Dim: 2, Seed: 1}})
	if err != nil {
		b.Fatal(err)
	}
	w := newWorker(p, nil, nil, 0)
	w.partIDs = []int{0, 1, 2, 3, 4, 5, 6, 7}
	msg := &kafkaio.Record{Key: []byte("user-12345")}
	w.logGate["wrong_partition"] = time.Now().Add(time.Hour)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = w.checkPartition(msg)
	}
}

func TestLearnerPanicContained(t *testing.T) {
	t.Parallel()
	// Unscaled, so that the learner sees the raw y = 999 that makes it panic.
	h := newHandleWorker(t, "ptest-panic", func(c *Config) { c.Model.Scale = models.ScaleSpec{X: "none", Y: "none"} }, nil)
	h.feed(t, "a", `{"id":"1","x":[1,2],"y":1}`)
	h.feed(t, "b", `{"id":"2","x":[1,2],"y":1}`)
	h.next(t)
	h.next(t)
	// Checkpoint a's state so far: the panic must restore exactly it.
	ops, _, err := h.cache.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.Commit(0, &checkpoint.Checkpoint{Meta: h.encodeMeta(), Learners: ops}); err != nil {
		t.Fatal(err)
	}
	h.cache.committed(0)
	want := unwrap(h.cache.live["a"].l).(*ptestPanic).w[0]
	h.feed(t, "a", `{"id":"3","x":[1,2],"y":999}`)
	if m := h.next(t); m.Topic != "out" {
		t.Fatalf("prediction of the panicking record went to %s", m.Topic)
	}
	if m := h.next(t); reasonHeader(m) != "learner_panic" {
		t.Fatalf("panicking record: reason %q, want learner_panic", reasonHeader(m))
	}
	if n := h.p.c.panics.Load(); n != 1 {
		t.Errorf("panics %d, want 1", n)
	}
	h.feed(t, "a", `{"id":"4","x":[1,2]}`) // a is read back
	h.next(t)
	// a's weights are the checkpointed ones, not the half update's.
	if got := unwrap(h.cache.live["a"].l).(*ptestPanic).w[0]; got != want {
		t.Errorf("a's w[0] = %v after the panic, want the checkpointed %v", got, want)
	}
	h.feed(t, "b", `{"id":"5","x":[1,2],"y":2}`)
	if m := h.next(t); m.Topic != "out" {
		t.Fatalf("other key after the panic: %s", m.Topic)
	}
}

func TestCorruptStateQuarantined(t *testing.T) {
	t.Parallel()
	h := newHandleWorker(t, "ptest-lms", nil, func(s *checkpoint.Store) {
		pk := pendingKey(nil, []byte("p"), []byte("9"))
		err := s.Commit(0, &checkpoint.Checkpoint{
			Learners: []checkpoint.Op{{Key: []byte("bad"), Value: []byte{3, 0xde, 0xad, 0xbe, 0xef}}},
			Pending:  []checkpoint.Op{{Key: pk, Value: []byte{0xff, 0xff}}}})
		if err != nil {
			t.Fatal(err)
		}
	})
	if n := h.p.c.quarantined[quarantinePending].Load(); n != 1 {
		t.Errorf("quarantined pending %d, want 1", n)
	}
	for i := 0; i < 3; i++ {
		h.feed(t, "bad", fmt.Sprintf(`{"id":"b%d","x":[1,2],"y":1}`, i))
		if m := h.next(t); reasonHeader(m) != "corrupt_state" {
			t.Fatalf("record of the corrupt key: topic %s reason %q", m.Topic, reasonHeader(m))
		}
		h.feed(t, "good", fmt.Sprintf(`{"id":"g%d","x":[1,2],"y":1}`, i))
		if m := h.next(t); m.Topic != "out" {
			t.Fatalf("record of a sound key: topic %s", m.Topic)
		}
	}
	if n := h.p.c.quarantined[quarantineLearner].Load(); n != 1 {
		t.Errorf("quarantined learners %d, want 1", n)
	}
	if n := h.p.c.dead[wire.ReasonCorruptState].Load(); n != 3 {
		t.Errorf("corrupt_state dead letters %d, want 3", n)
	}
}

// unwrap is the learner inside models' online-scaling wrapper, if any.
func unwrap(l models.Learner) models.Learner {
	if s, ok := l.(interface{ Inner() models.Learner }); ok {
		return s.Inner()
	}
	return l
}
