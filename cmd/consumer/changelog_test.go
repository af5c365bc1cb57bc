package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/feed"
	"github.com/kernelstream/kernelstream/internal/synth"
)

const changelogFeatures = 20000 // + 20000 delayed labels

// TestChangelogSurvivesDiskLossAndRetention: the consumer is killed with
// SIGKILL at seeded random moments, once by itself between a checkpoint's
// changelog write and its Badger commit; before every restart its checkpoint
// directory is deleted and the input topic is trimmed (DeleteRecords) to the
// group's committed offsets, as retention would. Everything the restarted
// member knows comes from the changelog topic. At the end every learner's
// state bytes equal an uninterrupted run's, every input id has a
// prediction, and every prediction, re-emitted ones included, equals the
// uninterrupted run's (whose outputs TestOutputEqualsEvalDump ties to eval
// -key -dump). (kfake never expires a member killed while its JoinGroup or
// SyncGroup reply is in flight, so every kill waits until the member is in
// a generation: waitInGeneration.)
func TestChangelogSurvivesDiskLossAndRetention(t *testing.T) {
	t.Parallel()
	ctx, b, addr := startBroker(t, 4*time.Minute, crashPartitions, "features", "out-ref", "dlq-ref", "out-cl", "dlq-cl")
	inputIDs := produceCrashStream(ctx, t, b.Addrs(), changelogFeatures)
	dir := t.TempDir()
	refDir, clDir := filepath.Join(dir, "state-ref"), filepath.Join(dir, "state-cl")
	refCfg := writeConfig(t, dir, "ref.yaml", fmtConfig(addr, "ref", "out-ref", "dlq-ref", refDir, ""))
	clCfg := writeConfig(t, dir, "cl.yaml", crashConfig(addr, "cl", "out-cl", "dlq-cl", clDir, ""))

	// The uninterrupted run first: the trimming below would cut its input.
	<-runReference(t, refCfg, filepath.Join(dir, "ref.log"), func(p *consumerProcess) {
		waitCaughtUp(ctx, t, addr, "ref", crashPartitions, p)
	})
	if t.Failed() {
		return
	}

	log := filepath.Join(dir, "cl.log")
	lose := func() {
		t.Helper()
		if err := os.RemoveAll(clDir); err != nil {
			t.Fatal(err)
		}
		trimToCommitted(ctx, t, addr, "features", crashPartitions, "cl")
	}
	rng := rand.New(rand.NewPCG(2026, 24))
	fractions := []float64{rng.Float64() * 0.2, 0.2 + rng.Float64()*0.2, 0.4 + rng.Float64()*0.2, 0.6 + rng.Float64()*0.2}
	sort.Float64s(fractions)
	p := startConsumer(t, clCfg, log)
	p.waitInGeneration(ctx, t)
	time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
	p.stop(t, syscall.SIGKILL, 10*time.Second)
	t.Logf("killed at start-up")
	for i, frac := range fractions {
		lose()
		target := int64(frac * changelogFeatures)
		var env []string
		if i == 1 {
			env = append(env, killAfterChangelog+"=3") // dies after its 3rd changelog write, before that Badger commit
		}
		p = startConsumer(t, clCfg, log, env...)
		p.waitInGeneration(ctx, t)
		for {
			out, _, err := endOffsets(ctx, addr, "out-cl", crashPartitions)
			if err != nil {
				t.Fatal(err)
			}
			if out >= target && env == nil {
				p.stop(t, syscall.SIGKILL, 10*time.Second)
				t.Logf("killed at %d outputs (target %.0f%% of %d)", out, 100*frac, changelogFeatures)
				break
			}
			select {
			case err := <-p.done:
				if env == nil {
					t.Fatalf("consumer exited on its own (%v); log tail:\n%s", err, tail(log, 3000))
				}
				t.Logf("killed itself between a changelog write and its Badger commit at %d outputs (%v)", out, err)
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %d outputs (have %d); log tail:\n%s", target, out, tail(log, 3000))
			case <-time.After(20 * time.Millisecond):
				continue
			}
			break
		}
	}
	lose()
	p = startConsumer(t, clCfg, log)
	waitCaughtUp(ctx, t, addr, "cl", crashPartitions, p)
	if code := p.stop(t, syscall.SIGTERM, crashGrace); code != 0 {
		t.Errorf("final run: exit %d after SIGTERM; log tail:\n%s", code, tail(log, 3000))
	}
	if t.Failed() {
		return
	}
	ref := compareLearnerStates(t, refDir, clDir, crashKeys)
	outputs, distinct, inputs := checkPredicted(ctx, t, b.Addrs(), "out-cl", inputIDs)
	checkSamePredictions(ctx, t, b.Addrs(), "out-ref", "out-cl")
	restores := len(restoreEventsMatching(t, log, changelogRestored))
	if restores == 0 {
		t.Error("no partition was restored from the changelog")
	}
	t.Logf("%d predictions for %d inputs (%d duplicates); %d learners equal; %d partition restores from the changelog",
		outputs, inputs, outputs-distinct, len(ref), restores)

	// The same restore from the changelog as compaction leaves it: only the
	// newest record of every key (bundles and the marker), in a new topic.
	compactInto(ctx, t, addr, "cl-features-changelog", "cl-compacted", crashPartitions)
	dir3 := filepath.Join(dir, "state-compacted")
	cfg3 := writeConfig(t, dir, "compacted.yaml", crashConfig(addr, "cl", "out-cl", "dlq-cl", dir3, "changelog:\n  topic: cl-compacted\n"))
	log3 := filepath.Join(dir, "compacted.log")
	p = startConsumer(t, cfg3, log3)
	p.waitInGeneration(ctx, t)
	// The group's offsets are at the end already, so "caught up" holds at
	// once: wait until every partition has been restored before stopping.
	waitFor(ctx, t, "cl", p, func() (bool, error) {
		return len(restoreEventsMatching(t, log3, changelogRestored)) >= crashPartitions, nil
	})
	waitCaughtUp(ctx, t, addr, "cl", crashPartitions, p)
	if code := p.stop(t, syscall.SIGTERM, crashGrace); code != 0 {
		t.Errorf("compacted restore: exit %d after SIGTERM; log tail:\n%s", code, tail(log3, 3000))
	}
	compareLearnerStates(t, refDir, dir3, crashKeys)
}

