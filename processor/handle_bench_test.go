package processor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/models"
)

// BenchmarkHandle measures the worker's per-record cost without Kafka:
// partitioner check, decode, learner lookup, predict, output encoding, update (labels inline,
// 100 keys, the test learner, so the figure is the pipeline's overhead),
// without and with idle-key expiry.
func BenchmarkHandle(b *testing.B) {
	for _, ttl := range []time.Duration{0, time.Hour} {
		b.Run(fmt.Sprintf("key_ttl=%v", ttl), func(b *testing.B) { benchmarkHandle(b, ttl) })
	}
}

func benchmarkHandle(b *testing.B, keyTTL time.Duration) {
	store, err := checkpoint.Open(checkpoint.Options{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	p, err := New(Config{Brokers: []string{"x:1"}, Group: "g", InputTopic: "in", OutputTopic: "out", DLQTopic: "dlq",
		CheckpointDir: "unused", Model: models.Spec{Algorithm: "ptest-lms", Dim: 8, Seed: 1}, KeyTTL: keyTTL})
	if err != nil {
		b.Fatal(err)
	}
	w := newWorker(p, store, nil, 0)
	w.partIDs = []int{0} // one partition: the partitioner check runs and passes
	if err := w.restore(-1, -1); err != nil {
		b.Fatal(err)
	}
	w.em = newEmitter(nil, w.log, p.m, time.Second, 0)
	w.hard = context.Background()
	go func() {
		for range w.em.ch {
		}
	}()
	msgs := make([]kafka.Message, 1000)
	start := time.Now()
	for i := range msgs {
		// The event time advances (1 ms a record): the watermark moves.
		msgs[i] = kafka.Message{Topic: "in", Key: []byte(fmt.Sprintf("user-%d", i%100)), Offset: int64(i), Time: start.Add(time.Duration(i) * time.Millisecond),
			Value: []byte(fmt.Sprintf(`{"id":"%d","x":[0.1,-0.2,0.3,0.4,0.5,-0.6,0.7,0.%d],"y":%d}`, i, i%10, i%3))}
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
