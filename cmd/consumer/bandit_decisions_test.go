package main

import (
	"context"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/config"
	"github.com/kernelstream/kernelstream/internal/banditenv"
	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/service"
	"github.com/kernelstream/kernelstream/models"
)

// TestBanditDecisionsEquivalence feeds decision records and their delayed
// rewards (the click loop's records: each reward 1..4 decisions of its user
// later, so several are pending at every checkpoint) for 5 users through the
// consumer (serve, in-process, against the embedded broker), with a learner
// cache of 2 so that learners are evicted to Badger and read back mid-stream.
// Every output equals the direct replay per key through models.New(spec,
// key) with Choose/Observe in the same order (arm, and mean, std, ucb,
// y_hat to 1e-12), and the stored states equal the replay's bytes.
//
// The engine's TestDecisions covers gp-ucb (and a ranking learner) with
// rewards right after their decision; this adds BKB (with a small qbar, so
// the dictionary is resampled and the PRNG moves, and a small refresh, so
// posteriors are rebuilt and new arm sets replayed) and delayed rewards.
func TestBanditDecisionsEquivalence(t *testing.T) {
	t.Parallel()
	env, err := banditenv.NewClicks(banditenv.ClickConfig{Users: 5, Items: 80, Dim: 3, Candidates: 8, MaxDelay: 4}, 7)
	if err != nil {
		t.Fatal(err)
	}
	kernel := models.KernelSpec{Type: "gaussian", Sigma: 1}
	for _, tc := range []struct {
		name string
		spec models.Spec
		n    int
	}{
		{"bkb", models.Spec{Algorithm: "bkb", Dim: 3, Kernel: kernel, Seed: 4,
			Params: map[string]any{"xi": 0.5, "beta": 1.0, "qbar": 2.0, "max_budget": 24, "refresh": 16}}, 1500},
		{"bkb-theoretical-radius", models.Spec{Algorithm: "bkb", Dim: 3, Kernel: kernel, Seed: 5,
			Params: map[string]any{"xi": 0.5, "max_history": 40, "radius": "theory"}}, 600},
		{"bkb-defaults", models.Spec{Algorithm: "bkb", Dim: 3, Seed: 8}, 600},
		{"gp-ucb", models.Spec{Algorithm: "gp-ucb", Dim: 3, Kernel: kernel, Seed: 6,
			Params: map[string]any{"xi": 0.5, "beta": 1.0}}, 600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := models.Lookup(tc.spec.Algorithm); !ok {
				t.Skipf("%s not registered", tc.spec.Algorithm)
			}
			ref := replayBandit(t, env, tc.n, tc.spec)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			b, err := broker.Start(broker.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			addr := b.Addrs()[0]
			const parts = 3
			if err := b.CreateTopics(ctx, parts, "decisions", "recommendations", "dead-letters"); err != nil {
				t.Fatal(err)
			}
			produceMessages(ctx, t, addr, "decisions", ref.msgs)

			cfg := config.Default()
			cfg.Kafka.Brokers = []string{addr}
			cfg.Kafka.Group = "equivalence"
			cfg.Kafka.InputTopic, cfg.Kafka.OutputTopic, cfg.Kafka.DLQTopic = "decisions", "recommendations", "dead-letters"
			cfg.Kafka.SessionTimeout, cfg.Kafka.HeartbeatInterval = 2*time.Second, 300*time.Millisecond
			cfg.Model = tc.spec
			cfg.Checkpoint.Dir = t.TempDir()
			cfg.Checkpoint.Interval, cfg.Checkpoint.MaxRecords = 200*time.Millisecond, 97
			cfg.Cache.MaxLearners = 2
			cfg.HTTP.Addr = ""
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- service.Serve(runCtx, cfg, testLogger(t), nil) }()
			for {
				ok, err := caughtUpNonEmpty(ctx, addr, "equivalence", "decisions", parts)
				if err == nil && ok {
					break
				}
				select {
				case err := <-done:
					t.Fatalf("serve returned: %v", err)
				case <-ctx.Done():
					t.Fatal("consumer did not catch up in time")
				case <-time.After(100 * time.Millisecond):
				}
			}
			stop()
			if err := <-done; err != nil {
				t.Fatalf("serve: %v", err)
			}
			outs := checkDecisionOutputs(ctx, t, addr, "recommendations", ref)
			checkBanditStates(t, cfg.Checkpoint.Dir, parts, ref)
			if dead, _ := broker.ReadAll(ctx, []string{addr}, "dead-letters"); len(dead) > 0 {
				t.Errorf("%d dead letters, first %s", len(dead), dead[0].Value)
			}
			t.Logf("%d decisions (%d outputs), %d rewards (%d clicks) over %d users: equal to the direct replay",
				ref.decisions, outs, len(ref.msgs)-ref.decisions, ref.clicks, len(ref.states))
		})
	}
}
