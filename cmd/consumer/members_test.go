package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/feed"
	"github.com/kernelstream/kernelstream/internal/synth"
)

const (
	membersPartitions = 8
	membersFeatures   = 8000 // + 8000 delayed labels
	membersKeys       = 32
	membersRate       = 1200 // records/s: the stream lasts about 13 s, so members change mid-stream
)

// TestMembersJoinAndLeave runs the consumer group as separate processes, each
// with its own checkpoint directory and stable identity (POD_NAME, as the
// StatefulSet sets it; kafka.instance_id empty), while a stream is produced:
//
//  1. members a, b and c start on an 8-partition topic;
//  2. at 25% of the stream b is killed with SIGKILL: after the session
//     timeout a and c take its partitions and restore them from the
//     changelog (their disks hold nothing for them), replaying the input
//     only from its last marker, without re-emitting;
//  3. at 40% b comes back on its old disk (a rolling restart): the sticky
//     balancer gives it back partitions it held, restored over its older
//     checkpoint;
//  4. at 55% c is killed with SIGKILL and its disk deleted, the input is
//     trimmed (DeleteRecords) to the committed offsets of the group and of
//     the reference, as retention would, and a fresh member d joins with
//     an empty disk;
//  5. at 70% the same again with a, and a fresh member e.
//
// Every kill waits until the group is stable, so that the victim is in a
// generation (kfake never expires a member killed while its JoinGroup or
// SyncGroup reply is in flight).
//
// At the end, for every partition, the learners of the member that processed
// it last (its checkpoint's next offset is the partition's end) equal, byte
// for byte, those of an uninterrupted single consumer over the same input,
// and every input id has at least one prediction on the group's output.
func TestMembersJoinAndLeave(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end multi-process test")
	}
	ctx, b, addr := startBroker(t, 3*time.Minute, membersPartitions, "features", "out-ref", "dlq-ref", "out-grp", "dlq-grp")
	dir := t.TempDir()
	refDir := filepath.Join(dir, "state-ref")
	refCfg := writeConfig(t, dir, "ref.yaml", fmtConfig(addr, "ref", "out-ref", "dlq-ref", refDir, ""))
	memberDir := func(name string) string { return filepath.Join(dir, "state-"+name) }
	memberCfg := func(name string) string {
		return writeConfig(t, dir, name+".yaml", fmtConfig(addr, "grp", "out-grp", "dlq-grp", memberDir(name), ""))
	}
	// start launches one member; its identity is POD_NAME, as the
	// StatefulSet sets it (kafka.instance_id is left empty).
	start := func(name, cfg string) *consumerProcess {
		return startConsumer(t, cfg, filepath.Join(dir, name+".log"), "POD_NAME="+name)
	}

	// The stream, produced at a steady rate while the members come and go.
	src, _ := synth.New("mixed", synth.Options{Keys: membersKeys, Dim: 5, Seed: 23})
	f, _ := feed.New(src, feed.Options{Labels: "delayed", MaxDelay: 40, Seed: 23, N: membersFeatures})
	inputIDs := make(map[string]bool, membersFeatures)
	var produced atomic.Int64
	prodDone := make(chan error, 1)
	go func() {
		n, err := feed.Produce(ctx, f, feed.Target{Brokers: b.Addrs(), Topic: "features"}, feed.ProduceOptions{
			Rate: membersRate,
			// 20 writes a second rather than the feed's 100: the members
			// still change mid-stream, and the broker and five consumers
			// handle a fifth of the requests (half the test's CPU).
			Batch:    membersRate / 20,
			OnRecord: func(r *feed.Record) { inputIDs[r.ID] = inputIDs[r.ID] || !r.Label },
			Progress: func(n int) { produced.Store(int64(n)) },
		})
		if err == nil && n != 2*membersFeatures {
			err = fmt.Errorf("produced %d records, want %d", n, 2*membersFeatures)
		}
		prodDone <- err
	}()

	procs := map[string]*consumerProcess{}
	procs["ref"] = start("ref", refCfg)
	for _, name := range []string{"a", "b", "c"} {
		procs[name] = start(name, memberCfg(name))
	}
	alive := func(names ...string) {
		t.Helper()
		for _, n := range names {
			select {
			case err := <-procs[n].done:
				procs[n].done <- err
				t.Fatalf("member %s exited on its own (%v); log tail:\n%s", n, err, tail(procs[n].log, 3000))
			default:
			}
		}
	}
	waitProduced := func(frac float64) {
		t.Helper()
		for float64(produced.Load()) < frac*2*membersFeatures {
			select {
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %.0f%% of the stream (have %d records)", 100*frac, produced.Load())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	// waitStable waits for a Stable generation of exactly the members
	// names (a killed member still counts until its session expires, so
	// a count alone would let the next kill hit a member whose JoinGroup
	// is in flight).
	waitStable := func(names ...string) {
		t.Helper()
		for {
			alive(names...)
			g, err := describeGroup(ctx, addr, "grp")
			if err == nil && g.stable(len(names)) && g.hasMembers(names...) {
				t.Logf("group stable at %d/%d records: %s", produced.Load(), 2*membersFeatures, g)
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("group did not settle on %v (last: %v, %v)", names, g, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}

	waitStable("a", "b", "c")
	waitProduced(0.25)
	procs["b"].stop(t, syscall.SIGKILL, 10*time.Second)
	t.Logf("b killed at %d records", produced.Load())
	atKill := groupOffsets(ctx, t, addr, "grp", "features", membersPartitions)
	waitStable("a", "c")
	waitProduced(0.40)
	// Every partition, b's among them, must have been checkpointed again
	// (by a and c) before b comes back, or b's disk is still current and
	// there is no older checkpoint to restore over.
	for {
		now, moved := groupOffsets(ctx, t, addr, "grp", "features", membersPartitions), true
		for part, off := range atKill {
			moved = moved && now[part] > off
		}
		if moved {
			break
		}
		alive("a", "c")
		select {
		case <-ctx.Done():
			t.Fatalf("a and c did not checkpoint b's partitions (committed %v, at b's kill %v)", now, atKill)
		case <-time.After(100 * time.Millisecond):
		}
	}
	procs["b"] = start("b", memberCfg("b"))
	waitStable("a", "b", "c")
	// A member lost with its disk, retention past the committed offsets,
	// a fresh member in its place: twice.
	replace := func(frac float64, victim, fresh string, others ...string) {
		t.Helper()
		waitProduced(frac)
		procs[victim].stop(t, syscall.SIGKILL, 10*time.Second)
		delete(procs, victim)
		if err := os.RemoveAll(memberDir(victim)); err != nil {
			t.Fatal(err)
		}
		trimToCommitted(ctx, t, addr, "features", membersPartitions, "grp", "ref")
		t.Logf("%s killed and its disk deleted at %d records; %s joins", victim, produced.Load(), fresh)
		procs[fresh] = start(fresh, memberCfg(fresh))
		waitStable(append(others, fresh)...)
	}
	replace(0.55, "c", "d", "a", "b")
	replace(0.70, "a", "e", "b", "d")

	if err := <-prodDone; err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"ref", "grp"} {
		for {
			ok, err := caughtUp(ctx, addr, g, "features", membersPartitions)
			if err == nil && ok {
				break
			}
			alive("ref", "b", "d", "e")
			select {
			case <-ctx.Done():
				t.Fatalf("group %s did not catch up", g)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	waitStable("b", "d", "e")
	// All at once, so that no member is left to take over another's
	// partitions while they leave.
	for _, p := range procs {
		p.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck
	}
	for name, p := range procs {
		// Not p.stop: a second SIGTERM makes the consumer exit at once.
		select {
		case <-p.done:
		case <-time.After(crashGrace):
			p.cmd.Process.Kill() //nolint:errcheck
			<-p.done
			t.Errorf("member %s did not exit within %v of SIGTERM", name, crashGrace)
		}
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("member %s: exit %d after SIGTERM; log tail:\n%s", name, code, tail(p.log, 3000))
		}
	}
	if t.Failed() {
		return
	}

	// Which restore paths ran (the engine logs one line per partition
	// restore): a partition rebuilt on a disk without its state while the
	// group had moved on, and one restored from an older checkpoint of the
	// same member plus the gap.
	var empty, older int
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		for _, r := range restoreEvents(t, filepath.Join(dir, name+".log")) {
			switch {
			case r.Message == changelogRestored && !r.LocalState:
				empty++
				t.Logf("%s: partition %d restored from the changelog onto an empty disk", name, r.Partition)
			case r.Message == changelogRestored:
				older++
				t.Logf("%s: partition %d restored from the changelog over its older local checkpoint", name, r.Partition)
			case !r.Checkpoint && r.GroupOffset > 0:
				empty++
				t.Logf("%s: partition %d rebuilt from an empty disk up to the group offset %d", name, r.Partition, r.GroupOffset)
			case r.Checkpoint && r.NextOffset < r.GroupOffset:
				older++
				t.Logf("%s: partition %d restored from its checkpoint at %d, gap replayed up to %d", name, r.Partition, r.NextOffset, r.GroupOffset)
			}
		}
	}
	if empty == 0 {
		t.Error("no partition was rebuilt on a member without its state: the scenario did not move state")
	}
	if older == 0 {
		t.Error("b came back on its old disk but restored no partition from its older checkpoint (the sticky balancer should give its partitions back after a restart)")
	}

	// Compare, partition by partition, with the uninterrupted run.
	_, ends, err := endOffsets(ctx, addr, "features", membersPartitions)
	if err != nil {
		t.Fatal(err)
	}
	ref := openStates(t, refDir)
	members := map[string]partitionStates{}
	for _, name := range []string{"b", "d", "e"} { // a and c lost their disks
		members[name] = openStates(t, memberDir(name))
	}
	learners := 0
	for part := 0; part < membersPartitions; part++ {
		if ref[part].next != ends[part] {
			t.Errorf("partition %d: reference checkpoint at %d, end %d", part, ref[part].next, ends[part])
		}
		var fresh []string
		for _, name := range []string{"b", "d", "e"} {
			m := members[name][part]
			if m.next != ends[part] {
				continue
			}
			fresh = append(fresh, name)
			learners += len(m.learners)
			if len(m.learners) != len(ref[part].learners) {
				t.Errorf("partition %d on %s: %d learners, reference %d", part, name, len(m.learners), len(ref[part].learners))
			}
			for key, want := range ref[part].learners {
				if got, ok := m.learners[key]; !ok {
					t.Errorf("partition %d on %s: learner %s missing", part, name, key)
				} else if !bytes.Equal(got, want) {
					t.Errorf("partition %d on %s: learner %s differs from the uninterrupted run (%d vs %d bytes)", part, name, key, len(got), len(want))
				}
			}
		}
		if len(fresh) == 0 {
			var at []string
			for name, m := range members {
				at = append(at, fmt.Sprintf("%s@%d", name, m[part].next))
			}
			sort.Strings(at)
			t.Errorf("partition %d (end %d): no member checkpointed it to the end (%s)", part, ends[part], strings.Join(at, " "))
		}
		t.Logf("partition %d: end %d, %d keys, up to date on %v", part, ends[part], len(ref[part].learners), fresh)
	}

	outputs, distinct, inputs := checkPredicted(ctx, t, b.Addrs(), "out-grp", inputIDs)
	t.Logf("%d predictions for %d inputs (%d duplicates from the kill and the moves); %d up-to-date learner copies equal the reference",
		outputs, inputs, outputs-distinct, learners)
}

// partitionStates is what one checkpoint directory holds per partition.
type partitionStates map[int]struct {
	next     int64 // next input offset of the partition's checkpoint; -1 = none
	learners map[string][]byte
}

// openStates reads a stopped member's store. The next offset is the first
// field of the engine's partition meta (processor/partition.go, encodeMeta:
// version byte 1, then the varint next input offset); the checkpoint package
// stores the meta opaquely, so the test decodes that one field itself.
func openStates(t *testing.T, dir string) partitionStates {
	t.Helper()
	st, err := checkpoint.Open(checkpoint.Options{Dir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := partitionStates{}
	for part := 0; part < membersPartitions; part++ {
		ps := out[part]
		ps.next, ps.learners = -1, map[string][]byte{}
		meta, ok, err := st.Meta(part)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if len(meta) < 2 || (meta[0] != 1 && meta[0] != 2) {
				t.Fatalf("%s: partition %d: unknown meta layout % x (update the test with the engine)", dir, part, meta)
			}
			v, n := binary.Varint(meta[1:])
			if n <= 0 {
				t.Fatalf("%s: partition %d: corrupt meta", dir, part)
			}
			ps.next = v
		}
		err = st.EachLearner(part, func(key, blob []byte) error {
			ps.learners[string(key)] = append([]byte(nil), blob...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		out[part] = ps
	}
	return out
}

// groupView is a consumer group as DescribeGroups shows it.
type groupView struct {
	state   string
	members []memberView
}

type memberView struct {
	identity   string
	partitions []int
}

// stable reports a Stable group of that many members that together hold
// every partition of an 8-partition topic (membersPartitions).
func (g groupView) stable(members int) bool { return g.stableOn(members, membersPartitions) }

// stableOn is stable for a topic of partitions partitions.
func (g groupView) stableOn(members, partitions int) bool {
	if g.state != "Stable" || len(g.members) != members {
		return false
	}
	seen := map[int]bool{}
	for _, m := range g.members {
		if len(m.partitions) == 0 {
			return false
		}
		for _, p := range m.partitions {
			seen[p] = true
		}
	}
	return len(seen) == partitions
}

// hasMembers reports whether the group's members are exactly the
// identities names (in any order).
func (g groupView) hasMembers(names ...string) bool {
	if len(g.members) != len(names) {
		return false
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	for _, m := range g.members {
		if !want[m.identity] {
			return false
		}
		delete(want, m.identity)
	}
	return true
}

func (g groupView) String() string {
	parts := make([]string, 0, len(g.members))
	for _, m := range g.members {
		parts = append(parts, fmt.Sprintf("%s=%v", m.identity, m.partitions))
	}
	sort.Strings(parts)
	return g.state + " " + strings.Join(parts, " ")
}

// describeGroup reads the group's state and assignment. The identity is the
// "id" field of the sticky balancer's JSON user data (processor/balancer.go),
// shown for the log only; the member id stands in when it is absent.
func describeGroup(ctx context.Context, addr, group string) (groupView, error) {
	cl := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 5 * time.Second}
	resp, err := cl.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil {
		return groupView{}, err
	}
	if len(resp.Groups) != 1 {
		return groupView{}, fmt.Errorf("describe %s: %d groups", group, len(resp.Groups))
	}
	g := resp.Groups[0]
	if g.Error != nil {
		return groupView{}, g.Error
	}
	v := groupView{state: g.GroupState}
	for _, m := range g.Members {
		var ud struct {
			ID string `json:"id"`
		}
		mv := memberView{identity: m.MemberID}
		if json.Unmarshal(m.MemberMetadata.UserData, &ud) == nil && ud.ID != "" {
			mv.identity = ud.ID
		}
		for _, tp := range m.MemberAssignments.Topics {
			if tp.Topic == "features" {
				mv.partitions = append(mv.partitions, tp.Partitions...)
			}
		}
		sort.Ints(mv.partitions)
		v.members = append(v.members, mv)
	}
	return v, nil
}

// restoreEvent is the engine's "partition restored" log line (JSON).
type restoreEvent struct {
	Message     string `json:"message"`
	Partition   int    `json:"partition"`
	NextOffset  int64  `json:"next_offset"`
	GroupOffset int64  `json:"group_offset"`
	Checkpoint  bool   `json:"checkpoint"`
	LocalState  bool   `json:"local_state"` // changelog restores: over an older local checkpoint
	Standby     bool   `json:"standby"`     // changelog restores: from this member's warm copy
	Records     int    `json:"records"`     // changelog restores: records read
}

// changelogRestored is the engine's log line for a partition whose state
// came from the changelog topic.
const changelogRestored = "partition state restored from the changelog"

func restoreEvents(t *testing.T, path string) []restoreEvent {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []restoreEvent
	for _, line := range bytes.Split(b, []byte("\n")) {
		var r restoreEvent
		if json.Unmarshal(line, &r) == nil && (r.Message == "partition restored" || r.Message == changelogRestored) {
			out = append(out, r)
		}
	}
	return out
}
