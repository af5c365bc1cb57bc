package sticky_test

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"
)

func TestRollingRestartMovesNothing(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pods, part int
		engine     bool
		restart    []int // StatefulSet order: highest ordinal first
	}{
		{"engine 3 pods 12 partitions", 3, 12, true, []int{2, 1, 0}},
		{"engine 3 pods 7 partitions", 3, 7, true, []int{2, 1, 0}},
		{"engine 5 pods 16 partitions", 5, 16, true, []int{4, 3, 2, 1, 0}},
		{"engine 4 pods 3 partitions", 4, 3, true, []int{3, 2, 1, 0}},
		{"engine 1 pod 4 partitions", 1, 4, true, []int{0}},
		// Without the engine's claims the leader's memory carries the
		// assignment, as long as the leader (pod 0, the oldest member)
		// itself is not restarted.
		{"leader memory 3 pods 12 partitions", 3, 12, false, []int{2, 1}},
		{"leader memory 4 pods 10 partitions", 4, 10, false, []int{3, 2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newSim(t, tc.part, tc.engine, input, labels)
			for i := 0; i < tc.pods; i++ {
				g.start(pod(i))
			}
			initial := g.rebalance()
			for _, i := range tc.restart {
				before := g.rebalance()
				g.stop(pod(i))
				if tc.pods > 1 {
					away := g.rebalance()
					// The survivors keep all they had and take only the
					// departed pod's partitions.
					if got, want := moved(before, away), len(before[pod(i)]); got != want {
						t.Fatalf("pod %d away: %d partitions moved, want %d: %v -> %v", i, got, want, before, away)
					}
					for id, parts := range before {
						if id != pod(i) && len(lost(parts, away[id])) > 0 {
							t.Fatalf("pod %d away: survivor %s lost partitions: %v -> %v", i, id, parts, away[id])
						}
					}
				}
				g.start(pod(i))
				back := g.rebalance()
				if !reflect.DeepEqual(back, before) {
					t.Fatalf("pod %d restarted: assignment %v, want the one before %v", i, back, before)
				}
			}
			if final := g.rebalance(); !reflect.DeepEqual(final, initial) {
				t.Fatalf("after the rolling restart %v, before %v", final, initial)
			}
		})
	}
}

// A restart where the pod comes back before the group noticed it left (no
// LeaveGroup, e.g. SIGKILL within the session timeout): the coordinator
// replaces the member, and nothing moves even without the engine's claims.
func TestFastRestartMovesNothing(t *testing.T) {
	for _, engine := range []bool{true, false} {
		t.Run(fmt.Sprintf("engine=%v", engine), func(t *testing.T) {
			g := newSim(t, 10, engine, input, labels)
			for i := 0; i < 3; i++ {
				g.start(pod(i))
			}
			before := g.rebalance()
			g.stop(pod(2))
			g.start(pod(2))
			if after := g.rebalance(); !reflect.DeepEqual(after, before) {
				t.Fatalf("after a fast restart %v, before %v", after, before)
			}
		})
	}
}

// TestRestoreBeatsStaleLeaderMemory: a leader remembers only the rebalances
// it led. A pod restarted with its partitions on disk states them (restored
// claims); the leader must not add what it remembers of that identity from
// an older rebalance (here the extra partition it held while another pod was
// away), which made the pod take a partition of a member that still owned it
// and leave one of its own (seen with kafka-go: processor's
// TestStickyBalancerWithKafkaGo failed about once in 25 runs under load).
func TestRestoreBeatsStaleLeaderMemory(t *testing.T) {
	g := newSim(t, 6, true, input, labels)
	for i := 0; i < 3; i++ {
		g.start(pod(i))
	}
	g.leader = pod(2)
	initial := g.rebalance()
	g.stop(pod(1)) // pod 0 takes one of pod 1's partitions, and pod 2 remembers it
	away := g.rebalance()
	if len(away[pod(0)]) != 3 {
		t.Fatalf("pod 1 away: %v, want 3 partitions for pod 0", away)
	}
	g.start(pod(1))
	g.leader = pod(0) // pod 2 does not lead this one: its memory of pod 0 goes stale
	if back := g.rebalance(); !reflect.DeepEqual(back, initial) {
		t.Fatalf("pod 1 back: %v, want %v", back, initial)
	}
	g.stop(pod(0))
	g.leader = pod(2)
	g.rebalance()
	g.start(pod(0)) // restores its partitions from disk
	if back := g.rebalance(); !reflect.DeepEqual(back, initial) {
		t.Fatalf("pod 0 back: %v, want %v (pod 0 was remembered with %v)", back, initial, away[pod(0)])
	}
}

