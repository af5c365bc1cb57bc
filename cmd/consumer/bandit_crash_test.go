package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/internal/banditenv"
	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/models"
)

const (
	banditCrashDecisions = 12000 // + 12000 delayed rewards
	banditCrashUsers     = 8
)

// banditCrashSpec is the learner of the crash test: BKB on 3-dimensional
// items, a small qbar (the dictionary is resampled, the PRNG moves) and a
// small refresh (rebuilds and replays happen between checkpoints).
var banditCrashSpec = models.Spec{Algorithm: "bkb", Dim: 3, Kernel: models.KernelSpec{Type: "gaussian", Sigma: 1}, Seed: 9,
	Params: map[string]any{"xi": 0.5, "beta": 1.0, "qbar": 4.0, "max_budget": 32, "refresh": 24}}

func fmtBanditConfig(brokers, group, output, dlq, dir string) string {
	return fmt.Sprintf(`kafka:
  brokers: [%s]
  group: %s
  input_topic: decisions
  output_topic: %s
  dlq_topic: %s
  session_timeout: 2s
  heartbeat_interval: 300ms
  rebalance_timeout: 5s
  retry_backoff_max: 500ms
model:
  algorithm: bkb
  dim: 3
  kernel: {type: gaussian, sigma: 1}
  params: {xi: 0.5, beta: 1, qbar: 4, max_budget: 32, refresh: 24}
  seed: 9
checkpoint:
  dir: %s
  interval: 300ms
  max_records: 1000
cache:
  max_learners: 3
http:
  addr: ""
log:
  level: info
  format: json
shutdown:
  grace: 15s
`, brokers, group, output, dlq, dir)
}

// TestBanditCrashSafety is TestCrashSafety with decisions: the click loop's
// records (decisions, and rewards 1..3 decisions of their user later, so
// rewards are always in flight in the pending map) for 8 users, answered by
// BKB; the consumer runs as a separate process and is killed with SIGKILL at
// seeded moments, each time restarted on the same checkpoint directory. At
// the end every learner's state bytes equal those of an uninterrupted run
// (and of the direct replay), every decision id has at least one output, and
// every output (re-emitted ones included) equals the direct replay's
// decision.
func TestBanditCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crash test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	env, err := banditenv.NewClicks(banditenv.ClickConfig{Users: banditCrashUsers, Items: 120, Dim: 3, Candidates: 10}, 13)
	if err != nil {
		t.Fatal(err)
	}
	ref := replayBandit(t, env, banditCrashDecisions, banditCrashSpec)

	b, err := broker.Start(broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	addr := b.Addrs()[0]
	if err := b.CreateTopics(ctx, crashPartitions, "decisions", "out-ref", "dlq-ref", "out-crash", "dlq-crash"); err != nil {
		t.Fatal(err)
	}
	produceMessages(ctx, t, addr, "decisions", ref.msgs)

	dir := t.TempDir()
	refDir, crashDir := filepath.Join(dir, "state-ref"), filepath.Join(dir, "state-crash")
	refCfg := writeConfig(t, dir, "ref.yaml", fmtBanditConfig(addr, "ref", "out-ref", "dlq-ref", refDir))
	crashCfg := writeConfig(t, dir, "crash.yaml", fmtBanditConfig(addr, "crash", "out-crash", "dlq-crash", crashDir))

	waitDone := func(group string, p *consumerProcess) {
		t.Helper()
		for {
			ok, err := caughtUpNonEmpty(ctx, addr, group, "decisions", crashPartitions)
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
	refDone := make(chan struct{})
	refProc := startConsumer(t, refCfg, filepath.Join(dir, "ref.log"))
	go func() {
		defer close(refDone)
		waitDone("ref", refProc)
		if code := refProc.stop(t, syscall.SIGTERM, crashGrace); code != 0 {
			t.Errorf("reference run: exit %d after SIGTERM; log tail:\n%s", code, tail(refProc.log, 3000))
		}
	}()

	rng := rand.New(rand.NewPCG(2026, 7))
	fractions := []float64{rng.Float64() * 0.1, 0.1 + rng.Float64()*0.2, 0.3 + rng.Float64()*0.2, 0.5 + rng.Float64()*0.2, 0.7 + rng.Float64()*0.2}
	sort.Float64s(fractions)
	crashLog := filepath.Join(dir, "crash.log")
	p := startConsumer(t, crashCfg, crashLog)
	time.Sleep(time.Duration(200+rng.IntN(600)) * time.Millisecond)
	p.stop(t, syscall.SIGKILL, 10*time.Second)
	t.Logf("killed at start-up")
	for _, frac := range fractions {
		// A target the earlier runs already passed would kill at start-up
		// again: then kill a few hundred new outputs later instead.
		before, _, err := endOffsets(ctx, addr, "out-crash", crashPartitions)
		if err != nil {
			t.Fatal(err)
		}
		target := max(int64(frac*banditCrashDecisions), before+int64(200+rng.IntN(400)))
		p = startConsumer(t, crashCfg, crashLog)
		for {
			out, _, err := endOffsets(ctx, addr, "out-crash", crashPartitions)
			if err != nil {
				t.Fatal(err)
			}
			if out >= target {
				t.Logf("killed at %d outputs (target %.0f%% of %d decisions)", out, 100*frac, banditCrashDecisions)
				break
			}
			select {
			case err := <-p.done:
				t.Fatalf("consumer exited on its own (%v); log tail:\n%s", err, tail(crashLog, 3000))
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %d outputs (have %d); log tail:\n%s", target, out, tail(crashLog, 3000))
			case <-time.After(10 * time.Millisecond):
			}
		}
		p.stop(t, syscall.SIGKILL, 10*time.Second)
	}
	p = startConsumer(t, crashCfg, crashLog)
	waitDone("crash", p)
	if code := p.stop(t, syscall.SIGTERM, crashGrace); code != 0 {
		t.Errorf("final run: exit %d after SIGTERM; log tail:\n%s", code, tail(crashLog, 3000))
	}
	<-refDone
	if t.Failed() {
		return
	}

	refStates, crashed := learnerStates(t, refDir), learnerStates(t, crashDir)
	if len(refStates) != banditCrashUsers {
		t.Errorf("reference run stored %d learners, want %d", len(refStates), banditCrashUsers)
	}
	for key, want := range refStates {
		if got, ok := crashed[key]; !ok || string(got) != string(want) {
			t.Errorf("learner %s: state differs after the crashes (%d vs %d bytes, present %v)", key, len(got), len(want), ok)
		}
	}
	if len(crashed) != len(refStates) {
		t.Errorf("%d learners after the crashes, %d in the reference run", len(crashed), len(refStates))
	}
	checkBanditStates(t, crashDir, crashPartitions, ref)
	outs := checkDecisionOutputs(ctx, t, addr, "out-crash", ref)
	checkDecisionOutputs(ctx, t, addr, "out-ref", ref)
	if dead, _ := broker.ReadAll(ctx, []string{addr}, "dlq-crash"); len(dead) > 0 {
		t.Errorf("%d dead letters, first %s", len(dead), dead[0].Value)
	}
	t.Logf("%d outputs for %d decisions (%d re-emitted after kills), %d rewards; %d learners equal", outs, ref.decisions, outs-ref.decisions, len(ref.msgs)-ref.decisions, len(refStates))
}
