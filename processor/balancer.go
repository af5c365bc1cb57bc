package processor

// Sticky group balancer: keeps each partition on the member whose local
// Badger store holds its state, so that state does not have to be rebuilt by
// gap replay after every rebalance.
//
// kafka-go gives a member a new, random member ID every time its process
// (re)joins the group, so member IDs cannot say "this is the pod that holds
// partition 3's state". The balancer therefore carries a stable identity (the
// StatefulSet pod name, POD_NAME from the downward API) in the JoinGroup
// UserData, together with the member's claims, and the group leader assigns
// by identity. A claim has one of two tiers:
//
//   - owned: the partitions the member holds in the current generation
//     (SetOwned / SetOwnedAssignments, called by the engine for every new
//     generation);
//   - restored: partitions whose state is on the member's disk without being
//     assigned to it, right after a restart (SetRestored, called at start-up
//     with the partitions the member held when it stopped).
//
// The plan (planSticky), per group of N members and P partition numbers:
//
//  1. Every member gets a quota of floor(P/N) or ceil(P/N) (balance within
//     one); the ceil slots go to the members with the most claims, so that as
//     few partitions as possible move (a partition that one member owns and
//     another restores counts for the restorer: it comes back to it).
//  2. A member keeps its uncontested claims up to its quota, owned ones first.
//  3. A partition claimed by several members goes to a claimant with room,
//     owned before restored, then the one with the most room left. After a
//     rolling restart the survivors own (over quota) the partitions of the
//     pod that was away, the pod claims them as restored, and they go back.
//  4. Everything else (new partitions, a departed member's partitions, a
//     member's excess) goes to the members with the most room left.
//
// Ties are broken by identity, then member ID, never by map order or the
// clock: the same members, claims and partitions always give the same
// assignment. With disjoint claims (the steady state) the number of
// partitions that move is the minimum any assignment balanced within one
// allows.
//
// Standby replicas (SetStandby): members also subscribe to the changelog
// topic, whose partitions are not owned but tailed. The leader hands changelog
// partition p to up to N members other than p's owner (sticky: those that
// tailed it in the last generation first, then the fewest standby tasks), and
// a member's standby partitions are claims of a third tier, below owned and
// restored: when p's owner leaves, p goes to a member that has its state warm.
//
// When a member states no claims (an engine that never calls SetOwned or
// SetRestored), the leader falls back on its memory of the last assignment it
// computed for that identity (owned if the identity was in the previous
// rebalance it led, restored if it was away); memory of an absent identity
// lasts forgetAfterRounds rebalances. A member that states restored claims is
// taken at its word: the leader's memory may be older than them. The fallback
// is lost when the leader itself restarts, which is why the engine should
// state claims.
//
// The unit of assignment is the partition number, not the topic-partition:
// the labels topic is co-partitioned with the input (docs/pipeline.md), and the
// pending-label join needs partition k of both topics on the same member.
// A member that does not subscribe to a topic never receives its partitions;
// they fall to the least loaded subscriber of that topic.

import (
	"encoding/json"
	"sort"
	"sync"

	"github.com/segmentio/kafka-go"
)

// StickyProtocolName is the consumer group protocol name of StickyBalancer.
// Every member of a group must offer it (kafka-go picks a protocol all
// members support).
const StickyProtocolName = "kernelstream-sticky"

// stickyUserDataVersion is the version of the UserData layout below.
const stickyUserDataVersion = 1

// forgetAfterRounds is how many rebalances a leader remembers the partitions
// of an identity that is no longer in the group. A rolling restart of one pod
// takes two rebalances (leave, rejoin); after a scale-down the memory is
// dropped after this many. A remembered absent identity never blocks an
// assignment: it simply claims nothing.
const forgetAfterRounds = 16

// Claim tiers: among claimants with room, a lower tier wins a contested
// partition.
const (
	tierOwned    = 1
	tierRestored = 2
	tierStandby  = 3
)

// StickyBalancer is a kafka.GroupBalancer that keeps partitions on the member
// (by stable identity) that holds their state. It is safe for concurrent use.
// Use one per consumer process: it carries what this member owns.
type StickyBalancer struct {
	identity string

	mu       sync.Mutex
	owned    []int // partition numbers held in the current generation; nil = unknown
	restored []int // partition numbers whose state is on local disk
	standby  []int // changelog partitions tailed in the current generation
	memory   map[string]rememberedClaim
	round    uint64

	standbyTopic    string // the changelog topic when standby replicas are on
	standbyReplicas int
}

type rememberedClaim struct {
	partitions []int
	lastSeen   uint64
}

var _ kafka.GroupBalancer = (*StickyBalancer)(nil)

