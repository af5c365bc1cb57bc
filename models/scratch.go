package models

// growFloats returns s resized to n, reusing its storage when it can and
// otherwise doubling it (the contents up to len(s) are kept). The learners'
// scratch buffers grow with their dictionaries through it, so that a round
// allocates only when the dictionary outgrows them.
func growFloats(s []float64, n int) []float64 {
	if cap(s) >= n {
		return s[:n]
	}
	out := make([]float64, n, max(n, 2*cap(s)))
	copy(out, s)
	return out
}

// growInts is growFloats for ints, without keeping the contents: its callers
// overwrite every element.
func growInts(s []int, n int) []int {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]int, n, max(n, 2*cap(s)))
}
