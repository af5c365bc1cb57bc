package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/feed"
	"github.com/kernelstream/kernelstream/internal/synth"
	"github.com/kernelstream/kernelstream/internal/wire"
)

const (
	crashPartitions = 4
	crashFeatures   = 30000 // + 30000 delayed labels = a 60k-record stream
	crashKeys       = 8
	crashGrace      = 15 * time.Second // shutdown.grace of fmtConfig: SIGTERM must exit 0 within it
)

// TestCrashSafety is the reliability contract of docs/pipeline.md ("Guarantees"): the consumer
// runs as a separate process and is killed with SIGKILL at several random
// (seeded) moments of a 60k-record stream, each time restarted on the same
// checkpoint directory. At the end every learner's state bytes equal those
// of an uninterrupted run over the same input, and every input id has at
// least one prediction on the output topic.
func TestCrashSafety(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end crash test")
	}
	ctx, b, addr := startBroker(t, 4*time.Minute, crashPartitions, "features", "out-ref", "dlq-ref", "out-crash", "dlq-crash")

	// One input stream, read by two groups: the reference run and the
	// crashed-and-restarted one.
	src, _ := synth.New("mixed", synth.Options{Keys: crashKeys, Dim: 5, Seed: 11})
	f, _ := feed.New(src, feed.Options{Labels: "delayed", MaxDelay: 40, Seed: 11, N: crashFeatures})
	inputIDs := make(map[string]bool, crashFeatures)
	n, err := feed.Produce(ctx, f, feed.Target{Brokers: b.Addrs(), Topic: "features"}, feed.ProduceOptions{
		OnRecord: func(r *feed.Record) {
			if !r.Label {
				inputIDs[r.ID] = true
			}
		},
	})
	if err != nil || n != 2*crashFeatures {
		t.Fatalf("produced %d records: %v", n, err)
	}

	dir := t.TempDir()
	refDir, crashDir := filepath.Join(dir, "state-ref"), filepath.Join(dir, "state-crash")
	refCfg := writeConfig(t, dir, "ref.yaml", fmtConfig(addr, "ref", "out-ref", "dlq-ref", refDir, ""))
	crashCfg := writeConfig(t, dir, "crash.yaml", crashConfig(addr, "crash", "out-crash", "dlq-crash", crashDir, ""))

	// The uninterrupted run, concurrently with the crashing one.
	refDone := runReference(t, refCfg, filepath.Join(dir, "ref.log"), func(p *consumerProcess) {
		waitCaughtUp(ctx, t, addr, "ref", crashPartitions, p)
	})

	crashLog := filepath.Join(dir, "crash.log")
	killAndRestart(ctx, t, crashKills{
		rng: rand.New(rand.NewPCG(2026, 11)), cfg: crashCfg, log: crashLog, addr: addr, output: "out-crash",
		stream: fmt.Sprint(crashFeatures), poll: 20 * time.Millisecond,
		target: func(frac float64) int64 { return int64(frac * crashFeatures) },
		finish: func(p *consumerProcess) { waitCaughtUp(ctx, t, addr, "crash", crashPartitions, p) },
	})
	<-refDone
	if t.Failed() {
		return
	}

	ref := compareLearnerStates(t, refDir, crashDir, crashKeys)

	// The operator's view of the same comparison: consumer -dump-state.
	var refDump, crashDump, errOut capture
	if code := run([]string{"-dump-state", refDir, "-dump-partitions", "4"}, &refDump, &errOut); code != 0 {
		t.Fatalf("-dump-state: exit %d: %s", code, errOut.String())
	}
	if code := run([]string{"-dump-state", crashDir, "-dump-partitions", "4"}, &crashDump, &errOut); code != 0 {
		t.Fatalf("-dump-state: exit %d: %s", code, errOut.String())
	}
	if lines := strings.Count(refDump.String(), "\n"); lines != crashKeys || refDump.String() != crashDump.String() {
		t.Errorf("-dump-state: %d lines; reference:\n%s\ncrashed:\n%s", lines, refDump.String(), crashDump.String())
	}

	outputs, distinct, inputs := checkPredicted(ctx, t, b.Addrs(), "out-crash", inputIDs)
	t.Logf("%d predictions for %d inputs (%d duplicates from replays after kills); %d learners equal", outputs, inputs, outputs-distinct, len(ref))
}