// NewStickyBalancer returns a balancer for a member with the given stable
// identity (normally config kafka.instance_id or MemberIdentity()). With an
// empty identity the member is known by its kafka member ID, so stickiness
// lasts only while the process lives.
func NewStickyBalancer(identity string) *StickyBalancer {
	return &StickyBalancer{identity: identity, memory: map[string]rememberedClaim{}}
}

// Identity returns the stable identity this member announces.
func (b *StickyBalancer) Identity() string { return b.identity }

// SetStandby turns standby replicas on: the partitions of topic (the
// changelog) are handed out as standby tasks, replicas per partition, never
// to the partition's owner. Every member of the group must use the same
// setting. Call it before joining.
func (b *StickyBalancer) SetStandby(topic string, replicas int) {
	b.mu.Lock()
	b.standbyTopic, b.standbyReplicas = topic, replicas
	b.mu.Unlock()
}

// ProtocolName implements kafka.GroupBalancer.
func (b *StickyBalancer) ProtocolName() string { return StickyProtocolName }

// SetOwned records the partitions this member holds in the current
// generation (topic -> partition numbers), announced as owned claims at the
// next JoinGroup. It clears the restored claims: once the member has taken
// part in a generation, what it owns is what it has freshest.
func (b *StickyBalancer) SetOwned(topicPartitions map[string][]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	owned := make(map[string][]int, len(topicPartitions))
	for t, ps := range topicPartitions {
		if t != b.standbyTopic || b.standbyTopic == "" {
			owned[t] = ps
		}
	}
	ids := flatten(owned)
	if ids == nil {
		ids = []int{} // known to own nothing, as opposed to unknown
	}
	b.owned, b.restored = ids, nil
	b.standby = nil
	if b.standbyTopic != "" {
		b.standby = sortedUnique(topicPartitions[b.standbyTopic])
	}
}

// SetOwnedAssignments is SetOwned for a kafka.Generation's Assignments.
func (b *StickyBalancer) SetOwnedAssignments(assignments map[string][]kafka.PartitionAssignment) {
	m := make(map[string][]int, len(assignments))
	for topic, as := range assignments {
		for _, a := range as {
			m[topic] = append(m[topic], a.ID)
		}
	}
	b.SetOwned(m)
}

// SetRestored records the partitions whose state this member has on local
// disk (topic -> partition numbers), announced as restored claims until the
// next SetOwned. Call it at start-up, before joining the group, with the
// partitions the member held when it stopped (the checkpoints it wrote on
// revoke/shutdown), not with every partition it ever held: a restored claim
// outranks the current owner when quotas are handed out, so that a pod
// coming back from a restart gets its partitions back.
func (b *StickyBalancer) SetRestored(topicPartitions map[string][]int) {
	ids := flatten(topicPartitions)
	b.mu.Lock()
	b.restored = ids
	b.mu.Unlock()
}

// stickyUserData is the JSON carried in the JoinGroup metadata. Owned is nil
// when the member does not know what it owns (then the leader's memory is
// used), and empty when it knows it owns nothing.
type stickyUserData struct {
	Version  int    `json:"v"`
	Identity string `json:"id,omitempty"`
	Owned    *[]int `json:"owned,omitempty"`
	Restored []int  `json:"restored,omitempty"`
	Standby  []int  `json:"standby,omitempty"` // changelog partitions tailed (a field older members ignore)
}

// UserData implements kafka.GroupBalancer.
func (b *StickyBalancer) UserData() ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ud := stickyUserData{Version: stickyUserDataVersion, Identity: b.identity, Restored: b.restored, Standby: b.standby}
	if b.owned != nil {
		owned := append([]int{}, b.owned...)
		ud.Owned = &owned
	}
	return json.Marshal(ud)
}

// decodeStickyUserData reads a member's UserData. Anything unreadable or of
// another version yields no identity and no claims: the member is still
// assigned its fair share, just without stickiness.
func decodeStickyUserData(data []byte) (ud stickyUserData, ok bool) {
	if len(data) == 0 || json.Unmarshal(data, &ud) != nil || ud.Version != stickyUserDataVersion {
		return stickyUserData{}, false
	}
	if ud.Owned != nil {
		owned := sortedUnique(*ud.Owned)
		if owned == nil {
			owned = []int{}
		}
		ud.Owned = &owned
	}
	ud.Restored = sortedUnique(ud.Restored)
	ud.Standby = sortedUnique(ud.Standby)
	return ud, true
}

// stickyMember is one group member as the leader sees it.
type stickyMember struct {
	memberID string
	identity string // stable identity, or the member ID when none was given
	topics   map[string]bool
	owned    []int // sorted partition numbers, tier owned
	restored []int // sorted partition numbers, tier restored (disjoint from owned)
	standby  []int // sorted partition numbers, tier standby (disjoint from both)
}

