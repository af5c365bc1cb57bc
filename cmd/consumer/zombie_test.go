package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/changelog"
	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/feed"
	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/internal/synth"
)

const (
	zombieKeys  = 16
	zombieRate  = 1500 // records/s, features and labels
	zombieChunk = 150  // features of one chunk of the stream (0.2 s)
	// zombieTail is how many chunks the stream goes on for after the
	// zombie's kill.
	zombieTail = 4
	// zombieRunning is how long the zombie runs after SIGCONT.
	zombieRunning = 3 * time.Second
	// zombieSession is the members' kafka.session_timeout; the zombie
	// stays stopped at least half a second longer.
	zombieSession = 2 * time.Second
)

// TestZombieMemberCannotCorruptState: three members a, b and c (separate
// processes, session timeout 2 s) read a stream that is produced
// throughout. b is the zombie: it runs with checkpoint.interval 1h, so
// everything it processes stays unwritten until its revoke, and is frozen
// with SIGSTOP while the stream runs. After its session timeout the group
// rebalances b's partitions to a and c, whose transactional producers (one
// transactional id per input partition) fence b's before they restore; the
// test waits until they have checkpointed b's partitions past everything b
// had processed. b is then thawed with SIGCONT, still believing it owns its
// partitions, and runs for 3 s: it may process the records produced while
// it was stopped before it learns of the revoke, and its final checkpoint
// then tries to write its state, which must be refused as fenced (its log
// says so). b is killed with SIGKILL (once back in a stable generation:
// kfake never expires a member killed mid-join) and its checkpoint
// directory deleted; the stream ends and a and c catch up.
//
// Then every committed changelog record is read (read_committed): the
// markers' sequence numbers must rise and no marker or key's bundle may go
// back in input offsets, which a landed checkpoint of b would break (it
// forked from the state a and c restored). Finally all the members lose
// their disks, the input is trimmed to the committed offsets, and a fresh
// member d restores everything from the changelog: every learner's state
// bytes equal an uninterrupted run's, every input has a prediction and
// every prediction, b's included, equals the uninterrupted run's.
//
// With fencing disabled (a transactional id per member process), b's
// checkpoint lands and the test fails on the changelog and on the missing
// refusal; the final learner states still match there, because the restores
// of the rebalances that follow repair the changelog (rewritten from a
// newer Badger checkpoint, or the gap replayed from the input) before the
// input is trimmed.
func TestZombieMemberCannotCorruptState(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end multi-process test")
	}
	const parts = crashPartitions
	ctx, b, addr := startBroker(t, 2*time.Minute, parts, "features", "out-ref", "dlq-ref", "out-grp", "dlq-grp")
	dir := t.TempDir()
	refDir := filepath.Join(dir, "state-ref")
	refCfg := writeConfig(t, dir, "ref.yaml", fmtConfig(addr, "ref", "out-ref", "dlq-ref", refDir, ""))
	memberDir := func(name string) string { return filepath.Join(dir, "state-"+name) }
	memberLog := func(name string) string { return filepath.Join(dir, name+".log") }
	groupConfig := func(name string) string {
		c := regressionConfig(addr, "grp", "out-grp", "dlq-grp", memberDir(name), "")
		c.session = zombieSession
		return c.yaml()
	}
	procs := map[string]*consumerProcess{}
	start := func(name, cfg string, env ...string) {
		procs[name] = startConsumer(t, cfg, memberLog(name), append([]string{"POD_NAME=" + name}, env...)...)
	}
	// A failed test leaves no process behind, a stopped one least of all
	// (signalling one that has exited and been waited for is a no-op).
	t.Cleanup(func() {
		for _, p := range procs {
			p.cmd.Process.Signal(syscall.SIGCONT) //nolint:errcheck
			p.cmd.Process.Kill()                  //nolint:errcheck
		}
	})

	// The stream: short self-contained chunks of one synthetic source
	// (each chunk's delayed labels come within it), produced at a steady
	// rate until zombieTail chunks after the zombie's kill.
	const (
		running = iota
		frozen
		thawed
		killed
	)
	var stage atomic.Int32
	var produced atomic.Int64
	inputIDs := map[string]bool{}
	prodDone := make(chan error, 1)
	go func() {
		src, _ := synth.New("mixed", synth.Options{Keys: zombieKeys, Dim: 5, Seed: 47})
		var err error
		for chunk, after := uint64(0), 0; err == nil && after < zombieTail; chunk++ {
			if stage.Load() == killed {
				after++
			}
			f, _ := feed.New(src, feed.Options{Labels: "delayed", MaxDelay: 40, Seed: 47 + chunk, N: zombieChunk})
			base := produced.Load()
			var n int
			n, err = feed.Produce(ctx, f, feed.Target{Brokers: b.Addrs(), Topic: "features"}, feed.ProduceOptions{
				Rate: zombieRate, Batch: zombieRate / 20,
				OnRecord: func(r *feed.Record) { inputIDs[r.ID] = inputIDs[r.ID] || !r.Label },
				Progress: func(n int) { produced.Store(base + int64(n)) },
			})
			if err == nil && n != 2*zombieChunk {
				err = fmt.Errorf("chunk %d: produced %d records, want %d", chunk, n, 2*zombieChunk)
			}
		}
		prodDone <- err
	}()

	start("ref", refCfg)
	for _, name := range []string{"a", "b", "c"} {
		var env []string
		if name == "b" { // the zombie-to-be: nothing it processes is written before its revoke
			env = []string{"KERNELSTREAM_CHECKPOINT_INTERVAL=1h", "KERNELSTREAM_CHECKPOINT_MAX_RECORDS=1000000000"}
		}
		start(name, writeConfig(t, dir, name+".yaml", groupConfig(name)), env...)
	}

	alive := func(names ...string) {
		t.Helper()
		for _, n := range names {
			select {
			case err := <-procs[n].done:
				procs[n].done <- err
				t.Fatalf("%s exited on its own (%v); log tail:\n%s", n, err, tail(procs[n].log, 3000))
			default:
			}
		}
	}
	// sleep waits d, failing the test if a process named exits meanwhile.
	sleep := func(d time.Duration, names ...string) {
		t.Helper()
		for end := time.Now().Add(d); time.Now().Before(end); {
			alive(names...)
			select {
			case <-ctx.Done():
				t.Fatal("timed out")
			case <-time.After(min(50*time.Millisecond, time.Until(end))):
			}
		}
	}
	// waitStable waits for a Stable generation of exactly the members
	// names, every partition assigned, and returns it.
	waitStable := func(names ...string) groupView {
		t.Helper()
		for {
			alive(append(names, "ref")...)
			g, err := describeGroup(ctx, addr, "grp")
			if err == nil && g.stableOn(len(names), parts) && g.hasMembers(names...) {
				t.Logf("group stable at %d records: %s", produced.Load(), g)
				return g
			}
			select {
			case <-ctx.Done():
				t.Fatalf("group did not settle on %v (last: %v, %v)", names, g, err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}

	// 1. All three members work; b has processed part of the stream on
	// its partitions (and written none of it).
	var zombieParts []int
	for _, m := range waitStable("a", "b", "c").members {
		if m.identity == "b" {
			zombieParts = m.partitions
		}
	}
	from := produced.Load()
	for produced.Load() < max(from+zombieRate/2, 2000) {
		sleep(20*time.Millisecond, "a", "b", "c")
	}

	// 2. b is frozen past its session timeout (for at least 2.5 s) while
	// the stream goes on.
	logSizes := func() map[string]int64 {
		out := map[string]int64{}
		for _, n := range []string{"a", "b", "c"} {
			if st, err := os.Stat(memberLog(n)); err == nil {
				out[n] = st.Size()
			}
		}
		return out
	}
	atFreeze := logSizes()
	if err := procs["b"].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozenAt := time.Now()
	stage.Store(frozen)
	// b processed at most what the partitions held when it stopped.
	_, zombieEnds, err := endOffsets(ctx, addr, "features", parts)
	if err != nil {
		t.Fatal(err)
	}
	producedAtFreeze := produced.Load()
	t.Logf("b (partitions %v) frozen at %d records; its partitions' ends %v", zombieParts, producedAtFreeze, zombieEnds)
	// a and c take b's partitions, fence b and restore, then checkpoint
	// them past everything b processed.
	waitStable("a", "c")
	for {
		committed, past := groupOffsets(ctx, t, addr, "grp", "features", parts), true
		for _, p := range zombieParts {
			past = past && (zombieEnds[p] == 0 || committed[p] > zombieEnds[p])
		}
		if past {
			t.Logf("a and c committed %v, past b's state", committed)
			break
		}
		sleep(50*time.Millisecond, "a", "c", "ref")
	}
	// The group expired b a session timeout after its last heartbeat,
	// which may have come up to a heartbeat interval before SIGSTOP: b
	// stays stopped well past its session timeout all the same.
	sleep(time.Until(frozenAt.Add(zombieSession+500*time.Millisecond)), "a", "c", "ref")
	took := map[int]string{}
	for _, n := range []string{"a", "c"} {
		for _, r := range restoreEventsSince(t, memberLog(n), atFreeze[n]) {
			took[r.Partition] = n
		}
	}
	for _, p := range zombieParts {
		if took[p] == "" {
			t.Errorf("no other member restored b's partition %d while b was stopped", p)
		}
	}
	if t.Failed() {
		return
	}

	// 3. b thaws, still holding its partitions as far as it knows, and
	// runs for 3 s.
	atThaw := logSizes()
	if err := procs["b"].cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("b thawed after %v (partitions taken over: %v) at %d records", time.Since(frozenAt).Round(10*time.Millisecond), took, produced.Load())
	stage.Store(thawed)
	producedAtThaw := produced.Load()
	sleep(zombieRunning, "a", "b", "c")
	waitStable("a", "b", "c") // b rejoined: it is in a generation
	zombieLog := logSince(t, memberLog("b"), atThaw["b"])
	procs["b"].stop(t, syscall.SIGKILL, 10*time.Second)
	stage.Store(killed)
	producedAtKill := produced.Load()
	delete(procs, "b")
	if err := os.RemoveAll(memberDir("b")); err != nil {
		t.Fatal(err)
	}
	fenced := 0
	for _, line := range strings.Split(zombieLog, "\n") {
		// A refused transaction fails with kafkaio.ErrFenced, which the
		// partition's log lines carry.
		var l struct {
			Partition *int   `json:"partition"`
			Error     string `json:"error"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Partition == nil || !slices.Contains(zombieParts, *l.Partition) ||
			!strings.Contains(l.Error, kafkaio.ErrFenced.Error()) {
			continue
		}
		if fenced++; fenced == 1 {
			t.Logf("the zombie's write was refused: %s", line)
		}
	}
	if fenced == 0 {
		t.Errorf("b wrote nothing fenced on its partitions %v after its thaw: its checkpoint was not refused; its log since:\n%s", zombieParts, zombieLog)
	}

	// 4. The stream ends; a and c catch up (after b's session expires).
	waitStable("a", "c")
	if err := <-prodDone; err != nil {
		t.Fatal(err)
	}
	if !(producedAtFreeze < producedAtThaw && producedAtThaw < producedAtKill && producedAtKill < produced.Load()) {
		t.Errorf("the stream did not run throughout: %d records at the freeze, %d at the thaw, %d at the kill, %d in all",
			producedAtFreeze, producedAtThaw, producedAtKill, produced.Load())
	}
	for _, g := range []string{"ref", "grp"} {
		for {
			if ok, err := caughtUp(ctx, addr, g, "features", parts); err == nil && ok {
				break
			}
			sleep(100*time.Millisecond, "ref", "a", "c")
		}
	}
	for _, p := range procs {
		p.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck
	}
	clean := true // the checks below run even if the zombie was not refused
	for name, p := range procs {
		select {
		case <-p.done:
		case <-time.After(crashGrace):
			p.cmd.Process.Kill() //nolint:errcheck
			<-p.done
			t.Errorf("%s did not exit within %v of SIGTERM", name, crashGrace)
			clean = false
		}
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("%s: exit %d after SIGTERM; log tail:\n%s", name, code, tail(p.log, 3000))
			clean = false
		}
	}
	if !clean {
		return
	}

	// 5. Nothing of the zombie in the changelog: one line of checkpoints
	// per partition, only moving forward.
	checkChangelogAdvances(ctx, t, b.Addrs(), "grp-features-changelog")

	// 6. Every member loses its disk; retention trims the input; one
	// fresh member restores everything from the changelog.
	for _, n := range []string{"a", "c"} {
		if err := os.RemoveAll(memberDir(n)); err != nil {
			t.Fatal(err)
		}
	}
	trimToCommitted(ctx, t, addr, "features", parts, "grp", "ref")
	procs = map[string]*consumerProcess{}
	start("d", writeConfig(t, dir, "d.yaml", groupConfig("d")))
	d := procs["d"]
	d.waitInGeneration(ctx, t)
	_, ends, err := endOffsets(ctx, addr, "features", parts)
	if err != nil {
		t.Fatal(err)
	}
	withRecords := 0
	for _, end := range ends {
		if end > 0 {
			withRecords++
		}
	}
	waitFor(ctx, t, "grp", d, func() (bool, error) {
		return len(restoreEventsMatching(t, d.log, changelogRestored)) >= withRecords, nil
	})
	waitCaughtUp(ctx, t, addr, "grp", parts, d)
	if code := d.stop(t, syscall.SIGTERM, crashGrace); code != 0 || ctx.Err() != nil {
		t.Errorf("d: exit %d after SIGTERM; log tail:\n%s", code, tail(d.log, 3000))
		return
	}
	ref := compareLearnerStates(t, refDir, memberDir("d"), zombieKeys)
	outputs, distinct, inputs := checkPredicted(ctx, t, b.Addrs(), "out-grp", inputIDs)
	checkSamePredictions(ctx, t, b.Addrs(), "out-ref", "out-grp")
	t.Logf("%d records; %d fenced writes of the zombie; %d learners equal after the restore from the changelog; %d predictions for %d inputs (%d duplicates)",
		produced.Load(), fenced, len(ref), outputs, inputs, outputs-distinct)
}

// checkChangelogAdvances reads every committed record of the changelog
// topic and fails the test where a checkpoint of a member that no longer
// owned the partition landed: a partition's marker whose sequence number is
// not above the previous marker's (two checkpoints forked from one state),
// or a marker or a key's bundle holding a lower next input offset than an
// earlier one (a stale checkpoint landed after a newer one).
func checkChangelogAdvances(ctx context.Context, t *testing.T, addrs []string, topic string) {
	t.Helper()
	msgs, err := broker.ReadAll(ctx, addrs, topic)
	if err != nil {
		t.Fatal(err)
	}
	type last struct {
		seq     uint64
		next    int64 // the last marker's next input offset
		bundles map[string]int64
	}
	seen := map[int]*last{}
	markers, bad := 0, 0
	report := func(format string, args ...any) {
		t.Helper()
		if bad++; bad <= 8 {
			t.Errorf(format, args...)
		}
	}
	for _, m := range msgs {
		d, err := changelog.Decode(m.Key, m.Value)
		if err != nil {
			t.Fatalf("%s/%d offset %d: %v", topic, m.Partition, m.Offset, err)
		}
		l := seen[m.Partition]
		if l == nil {
			l = &last{next: -1, bundles: map[string]int64{}}
			seen[m.Partition] = l
		}
		switch {
		case d.Marker != nil:
			markers++
			// The partition meta: a version byte, then the varint next
			// input offset (as openStates reads it).
			if len(d.Marker.Meta) < 2 {
				t.Fatalf("%s/%d offset %d: marker meta % x", topic, m.Partition, m.Offset, d.Marker.Meta)
			}
			next, n := binary.Varint(d.Marker.Meta[1:])
			if n <= 0 {
				t.Fatalf("%s/%d offset %d: corrupt marker meta", topic, m.Partition, m.Offset)
			}
			if d.Marker.Seq <= l.seq {
				report("%s/%d offset %d: marker of checkpoint %d (input offset %d) after checkpoint %d (input offset %d): two owners' checkpoints landed",
					topic, m.Partition, m.Offset, d.Marker.Seq, next, l.seq, l.next)
			}
			if next < l.next {
				report("%s/%d offset %d: marker at input offset %d after one at %d: a stale checkpoint landed",
					topic, m.Partition, m.Offset, next, l.next)
			}
			l.seq, l.next = max(l.seq, d.Marker.Seq), max(l.next, next)
		case d.Bundle != nil:
			key := string(d.Routing)
			if prev, ok := l.bundles[key]; ok && d.Bundle.NextIn < prev {
				report("%s/%d offset %d: bundle of %s at input offset %d after one at %d: a stale checkpoint landed",
					topic, m.Partition, m.Offset, key, d.Bundle.NextIn, prev)
			}
			l.bundles[key] = max(l.bundles[key], d.Bundle.NextIn)
		}
	}
	if markers == 0 {
		t.Errorf("%s holds no marker", topic)
	}
	t.Logf("changelog: %d committed records, %d markers, %d out of order", len(msgs), markers, bad)
}

// logSince returns the log at path from offset on.
func logSince(t *testing.T, path string, offset int64) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b[min(offset, int64(len(b))):])
}

// restoreEventsSince returns the restore lines (restoreEvents) of the log
// at path from offset on.
func restoreEventsSince(t *testing.T, path string, offset int64) []restoreEvent {
	t.Helper()
	var out []restoreEvent
	for _, line := range strings.Split(logSince(t, path, offset), "\n") {
		var r restoreEvent
		if json.Unmarshal([]byte(line), &r) == nil && (r.Message == "partition restored" || r.Message == changelogRestored) {
			out = append(out, r)
		}
	}
	return out
}