// checkPredicted reads the output topic and fails the test for every input
// id (inputIDs[id] true) that has no output record: the first five one by one,
// then their count. It returns the number of output records, of distinct ids
// among them and of inputs.
func checkPredicted(ctx context.Context, t *testing.T, addrs []string, topic string, inputIDs map[string]bool) (outputs, distinct, inputs int) {
	t.Helper()
	msgs, err := broker.ReadAll(ctx, addrs, topic)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool, len(inputIDs))
	for _, m := range msgs {
		var o wire.Output
		if err := json.Unmarshal(m.Value, &o); err != nil {
			t.Fatalf("output %s: %v", m.Value, err)
		}
		seen[o.ID.String()] = true
	}
	missing := 0
	for id, isInput := range inputIDs {
		if !isInput {
			continue
		}
		inputs++
		if !seen[id] {
			if missing < 5 {
				t.Errorf("input %s has no prediction", id)
			}
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d inputs have no prediction", missing, inputs)
	}
	return len(msgs), len(seen), inputs
}

// checkSamePredictions fails the test for every output record of topic
// whose y_hat differs from the reference topic's for the same key and id:
// a re-emitted or restored prediction must be the one the uninterrupted run
// made (which TestOutputEqualsEvalDump compares with eval -key -dump).
func checkSamePredictions(ctx context.Context, t *testing.T, addrs []string, ref, topic string) {
	t.Helper()
	read := func(topic string) []wire.Output {
		msgs, err := broker.ReadAll(ctx, addrs, topic)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]wire.Output, len(msgs))
		for i, m := range msgs {
			if err := json.Unmarshal(m.Value, &out[i]); err != nil || out[i].YHat == nil {
				t.Fatalf("%s: output %s: %v", topic, m.Value, err)
			}
		}
		return out
	}
	want := map[string]float64{}
	for _, o := range read(ref) {
		want[o.Key+"/"+o.ID.String()] = *o.YHat
	}
	if len(want) == 0 {
		t.Fatalf("the reference topic %s is empty", ref)
	}
	bad := 0
	for _, o := range read(topic) {
		if w, ok := want[o.Key+"/"+o.ID.String()]; !ok || w != *o.YHat {
			if bad < 5 {
				t.Errorf("%s %s/%s: y_hat %v, the uninterrupted run's %v (present %v)", topic, o.Key, o.ID, *o.YHat, w, ok)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d predictions differ from the uninterrupted run's", bad)
	}
}

// runReference starts the uninterrupted run of a crash test on cfg and, in
// the background, waits for it (wait) and stops it: it must exit 0 within
// crashGrace of SIGTERM. The channel closes when that is done.
func runReference(t *testing.T, cfg, log string, wait func(p *consumerProcess)) <-chan struct{} {
	refDone := make(chan struct{})
	p := startConsumer(t, cfg, log)
	go func() {
		defer close(refDone)
		wait(p)
		if code := p.stop(t, syscall.SIGTERM, crashGrace); code != 0 {
			t.Errorf("reference run: exit %d after SIGTERM; log tail:\n%s", code, tail(p.log, 3000))
		}
	}()
	return refDone
}

// compareLearnerStates fails the test unless the stopped reference run in
// refDir stored want learners and the crashed run in crashDir stored the
// same learners with the same state bytes; it returns the reference states.
func compareLearnerStates(t *testing.T, refDir, crashDir string, want int) map[string][]byte {
	t.Helper()
	ref, crashed := learnerStates(t, refDir), learnerStates(t, crashDir)
	if len(ref) != want {
		t.Errorf("reference run stored %d learners, want %d", len(ref), want)
	}
	for key, want := range ref {
		got, ok := crashed[key]
		switch {
		case !ok:
			t.Errorf("learner %s missing after the crashes", key)
		case !bytes.Equal(got, want):
			t.Errorf("learner %s: state differs after the crashes (%d vs %d bytes)", key, len(got), len(want))
		}
	}
	for key := range crashed {
		if _, ok := ref[key]; !ok {
			t.Errorf("learner %s exists only after the crashes", key)
		}
	}
	return ref
}

// crashKills is the kill schedule of a crash test: see killAndRestart.
type crashKills struct {
	rng      *rand.Rand // draws the fractions and the start-up delay
	cfg, log string     // the crashing consumer's configuration and log
	addr     string
	output   string        // the topic whose end offsets measure progress
	stream   string        // what the fractions are of, for the log
	poll     time.Duration // how often the output topic is read
	target   func(frac float64) int64
	finish   func(p *consumerProcess) // waits for the last run to catch up
}

// killAndRestart runs the consumer of k.cfg and kills it with SIGKILL: an
// early kill up to 300 ms after the start's group assignment (while it
// restores, before the first checkpoint), then, for five seeded random
// fractions in increasing order, a kill when the output topic reaches
// k.target(frac) records (the target is asked for before the consumer
// restarts). Every kill waits until the process is in a generation
// (waitInGeneration says why). Each time it restarts on the same checkpoint
// directory; the last run is left to k.finish and then must exit 0 within
// crashGrace of SIGTERM.
func killAndRestart(ctx context.Context, t *testing.T, k crashKills) {
	t.Helper()
	rng := k.rng
	fractions := []float64{rng.Float64() * 0.1, 0.1 + rng.Float64()*0.2, 0.3 + rng.Float64()*0.2, 0.5 + rng.Float64()*0.2, 0.7 + rng.Float64()*0.2}
	sort.Float64s(fractions)
	p := startConsumer(t, k.cfg, k.log)
	p.waitInGeneration(ctx, t)
	time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) // restoring, or just started
	p.stop(t, syscall.SIGKILL, 10*time.Second)
	t.Logf("killed at start-up")
	for _, frac := range fractions {
		target := k.target(frac)
		p = startConsumer(t, k.cfg, k.log)
		p.waitInGeneration(ctx, t)
		for {
			out, _, err := endOffsets(ctx, k.addr, k.output, crashPartitions)
			if err != nil {
				t.Fatal(err)
			}
			if out >= target {
				t.Logf("killed at %d outputs (target %.0f%% of %s)", out, 100*frac, k.stream)
				break
			}
			select {
			case err := <-p.done:
				t.Fatalf("consumer exited on its own (%v); log tail:\n%s", err, tail(k.log, 3000))
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %d outputs (have %d); log tail:\n%s", target, out, tail(k.log, 3000))
			case <-time.After(k.poll):
			}
		}
		p.stop(t, syscall.SIGKILL, 10*time.Second)
	}
	p = startConsumer(t, k.cfg, k.log)
	k.finish(p)
	if code := p.stop(t, syscall.SIGTERM, crashGrace); code != 0 {
		t.Errorf("final run: exit %d after SIGTERM; log tail:\n%s", code, tail(k.log, 3000))
	}
}