// AssignGroups implements kafka.GroupBalancer.
func (b *StickyBalancer) AssignGroups(members []kafka.GroupMember, partitions []kafka.Partition) kafka.GroupMemberAssignments {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.round++

	ms := b.readMembers(members)
	out := make(kafka.GroupMemberAssignments, len(ms))
	for _, m := range ms {
		out[m.memberID] = map[string][]int{}
	}
	if len(ms) == 0 {
		return out
	}

	// Partition numbers of the topics somebody subscribes to.
	byTopic := map[string][]int{}
	var ids []int
	var standbyIDs []int
	for _, p := range partitions {
		if !subscribed(ms, p.Topic) {
			continue
		}
		if b.standbyTopic != "" && p.Topic == b.standbyTopic {
			standbyIDs = append(standbyIDs, p.ID)
			continue
		}
		byTopic[p.Topic] = append(byTopic[p.Topic], p.ID)
		ids = append(ids, p.ID)
	}
	ids = sortedUnique(ids)

	owner := planSticky(ids, ms)

	topics := make([]string, 0, len(byTopic))
	for t := range byTopic {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, topic := range topics {
		load := make([]int, len(ms)) // this topic's load, for the fallback
		var orphans []int
		for _, id := range sortedUnique(byTopic[topic]) {
			if i := owner[id]; ms[i].topics[topic] {
				out[ms[i].memberID][topic] = append(out[ms[i].memberID][topic], id)
				load[i]++
			} else {
				orphans = append(orphans, id)
			}
		}
		// The owner does not read this topic (mixed subscriptions, e.g. in
		// a rollout that adds the labels topic): least loaded subscriber.
		for _, id := range orphans {
			best := -1
			for i, m := range ms {
				if m.topics[topic] && (best < 0 || load[i] < load[best]) {
					best = i
				}
			}
			out[ms[best].memberID][topic] = append(out[ms[best].memberID][topic], id)
			load[best]++
		}
		for _, m := range ms {
			sort.Ints(out[m.memberID][topic])
		}
	}

	if len(standbyIDs) > 0 {
		for id, members := range planStandby(sortedUnique(standbyIDs), ms, owner, b.standbyTopic, b.standbyReplicas) {
			for _, i := range members {
				out[ms[i].memberID][b.standbyTopic] = append(out[ms[i].memberID][b.standbyTopic], id)
			}
		}
		for _, m := range ms {
			sort.Ints(out[m.memberID][b.standbyTopic])
		}
	}
	b.remember(ms, owner)
	return out
}

// planStandby picks, for each partition number in ids, up to replicas
// members that subscribe to topic, other than the partition's owner: those
// that tailed it in the last generation first, then the fewest standby tasks
// so far, then the order of ms (by identity).
func planStandby(ids []int, ms []stickyMember, owner map[int]int, topic string, replicas int) map[int][]int {
	out := make(map[int][]int, len(ids))
	load := make([]int, len(ms))
	had := make([]map[int]bool, len(ms))
	for i, m := range ms {
		had[i] = make(map[int]bool, len(m.standby))
		for _, id := range m.standby {
			had[i][id] = true
		}
	}
	for _, id := range ids {
		own, owned := owner[id]
		var picked []int
		for len(picked) < replicas {
			best := -1
			for i, m := range ms {
				if !m.topics[topic] || (owned && i == own) || contains(picked, i) {
					continue
				}
				if best < 0 || had[i][id] && !had[best][id] || had[i][id] == had[best][id] && load[i] < load[best] {
					best = i
				}
			}
			if best < 0 {
				break // fewer eligible members than replicas
			}
			picked = append(picked, best)
			load[best]++
		}
		out[id] = picked
	}
	return out
}

func contains(s []int, x int) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// readMembers decodes and orders the members (by identity, then member ID)
// and fills in claims from the leader's memory where a member stated none.
func (b *StickyBalancer) readMembers(members []kafka.GroupMember) []stickyMember {
	ms := make([]stickyMember, 0, len(members))
	for _, gm := range members {
		ud, _ := decodeStickyUserData(gm.UserData)
		m := stickyMember{memberID: gm.ID, identity: ud.Identity, topics: make(map[string]bool, len(gm.Topics))}
		if m.identity == "" {
			m.identity = gm.ID
		}
		for _, t := range gm.Topics {
			m.topics[t] = true
		}
		restored := ud.Restored
		switch r, remembered := b.memory[m.identity]; {
		case ud.Owned != nil:
			m.owned = *ud.Owned
		case len(ud.Restored) > 0:
			// It states what it checkpointed when it stopped. The leader's
			// memory may be older: a leader remembers only the rebalances
			// it led, and adding those partitions made a restarted pod
			// claim one it had held only while another pod was away
			// (TestStickyBalancerRestoreBeatsStaleLeaderMemory).
		case remembered && r.lastSeen == b.round-1:
			m.owned = r.partitions
		case remembered:
			restored = r.partitions
		}
		m.restored = minus(sortedUnique(restored), m.owned)
		m.standby = minus(minus(ud.Standby, m.owned), m.restored)
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

// remember stores the new assignment by identity and forgets identities
// absent for more than forgetAfterRounds rebalances.
func (b *StickyBalancer) remember(ms []stickyMember, owner map[int]int) {
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
		b.memory[m.identity] = rememberedClaim{partitions: got[i], lastSeen: b.round}
	}
	for id, r := range b.memory {
		if b.round-r.lastSeen > forgetAfterRounds {
			delete(b.memory, id)
		}
	}
}

// claimant is a member's claim on one partition; claim is one partition a
// member claims.
type (
	claimant struct{ member, tier int }
	claim    struct{ id, tier int }
)

// planSticky assigns each partition number in ids (sorted) to an index of ms
// (sorted by identity): balanced within one, keeping claims where it can.
func planSticky(ids []int, ms []stickyMember) map[int]int {
	owner := make(map[int]int, len(ids))
	n := len(ms)
	if len(ids) == 0 || n == 0 {
		return owner
	}
	exists := make(map[int]bool, len(ids))
	for _, id := range ids {
		exists[id] = true
	}
	claims := make([][]claim, n) // per member, owned first, each ascending
	byID := map[int][]claimant{}
	for i, m := range ms {
		for tier, list := range [][]int{tierOwned: m.owned, tierRestored: m.restored, tierStandby: m.standby} {
			for _, id := range list {
				if exists[id] {
					claims[i] = append(claims[i], claim{id: id, tier: tier})
					byID[id] = append(byID[id], claimant{member: i, tier: tier})
				}
			}
		}
	}

	// Quotas: q each, one more for the r members with the most claims. A
	// partition some member restores counts for the restorer, not for its
	// current owner: the owner took it over while the restorer was away, and
	// it goes back (see the rolling restart in the file comment).
	q, r := len(ids)/n, len(ids)%n
	weight := make([]int, n)
	for i := range ms {
		for _, c := range claims[i] {
			if c.tier == tierOwned && restoredBySomeone(byID[c.id]) || c.tier == tierStandby {
				continue
			}
			weight[i]++
		}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, c int) bool { return weight[order[a]] > weight[order[c]] })
	quota := make([]int, n)
	for k, i := range order {
		quota[i] = q
		if k < r {
			quota[i]++
		}
	}
	load := make([]int, n)
	room := func(i int) int { return quota[i] - load[i] }
	assign := func(id, i int) { owner[id] = i; load[i]++ }

	// Uncontested claims up to quota, owned before restored.
	for i := range ms {
		for _, c := range claims[i] {
			if len(byID[c.id]) == 1 && room(i) > 0 {
				assign(c.id, i)
			}
		}
	}
	// Contested claims: a claimant with room, owned before restored, then
	// the most room.
	for _, id := range ids {
		cs := byID[id]
		if len(cs) < 2 {
			continue
		}
		best := claimant{member: -1}
		for _, c := range cs {
			if room(c.member) == 0 {
				continue
			}
			if best.member < 0 || c.tier < best.tier || c.tier == best.tier && room(c.member) > room(best.member) {
				best = c
			}
		}
		if best.member >= 0 {
			assign(id, best.member)
		}
	}
	// The rest: the member with the most room. Quotas add up to len(ids), so
	// there is always room and every member ends exactly at its quota.
	for _, id := range ids {
		if _, done := owner[id]; done {
			continue
		}
		best := -1
		for i := range ms {
			if room(i) > 0 && (best < 0 || room(i) > room(best)) {
				best = i
			}
		}
		assign(id, best)
	}
	return owner
}

func restoredBySomeone(cs []claimant) bool {
	for _, c := range cs {
		if c.tier == tierRestored {
			return true
		}
	}
	return false
}

func subscribed(ms []stickyMember, topic string) bool {
	for _, m := range ms {
		if m.topics[topic] {
			return true
		}
	}
	return false
}

// flatten returns the sorted partition numbers of all topics.
func flatten(topicPartitions map[string][]int) []int {
	var ids []int
	for _, ps := range topicPartitions {
		ids = append(ids, ps...)
	}
	return sortedUnique(ids)
}

// minus returns the elements of a (sorted) not in b (sorted).
func minus(a, b []int) []int {
	var out []int
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j < len(b) && b[j] == x {
			continue
		}
		out = append(out, x)
	}
	return out
}

// sortedUnique sorts ids and drops duplicates and negatives; nil when empty.
func sortedUnique(ids []int) []int {
	var out []int
	s := append([]int(nil), ids...)
	sort.Ints(s)
	for i, id := range s {
		if id >= 0 && (i == 0 || id != s[i-1]) {
			out = append(out, id)
		}
	}
	return out
}
