package processor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/changelog"
	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/models"
)

// BenchmarkChangelogRestore measures a partition restore from the changelog
// (read the partition to its end, write the pending entries into Badger and
// hand the learners to the cache; warm.go) for K keys,
// each with an aogd-ald learner of dimension 5 that saw 50 records (about
// 1.5 KB) and one pending entry. One op = one restore of one partition;
// ns/op is its duration. Run: go test ./processor -run '^$' -bench ChangelogRestore -benchtime 1x
func BenchmarkChangelogRestore(b *testing.B) {
	for _, keys := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			// On disk: in memory the broker holds its log in growing buffers,
			// several copies of 1.5 GB for a million keys.
			br, err := broker.Start(broker.Options{DataDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			ctx := context.Background()
			const topic = "bench-changelog"
			if err := br.CreateTopics(ctx, 1, topic); err != nil {
				b.Fatal(err)
			}
			spec := models.Spec{Algorithm: "aogd-ald", Dim: 5, Kernel: models.KernelSpec{Type: "gaussian", Sigma: 1}, Seed: 1}
			l, x := trainedLearner(b, spec, 50)
			blob, _ := l.MarshalBinary()
			pend := encodePending(&pendingEntry{offset: 1, ts: 1, arms: []pendingArm{{x: x, p: models.Prediction{Value: 0.5, Choice: -1, Prob: 1}}}})
			w := &kafka.Writer{Addr: kafka.TCP(br.Addrs()...), Topic: topic, RequiredAcks: kafka.RequireAll, BatchSize: 5000, BatchBytes: 900 << 10, BatchTimeout: time.Millisecond}
			batch := make([]kafka.Message, 0, 5000)
			var bytes int64
			for k := 0; k < keys; k++ {
				key := fmt.Sprintf("user-%d", k)
				v := changelog.EncodeBundle(nil, &changelog.Bundle{Seq: 1, NextIn: int64(keys), Learner: blob,
					Pending: []changelog.Entry{{Key: pendingKey(nil, []byte(key), []byte(`"1"`)), Value: pend}}})
				bytes += int64(len(v))
				batch = append(batch, kafka.Message{Key: changelog.BundleKey([]byte(key)), Value: v})
				if len(batch) == cap(batch) || k == keys-1 {
					if err := w.WriteMessages(ctx, batch...); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			p, err := New(Config{Brokers: br.Addrs(), Group: "g", InputTopic: "in", OutputTopic: "out", DLQTopic: "dlq",
				CheckpointDir: "unused", Model: spec, Changelog: ChangelogConfig{Topic: topic}, Logger: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			wk := &worker{p: p, part: 0, cfg: &p.cfg, log: zerolog.Nop()}
			wk.ckptSeq = 1
			meta := wk.encodeMeta()
			if err := w.WriteMessages(ctx, kafka.Message{Key: changelog.MarkerKey(), Value: changelog.EncodeMarker(nil, &changelog.Marker{Seq: 1, Meta: meta})}); err != nil {
				b.Fatal(err)
			}
			w.Close()
			b.ReportMetric(float64(bytes)/float64(keys), "bytes/key")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				store, err := checkpoint.Open(checkpoint.Options{Dir: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				wk.store = store
				b.StartTimer()
				start := time.Now()
				if err := wk.restoreChangelog(ctx); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(time.Since(start).Seconds(), "s/restore")
				b.StopTimer()
				if n := len(wk.warm); n != keys {
					b.Fatalf("%d learners restored, want %d", n, keys)
				}
				wk.warm = nil
				store.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkSnapshotChangelog measures the changelog records of one
// checkpoint of a stream whose every record changes another key: learners=N
// learner operations of 340 bytes (a small aogd-ald learner), no pending
// entries. Run: go test ./processor -run '^$' -bench SnapshotChangelog -benchmem
func BenchmarkSnapshotChangelog(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("learners=%d", n), func(b *testing.B) {
			w := &worker{cfg: &Config{Changelog: ChangelogConfig{Topic: "cl"}}, pend: newPendingMap(), part: 3}
			ops := make([]checkpoint.Op, n)
			for i := range ops {
				ops[i] = checkpoint.Op{Key: []byte(fmt.Sprintf("user-%08d", (i*7919)%n)), Value: make([]byte, 340)}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				snap := &snapshot{cp: checkpoint.Checkpoint{Meta: []byte("meta"), Learners: ops}}
				msgs, err := w.snapshotChangelog(snap)
				if err != nil || len(msgs) != n+1 {
					b.Fatal(len(msgs), err)
				}
			}
		})
	}
}
