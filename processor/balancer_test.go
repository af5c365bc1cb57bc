package processor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/processor"
)

// The planning itself (quotas, claim tiers, standby replicas, the leader's
// memory) is tested in internal/sticky; these tests cover what the kafka-go
// side adds: the conversions, the member's own claims, and a real group.

const (
	stickyInput  = "features"
	stickyLabels = "labels"
)

func stickyPod(i int) string { return fmt.Sprintf("kernelstream-%d", i) }

// stickyMember is the kafka-go group member of b's process.
func stickyMember(t *testing.T, memberID string, topics []string, b *processor.StickyBalancer) kafka.GroupMember {
	t.Helper()
	ud, err := b.UserData()
	if err != nil {
		t.Fatal(err)
	}
	return kafka.GroupMember{ID: memberID, Topics: topics, UserData: ud}
}

// TestStickyBalancerAssignGroups: kafka-go's members and partitions, in any
// order, reach the planner and its plan comes back as kafka-go's
// assignments, with the standby setting of SetStandby.
func TestStickyBalancerAssignGroups(t *testing.T) {
	both := []string{stickyInput, stickyLabels}
	owning := func(identity string, standby bool, owned map[string][]int) *processor.StickyBalancer {
		b := processor.NewStickyBalancer(identity)
		if standby {
			b.SetStandby("cl", 1)
		}
		b.SetOwned(owned)
		return b
	}
	for _, tc := range []struct {
		name       string
		standby    bool // the leader hands out topic "cl" as standby tasks, one replica
		members    []kafka.GroupMember
		partitions []kafka.Partition
		want       kafka.GroupMemberAssignments
	}{
		{
			name: "owners keep their partitions; a topic nobody reads is left out",
			members: []kafka.GroupMember{
				stickyMember(t, "b", both, owning("p-1", false, map[string][]int{stickyInput: {2, 3}, stickyLabels: {2, 3}})),
				stickyMember(t, "a", both, owning("p-0", false, map[string][]int{stickyInput: {0, 1}, stickyLabels: {0, 1}})),
			},
			partitions: []kafka.Partition{
				{Topic: stickyLabels, ID: 3}, {Topic: "other", ID: 0}, {Topic: stickyInput, ID: 2}, {Topic: stickyInput, ID: 0},
				{Topic: stickyLabels, ID: 1}, {Topic: stickyInput, ID: 3}, {Topic: stickyLabels, ID: 0}, {Topic: stickyInput, ID: 1},
				{Topic: stickyLabels, ID: 2},
			},
			want: kafka.GroupMemberAssignments{
				"a": {stickyInput: {0, 1}, stickyLabels: {0, 1}},
				"b": {stickyInput: {2, 3}, stickyLabels: {2, 3}},
			},
		},
		{
			name: "unreadable user data: fair share by member ID",
			members: []kafka.GroupMember{
				{ID: "b", Topics: both, UserData: []byte("not json")},
				{ID: "a", Topics: both, UserData: nil},
			},
			partitions: []kafka.Partition{{Topic: stickyInput, ID: 1}, {Topic: stickyInput, ID: 0}},
			want: kafka.GroupMemberAssignments{
				"a": {stickyInput: {0}},
				"b": {stickyInput: {1}},
			},
		},
		{
			name:    "standby tasks of the changelog stay with the members that tail them",
			standby: true,
			members: []kafka.GroupMember{
				stickyMember(t, "a", []string{stickyInput, "cl"}, owning("p-0", true, map[string][]int{stickyInput: {0}, "cl": {1}})),
				stickyMember(t, "b", []string{stickyInput, "cl"}, owning("p-1", true, map[string][]int{stickyInput: {1}, "cl": {0}})),
			},
			partitions: []kafka.Partition{{Topic: "cl", ID: 1}, {Topic: stickyInput, ID: 1}, {Topic: "cl", ID: 0}, {Topic: stickyInput, ID: 0}},
			want: kafka.GroupMemberAssignments{
				"a": {stickyInput: {0}, "cl": {1}},
				"b": {stickyInput: {1}, "cl": {0}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leader := processor.NewStickyBalancer("leader")
			if tc.standby {
				leader.SetStandby("cl", 1)
			}
			if got := leader.AssignGroups(tc.members, tc.partitions); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestStickyBalancerUserData(t *testing.T) {
	b := processor.NewStickyBalancer("kernelstream-3")
	if b.ProtocolName() != processor.StickyProtocolName {
		t.Fatalf("protocol %q", b.ProtocolName())
	}
	for _, tc := range []struct {
		name string
		set  func()
		want string
	}{
		{"fresh process: identity only", func() {}, `{"v":1,"id":"kernelstream-3"}`},
		{"state restored from disk", func() { b.SetRestored(map[string][]int{stickyInput: {4, 1}, stickyLabels: {1}}) },
			`{"v":1,"id":"kernelstream-3","restored":[1,4]}`},
		{"owned after a generation", func() {
			b.SetOwnedAssignments(map[string][]kafka.PartitionAssignment{stickyInput: {{ID: 7}, {ID: 2}}, stickyLabels: {{ID: 2}, {ID: 7}}})
		}, `{"v":1,"id":"kernelstream-3","owned":[2,7]}`},
		{"owns nothing (known)", func() { b.SetOwned(nil) }, `{"v":1,"id":"kernelstream-3","owned":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.set()
			data, err := b.UserData()
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != tc.want {
				t.Fatalf("UserData %s, want %s", data, tc.want)
			}
			if !json.Valid(data) {
				t.Fatal("not JSON")
			}
		})
	}
}

// stickyMinus returns the elements of a not in b.
func stickyMinus(a, b []int) []int {
	in := map[int]bool{}
	for _, x := range b {
		in[x] = true
	}
	var out []int
	for _, x := range a {
		if !in[x] {
			out = append(out, x)
		}
	}
	return out
}

// TestStickyBalancerWithKafkaGo runs the balancer inside real kafka-go
// consumer groups against the embedded Kafka-protocol broker: three members
// (doing what the engine does: SetRestored at start, SetOwnedAssignments per
// generation), one leaves and comes back as a new process with the same
// identity, and must get exactly its partitions back, while the survivors
// keep theirs throughout.
func TestStickyBalancerWithKafkaGo(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts an embedded broker")
	}
	b, err := broker.Start(broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const parts = 6
	if err := b.CreateTopics(ctx, parts, stickyInput, stickyLabels); err != nil {
		t.Fatal(err)
	}

	type report struct {
		gen   int32
		parts []int
	}
	var mu sync.Mutex
	reports := map[string]report{}
	start := func(identity string, restored []int) (stop func()) {
		bal := processor.NewStickyBalancer(identity)
		if restored != nil {
			bal.SetRestored(map[string][]int{stickyInput: restored, stickyLabels: restored})
		}
		cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
			ID: "sticky-balancer-test", Brokers: b.Addrs(), Topics: []string{stickyInput, stickyLabels},
			GroupBalancers:    []kafka.GroupBalancer{bal},
			HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 6 * time.Second,
			RebalanceTimeout: 3 * time.Second, JoinGroupBackoff: 100 * time.Millisecond, Timeout: 5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				gen, err := cg.Next(ctx)
				if err != nil {
					if errors.Is(err, kafka.ErrGroupClosed) || ctx.Err() != nil {
						return
					}
					time.Sleep(50 * time.Millisecond)
					continue
				}
				bal.SetOwnedAssignments(gen.Assignments)
				var in, lab []int
				for _, a := range gen.Assignments[stickyInput] {
					in = append(in, a.ID)
				}
				for _, a := range gen.Assignments[stickyLabels] {
					lab = append(lab, a.ID)
				}
				sort.Ints(in)
				sort.Ints(lab)
				if !reflect.DeepEqual(in, lab) {
					t.Errorf("%s: input partitions %v, labels partitions %v", identity, in, lab)
				}
				mu.Lock()
				reports[identity] = report{gen: gen.ID, parts: in}
				mu.Unlock()
				ended := make(chan struct{})
				gen.Start(func(gctx context.Context) { <-gctx.Done(); close(ended) })
				<-ended
			}
		}()
		return func() {
			cg.Close()
			<-done
			mu.Lock()
			delete(reports, identity)
			mu.Unlock()
		}
	}
	// settled waits until exactly the given identities report the same
	// generation and together hold every partition once.
	settled := func(ids ...string) map[string][]int {
		t.Helper()
		for ctx.Err() == nil {
			mu.Lock()
			got := map[string][]int{}
			gens := map[int32]bool{}
			n := 0
			for id, r := range reports {
				got[id] = r.parts
				gens[r.gen] = true
				n += len(r.parts)
			}
			mu.Unlock()
			ok := len(got) == len(ids) && len(gens) == 1 && n == parts
			for _, id := range ids {
				if _, in := got[id]; !in {
					ok = false
				}
			}
			if ok {
				return got
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("group did not settle on %v: %v", ids, reports)
		return nil
	}

	stops := map[string]func(){}
	for i := 0; i < 3; i++ {
		stops[stickyPod(i)] = start(stickyPod(i), nil)
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	initial := settled(stickyPod(0), stickyPod(1), stickyPod(2))
	t.Logf("initial assignment %v", initial)

	// A rolling restart, highest ordinal first as a StatefulSet does: each
	// pod comes back as a new member (new kafka member ID), and one of them
	// is the group leader.
	for _, i := range []int{2, 1, 0} {
		name := stickyPod(i)
		stops[name]()
		delete(stops, name)
		var rest []string
		for j := 0; j < 3; j++ {
			if j != i {
				rest = append(rest, stickyPod(j))
			}
		}
		away := settled(rest...)
		t.Logf("%s away: %v", name, away)
		for _, id := range rest {
			if len(stickyMinus(initial[id], away[id])) > 0 {
				t.Fatalf("%s away: %s lost partitions: %v -> %v", name, id, initial[id], away[id])
			}
		}
		stops[name] = start(name, initial[name])
		if back := settled(stickyPod(0), stickyPod(1), stickyPod(2)); !reflect.DeepEqual(back, initial) {
			t.Fatalf("%s restarted: %v, before %v", name, back, initial)
		}
	}
}
