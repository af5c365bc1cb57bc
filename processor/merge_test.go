package processor

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/internal/kafkaio/kafkaiotest"
	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// TestMergeTailDeterministic: the input and labels topics are appended in
// timestamp order (as with LogAppendTime), labels sometimes before their
// features, and each topic is fetched with its own random delays. Whatever
// the timing, the merged order is the timestamp order a replay of the two
// complete logs gives, and so is the learners' state.
func TestMergeTailDeterministic(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := models.NewRand(seed)
			base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var logs [2][]kafkaio.Record // 0 input, 1 labels
			var global []kafkaio.Record
			add := func(lab int, key, value string) {
				topic := "in"
				if lab == 1 {
					topic = "labels"
				}
				m := kafkaio.Record{Topic: topic, Key: []byte(key), Value: []byte(value), Offset: int64(len(logs[lab])),
					Time: base.Add(time.Duration(len(global)) * time.Millisecond)}
				logs[lab] = append(logs[lab], m)
				global = append(global, m)
			}
			for i := 0; i < 150; i++ {
				key := fmt.Sprintf("k%d", i%3)
				id := strconv.Itoa(i)
				x := string(wire.AppendFeatures(nil, id, []float64{rng.Float64(), rng.Float64()}))
				y := string(wire.AppendLabel(nil, id, rng.Float64()))
				if rng.Float64() < 0.3 { // the label is produced first: a replay drops it as unknown
					add(1, key, y)
					add(0, key, x)
				} else {
					add(0, key, x)
					add(1, key, y)
				}
			}
			var appended [2]atomic.Int64
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			feeds := [2]*kafkaiotest.Reader{kafkaiotest.NewFeed(), kafkaiotest.NewFeed()}
			// Fetchers: each side delivers its records some time after
			// they are appended, with its own delays (bursty labels), in
			// chunks of up to 5 of the records appended by then.
			for s := 0; s < 2; s++ {
				frng := models.NewRand(seed*10 + uint64(s))
				go func() {
					for j := 0; j < len(logs[s]); {
						for appended[s].Load() <= int64(j) {
							time.Sleep(50 * time.Microsecond)
						}
						if d := frng.Float64(); d < 0.2 {
							time.Sleep(time.Duration(d*15) * time.Millisecond)
						}
						n := min(1+int(frng.Float64()*5), int(appended[s].Load())-j)
						if ctx.Err() != nil {
							return
						}
						feeds[s].Push(kafkaio.Chunk{Records: logs[s][j : j+n], Next: -1})
						j += n
					}
				}()
			}
			go func() { // the producers append in timestamp order
				arng := models.NewRand(seed * 100)
				for _, m := range global {
					s := 0
					if m.Topic == "labels" {
						s = 1
					}
					appended[s].Add(1)
					if arng.Float64() < 0.1 {
						time.Sleep(time.Duration(arng.Float64()*3) * time.Millisecond)
					}
				}
			}()
			lab := newSide(feeds[1], 0, true)
			m := &merger{in: newSide(feeds[0], 0, false), lab: &lab, wait: 5 * time.Second,
				hwm: func(_ context.Context, lab bool) (int64, error) {
					if lab {
						return appended[1].Load(), nil
					}
					return appended[0].Load(), nil
				}}
			tick := make(chan time.Time)
			live := newHandleWorker(t, "ptest-lms", nil, nil)
			ref := newHandleWorker(t, "ptest-lms", nil, nil)
			for i, want := range global {
				got, lab, ok, err := m.next(ctx, tick)
				if err != nil || !ok {
					t.Fatalf("next: %v %v", ok, err)
				}
				if got.Topic != want.Topic || got.Offset != want.Offset {
					t.Fatalf("record %d: merged %s/%d, the logs' order has %s/%d", i, got.Topic, got.Offset, want.Topic, want.Offset)
				}
				feedMsg(t, live, got, lab)
				feedMsg(t, ref, &want, want.Topic == "labels")
			}
			for k, s := range ref.cache.live {
				a, _ := s.l.MarshalBinary()
				b, _ := live.cache.live[k].l.MarshalBinary()
				if string(a) != string(b) {
					t.Errorf("key %s: state differs from the replay", k)
				}
			}
		})
	}
}

func feedMsg(t *testing.T, h *handleWorker, m *kafkaio.Record, lab bool) {
	t.Helper()
	if err := h.handle(context.Background(), m, lab); err != nil {
		t.Fatal(err)
	}
	h.drain()
}

// TestMergeBoundedWait: when the other topic's high-water mark cannot be
// had (or its records below the mark never come), a record is merged after
// MergeWait, not never.
func TestMergeBoundedWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		hwm  func(context.Context, bool) (int64, error)
	}{
		{"brokers do not answer", func(context.Context, bool) (int64, error) { return 0, context.DeadlineExceeded }},
		{"records below the mark never come", func(context.Context, bool) (int64, error) { return 5, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := kafkaiotest.NewFeed()
			lab := newSide(kafkaiotest.NewFeed(), 0, true)
			m := &merger{in: newSide(in, 0, false), lab: &lab, wait: 100 * time.Millisecond, hwm: tc.hwm}
			in.Push(kafkaio.Chunk{Records: []kafkaio.Record{{Topic: "in", Offset: 0, Time: time.Now()}}, Next: -1})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			for {
				msg, _, ok, err := m.next(ctx, time.After(time.Second))
				if err != nil {
					t.Fatalf("no record within 5 s: %v", err)
				}
				if ok {
					if msg.Topic != "in" || time.Since(start) < 100*time.Millisecond {
						t.Fatalf("got %s after %v", msg.Topic, time.Since(start))
					}
					return
				}
			}
		})
	}
}

