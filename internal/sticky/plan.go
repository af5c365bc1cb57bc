package sticky

import "sort"

// Member is one member of the group as the leader receives it.
type Member struct {
	ID     string   // the member ID the group coordinator gave this process
	Topics []string // the topics the member subscribes to
	Claims Claims
}

// NewMember returns the member with the given member ID, topics and JoinGroup
// user data. User data that ParseUserData rejects counts as no claims and no
// identity: the member is still assigned its fair share, which is better
// than failing the whole rebalance over one member's metadata.
func NewMember(id string, topics []string, userData []byte) Member {
	claims, err := ParseUserData(userData)
	if err != nil {
		claims = Claims{}
	}
	return Member{ID: id, Topics: topics, Claims: claims}
}

// Standby turns standby replicas on: the partitions of Topic (the changelog)
// are handed out as standby tasks, Replicas per partition, never to the
// partition's owner. The zero value turns them off. Every member of a group
// must use the same setting.
type Standby struct {
	Topic    string
	Replicas int
}

// Assignment is the result of a plan: member ID -> topic -> partition
// numbers, ascending.
type Assignment map[string]map[string][]int

// Planner plans the rebalances a member leads. It remembers, by identity,
// the assignments it computed, for members that state no claims; the zero
// value is ready to use (with no memory). Use one per process and do not
// share it between goroutines without a lock.
type Planner struct {
	memory map[string]rememberedClaim
	round  uint64
}

// Assign plans the assignment of partitions (topic -> partition numbers) to
// members; standby says which topic, if any, is handed out as standby tasks.
// Every member appears in the result, with an empty map when it gets
// nothing.
func (p *Planner) Assign(members []Member, partitions map[string][]int, standby Standby) Assignment {
	p.round++

	ms := p.readMembers(members)
	out := make(Assignment, len(ms))
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
	for topic, ps := range partitions {
		if !subscribed(ms, topic) {
			continue
		}
		if standby.Topic != "" && topic == standby.Topic {
			standbyIDs = append(standbyIDs, ps...)
			continue
		}
		byTopic[topic] = append(byTopic[topic], ps...)
		ids = append(ids, ps...)
	}
	ids = sortedUnique(ids)

	owner := planOwners(ids, ms)

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
		for id, members := range planStandby(sortedUnique(standbyIDs), ms, owner, standby) {
			for _, i := range members {
				out[ms[i].memberID][standby.Topic] = append(out[ms[i].memberID][standby.Topic], id)
			}
		}
		for _, m := range ms {
			sort.Ints(out[m.memberID][standby.Topic])
		}
	}
	p.remember(ms, owner)
	return out
}

func subscribed(ms []groupMember, topic string) bool {
	for _, m := range ms {
		if m.topics[topic] {
			return true
		}
	}
	return false
}
