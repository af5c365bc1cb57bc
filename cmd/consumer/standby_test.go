package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/internal/feed"
	"github.com/kernelstream/kernelstream/internal/synth"
)

const (
	standbyPartitions = 4
	standbyFeatures   = 5000 // + 5000 delayed labels
	standbyRate       = 2000 // records/s: the stream lasts about 5 s
)

// TestStandbyFailover: two members with changelog.standby_replicas 1 while a
// stream is produced; once the group is stable and the standby copies have
// caught up, the member a is killed with SIGKILL (it is in a generation:
// kfake never expires a member killed while its JoinGroup or SyncGroup reply
// is in flight). b takes a's partitions from its warm copies, reading only
// the changelog records written since (every such restore logs standby
// true), and at the end b's learners equal an uninterrupted run's. The test
// logs the failover time: SIGKILL to b's first output on a's partitions.
//
// FAILOVER_FIGURE=1 also runs the same scenario without standby replicas,
// for the figure published in the README (not a KERNELSTREAM_ variable: the
// consumer refuses those it does not know):
//
//	FAILOVER_FIGURE=1 go test ./cmd/consumer -run TestStandbyFailover -v
func TestStandbyFailover(t *testing.T) {
	t.Parallel()
	replicas := []int{1}
	if os.Getenv("FAILOVER_FIGURE") != "" {
		replicas = append(replicas, 0)
	}
	for _, n := range replicas {
		t.Run(fmt.Sprintf("standby_replicas=%d", n), func(t *testing.T) {
			t.Parallel()
			standbyFailover(t, n)
		})
	}
}

func standbyFailover(t *testing.T, replicas int) {
	ctx, b, addr := startBroker(t, 3*time.Minute, standbyPartitions, "features", "out-ref", "dlq-ref", "out-sb", "dlq-sb")
	dir := t.TempDir()
	extra := fmt.Sprintf("changelog:\n  standby_replicas: %d\n", replicas)
	cfg := func(name string) string {
		return writeConfig(t, dir, name+".yaml", fmtConfig(addr, "sb", "out-sb", "dlq-sb", filepath.Join(dir, "state-"+name), extra))
	}
	start := func(name string) *consumerProcess {
		return startConsumer(t, cfg(name), filepath.Join(dir, name+".log"), "POD_NAME="+name)
	}

	src, _ := synth.New("mixed", synth.Options{Keys: 16, Dim: 5, Seed: 31})
	f, _ := feed.New(src, feed.Options{Labels: "delayed", MaxDelay: 40, Seed: 31, N: standbyFeatures})
	var produced atomic.Int64
	prodDone := make(chan error, 1)
	go func() {
		n, err := feed.Produce(ctx, f, feed.Target{Brokers: b.Addrs(), Topic: "features"}, feed.ProduceOptions{
			Rate: standbyRate, Progress: func(n int) { produced.Store(int64(n)) }})
		if err == nil && n != 2*standbyFeatures {
			err = fmt.Errorf("produced %d records, want %d", n, 2*standbyFeatures)
		}
		prodDone <- err
	}()

	pa, pb := start("a"), start("b")
	var view groupView
	for {
		g, err := describeGroup(ctx, addr, "sb")
		if err == nil && g.stableOn(2, standbyPartitions) {
			view = g
			break
		}
		select {
		case err := <-pa.done:
			t.Fatalf("a exited (%v); log tail:\n%s", err, tail(pa.log, 2000))
		case err := <-pb.done:
			t.Fatalf("b exited (%v); log tail:\n%s", err, tail(pb.log, 2000))
		case <-ctx.Done():
			t.Fatalf("group did not settle on 2 members (last: %v, %v); a log tail:\n%s", g, err, tail(pa.log, 2000))
		case <-time.After(100 * time.Millisecond):
		}
	}
	for float64(produced.Load()) < 0.4*2*standbyFeatures {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second) // the standby copies follow with a fetch wait of 0.5 s
	var aParts []int
	for _, m := range view.members {
		if m.identity == "a" {
			aParts = m.partitions
		}
	}
	killed := time.Now()
	pa.stop(t, syscall.SIGKILL, 10*time.Second)
	time.Sleep(200 * time.Millisecond) // a's last acknowledged writes are in
	_, before, err := endOffsets(ctx, addr, "out-sb", standbyPartitions)
	if err != nil {
		t.Fatal(err)
	}
	var failover time.Duration
	for failover == 0 {
		_, now, err := endOffsets(ctx, addr, "out-sb", standbyPartitions)
		if err == nil {
			for _, p := range aParts {
				if now[p] > before[p] {
					failover = time.Since(killed)
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no output on a's partitions %v after its kill", aParts)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Logf("standby_replicas %d: a (partitions %v) killed; first output of b on them %v later (session timeout 2s)",
		replicas, aParts, failover.Round(10*time.Millisecond))

	if err := <-prodDone; err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(ctx, t, addr, "sb", standbyPartitions, pb)
	if code := pb.stop(t, syscall.SIGTERM, crashGrace); code != 0 {
		t.Fatalf("b: exit %d after SIGTERM; log tail:\n%s", code, tail(pb.log, 3000))
	}
	refDir := filepath.Join(dir, "state-ref")
	refCfg := writeConfig(t, dir, "ref.yaml", fmtConfig(addr, "ref", "out-ref", "dlq-ref", refDir, ""))
	<-runReference(t, refCfg, filepath.Join(dir, "ref.log"), func(p *consumerProcess) {
		waitCaughtUp(ctx, t, addr, "ref", standbyPartitions, p)
	})
	if t.Failed() {
		return
	}
	compareLearnerStates(t, refDir, filepath.Join(dir, "state-b"), 16)

	last := map[int]restoreEvent{} // b's last restore of each partition: the takeover
	for _, r := range restoreEventsMatching(t, pb.log, changelogRestored) {
		last[r.Partition] = r
	}
	var took []string
	for _, p := range aParts {
		r, ok := last[p]
		if !ok {
			t.Errorf("b did not restore a's partition %d from the changelog", p)
			continue
		}
		took = append(took, fmt.Sprintf("partition %d: %d records read, standby %v", p, r.Records, r.Standby))
		if replicas > 0 && !r.Standby {
			t.Errorf("b restored partition %d without its standby copy", p)
		}
	}
	t.Logf("b's takeover restores: %s", strings.Join(took, "; "))
}
