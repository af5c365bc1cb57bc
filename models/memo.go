package models

import "math"

// predictMemo remembers the instance the last Predict did its kernel work
// for (kernel vector, features, score), and the version of the model it did
// it against, so that the Update of the same x right after it (the usual
// inline-label case) can reuse that work instead of recomputing it. The work
// itself stays in the learner's scratch; the memo only says whether it is
// still for x. It is scratch, never learner state (not serialized): a miss
// just recomputes, and a hit yields bit-identical numbers.
type predictMemo struct {
	x   []float64
	ver uint64 // the model version (round counter, generation) at store
	ok  bool
}

// newPredictMemo returns an empty memo for d-dimensional instances (storing
// one allocates nothing).
func newPredictMemo(d int) predictMemo { return predictMemo{x: make([]float64, 0, d)} }

// store records that the scratch now holds the work for x at version ver.
func (m *predictMemo) store(x []float64, ver uint64) {
	m.x = append(m.x[:0], x...)
	m.ver, m.ok = ver, true
}

// hit reports whether the scratch holds the work for x at version ver.
func (m *predictMemo) hit(x []float64, ver uint64) bool {
	return m.ok && m.ver == ver && sameVector(m.x, x)
}

// forget invalidates the memo (the scratch or the model changed).
func (m *predictMemo) forget() { m.ok = false }

// bitMemo is a predictMemo that matches x bit for bit, so that -0 and +0
// differ: the Kernel-AWV learners (KAWV, PKAWVTaylor, PKAWVNystrom) reuse
// their scratch only for the very instance Predict saw.
type bitMemo struct{ predictMemo }

// newBitMemo returns an empty memo for d-dimensional instances.
func newBitMemo(d int) bitMemo { return bitMemo{newPredictMemo(d)} }

// hit reports whether the scratch holds the work for the bits of x at
// version ver.
func (m *bitMemo) hit(x []float64, ver uint64) bool {
	if !m.ok || m.ver != ver || len(x) != len(m.x) {
		return false
	}
	for i, v := range x {
		if math.Float64bits(v) != math.Float64bits(m.x[i]) {
			return false
		}
	}
	return true
}

// sameVector reports whether a and b are equal element by element.
func sameVector(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i, v := range a {
		if v != b[i] {
			return false
		}
	}
	return true
}
