package sticky

import "sort"

// groupMember is one group member as the leader sees it.
type groupMember struct {
	memberID string
	identity string // stable identity, or the member ID when none was given
	topics   map[string]bool
	owned    []int // sorted partition numbers, tier owned
	restored []int // sorted partition numbers, tier restored (disjoint from owned)
	standby  []int // sorted partition numbers, tier standby (disjoint from both)
}

// readMembers orders the members (by identity, then member ID), normalizes
// their claims and fills them in from the leader's memory where a member
// stated none.
func (p *Planner) readMembers(members []Member) []groupMember {
	ms := make([]groupMember, 0, len(members))
	for _, gm := range members {
		c := gm.Claims
		m := groupMember{memberID: gm.ID, identity: c.Identity, topics: make(map[string]bool, len(gm.Topics))}
		if m.identity == "" {
			m.identity = gm.ID
		}
		for _, t := range gm.Topics {
			m.topics[t] = true
		}
		restored := sortedUnique(c.Restored)
		switch r, remembered := p.memory[m.identity]; {
		case c.Owned != nil:
			m.owned = sortedUnique(c.Owned)
		case len(restored) > 0:
			// It states what it checkpointed when it stopped. The leader's
			// memory may be older: a leader remembers only the rebalances
			// it led, and adding those partitions made a restarted pod
			// claim one it had held only while another pod was away
			// (TestRestoreBeatsStaleLeaderMemory).
		case remembered && r.lastSeen == p.round-1:
			m.owned = r.partitions
		case remembered:
			restored = r.partitions
		}
		m.restored = minus(restored, m.owned)
		m.standby = minus(minus(sortedUnique(c.Standby), m.owned), m.restored)
		ms = append(ms, m)
	}
	sort.Slice(ms, func(a, c int) bool {
		if ms[a].identity != ms[c].identity {
			return ms[a].identity < ms[c].identity
		}
		return ms[a].memberID < ms[c].memberID
	})
	// Two live members with one identity (a misconfigured POD_NAME, or a
	// zombie process): only the first keeps the identity's claims, the other
	// is known by its member ID.
	seen := make(map[string]bool, len(ms))
	for i := range ms {
		if seen[ms[i].identity] {
			ms[i].identity += "#" + ms[i].memberID
			ms[i].owned, ms[i].restored, ms[i].standby = nil, nil, nil
		}
		seen[ms[i].identity] = true
	}
	return ms
}

// forgetAfterRounds is how many rebalances a leader remembers the partitions
// of an identity that is no longer in the group. A rolling restart of one pod
// takes two rebalances (leave, rejoin); after a scale-down the memory is
// dropped after this many. A remembered absent identity never blocks an
// assignment: it simply claims nothing.
const forgetAfterRounds = 16

type rememberedClaim struct {
	partitions []int
	lastSeen   uint64
}

// remember stores the new assignment by identity and forgets identities
// absent for more than forgetAfterRounds rebalances.
func (p *Planner) remember(ms []groupMember, owner map[int]int) {
	if p.memory == nil {
		p.memory = map[string]rememberedClaim{}
	}
	got := make([][]int, len(ms))
	ids := make([]int, 0, len(owner))
	for id := range owner {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		got[owner[id]] = append(got[owner[id]], id)
	}
	for i, m := range ms {
		p.memory[m.identity] = rememberedClaim{partitions: got[i], lastSeen: p.round}
	}
	for id, r := range p.memory {
		if p.round-r.lastSeen > forgetAfterRounds {
			delete(p.memory, id)
		}
	}
}
