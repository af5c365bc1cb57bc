package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/feed"
	"github.com/kernelstream/kernelstream/internal/synth"
	"github.com/kernelstream/kernelstream/internal/wire"
)

const (
	poisonPartitions = 2
	poisonKeys       = 6
	poisonFeatures   = 400 // + as many delayed labels
)

// TestPoisonRecordsLeaveTheConsumerUp: a predict-only record with a 70 KB
// id (its pending entry's store key would exceed Badger's 65,000 bytes)
// and one with a 100 KB key come between good records. The consumer, a
// separate process with its changelog, dead-letters both and stays up and
// ready; killed with SIGKILL once it has checkpointed past them, its disk
// deleted, it restarts from the changelog and reads the rest. Every good
// record is predicted as by a run that never saw the two (same y_hat per
// key and id, same learner states), the DLQ holds exactly the two,
// unchanged, and /readyz, once 200, never turns away while the process
// runs. (Before the limits on keys and ids, the checkpoint failed, Run
// returned, and every restart failed the same way from the changelog.)
func TestPoisonRecordsLeaveTheConsumerUp(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	ctx, b, addr := startBroker(t, 2*time.Minute, poisonPartitions, "features", "features-ref", "out-ref", "dlq-ref", "out-p", "dlq-p")
	good, ids := poisonStream(t)
	poison := []kafka.Message{
		{Key: []byte("user-1"), Value: wire.AppendFeatures(nil, strings.Repeat("i", 70_000), []float64{0.1, 0.2, 0.3, 0.4, 0.5})},
		{Key: bytes.Repeat([]byte("k"), 100_000), Value: wire.AppendFeatures(nil, "long-key", []float64{0.1, 0.2, 0.3, 0.4, 0.5})},
	}
	half := len(good) / 2
	produceMessages(ctx, t, addr, "features-ref", good)
	produceMessages(ctx, t, addr, "features", append(append(append([]kafka.Message(nil), good[:half]...), poison[0]), poison[1]))

	dir := t.TempDir()
	config := func(group, input, output, dlq, state string) string {
		c := regressionConfig(addr, group, output, dlq, state, "")
		c.input, c.maxRecords, c.session = input, 200, singleMemberSession
		return writeConfig(t, dir, group+".yaml", c.yaml())
	}
	refDone := runReference(t, config("ref", "features-ref", "out-ref", "dlq-ref", filepath.Join(dir, "state-ref")), filepath.Join(dir, "ref.log"),
		func(p *consumerProcess) { waitCaughtUpOn(ctx, t, addr, "ref", "features-ref", p) })

	state := filepath.Join(dir, "state-p")
	cfg, log := config("p", "features", "out-p", "dlq-p", state), filepath.Join(dir, "p.log")
	httpAddr := freeAddr(t)
	run := func() (*consumerProcess, func() (int, bool)) {
		p := startConsumer(t, cfg, log, "KERNELSTREAM_HTTP_ADDR="+httpAddr)
		return p, watchReady(t, "http://"+httpAddr+"/readyz")
	}
	checkReady := func(when string, readiness func() (int, bool)) {
		t.Helper()
		if lapses, ready := readiness(); !ready || lapses > 0 {
			t.Errorf("%s: /readyz 200 %v, then turned away %d times", when, ready, lapses)
		}
	}
	p, readiness := run()
	p.waitInGeneration(ctx, t)
	waitCaughtUpOn(ctx, t, addr, "p", "features", p) // checkpointed past the poison records
	if t.Failed() {
		return
	}
	checkReady("before the kill", readiness)
	p.stop(t, syscall.SIGKILL, 10*time.Second)
	if err := os.RemoveAll(state); err != nil {
		t.Fatal(err)
	}
	produceMessages(ctx, t, addr, "features", good[half:])
	p, readiness = run()
	waitCaughtUpOn(ctx, t, addr, "p", "features", p)
	checkReady("after the restart", readiness)
	if code := p.stop(t, syscall.SIGTERM, crashGrace); code != 0 {
		t.Errorf("exit %d after SIGTERM; log tail:\n%s", code, tail(log, 3000))
	}
	<-refDone
	if t.Failed() {
		return
	}
	if len(restoreEventsMatching(t, log, changelogRestored)) == 0 {
		t.Error("the restart on an empty disk restored nothing from the changelog")
	}
	checkPredicted(ctx, t, b.Addrs(), "out-p", ids)
	checkSamePredictions(ctx, t, b.Addrs(), "out-ref", "out-p")
	ref, got := learnerStatesN(t, filepath.Join(dir, "state-ref"), poisonPartitions), learnerStatesN(t, state, poisonPartitions)
	if len(ref) != poisonKeys || len(got) != len(ref) {
		t.Errorf("%d learners stored, the run without the poison records %d (want %d)", len(got), len(ref), poisonKeys)
	}
	for k, v := range ref {
		if !bytes.Equal(got[k], v) {
			t.Errorf("learner %s differs from the run without the poison records", k)
		}
	}
	dead, err := broker.ReadAll(ctx, b.Addrs(), "dlq-p")
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != len(poison) {
		t.Fatalf("%d dead letters, want %d", len(dead), len(poison))
	}
	for _, d := range dead {
		var reason, msg string
		for _, h := range d.Headers {
			switch h.Key {
			case wire.HeaderReason:
				reason = string(h.Value)
			case wire.HeaderError:
				msg = string(h.Value)
			}
		}
		i := 0
		if len(d.Key) > 1000 {
			i = 1
		}
		if reason != "oversized" || !bytes.Equal(d.Key, poison[i].Key) || !bytes.Equal(d.Value, poison[i].Value) {
			t.Errorf("dead letter %q (reason %s) is not poison record %d unchanged", msg, reason, i)
		}
	}
}

// poisonStream is the good records (poisonKeys keys of dimension 5, labels
// delayed by up to 20 records) and their input ids.
func poisonStream(t *testing.T) ([]kafka.Message, map[string]bool) {
	t.Helper()
	src, _ := synth.New("mixed", synth.Options{Keys: poisonKeys, Dim: 5, Seed: 13})
	f, err := feed.New(src, feed.Options{Labels: "delayed", MaxDelay: 20, Seed: 13, N: poisonFeatures})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []kafka.Message
	ids := map[string]bool{}
	var r feed.Record
	for f.Next(&r) {
		msgs = append(msgs, kafka.Message{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)})
		ids[r.ID] = ids[r.ID] || !r.Label
	}
	return msgs, ids
}

// waitCaughtUpOn waits until group has committed the end of every
// partition of input.
func waitCaughtUpOn(ctx context.Context, t *testing.T, addr, group, input string, p *consumerProcess) {
	t.Helper()
	waitFor(ctx, t, group, p, func() (bool, error) { return caughtUp(ctx, addr, group, input, poisonPartitions) })
}

// watchReady polls url every 50 ms while p runs. The function it returns
// stops the polling (call it before stopping p) and says how many polls
// after the first 200 were not 200, and whether one was: a consumer is
// expected to turn ready and stay ready.
func watchReady(t *testing.T, url string) func() (lapses int, ready bool) {
	var lapses atomic.Int64
	var ready atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			switch code, body := get(url); {
			case code == 200:
				ready.Store(true)
			case ready.Load():
				lapses.Add(1)
				t.Logf("/readyz %d after 200: %s", code, body)
			}
		}
	}()
	var once sync.Once
	return func() (int, bool) {
		once.Do(func() { close(stop); wg.Wait() })
		return int(lapses.Load()), ready.Load()
	}
}
