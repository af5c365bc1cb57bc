package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// TestLatencyProbe (opt-in: KS_LATENCY=1, or KS_LATENCY=aogd for aogd-ald)
// measures input-to-prediction latency at 5000 records/s for 8 s, 64 keys,
// 3 partitions, once the processor is Ready: latency = the output record's
// Kafka timestamp (set when the emitter hands it to the writer) minus the
// time the input was handed to the producer, and the time the output was
// received minus the same. It fails when p99 exceeds 50 ms.
func TestLatencyProbe(t *testing.T) {
	mode := os.Getenv("KS_LATENCY")
	if mode == "" {
		t.Skip("set KS_LATENCY=1 (or aogd) to run the latency probe")
	}
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	spec := models.Spec{Algorithm: "ptest-lms", Dim: 5, Seed: 1}
	if mode == "aogd" {
		spec = models.Spec{Algorithm: "aogd-ald", Dim: 5, Kernel: models.KernelSpec{Type: "gaussian", Sigma: 1}, Params: map[string]any{"max_budget": 16}, Seed: 1}
	}
	cfg := testConfig(t, addr, t.TempDir(), spec, nil)
	cfg.CheckpointInterval, cfg.CheckpointMaxRecords, cfg.MaxLearners = DefaultCheckpointInterval, DefaultCheckpointMaxRecords, DefaultMaxLearners
	t0 := time.Now()
	r := start(t, cfg)
	defer r.stop(t)
	for !r.p.Ready() {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("ready %v after Run", time.Since(t0).Round(time.Millisecond))
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: tIn, Balancer: &kafka.Murmur2Balancer{}, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(tOut))
	if err != nil {
		t.Fatal(err)
	}
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
				var o wire.Output
				_ = json.Unmarshal(rec.Value, &o)
				n, _ := strconv.Atoi(o.ID.String())
				mu.Lock()
				s := sent[n]
				mu.Unlock()
				stamp = append(stamp, float64(rec.Timestamp.Sub(s).Microseconds())/1000)
				recv = append(recv, float64(now.Sub(s).Microseconds())/1000)
			})
		}
	}()
	begin, n := time.Now(), 0
	for time.Since(begin) < 8*time.Second {
		msgs := make([]kafka.Message, 5)
		now := time.Now()
		mu.Lock()
		for i := range msgs {
			msgs[i] = kafka.Message{Key: []byte(fmt.Sprintf("k%d", n%64)), Time: now,
				Value: wire.AppendLabeled(nil, strconv.Itoa(n), []float64{0.1, 0.2, 0.3, 0.4, float64(n%10) / 10}, 1)}
			sent[n] = now
			n++
		}
		mu.Unlock()
		go w.WriteMessages(context.Background(), msgs...) //nolint:errcheck // counted below
		time.Sleep(time.Millisecond)
	}
	<-done
	q := func(v []float64, p float64) float64 {
		if len(v) == 0 {
			return 0
		}
		sort.Float64s(v)
		return v[int(p*float64(len(v)-1))]
	}
	t.Logf("%s: sent %d, received %d; output timestamp - input: p50 %.1f p99 %.1f max %.1f ms; received - input: p50 %.1f p99 %.1f max %.1f ms",
		spec.Algorithm, n, len(stamp), q(stamp, .5), q(stamp, .99), q(stamp, 1), q(recv, .5), q(recv, .99), q(recv, 1))
	if len(stamp) < n*99/100 || q(stamp, .99) > 50 {
		t.Errorf("p99 %.1f ms (target < 50), %d of %d received", q(stamp, .99), len(stamp), n)
	}
}