func waitCaughtUp(ctx context.Context, t *testing.T, addr, group string, partitions int, p *consumerProcess) {
	t.Helper()
	waitFor(ctx, t, group, p, func() (bool, error) { return caughtUp(ctx, addr, group, "features", partitions) })
}

// waitFor polls caught every 100 ms until it reports true (an error counts
// as not yet); it fails the test if the consumer p of group exits first (the
// exit is put back on p.done for p.stop) or ctx ends.
func waitFor(ctx context.Context, t *testing.T, group string, p *consumerProcess, caught func() (bool, error)) {
	t.Helper()
	for {
		ok, err := caught()
		if err == nil && ok {
			return
		}
		select {
		case err := <-p.done:
			t.Errorf("%s consumer exited before catching up (%v); log tail:\n%s", group, err, tail(p.log, 3000))
			p.done <- err
			return
		case <-ctx.Done():
			t.Errorf("%s consumer did not catch up in time; log tail:\n%s", group, tail(p.log, 3000))
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// learnerStates reads every learner blob of a stopped consumer's store.
func learnerStates(t *testing.T, dir string) map[string][]byte {
	return learnerStatesN(t, dir, crashPartitions)
}

func learnerStatesN(t *testing.T, dir string, partitions int) map[string][]byte {
	t.Helper()
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	st, err := checkpoint.Open(checkpoint.Options{Dir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := map[string][]byte{}
	for part := 0; part < partitions; part++ {
		err := st.EachLearner(part, func(key, blob []byte) error {
			out[string(key)] = append([]byte(nil), blob...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
