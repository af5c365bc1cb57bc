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

// decisionBench is make bench-decisions' workload without Kafka: bkb at
// dimension 16 with its defaults per user, decisions among 100 candidates
// (features with 4 decimals, as the benchmark's records carry them), each
// user's reward before its next decision.
type decisionBench struct {
	w     *worker
	store *checkpoint.Store
	users int
	items [][]byte // encoded arms
	t     []int    // decisions per user so far
	r     *models.Rand
	buf   []byte
	arms  [][]byte
	msg   kafkaio.Record
	start time.Time
	n     int64
}

func newDecisionBench(tb testing.TB, users int) *decisionBench {
	store, err := checkpoint.Open(checkpoint.Options{InMemory: true})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := New(Config{Brokers: []string{"x:1"}, Group: "g", InputTopic: "in", OutputTopic: "out", DLQTopic: "dlq",
		CheckpointDir: "unused", Model: models.Spec{Algorithm: "bkb", Dim: 16}})
	if err != nil {
		tb.Fatal(err)
	}
	w := newWorker(p, store, kafkaiotest.Discard{}, 0)
	w.partIDs = []int{0}
	if err := w.restore(-1, -1); err != nil {
		tb.Fatal(err)
	}
	w.em = newEmitter(w.kio, w.log, p.m)
	w.hard = context.Background()
	d := &decisionBench{w: w, store: store, users: users, t: make([]int, users), r: models.NewRand(7), start: time.Now()}
	for i := 0; i < 500; i++ {
		x := make([]float64, 16)
		for j := range x {
			x[j] = math.Round((2*d.r.Float64()-1)*1e4) / 1e4
		}
		d.items = append(d.items, wire.AppendArm(nil, fmt.Sprintf("item-%03d", i), x))
	}
	return d
}

func (d *decisionBench) handle(tb testing.TB, key, value []byte) {
	d.n++
	d.msg = kafkaio.Record{Topic: "in", Key: key, Value: value, Offset: d.n, Time: d.start.Add(time.Duration(d.n) * time.Millisecond)}
	if err := d.w.handle(context.Background(), &d.msg, false); err != nil {
		tb.Fatal(err)
	}
}

// step makes user u's next decision and, for the one before, its reward
// (rewarded just before the next decision, as in the benchmark).
func (d *decisionBench) step(tb testing.TB, u int) {
	key := []byte(fmt.Sprintf("user-%05d", u))
	if t := d.t[u]; t > 0 {
		id := fmt.Sprintf(`"user-%05d-%d"`, u, t-1)
		e := d.w.pend.m[string(pendingKey(nil, key, []byte(id)))]
		if e == nil {
			tb.Fatalf("decision %s not pending", id)
		}
		arm := e.arms[0].id // the token, quotes included
		d.buf = wire.AppendReward(d.buf[:0], id[1:len(id)-1], float64(d.r.Uint64()&1), string(arm[1:len(arm)-1]))
		d.handle(tb, key, d.buf)
	}
	// 100 distinct candidates: a random stride through the catalogue.
	d.arms = d.arms[:0]
	at, stride := int(d.r.Uint64()%500), 1+2*int(d.r.Uint64()%2)
	for k := 0; k < 100; k++ {
		d.arms = append(d.arms, d.items[(at+k*stride)%500])
	}
	d.buf = wire.AppendDecision(d.buf[:0], fmt.Sprintf("user-%05d-%d", u, d.t[u]), d.arms)
	d.handle(tb, key, d.buf)
	d.t[u]++
}

// BenchmarkDecide: one decision and the reward of the user's previous one
// through the worker (decode, bkb Choose and Observe, pending map, output
// encoding), users with about 6 decisions each.
func BenchmarkDecide(b *testing.B) {
	d := newDecisionBench(b, 2000)
	for i := 0; i < 5*d.users; i++ {
		d.step(b, i%d.users)
	}
	if dead := d.w.p.c.snapshot().DeadLetters; dead[wire.ReasonUnknownArm.String()] > 0 {
		b.Fatalf("dead letters: %v", dead)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d.step(b, i%d.users)
	}
}

// BenchmarkDecisionSnapshot: one checkpoint's snapshot on the worker after
// 2,500 users of the decision workload (about 6 decisions each) changed:
// what a partition of make bench-decisions encodes every 5 s.
func BenchmarkDecisionSnapshot(b *testing.B) {
	d := newDecisionBench(b, 2500)
	d.w.cfg.Changelog.Topic = "cl"
	for i := 0; i < 6*d.users; i++ {
		d.step(b, i%d.users)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for _, s := range d.w.cache.live {
			s.dirty = true
		}
		d.w.sinceCkpt = 1
		b.StartTimer()
		snap, err := d.w.takeSnapshot()
		if err != nil || snap == nil {
			b.Fatal(err)
		}
		b.StopTimer()
		d.w.cache.committed(snap.fresh)
		b.StartTimer()
	}
}
