package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestZZLatency(t *testing.T) {
	if os.Getenv("KS_LAT") == "" {
		t.Skip()
	}
	c := startCluster(t, 0, "")
	defer c.Close()
	addr := c.ListenAddrs()[0]
	spec := lmsSpec
	spec.Dim = 5
	cfg := testConfig(t, addr, t.TempDir(), spec, nil)
	cfg.CheckpointInterval = 5 * time.Second
	cfg.CheckpointMaxRecords = 10000
	cfg.MaxLearners = 100000
	r := start(t, cfg)
	defer r.stop(t)
	for !r.p.Ready() {
		time.Sleep(10 * time.Millisecond)
	}
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: tIn, Balancer: &kafka.Murmur2Balancer{}, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	cl, _ := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(tOut))
	defer cl.Close()
	var mu sync.Mutex
	sent := map[int]time.Time{}
	var stamp, recv []float64
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.Now().Add(11 * time.Second)
		for time.Now().Before(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			now := time.Now()
			fs.EachRecord(func(rec *kgo.Record) {
				var o struct {
					ID string `json:"id"`
				}
				json.Unmarshal(rec.Value, &o)
				var n int
				fmt.Sscanf(o.ID, "%d", &n)
				mu.Lock()
				s := sent[n]
				mu.Unlock()
				stamp = append(stamp, float64(rec.Timestamp.Sub(s).Microseconds())/1000)
				recv = append(recv, float64(now.Sub(s).Microseconds())/1000)
			})
		}
	}()
	start := time.Now()
	n := 0
	for time.Since(start) < 8*time.Second {
		msgs := make([]kafka.Message, 5)
		now := time.Now()
		mu.Lock()
		for i := range msgs {
			msgs[i] = kafka.Message{Key: []byte(fmt.Sprintf("k%d", n%64)), Value: []byte(fmt.Sprintf(`{"id":"%d","x":[0.1,0.2,0.3,0.4,0.5],"y":1}`, n)), Time: now}
			sent[n] = now
			n++
		}
		mu.Unlock()
		go w.WriteMessages(context.Background(), msgs...)
		time.Sleep(time.Millisecond)
	}
	<-done
	q := func(v []float64, p float64) float64 {
		sort.Float64s(v)
		if len(v) == 0 {
			return 0
		}
		return v[int(p*float64(len(v)-1))]
	}
	t.Logf("sent %d got %d; output-stamp latency p50 %.1f p99 %.1f max %.1f ms; receive latency p50 %.1f p99 %.1f max %.1f", n, len(stamp),
		q(stamp, .5), q(stamp, .99), q(stamp, 1), q(recv, .5), q(recv, .99), q(recv, 1))
}
