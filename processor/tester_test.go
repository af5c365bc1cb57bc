package processor

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/internal/kafkaio/kafkaiotest"
	"github.com/kernelstream/kernelstream/models"
)

// tester drives one partition's worker without a broker, in the spirit of
// goka's tester package: consume records one at a time through the worker's
// own handle path, then read synchronously what it emitted (predictions and
// dead letters, in order, with headers) and what it checkpointed. It is for
// record-level behaviour (decoding, dead letters, the label join, decisions,
// rankings, expiries); group, crash and outage behaviour stay on the
// in-process broker (harness_test.go).
type tester struct {
	t     testing.TB
	w     *worker
	store *checkpoint.Store
	dir   string
	next  map[string]int64     // next offset per topic
	base  time.Time            // Kafka timestamp of offset 0; each record is 1 ms later
	seen  int                  // records consumed (their timestamps)
	kio   *kafkaiotest.Cluster // what the worker produced
	done  bool                 // the store is closed
}

// newTester builds a worker for partition 0 of a processor with spec and the
// test defaults; tune, if given, adjusts the config first.
func newTester(t testing.TB, spec models.Spec, tune func(*Config)) *tester {
	t.Helper()
	cfg := Config{Brokers: []string{"unused:9092"}, Group: "g", InputTopic: tIn, OutputTopic: tOut, DLQTopic: tDLQ,
		Model: spec, CheckpointDir: t.TempDir(), MaxLearners: 4,
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(testLogLevel)}
	if tune != nil {
		tune(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.Open(checkpoint.Options{Dir: cfg.CheckpointDir})
	if err != nil {
		t.Fatal(err)
	}
	ts := &tester{t: t, store: store, dir: cfg.CheckpointDir, next: map[string]int64{},
		base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	t.Cleanup(func() {
		if !ts.done {
			store.Close()
		}
	})
	// The topics' max.message.bytes, as a start-up reads them: room for
	// the 2 MiB records the tests dead-letter.
	p.limits = map[string]int32{tOut: 8 << 20, tDLQ: 8 << 20}
	ts.kio = &kafkaiotest.Cluster{}
	w := newWorker(p, store, ts.kio, 0)
	if err := w.restore(-1, -1); err != nil {
		t.Fatal(err)
	}
	w.em = newEmitter(ts.kio, w.log, p.m)
	w.hard = context.Background()
	ts.w = w
	return ts
}

// consume hands each record to the worker (input topic unless rec.topic is
// the labels topic) at the next offset of its topic, with increasing Kafka
// timestamps (or rec.time), and collects what it emitted.
func (ts *tester) consume(recs ...testRecord) {
	ts.t.Helper()
	for _, r := range recs {
		topic := r.topic
		if topic == "" {
			topic = tIn
		}
		off := ts.next[topic]
		ts.next[topic] = off + 1
		msg := &kafkaio.Record{Topic: topic, Partition: 0, Offset: off, Value: []byte(r.value),
			Time: ts.base.Add(time.Duration(ts.seen) * time.Millisecond)}
		if !r.time.IsZero() {
			msg.Time = r.time
		}
		if r.key != "" {
			msg.Key = []byte(r.key)
		}
		ts.seen++
		if err := ts.w.handle(context.Background(), msg, topic == tLabels); err != nil {
			ts.t.Fatalf("handle %s/%d: %v", topic, off, err)
		}
		ts.w.sinceCkpt++ // as the run loop counts
		ts.w.publish()   // as the run loop does before it may wait
	}
}

// emitted returns the messages written to topic so far, decoded like the
// broker tests' consumer does.
func (ts *tester) emitted(topic string) []outRecord {
	var rs []outRecord
	for _, m := range ts.kio.Produced() {
		if m.Topic != topic {
			continue
		}
		headers := make(map[string]string, len(m.Headers))
		for _, h := range m.Headers {
			headers[h.Key] = string(h.Value)
		}
		rs = append(rs, newOutRecord(m.Key, m.Value, headers))
	}
	return rs
}

// checkpoint commits the partition's state synchronously (every output is
// taken as acknowledged: there is no broker) and returns the checkpoint
// directory, readable by storedStates once the tester is closed.
func (ts *tester) checkpoint() {
	ts.t.Helper()
	snap, err := ts.w.takeSnapshot()
	if err != nil {
		ts.t.Fatal(err)
	}
	if snap == nil {
		return
	}
	if err := ts.w.storeSnapshot(snap); err != nil {
		ts.t.Fatal(err)
	}
	ts.w.cache.committed(snap.fresh)
}

// close checkpoints and closes the store; the directory can then be read.
func (ts *tester) close() string {
	ts.t.Helper()
	ts.checkpoint()
	ts.w.cache.release()
	ts.done = true
	if err := ts.store.Close(); err != nil {
		ts.t.Fatal(err)
	}
	return ts.dir
}