func TestScaleMovesMinimum(t *testing.T) {
	for _, tc := range []struct {
		name      string
		part      int
		from, to  int // replicas before and after (StatefulSet ordinals)
		engine    bool
		wantMoved int // -1: compare with minMoves
	}{
		{"up 3->4 of 12", 12, 3, 4, true, 3},
		{"up 3->4 of 7", 7, 3, 4, true, -1},
		{"up 1->2 of 6", 6, 1, 2, true, 3},
		{"up 4->6 of 16", 16, 4, 6, true, -1},
		{"up 2->5 of 3", 3, 2, 5, true, -1},
		{"down 4->3 of 12", 12, 4, 3, true, 3},
		{"down 3->2 of 7", 7, 3, 2, true, -1},
		{"down 6->1 of 16", 16, 6, 1, true, -1},
		{"up 3->4 of 12 leader memory", 12, 3, 4, false, 3},
		{"down 4->3 of 13 leader memory", 13, 4, 3, false, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newSim(t, tc.part, tc.engine, input, labels)
			for i := 0; i < tc.from; i++ {
				g.start(pod(i))
			}
			before := g.rebalance()
			var stay []string
			for i := 0; i < min(tc.from, tc.to); i++ {
				stay = append(stay, pod(i))
			}
			for i := tc.from; i < tc.to; i++ {
				g.start(pod(i))
			}
			for i := tc.from - 1; i >= tc.to; i-- {
				g.stop(pod(i))
			}
			after := g.rebalance()
			// Partitions of removed pods must move; on top of that, the
			// fewest that balance within one allows.
			removed := 0
			for i := tc.to; i < tc.from; i++ {
				removed += len(before[pod(i)])
			}
			var ids []string
			for i := 0; i < tc.to; i++ {
				ids = append(ids, pod(i))
			}
			want := tc.wantMoved
			if want < 0 {
				want = removed + minMoves(before, ids, tc.part)
			}
			if got := moved(before, after); got != want {
				t.Fatalf("moved %d partitions, want %d: %v -> %v", got, want, before, after)
			}
			for _, id := range stay {
				if len(after[id]) > len(before[id]) && len(lost(before[id], after[id])) > 0 {
					t.Fatalf("%s both gained and lost partitions: %v -> %v", id, before[id], after[id])
				}
			}
		})
	}
}

// TestRandomHistory runs a long random StatefulSet history
// (scale up and down by ordinal, rolling restarts of single pods, new
// partitions) with the engine's claims and checks after every rebalance the
// invariants of rebalance (each topic-partition once, co-partitioning,
// balance within one) and how much moved:
//   - a restart gives the pod back exactly what it had;
//   - scaling up with a new identity, scaling down or adding partitions
//     moves the minimum that balance allows;
//   - scaling up with an identity whose volume still holds old state (the
//     StatefulSet reuses ordinals) may move up to P%N more, because restored
//     claims win the larger quotas.
func TestRandomHistory(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			parts := 6 + rng.Intn(20)
			g := newSim(t, parts, true, input, labels)
			replicas := 1 + rng.Intn(4)
			for i := 0; i < replicas; i++ {
				g.start(pod(i))
			}
			cur := g.rebalance()
			everStarted := map[string]bool{}
			for i := 0; i < replicas; i++ {
				everStarted[pod(i)] = true
			}
			ids := func() []string {
				var out []string
				for i := 0; i < replicas; i++ {
					out = append(out, pod(i))
				}
				return out
			}
			ops := map[string]int{}
			for step := 0; step < 60; step++ {
				before := cur
				switch op := rng.Intn(4); {
				case op == 0 && replicas < 8: // scale up by one
					name := pod(replicas)
					reused := everStarted[name]
					replicas++
					everStarted[name] = true
					g.start(name)
					cur = g.rebalance()
					want := minMoves(before, ids(), parts)
					limit := want
					if reused {
						limit += parts % replicas
					}
					if got := moved(before, cur); got < want || got > limit {
						t.Fatalf("step %d: scale up to %d (reused=%v): moved %d, want %d..%d: %v -> %v", step, replicas, reused, got, want, limit, before, cur)
					}
					ops["up"]++
				case op == 1 && replicas > 1: // scale down by one
					replicas--
					name := pod(replicas)
					g.stop(name)
					cur = g.rebalance()
					want := len(before[name]) + minMoves(before, ids(), parts)
					if got := moved(before, cur); got != want {
						t.Fatalf("step %d: scale down to %d: moved %d, want %d: %v -> %v", step, replicas, got, want, before, cur)
					}
					ops["down"]++
				case op == 2 && replicas > 1: // restart one pod
					name := pod(rng.Intn(replicas))
					g.stop(name)
					g.rebalance()
					g.start(name)
					cur = g.rebalance()
					if !reflect.DeepEqual(cur, before) {
						t.Fatalf("step %d: restart of %s: %v, before %v", step, name, cur, before)
					}
					ops["restart"]++
				case op == 3 && parts < 40: // the topics get more partitions
					add := 1 + rng.Intn(4)
					for _, topic := range []string{input, labels} {
						for p := parts; p < parts+add; p++ {
							g.partitions[topic] = append(g.partitions[topic], p)
						}
					}
					parts += add
					cur = g.rebalance()
					if got, want := moved(before, cur), minMoves(before, ids(), parts); got != want {
						t.Fatalf("step %d: %d partitions: moved %d, minimum %d: %v -> %v", step, parts, got, want, before, cur)
					}
					ops["partitions"]++
				}
			}
			t.Logf("operations: %v; finally %d replicas, %d partitions", ops, replicas, parts)
		})
	}
}
