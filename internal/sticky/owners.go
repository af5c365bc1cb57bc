package sticky

import "sort"

// Claim tiers: among claimants with room, a lower tier wins a contested
// partition.
const (
	tierOwned    = 1
	tierRestored = 2
	tierStandby  = 3
)

// claimant is a member's claim on one partition; claim is one partition a
// member claims.
type (
	claimant struct{ member, tier int }
	claim    struct{ id, tier int }
)

// planOwners assigns each partition number in ids (sorted) to an index of ms
// (sorted by identity): balanced within one, keeping claims where it can.
func planOwners(ids []int, ms []groupMember) map[int]int {
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
	// it goes back (see the rolling restart in the package comment).
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