// compactInto copies topic into a new compacted topic to, partition by
// partition, keeping only the newest record of every key in its place in
// the order: what log compaction may leave of topic.
func compactInto(ctx context.Context, t *testing.T, addr, from, to string, partitions int) {
	t.Helper()
	kc := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 10 * time.Second}
	res, err := kc.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: to, NumPartitions: partitions, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}}}}})
	if err != nil || res.Errors[to] != nil {
		t.Fatalf("create %s: %v %v", to, err, res.Errors)
	}
	msgs, err := broker.ReadAll(ctx, []string{addr}, from)
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int{}
	for i, m := range msgs {
		last[fmt.Sprint(m.Partition, "/", string(m.Key))] = i
	}
	var kept []kafka.Message
	for i, m := range msgs {
		if last[fmt.Sprint(m.Partition, "/", string(m.Key))] == i {
			kept = append(kept, kafka.Message{Partition: m.Partition, Key: m.Key, Value: m.Value})
		}
	}
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: to, RequiredAcks: kafka.RequireAll, BatchBytes: 64 << 20,
		Balancer: kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return m.Partition })}
	defer w.Close()
	if err := w.WriteMessages(ctx, kept...); err != nil {
		t.Fatal(err)
	}
	t.Logf("changelog compacted: %d of %d records kept", len(kept), len(msgs))
}

// produceCrashStream writes the crash tests' stream (crashKeys keys,
// dimension 5, labels delayed by up to 40 records) and returns its input ids.
func produceCrashStream(ctx context.Context, t *testing.T, addrs []string, features int) map[string]bool {
	t.Helper()
	src, _ := synth.New("mixed", synth.Options{Keys: crashKeys, Dim: 5, Seed: 11})
	f, _ := feed.New(src, feed.Options{Labels: "delayed", MaxDelay: 40, Seed: 11, N: features})
	ids := make(map[string]bool, features)
	n, err := feed.Produce(ctx, f, feed.Target{Brokers: addrs, Topic: "features"}, feed.ProduceOptions{
		OnRecord: func(r *feed.Record) {
			if !r.Label {
				ids[r.ID] = true
			}
		},
	})
	if err != nil || n != 2*features {
		t.Fatalf("produced %d records: %v", n, err)
	}
	return ids
}

// groupOffsets returns group's committed offset of every partition of
// topic (-1 where it has none).
func groupOffsets(ctx context.Context, t *testing.T, addr, group, topic string, partitions int) map[int]int64 {
	t.Helper()
	out, err := broker.Committed(ctx, []string{addr}, group, topic, partitions)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// trimToCommitted deletes the records of topic below the committed offsets
// of every group given (what retention may do to everything they have all
// committed).
func trimToCommitted(ctx context.Context, t *testing.T, addr, topic string, partitions int, groups ...string) {
	t.Helper()
	committed := map[int]int64{}
	for i, group := range groups {
		for part, off := range groupOffsets(ctx, t, addr, group, topic, partitions) {
			if c, ok := committed[part]; i == 0 || (ok && off < c) {
				committed[part] = off
			}
		}
	}
	if err := broker.DeleteRecords(ctx, []string{addr}, topic, committed); err != nil {
		t.Fatal(err)
	}
	t.Logf("input trimmed to the committed offsets %v of %v", committed, groups)
}

// restoreEventsMatching returns the log lines of path whose message is msg.
func restoreEventsMatching(t *testing.T, path, msg string) []restoreEvent {
	var out []restoreEvent
	for _, r := range restoreEvents(t, path) {
		if r.Message == msg {
			out = append(out, r)
		}
	}
	return out
}