// TestMergeDropsOldGenerations: after a side's reset (the fetcher moved by
// SetOffset), what it held and the chunks fetched before the move are
// dropped; the new generation's records come next, without and with a
// labels topic.
func TestMergeDropsOldGenerations(t *testing.T) {
	t.Parallel()
	run := func(topic string, from, n int64, gen uint64) kafkaio.Chunk {
		c := kafkaio.Chunk{Gen: gen, Next: -1}
		for o := from; o < from+n; o++ {
			c.Records = append(c.Records, kafkaio.Record{Topic: topic, Offset: o, Time: time.Unix(o, 0)})
		}
		return c
	}
	for _, labels := range []bool{false, true} {
		t.Run(fmt.Sprintf("labels=%v", labels), func(t *testing.T) {
			t.Parallel()
			in, lab := kafkaiotest.NewFeed(), kafkaiotest.NewFeed()
			m := &merger{in: newSide(in, 0, false)}
			s, feed, topic := &m.in, in, "in"
			if labels {
				ls := newSide(lab, 0, true)
				m.lab = &ls
				m.hwm, m.wait = func(context.Context, bool) (int64, error) { return 0, nil }, time.Second
				s, feed, topic = m.lab, lab, "labels"
			}
			feed.Push(run(topic, 0, 5, 0))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			next := func() *kafkaio.Record {
				t.Helper()
				msg, _, ok, err := m.next(ctx, nil)
				if err != nil || !ok {
					t.Fatalf("next: %v %v", ok, err)
				}
				return msg
			}
			for o := int64(0); o < 2; o++ {
				if got := next(); got.Offset != o {
					t.Fatalf("offset %d, want %d", got.Offset, o)
				}
			}
			s.reset(1)
			feed.Push(run(topic, 5, 5, 0))   // fetched before the move
			feed.Push(run(topic, 100, 3, 1)) // after it
			for o := int64(100); o < 103; o++ {
				if got := next(); got.Offset != o || got.Topic != topic {
					t.Fatalf("%s/%d, want %s/%d", got.Topic, got.Offset, topic, o)
				}
			}
		})
	}
}

// TestMergeResetForgetsTheOldLogEnd: a reset side knows nothing of the old
// log's end: neither a mark assumed reached nor an answer asked before the
// reset settles a record of the other side.
func TestMergeResetForgetsTheOldLogEnd(t *testing.T) {
	t.Parallel()
	m := &merger{in: newSide(kafkaiotest.NewFeed(), 0, false)}
	lab := newSide(kafkaiotest.NewFeed(), 0, true)
	m.lab = &lab
	m.lab.hwm, m.lab.hwmClock, m.lab.assumed, m.lab.next = 1000, 1, 1000, 1000
	epoch := m.lab.epoch
	m.lab.reset(1)
	m.lab.next = 0
	m.answer(hwmAnswer{lab: true, epoch: epoch, clock: 9, hwm: 0}) // asked before the reset
	if m.lab.hwmClock != 0 {
		t.Fatal("an answer about the old log was taken")
	}
	m.answer(hwmAnswer{lab: true, epoch: m.lab.epoch, clock: 5, hwm: 50})
	if m.settled(context.Background(), m.lab, 3) {
		t.Fatal("labels read to 0 of a new log whose end is 50 count as read up to it")
	}
}

// TestMergeReady: ready is true only while next has a record at hand (the
// worker publishes its tally when it is false, before it may wait).
func TestMergeReady(t *testing.T) {
	t.Parallel()
	records := func(topic string, from, n int64) kafkaio.Chunk {
		c := kafkaio.Chunk{Next: -1}
		for o := from; o < from+n; o++ {
			c.Records = append(c.Records, kafkaio.Record{Topic: topic, Offset: o, Time: time.Unix(2*o, 0)})
		}
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	next := func(m *merger) *kafkaio.Record {
		t.Helper()
		msg, _, ok, err := m.next(ctx, nil)
		if err != nil || !ok {
			t.Fatalf("next: %v %v", ok, err)
		}
		return msg
	}
	check := func(m *merger, want bool, when string) {
		t.Helper()
		if got := m.ready(); got != want {
			t.Fatalf("%s: ready %v, want %v", when, got, want)
		}
	}

	in := kafkaiotest.NewFeed()
	m := &merger{in: newSide(in, 0, false)}
	check(m, false, "nothing fetched")
	in.Push(records("in", 0, 2))
	check(m, true, "a chunk queued")
	next(m)
	check(m, true, "one record of the chunk left")
	next(m)
	check(m, false, "the chunk taken")

	in, labFeed := kafkaiotest.NewFeed(), kafkaiotest.NewFeed()
	lab := newSide(labFeed, 0, true)
	m = &merger{in: newSide(in, 0, false), lab: &lab, wait: time.Second,
		hwm: func(context.Context, bool) (int64, error) { return 0, nil }}
	in.Push(records("in", 0, 2))          // times 0 and 2
	labFeed.Push(records("labels", 0, 1)) // time 0: merged after in/0 (a tie goes to the input)
	check(m, false, "nothing merged yet")
	next(m)
	check(m, true, "a record on each side")
	next(m)
	check(m, false, "the labels side empty")
}
