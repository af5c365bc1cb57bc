// Package dataset reads labelled instances from LIBSVM and CSV files and
// applies the papers' offline preprocessing: min-max scaling, permutations and
// the adversarial block stream.
package dataset

import (
	"math"

	"github.com/kernelstream/kernelstream/internal/label"
	"github.com/kernelstream/kernelstream/internal/rng"
)

// Set is a labelled dataset held row-major: row i is X[i*Dim:(i+1)*Dim].
type Set struct {
	Dim int
	X   []float64
	Y   []float64
}

// Len is the number of rows.
func (s *Set) Len() int { return len(s.Y) }

// Row returns row i (a view, not a copy).
func (s *Set) Row(i int) []float64 { return s.X[i*s.Dim : (i+1)*s.Dim : (i+1)*s.Dim] }

// Clone returns a deep copy.
func (s *Set) Clone() *Set {
	return &Set{Dim: s.Dim, X: append([]float64(nil), s.X...), Y: append([]float64(nil), s.Y...)}
}

// IsBinary reports whether every label is in {-1, 0, 1} and both classes occur.
func (s *Set) IsBinary() bool {
	neg, pos := false, false
	for _, y := range s.Y {
		switch y {
		case 1:
			pos = true
		case 0, -1:
			neg = true
		default:
			return false
		}
	}
	return neg && pos
}

// ScaleFeatures maps every feature column to [-1, 1] by its min and max, as
// the papers do; constant columns become 0.
func (s *Set) ScaleFeatures() {
	d := s.Dim
	lo := make([]float64, d)
	hi := make([]float64, d)
	for j := range lo {
		lo[j], hi[j] = math.Inf(1), math.Inf(-1)
	}
	for i := 0; i < s.Len(); i++ {
		for j, v := range s.Row(i) {
			lo[j] = math.Min(lo[j], v)
			hi[j] = math.Max(hi[j], v)
		}
	}
	for i := 0; i < s.Len(); i++ {
		r := s.Row(i)
		for j := range r {
			if hi[j] > lo[j] {
				r[j] = 2*(r[j]-lo[j])/(hi[j]-lo[j]) - 1
			} else {
				r[j] = 0
			}
		}
	}
}

// ScaleTargets maps the labels to [0, 1] by their min and max (regression only).
func (s *Set) ScaleTargets() {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, y := range s.Y {
		lo, hi = math.Min(lo, y), math.Max(hi, y)
	}
	for i, y := range s.Y {
		if hi > lo {
			s.Y[i] = (y - lo) / (hi - lo)
		} else {
			s.Y[i] = 0
		}
	}
}

// Permutation returns a uniformly random permutation of 0..n-1 drawn from
// seed (Fisher-Yates on rng.Rand, so it is the same on every platform).
func Permutation(n int, seed uint64) []int {
	r := rng.New(seed)
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := r.Intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// Permute returns the rows in the order perm.
func (s *Set) Permute(perm []int) *Set {
	out := &Set{Dim: s.Dim, X: make([]float64, 0, len(perm)*s.Dim), Y: make([]float64, 0, len(perm))}
	for _, i := range perm {
		out.X = append(out.X, s.Row(i)...)
		out.Y = append(out.Y, s.Y[i])
	}
	return out
}

// Adversarial builds the adversarial stream of FORKS (Wen et al., Sec. 5; after
// Calandriello et al. 2017a): blocks instances, the i-th being row perm[i],
// each repeated r times, with the label negated in every even block (1-based;
// i%2 == 1 zero-based). T = blocks*r. Labels are mapped to -1/+1 first.
func (s *Set) Adversarial(blocks, r int, seed uint64) *Set {
	if blocks > s.Len() {
		blocks = s.Len()
	}
	perm := Permutation(s.Len(), seed)[:blocks]
	out := &Set{Dim: s.Dim, X: make([]float64, 0, blocks*r*s.Dim), Y: make([]float64, 0, blocks*r)}
	for b, i := range perm {
		y := label.Binary(s.Y[i])
		if b%2 == 1 {
			y = -y
		}
		for k := 0; k < r; k++ {
			out.X = append(out.X, s.Row(i)...)
			out.Y = append(out.Y, y)
		}
	}
	return out
}
