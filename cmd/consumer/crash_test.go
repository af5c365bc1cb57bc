package main

import (
	"bytes"
	"context"
	"encoding/json"
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
)

const (
	crashPartitions = 4
	crashFeatures   = 50000 // + 50000 delayed labels = a 100k-record stream
	crashKeys       = 8
	crashGrace      = 15 * time.Second // shutdown.grace of fmtConfig: SIGTERM must exit 0 within it
)

// TestCrashSafety is the reliability contract of DESIGN.md: the consumer
// runs as a separate process and is killed with SIGKILL at several random
// (seeded) moments of a 100k-record stream, each time restarted on the same
// checkpoint directory. At the end every learner's state bytes equal those
// of an uninterrupted run over the same input, and every input id has at
// least one prediction on the output topic.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b, err := broker.Start(broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	addr := b.Addrs()[0]
	if err := b.CreateTopics(ctx, crashPartitions, "features", "out-ref", "dlq-ref", "out-crash", "dlq-crash"); err != nil {
		t.Fatal(err)
	}

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
	crashCfg := writeConfig(t, dir, "crash.yaml", fmtConfig(addr, "crash", "out-crash", "dlq-crash", crashDir, ""))

	// The uninterrupted run, concurrently with the crashing one.
	refDone := make(chan struct{})
	refProc := startConsumer(t, refCfg, filepath.Join(dir, "ref.log"))
	go func() {
		defer close(refDone)
		p := refProc
		waitCaughtUp(ctx, t, addr, "ref", crashPartitions, p)
		if code := p.stop(t, syscall.SIGTERM, crashGrace); code != 0 {
			t.Errorf("reference run: exit %d after SIGTERM; log tail:\n%s", code, tail(p.log, 3000))
		}
	}()

	// Kill points: an early kill a random few hundred milliseconds after a
	// start (often before the first checkpoint), then kills when the output
	// topic reaches random fractions of the stream.
	rng := rand.New(rand.NewPCG(2026, 11))
	fractions := []float64{rng.Float64() * 0.1, 0.1 + rng.Float64()*0.2, 0.3 + rng.Float64()*0.2, 0.5 + rng.Float64()*0.2, 0.7 + rng.Float64()*0.2}
	sort.Float64s(fractions)
	crashLog := filepath.Join(dir, "crash.log")
	p := startConsumer(t, crashCfg, crashLog)
	time.Sleep(time.Duration(200+rng.IntN(600)) * time.Millisecond)
	p.stop(t, syscall.SIGKILL, 10*time.Second)
	t.Logf("killed at start-up")
	for _, frac := range fractions {
		p = startConsumer(t, crashCfg, crashLog)
		target := int64(frac * crashFeatures)
		for {
			out, _, err := endOffsets(ctx, addr, "out-crash", crashPartitions)
			if err != nil {
				t.Fatal(err)
			}
			if out >= target {
				t.Logf("killed at %d outputs (target %.0f%% of %d)", out, 100*frac, crashFeatures)
				break
			}
			select {
			case err := <-p.done:
				t.Fatalf("consumer exited on its own (%v); log tail:\n%s", err, tail(crashLog, 3000))
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %d outputs (have %d); log tail:\n%s", target, out, tail(crashLog, 3000))
			case <-time.After(20 * time.Millisecond):
			}
		}
		p.stop(t, syscall.SIGKILL, 10*time.Second)
	}
	p = startConsumer(t, crashCfg, crashLog)
	waitCaughtUp(ctx, t, addr, "crash", crashPartitions, p)
	if code := p.stop(t, syscall.SIGTERM, crashGrace); code != 0 {
		t.Errorf("final run: exit %d after SIGTERM; log tail:\n%s", code, tail(crashLog, 3000))
	}
	<-refDone
	if t.Failed() {
		return
	}

	ref, crashed := learnerStates(t, refDir), learnerStates(t, crashDir)
	if len(ref) != crashKeys {
		t.Errorf("reference run stored %d learners, want %d", len(ref), crashKeys)
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

	msgs, err := broker.ReadAll(ctx, b.Addrs(), "out-crash")
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool, len(inputIDs))
	for _, m := range msgs {
		var o struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(m.Value, &o); err != nil {
			t.Fatalf("output %s: %v", m.Value, err)
		}
		seen[o.ID] = true
	}
	missing := 0
	for id := range inputIDs {
		if !seen[id] {
			if missing < 5 {
				t.Errorf("input %s has no prediction", id)
			}
			missing++
		}
	}
	t.Logf("%d predictions for %d inputs (%d duplicates from replays after kills); %d learners equal", len(msgs), len(inputIDs), len(msgs)-len(seen), len(ref))
	if missing > 0 {
		t.Errorf("%d of %d inputs have no prediction", missing, len(inputIDs))
	}
}

func waitCaughtUp(ctx context.Context, t *testing.T, addr, group string, partitions int, p *consumerProcess) {
	t.Helper()
	for {
		ok, err := caughtUp(ctx, addr, group, "features", partitions)
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
