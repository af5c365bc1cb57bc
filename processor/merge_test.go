package processor

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

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
			var logs [2][]kafka.Message // 0 input, 1 labels
			var global []kafka.Message
			add := func(lab int, key, value string) {
				topic := "in"
				if lab == 1 {
					topic = "labels"
				}
				m := kafka.Message{Topic: topic, Key: []byte(key), Value: []byte(value), Offset: int64(len(logs[lab])),
					Time: base.Add(time.Duration(len(global)) * time.Millisecond)}
				logs[lab] = append(logs[lab], m)
				global = append(global, m)
			}
			for i := 0; i < 150; i++ {
				key := fmt.Sprintf("k%d", i%3)
				x := fmt.Sprintf(`{"id":"%d","x":[%.3f,%.3f]}`, i, rng.Float64(), rng.Float64())
				y := fmt.Sprintf(`{"id":"%d","y":%.3f}`, i, rng.Float64())
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
			chans := [2]chan chunk{make(chan chunk, 4), make(chan chunk, 4)}
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
						select {
						case chans[s] <- chunk{msgs: logs[s][j : j+n]}:
							j += n
						case <-ctx.Done():
							return
						}
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
			m := &merger{in: side{ch: chans[0]}, lab: &side{ch: chans[1], lab: true}, wait: 5 * time.Second,
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
				feedMsg(t, live, &got, lab)
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

func feedMsg(t *testing.T, h *handleWorker, m *kafka.Message, lab bool) {
	t.Helper()
	if err := h.handle(context.Background(), m, lab); err != nil {
		t.Fatal(err)
	}
	for len(h.out) > 0 {
		<-h.out
	}
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
			in, lab := make(chan chunk, 1), make(chan chunk)
			m := &merger{in: side{ch: in}, lab: &side{ch: lab, lab: true}, wait: 100 * time.Millisecond, hwm: tc.hwm}
			in <- chunk{msgs: []kafka.Message{{Topic: "in", Offset: 0, Time: time.Now()}}}
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
