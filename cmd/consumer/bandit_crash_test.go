package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/internal/banditenv"
	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/models"
)

const (
	banditCrashDecisions = 8000 // + 8000 delayed rewards
	banditCrashUsers     = 8
)

// banditCrashSpec is the learner of the crash test: BKB on 3-dimensional
// items, a small qbar (the dictionary is resampled, the PRNG moves) and a
// small refresh (rebuilds and replays happen between checkpoints).
var banditCrashSpec = models.Spec{Algorithm: "bkb", Dim: 3, Kernel: models.KernelSpec{Type: "gaussian", Sigma: 1}, Seed: 9,
	Params: map[string]any{"xi": 0.5, "beta": 1.0, "qbar": 4.0, "max_budget": 32, "refresh": 24}}

// fmtBanditConfig is the configuration of the bandit tests: banditCrashSpec
// on the decisions topic, with a cache smaller than the number of users.
func fmtBanditConfig(brokers, group, output, dlq, dir string) string {
	return consumerConfig{brokers: brokers, group: group, output: output, dlq: dlq, dir: dir,
		input: "decisions",
		model: `  algorithm: bkb
  dim: 3
  kernel: {type: gaussian, sigma: 1}
  params: {xi: 0.5, beta: 1, qbar: 4, max_budget: 32, refresh: 24}
  seed: 9
`,
		maxRecords: 1000,
		cache: `cache:
  max_learners: 3
`,
		session: singleMemberSession,
	}.yaml()
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
	t.Parallel()
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
		waitFor(ctx, t, group, p, func() (bool, error) { return caughtUpNonEmpty(ctx, addr, group, "decisions", crashPartitions) })
	}
	refDone := runReference(t, refCfg, filepath.Join(dir, "ref.log"), func(p *consumerProcess) { waitDone("ref", p) })

	crashLog := filepath.Join(dir, "crash.log")
	rng := rand.New(rand.NewPCG(2026, 7))
	killAndRestart(ctx, t, crashKills{
		rng: rng, cfg: crashCfg, log: crashLog, addr: addr, output: "out-crash",
		stream: fmt.Sprintf("%d decisions", banditCrashDecisions), poll: 10 * time.Millisecond,
		// A target the earlier runs already passed would kill at start-up
		// again: then kill a few hundred new outputs later instead.
		target: func(frac float64) int64 {
			before, _, err := endOffsets(ctx, addr, "out-crash", crashPartitions)
			if err != nil {
				t.Fatal(err)
			}
			return max(int64(frac*banditCrashDecisions), before+int64(200+rng.IntN(400)))
		},
		finish: func(p *consumerProcess) { waitDone("crash", p) },
	})
	<-refDone
	if t.Failed() {
		return
	}

	refStates := compareLearnerStates(t, refDir, crashDir, banditCrashUsers)
	checkBanditStates(t, crashDir, crashPartitions, ref)
	outs := checkDecisionOutputs(ctx, t, addr, "out-crash", ref)
	checkDecisionOutputs(ctx, t, addr, "out-ref", ref)
	if dead, _ := broker.ReadAll(ctx, []string{addr}, "dlq-crash"); len(dead) > 0 {
		t.Errorf("%d dead letters, first %s", len(dead), dead[0].Value)
	}
	t.Logf("%d outputs for %d decisions (%d re-emitted after kills), %d rewards; %d learners equal", outs, ref.decisions, outs-ref.decisions, len(ref.msgs)-ref.decisions, len(refStates))
}
