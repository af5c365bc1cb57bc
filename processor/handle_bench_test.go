package processor

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/internal/kafkaio/kafkaiotest"
	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// BenchmarkHandle measures the worker's per-record cost without Kafka:
// partitioner check, decode, learner lookup, predict, output encoding, update (labels inline,
// 100 keys, the test learner, so the figure is the pipeline's overhead),
// without and with idle-key expiry.
func BenchmarkHandle(b *testing.B) {
	for _, ttl := range []time.Duration{0, time.Hour} {
		b.Run(fmt.Sprintf("key_ttl=%v", ttl), func(b *testing.B) {
			benchmarkHandle(b, models.Spec{Algorithm: "ptest-lms", Dim: 8, Seed: 1}, ttl, 100, testValue)
		})
	}
	// make bench-e2e's model and records (17-digit features, 64 keys): the
	// worker's share of that benchmark's CPU per record.
	e2e := models.Spec{Algorithm: "aogd-ald", Dim: 5, Kernel: models.KernelSpec{Type: "gaussian", Sigma: 1},
		Params: map[string]any{"max_budget": 16.0}, Seed: 1}
	b.Run("model=bench-e2e", func(b *testing.B) { benchmarkHandle(b, e2e, 0, 64, e2eValue) })
}

func testValue(i int) []byte {
	x := []float64{0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, float64(i%10) / 10}
	return wire.AppendLabeled(nil, strconv.Itoa(i), x, float64(i%3))
}

// e2eValue is a record as benche2e's feed writes it: shortest-text floats.
func e2eValue(i int) []byte {
	r := models.NewRand(uint64(i))
	x := make([]float64, 5)
	y := 0.0
	for k := range x {
		x[k] = r.Float64()*2 - 1
		y += x[k]
	}
	return wire.AppendLabeled(nil, strconv.Itoa(i), x, y)
}

func benchmarkHandle(b *testing.B, spec models.Spec, keyTTL time.Duration, keys int, value func(int) []byte) {
	store, err := checkpoint.Open(checkpoint.Options{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	p, err := New(Config{Brokers: []string{"x:1"}, Group: "g", InputTopic: "in", OutputTopic: "out", DLQTopic: "dlq",
		CheckpointDir: "unused", Model: spec, KeyTTL: keyTTL})
	if err != nil {
		b.Fatal(err)
	}
	w := newWorker(p, store, kafkaiotest.Discard{}, 0)
	w.partIDs = []int{0} // one partition: the partitioner check runs and passes
	if err := w.restore(-1, -1); err != nil {
		b.Fatal(err)
	}
	w.em = newEmitter(w.kio, w.log, p.m)
	w.hard = context.Background()
	msgs := make([]kafkaio.Record, 1000)
	start := time.Now()
	for i := range msgs {
		// The event time advances (1 ms a record): the watermark moves.
		msgs[i] = kafkaio.Record{Topic: "in", Key: []byte(fmt.Sprintf("user-%d", i%keys)), Offset: int64(i), Time: start.Add(time.Duration(i) * time.Millisecond),
			Value: value(i)}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m := &msgs[i%len(msgs)]
		if i%len(msgs) == 0 && i > 0 {
			for j := range msgs { // keep the event time moving
				msgs[j].Time = msgs[j].Time.Add(time.Second)
			}
		}
		if err := w.handle(ctx, m, false); err != nil {
			b.Fatal(err)
		}
	}
}
