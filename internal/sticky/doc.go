// Package sticky plans the partition assignment of a consumer group so that
// each partition stays on the member whose local store holds its state, and
// that state does not have to be rebuilt by gap replay after every
// rebalance. It knows nothing of any Kafka client (as franz-go keeps its
// balancing in pkg/kgo/internal/sticky): members, claims and partition
// numbers come in as plain values and an Assignment comes out;
// processor.StickyBalancer adapts it to kafka-go's GroupBalancer.
//
// Kafka gives a member a new, random member ID every time its process
// (re)joins the group, so member IDs cannot say "this is the pod that holds
// partition 3's state". A member therefore announces a stable identity (the
// StatefulSet pod name) in its JoinGroup user data, together with its
// claims (Claims, UserData, ParseUserData), and the group leader assigns by
// identity (Planner.Assign). A claim has one of three tiers:
//
//   - owned: the partitions the member holds in the current generation
//     (Claims.WithOwned, for every new generation);
//   - restored: partitions whose state is on the member's disk without being
//     assigned to it, right after a restart (Claims.WithRestored, at
//     start-up, with the partitions the member held when it stopped);
//   - standby: changelog partitions the member tails as a standby replica
//     (see below).
//
// The plan of owners (planOwners), per group of N members and P partition
// numbers:
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
// Standby replicas (Standby): members also subscribe to the changelog topic,
// whose partitions are not owned but tailed. The leader hands changelog
// partition p to up to Replicas members other than p's owner (planStandby;
// sticky: those that tailed it in the last generation first, then the fewest
// standby tasks), and a member's standby partitions are claims of the third
// tier, below owned and restored: when p's owner leaves, p goes to a member
// that has its state warm.
//
// When a member states no claims (an engine that never calls WithOwned or
// WithRestored), the leader falls back on its memory of the last assignment
// it computed for that identity (owned if the identity was in the previous
// rebalance it led, restored if it was away); memory of an absent identity
// lasts forgetAfterRounds rebalances. A member that states restored claims is
// taken at its word: the leader's memory may be older than them. The
// fallback is lost when the leader itself restarts, which is why the engine
// should state claims.
//
// The unit of assignment is the partition number, not the topic-partition:
// the labels topic is co-partitioned with the input (docs/pipeline.md), and
// the pending-label join needs partition k of both topics on the same member.
// A member that does not subscribe to a topic never receives its partitions;
// they fall to the least loaded subscriber of that topic.
package sticky
