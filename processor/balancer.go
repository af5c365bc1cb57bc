package processor

// The sticky group balancer: kafka-go's side of the planner in
// internal/sticky, which keeps each partition on the member whose local
// Badger store holds its state (the algorithm, its claim tiers and its wire
// format are described there). This file only converts between kafka-go's
// types and the planner's, and holds what this member announces.

import (
	"sync"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/sticky"
)

// StickyProtocolName is the consumer group protocol name of StickyBalancer.
// Every member of a group must offer it (kafka-go picks a protocol all
// members support).
const StickyProtocolName = "kernelstream-sticky"

// StateAwareBalancer is a group balancer that Run keeps informed of where
// this member's partition state is, so that the assignment can follow the
// state: the standby setting before joining, the partitions restored from
// the local store at start-up, and the partitions owned in every
// generation. Run recognizes it among Config.GroupBalancers; any other
// balancer is used as it is. StickyBalancer implements it.
type StateAwareBalancer interface {
	kafka.GroupBalancer
	// Identity returns the stable identity this member announces.
	Identity() string
	// SetStandby hands the partitions of topic (the changelog) out as
	// standby tasks, replicas per partition. Called before joining.
	SetStandby(topic string, replicas int)
	// SetRestored states the partitions (topic -> partition numbers) whose
	// state the local store holds. Called before joining.
	SetRestored(topicPartitions map[string][]int)
	// SetOwnedAssignments states a new generation's assignment.
	SetOwnedAssignments(assignments map[string][]kafka.PartitionAssignment)
}

// stateAware returns the balancers of bs that Run keeps informed.
func stateAware(bs []kafka.GroupBalancer) []StateAwareBalancer {
	var out []StateAwareBalancer
	for _, b := range bs {
		if s, ok := b.(StateAwareBalancer); ok {
			out = append(out, s)
		}
	}
	return out
}

// StickyBalancer is a kafka.GroupBalancer that keeps partitions on the member
// (by stable identity) that holds their state. It is safe for concurrent use.
// Use one per consumer process: it carries what this member owns.
type StickyBalancer struct {
	mu      sync.Mutex
	claims  sticky.Claims  // what this member announces at the next JoinGroup
	planner sticky.Planner // used when this member leads a rebalance
	standby sticky.Standby
}

var _ StateAwareBalancer = (*StickyBalancer)(nil)

// NewStickyBalancer returns a balancer for a member with the given stable
// identity (normally config kafka.instance_id or MemberIdentity()). With an
// empty identity the member is known by its kafka member ID, so stickiness
// lasts only while the process lives.
func NewStickyBalancer(identity string) *StickyBalancer {
	return &StickyBalancer{claims: sticky.Claims{Identity: identity}}
}

// Identity returns the stable identity this member announces.
func (b *StickyBalancer) Identity() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.claims.Identity
}

// SetStandby turns standby replicas on: the partitions of topic (the
// changelog) are handed out as standby tasks, replicas per partition, never
// to the partition's owner. Every member of the group must use the same
// setting. Call it before joining.
func (b *StickyBalancer) SetStandby(topic string, replicas int) {
	b.mu.Lock()
	b.standby = sticky.Standby{Topic: topic, Replicas: replicas}
	b.mu.Unlock()
}

// ProtocolName implements kafka.GroupBalancer.
func (b *StickyBalancer) ProtocolName() string { return StickyProtocolName }

// SetOwned records the partitions this member holds in the current
// generation (topic -> partition numbers), announced as owned claims at the
// next JoinGroup (sticky.Claims.WithOwned; the restored claims are dropped).
func (b *StickyBalancer) SetOwned(topicPartitions map[string][]int) {
	b.mu.Lock()
	b.claims = b.claims.WithOwned(topicPartitions, b.standby.Topic)
	b.mu.Unlock()
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
// partitions the member held when it stopped (sticky.Claims.WithRestored
// says why not more).
func (b *StickyBalancer) SetRestored(topicPartitions map[string][]int) {
	b.mu.Lock()
	b.claims = b.claims.WithRestored(topicPartitions)
	b.mu.Unlock()
}

// SetAddr sets the scoring address this member announces in its user data
// ("" = none), read by the other members to forward scoring requests
// (Config.Scoring). Call it before joining.
func (b *StickyBalancer) SetAddr(addr string) {
	b.mu.Lock()
	b.claims.Addr = addr
	b.mu.Unlock()
}

// UserData implements kafka.GroupBalancer.
func (b *StickyBalancer) UserData() ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.claims.UserData()
}

// AssignGroups implements kafka.GroupBalancer.
func (b *StickyBalancer) AssignGroups(members []kafka.GroupMember, partitions []kafka.Partition) kafka.GroupMemberAssignments {
	ms := make([]sticky.Member, len(members))
	for i, gm := range members {
		ms[i] = sticky.NewMember(gm.ID, gm.Topics, gm.UserData)
	}
	byTopic := map[string][]int{}
	for _, p := range partitions {
		byTopic[p.Topic] = append(byTopic[p.Topic], p.ID)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return kafka.GroupMemberAssignments(b.planner.Assign(ms, byTopic, b.standby))
}
