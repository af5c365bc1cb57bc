package sticky

import "slices"

// planStandby picks, for each partition number in ids, up to
// standby.Replicas members that subscribe to standby.Topic, other than the
// partition's owner: those that tailed it in the last generation first, then
// the fewest standby tasks so far, then the order of ms (by identity).
func planStandby(ids []int, ms []groupMember, owner map[int]int, standby Standby) map[int][]int {
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
		for len(picked) < standby.Replicas {
			best := -1
			for i, m := range ms {
				if !m.topics[standby.Topic] || (owned && i == own) || slices.Contains(picked, i) {
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
