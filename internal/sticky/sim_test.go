package sticky_test

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/kernelstream/kernelstream/internal/sticky"
)

// The tests drive a simulated consumer group: one Planner and one Claims per
// pod (a process), the group coordinator's choices (member IDs change on
// every process start, the oldest member leads), and, in the "engine" mode,
// the engine's claims (WithOwned for every generation, WithRestored at
// start-up with the partitions whose state is on the pod's disk). Claims
// travel as user data, encoded and parsed as between real members.

const (
	input  = "features"
	labels = "labels"
)

type simPod struct {
	identity string
	memberID string
	topics   []string
	claims   sticky.Claims
	planner  *sticky.Planner
}

type sim struct {
	t          *testing.T
	engine     bool             // the engine states its claims (WithOwned, WithRestored)
	partitions map[string][]int // topic -> partition numbers
	pods       []*simPod        // join order: pods[0] is the leader unless leader is set
	leader     string           // identity of the leader of the next rebalances ("": pods[0])
	disk       map[string][]int
	starts     int
	rng        *rand.Rand
}

func newSim(t *testing.T, partitions int, engine bool, topics ...string) *sim {
	g := &sim{t: t, engine: engine, partitions: map[string][]int{}, disk: map[string][]int{}, rng: rand.New(rand.NewSource(1))}
	for _, topic := range topics {
		for p := 0; p < partitions; p++ {
			g.partitions[topic] = append(g.partitions[topic], p)
		}
	}
	return g
}

// start launches a new process for identity (fresh claims and planner, a
// new member ID), as a pod start or restart does, and appends it to the
// group.
func (g *sim) start(identity string, topics ...string) {
	if len(topics) == 0 {
		topics = []string{input, labels}
	}
	g.starts++
	p := &simPod{
		identity: identity,
		memberID: fmt.Sprintf("consumer-%03d", 1000-g.starts), // unrelated to identity order
		topics:   topics,
		claims:   sticky.Claims{Identity: identity},
		planner:  &sticky.Planner{},
	}
	if g.engine {
		if parts := g.disk[identity]; len(parts) > 0 {
			p.claims = p.claims.WithRestored(map[string][]int{input: parts})
		}
	}
	g.pods = append(g.pods, p)
}

// stop removes identity's process from the group (it left or was killed).
func (g *sim) stop(identity string) {
	for i, p := range g.pods {
		if p.identity == identity {
			g.pods = append(g.pods[:i], g.pods[i+1:]...)
			return
		}
	}
	g.t.Fatalf("no pod %s", identity)
}

// members returns the group's members as the leader receives them, in a
// shuffled order (the plan must not depend on it).
func (g *sim) members() []sticky.Member {
	g.t.Helper()
	members := make([]sticky.Member, 0, len(g.pods))
	for _, p := range g.pods {
		members = append(members, sticky.NewMember(p.memberID, p.topics, userData(g.t, p.claims)))
	}
	g.rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	return members
}

// rebalance runs one JoinGroup/SyncGroup round and returns identity ->
// partition numbers, after checking that every topic-partition has exactly
// one owner, that co-partitioned topics go together and that the partition
// numbers are balanced within one.
func (g *sim) rebalance() map[string][]int {
	g.t.Helper()
	members := g.members()
	lead := g.pods[0]
	for _, p := range g.pods {
		if p.identity == g.leader {
			lead = p
		}
	}
	out := lead.planner.Assign(members, g.partitions, sticky.Standby{})

	byMember := map[string]*simPod{}
	for _, p := range g.pods {
		byMember[p.memberID] = p
	}
	seen := map[string]string{}
	got := map[string][]int{}
	for memberID, topics := range out {
		p, ok := byMember[memberID]
		if !ok {
			g.t.Fatalf("assignment to unknown member %s", memberID)
		}
		for topic, parts := range topics {
			for _, id := range parts {
				tp := fmt.Sprintf("%s/%d", topic, id)
				if prev, dup := seen[tp]; dup {
					g.t.Fatalf("%s assigned to %s and %s", tp, prev, p.identity)
				}
				seen[tp] = p.identity
			}
		}
		if in, lab := topics[input], topics[labels]; len(lab) > 0 && !reflect.DeepEqual(in, lab) {
			g.t.Fatalf("%s: labels partitions %v differ from input partitions %v", p.identity, lab, in)
		}
		got[p.identity] = append([]int{}, topics[input]...)
		sort.Ints(got[p.identity])
		if g.engine {
			p.claims = p.claims.WithOwned(topics, "")
		}
	}
	for topic, ids := range g.partitions {
		for _, id := range ids {
			if _, ok := seen[fmt.Sprintf("%s/%d", topic, id)]; !ok {
				g.t.Fatalf("%s/%d not assigned", topic, id)
			}
		}
	}
	min, max := 1<<30, -1
	for _, p := range g.pods {
		n := len(got[p.identity])
		if n < min {
			min = n
		}
		if n > max {
			max = n
		}
		g.disk[p.identity] = got[p.identity]
	}
	if max-min > 1 {
		g.t.Fatalf("unbalanced: %v", got)
	}
	return got
}

// moved counts the partitions whose owner (by identity) changed.
func moved(before, after map[string][]int) int {
	owner := map[int]string{}
	for id, parts := range before {
		for _, p := range parts {
			owner[p] = id
		}
	}
	n := 0
	for id, parts := range after {
		for _, p := range parts {
			if prev, ok := owner[p]; ok && prev != id {
				n++
			}
		}
	}
	return n
}

func pod(i int) string { return fmt.Sprintf("kernelstream-%d", i) }

// minMoves is the fewest partitions that must move from before (disjoint
// claims of the members in ids) to any assignment of p partitions over ids
// balanced within one: p minus the most claims that can be kept, found by
// trying every way of handing out the p%n larger quotas.
func minMoves(before map[string][]int, ids []string, p int) int {
	n := len(ids)
	q, r := p/n, p%n
	best := -1
	for mask := 0; mask < 1<<n; mask++ {
		bits := 0
		for m := mask; m > 0; m &= m - 1 {
			bits++
		}
		if bits != r {
			continue
		}
		kept := 0
		for i, id := range ids {
			quota := q
			if mask&(1<<i) != 0 {
				quota++
			}
			kept += min(len(before[id]), quota)
		}
		best = max(best, kept)
	}
	held := 0
	for _, id := range ids {
		held += len(before[id])
	}
	// Partitions held before by a member still present and now elsewhere.
	return held - best
}

// lost returns the partitions of before that are not in after.
func lost(before, after []int) []int {
	return slices.DeleteFunc(slices.Clone(before), func(p int) bool { return slices.Contains(after, p) })
}
