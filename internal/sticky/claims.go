package sticky

// Claims is what a member states about itself in its JoinGroup user data:
// its stable identity and the partition numbers it claims, by tier. The
// zero value (no identity, no claims) is what a member with unreadable user
// data counts as: it is still assigned its fair share, known by its member
// ID, just without stickiness.
type Claims struct {
	// Identity is the member's stable identity (normally the StatefulSet
	// pod name). Empty: the member is known by its member ID, so stickiness
	// lasts only while its process lives.
	Identity string
	// Owned is nil when the member does not know what it owns (then the
	// leader's memory is used), and empty but not nil when it knows it owns
	// nothing.
	Owned    []int
	Restored []int
	Standby  []int
	// Addr is the address at which the member answers scoring requests
	// (config serve.advertised_addr), "" when it serves none. It is not a
	// claim: every member reads it from the others' user data (through
	// DescribeGroups) to forward a request to the owner of the key's
	// partition (docs/bandits.md, "Scoring on request").
	Addr string
}

// WithOwned returns c for a member that holds topicPartitions (topic ->
// partition numbers) in the current generation: owned claims from every
// topic but standbyTopic (the changelog, "" when standby replicas are off),
// whose partitions become the standby claims. The restored claims are
// dropped: once the member has taken part in a generation, what it owns is
// what it has freshest.
func (c Claims) WithOwned(topicPartitions map[string][]int, standbyTopic string) Claims {
	owned := make(map[string][]int, len(topicPartitions))
	for t, ps := range topicPartitions {
		if t != standbyTopic || standbyTopic == "" {
			owned[t] = ps
		}
	}
	c.Owned = flatten(owned)
	if c.Owned == nil {
		c.Owned = []int{} // known to own nothing, as opposed to unknown
	}
	c.Restored, c.Standby = nil, nil
	if standbyTopic != "" {
		c.Standby = sortedUnique(topicPartitions[standbyTopic])
	}
	return c
}

// WithRestored returns c for a member whose local disk holds the state of
// topicPartitions (topic -> partition numbers). Use it at start-up with the
// partitions the member held when it stopped (the checkpoints it wrote on
// revoke/shutdown), not with every partition it ever held: a restored claim
// outranks the current owner when quotas are handed out, so that a pod
// coming back from a restart gets its partitions back.
func (c Claims) WithRestored(topicPartitions map[string][]int) Claims {
	c.Restored = flatten(topicPartitions)
	return c
}
