package processor

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kernelstream/kernelstream/internal/broker"
)

// TestCompressionOfEachTopic: the outputs' batches take Compression and the
// changelog's Changelog.Compression (default none: learner states are
// binary floats, which lz4 hardly shrinks), except with exactly-once
// outputs, whose transactions carry both and take Compression. Read back
// with an independent client, batch codec by batch codec (the record's
// attributes carry its batch's).
func TestCompressionOfEachTopic(t *testing.T) {
	t.Parallel()
	// Kafka's codec numbers in a batch's attributes.
	const none, gzip, snappy, lz4, zstd = 0, 1, 2, 3, 4
	for _, tc := range []struct {
		name                   string
		delivery, out, cl      string // "" = the defaults
		wantOut, wantChangelog uint8
	}{
		{"defaults", "", "", "", lz4, none},
		{"changelog zstd", "", "", "zstd", lz4, zstd},
		{"outputs gzip", "", "gzip", "", gzip, none},
		{"exactly once shares the outputs' codec", "exactly_once", "snappy", "zstd", snappy, snappy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBroker(t, broker.Options{}, nil)
			addr := b.Addrs()[0]
			recs := stream(4, 6, 3, 31)
			produce(t, addr, recs)
			cfg := testConfig(t, addr, t.TempDir(), lmsSpec, nil)
			cfg.Changelog.Topic, cfg.OutputDelivery, cfg.Compression, cfg.Changelog.Compression = "cl", tc.delivery, tc.out, tc.cl
			r := start(t, cfg)
			out := newCommittedConsumer(t, addr, tOut)
			waitDone(t, r, out, replay(t, lmsSpec, recs, DefaultTopK))
			r.stop(t) // the final checkpoints are committed

			for topic, want := range map[string]uint8{tOut: tc.wantOut, "cl": tc.wantChangelog} {
				codecs := batchCodecs(t, addr, topic)
				if len(codecs) == 0 {
					t.Fatalf("%s: no record read", topic)
				}
				// kgo sends a batch that its codec would not shrink
				// uncompressed (a lone short record, say).
				for codec, n := range codecs {
					if codec != want && codec != none {
						t.Errorf("%s: %d records in batches of codec %d, want %d (or none)", topic, n, codec, want)
					}
				}
				if codecs[want] == 0 {
					t.Errorf("%s: no record in a batch of codec %d (by codec: %v)", topic, want, codecs)
				}
			}
		})
	}
}

// batchCodecs reads topic from the start (read_committed) until a poll
// brings nothing more, and counts its records by their batch's codec.
func batchCodecs(t *testing.T, addr, topic string) map[uint8]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	codecs := map[uint8]int{}
	for idle := 0; idle < 3; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { codecs[r.Attrs.CompressionType()]++; n++ })
		if n == 0 {
			idle++
		}
	}
	return codecs
}
