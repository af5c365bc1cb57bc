package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/feed"
	"github.com/kernelstream/kernelstream/internal/synth"
)

const (
	groupPartitions = 6
	groupFeatures   = 15000 // + 15000 delayed labels
	groupKeys       = 12
)

// TestGroupMembersComeAndGo is issue 4's scaling contract with real
// processes: three consumer processes share a group while the stream is
// being produced; one is killed with SIGKILL and one is added mid-stream.
// Then all leave with SIGTERM (exit 0 each) and a last member, on the added
// member's disk, takes every partition and rebuilds the ones it never held by
// the gap replay, emitting nothing new. Its learner states must equal those
// of an uninterrupted single-consumer run, and every input id must have a
// prediction.
func TestGroupMembersComeAndGo(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end group test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b, err := broker.Start(broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	addr := b.Addrs()[0]
	if err := b.CreateTopics(ctx, groupPartitions, "features", "out-ref", "dlq-ref", "out", "dlq"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	member := func(name string) (config, logPath string) {
		stateDir := filepath.Join(dir, "state-"+name)
		return writeConfig(t, dir, name+".yaml", fmtConfig(addr, "multi", "out", "dlq", stateDir, "")), filepath.Join(dir, name+".log")
	}
	startMember := func(name string, env ...string) *consumerProcess {
		cfg, log := member(name)
		return startConsumer(t, cfg, log, append([]string{"KERNELSTREAM_KAFKA_INSTANCE_ID=pod-" + name}, env...)...)
	}

	// The stream is produced while the members run.
	src, _ := synth.New("mixed", synth.Options{Keys: groupKeys, Dim: 5, Seed: 21})
	f, _ := feed.New(src, feed.Options{Labels: "delayed", MaxDelay: 30, Seed: 21, N: groupFeatures})
	var idsMu sync.Mutex
	inputIDs := map[string]bool{}
	a, bm, c := startMember("a"), startMember("b"), startMember("c")
	produced := make(chan error, 1)
	go func() {
		_, err := feed.Produce(ctx, f, feed.Target{Brokers: b.Addrs(), Topic: "features"}, feed.ProduceOptions{
			Rate: 3000,
			OnRecord: func(r *feed.Record) {
				if !r.Label {
					idsMu.Lock()
					inputIDs[r.ID] = true
					idsMu.Unlock()
				}
			},
		})
		produced <- err
	}()
	waitOutputs := func(target int64, procs ...*consumerProcess) {
		t.Helper()
		for {
			n, _, err := endOffsets(ctx, addr, "out", groupPartitions)
			if err != nil {
				t.Fatal(err)
			}
			if n >= target {
				return
			}
			for _, p := range procs {
				select {
				case err := <-p.done:
					t.Fatalf("a member exited on its own (%v); log tail:\n%s", err, tail(p.log, 3000))
				default:
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %d outputs (have %d)", target, n)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	waitOutputs(groupFeatures/4, a, bm, c)
	bm.stop(t, syscall.SIGKILL, 10*time.Second)
	t.Log("member b killed")
	d := startMember("d")
	waitOutputs(groupFeatures/2, a, c, d)
	t.Log("member d added")
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(ctx, t, addr, "multi", groupPartitions, a)
	for _, m := range []struct {
		name string
		p    *consumerProcess
	}{{"a", a}, {"c", c}, {"d", d}} {
		if code := m.p.stop(t, syscall.SIGTERM, crashGrace); code != 0 {
			t.Fatalf("member %s: exit %d after SIGTERM; log tail:\n%s", m.name, code, tail(m.p.log, 3000))
		}
	}
	before, _, err := endOffsets(ctx, addr, "out", groupPartitions)
	if err != nil {
		t.Fatal(err)
	}

	// The last member, on d's disk: every partition, ready once restored.
	httpAddr := freeAddr(t)
	cfgD, _ := member("d")
	e := startConsumer(t, cfgD, filepath.Join(dir, "e.log"), "KERNELSTREAM_KAFKA_INSTANCE_ID=pod-d", "KERNELSTREAM_HTTP_ADDR="+httpAddr)
	for {
		if code, _ := get("http://" + httpAddr + "/readyz"); code == 200 {
			break
		}
		select {
		case err := <-e.done:
			t.Fatalf("last member exited (%v); log tail:\n%s", err, tail(e.log, 3000))
		case <-ctx.Done():
			t.Fatalf("last member never ready; log tail:\n%s", tail(e.log, 3000))
		case <-time.After(100 * time.Millisecond):
		}
	}
	if code := e.stop(t, syscall.SIGTERM, crashGrace); code != 0 {
		t.Fatalf("last member: exit %d; log tail:\n%s", code, tail(e.log, 3000))
	}
	after, _, err := endOffsets(ctx, addr, "out", groupPartitions)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the gap replay emitted %d predictions; it must emit none", after-before)
	}

	// The uninterrupted single-consumer run over the same input.
	refDir := filepath.Join(dir, "state-ref")
	ref := startConsumer(t, writeConfig(t, dir, "ref.yaml", fmtConfig(addr, "ref", "out-ref", "dlq-ref", refDir, "")), filepath.Join(dir, "ref.log"))
	waitCaughtUp(ctx, t, addr, "ref", groupPartitions, ref)
	if code := ref.stop(t, syscall.SIGTERM, crashGrace); code != 0 {
		t.Fatalf("reference: exit %d", code)
	}
	if t.Failed() {
		return
	}

	want, got := learnerStatesN(t, refDir, groupPartitions), learnerStatesN(t, filepath.Join(dir, "state-d"), groupPartitions)
	if len(want) != groupKeys {
		t.Errorf("reference holds %d learners, want %d", len(want), groupKeys)
	}
	for key, w := range want {
		if g, ok := got[key]; !ok {
			t.Errorf("learner %s missing", key)
		} else if !bytes.Equal(g, w) {
			t.Errorf("learner %s differs from the uninterrupted run (%d vs %d bytes)", key, len(g), len(w))
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d learners, want %d", len(got), len(want))
	}
	msgs, err := broker.ReadAll(ctx, b.Addrs(), "out")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range msgs {
		var o struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(m.Value, &o); err != nil {
			t.Fatal(errors.Join(err, errors.New(string(m.Value))))
		}
		seen[o.ID] = true
	}
	missing := 0
	for id := range inputIDs {
		if !seen[id] {
			missing++
		}
	}
	if missing > 0 || len(inputIDs) != groupFeatures {
		t.Errorf("%d of %d inputs have no prediction", missing, len(inputIDs))
	}
	t.Logf("%d predictions for %d inputs; %d learners equal the uninterrupted run", len(msgs), len(inputIDs), len(want))
}
