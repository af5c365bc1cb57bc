package changelog

import (
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestLastSeq: the last marker is found wherever it lies within the tail
// window (at the end, behind a checkpoint's bundles, behind more bundles
// than the first windows hold), and none is reported when the partition is
// empty, holds only bundles, or holds its last marker beyond the window.
func TestLastSeq(t *testing.T) {
	ctx, b, cl := testBroker(t)
	type rec struct {
		marker uint64 // a marker of this seq, else (0) a bundle
		n      int    // repeated n times
	}
	cases := []struct {
		name  string
		recs  []rec
		seq   uint64
		found bool
	}{
		{"empty", nil, 0, false},
		{"bundles only", []rec{{0, 50}}, 0, false},
		{"marker last", []rec{{0, 30}, {1, 1}, {0, 30}, {2, 1}}, 2, true},
		{"marker behind a checkpoint", []rec{{3, 1}, {0, 10}}, 3, true},
		{"marker behind more than the first windows", []rec{{0, 5}, {4, 1}, {5, 1}, {0, 1000}}, 5, true},
		{"marker beyond the window", []rec{{6, 1}, {0, tailWindow + 1}}, 0, false},
		{"marker at the window's edge", []rec{{7, 1}, {0, tailWindow - 1}}, 7, true},
	}
	w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), BatchTimeout: time.Millisecond, BatchSize: 5000, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	for i, c := range cases {
		topic := fmt.Sprintf("lastseq-%d", i)
		if err := EnsureTopic(ctx, cl, topic, 1, TopicConfig{}); err != nil {
			t.Fatal(err)
		}
		var msgs []kafka.Message
		for _, r := range c.recs {
			for range r.n {
				m := kafka.Message{Topic: topic, Key: BundleKey([]byte("k")), Value: EncodeBundle(nil, &Bundle{Seq: 1, Learner: make([]byte, 100)})}
				if r.marker != 0 {
					m = kafka.Message{Topic: topic, Key: MarkerKey(), Value: EncodeMarker(nil, &Marker{Seq: r.marker, Meta: []byte("meta")})}
				}
				msgs = append(msgs, m)
			}
		}
		if len(msgs) > 0 {
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				t.Fatal(err)
			}
		}
		t.Run(c.name, func(t *testing.T) {
			seq, found, err := source(t, b, topic).LastSeq(ctx, 0)
			if err != nil || seq != c.seq || found != c.found {
				t.Errorf("LastSeq = %d, %v, %v; want %d, %v", seq, found, err, c.seq, c.found)
			}
		})
	}
}
