package sticky

import "sort"

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
