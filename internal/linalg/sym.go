package linalg

// Sym is an n x n symmetric matrix stored as its packed lower triangle, like
// Tri. Learners keep inverses such as ONS's A^{-1} in it: a dictionary
// addition appends a row, a Sherman-Morrison step is Rank1.
type Sym struct {
	N    int
	Data []float64
}

func (s *Sym) idx(i, k int) int {
	if k > i {
		i, k = k, i
	}
	return i*(i+1)/2 + k
}

// At returns element (i, k).
func (s *Sym) At(i, k int) float64 { return s.Data[s.idx(i, k)] }

// Set sets elements (i, k) and (k, i).
func (s *Sym) Set(i, k int, v float64) { s.Data[s.idx(i, k)] = v }

// Reset makes s the n x n matrix v I, reusing storage.
func (s *Sym) Reset(n int, v float64) {
	need := n * (n + 1) / 2
	if cap(s.Data) < need {
		s.Data = make([]float64, need)
	}
	s.Data = s.Data[:need]
	clear(s.Data)
	s.N = n
	for i := 0; i < n; i++ {
		s.Data[i*(i+1)/2+i] = v
	}
}

// AppendDiag grows s to (n+1) x (n+1) as blockdiag(s, v).
func (s *Sym) AppendDiag(v float64) {
	for k := 0; k < s.N; k++ {
		s.Data = append(s.Data, 0)
	}
	s.Data = append(s.Data, v)
	s.N++
}

// MulVec sets dst = S x (dst must not alias x). O(n^2).
func (s *Sym) MulVec(dst, x []float64) {
	n := s.N
	dst = dst[:n]
	clear(dst)
	for i := 0; i < n; i++ {
		row := s.Data[i*(i+1)/2 : i*(i+1)/2+i+1]
		xi := x[i]
		acc := 0.0
		for k := 0; k < i; k++ {
			acc += row[k] * x[k]
			dst[k] += row[k] * xi
		}
		dst[i] += acc + row[i]*xi
	}
}

// Rank1 sets S += a v v'. O(n^2).
func (s *Sym) Rank1(a float64, v []float64) {
	for i := 0; i < s.N; i++ {
		avi := a * v[i]
		row := s.Data[i*(i+1)/2 : i*(i+1)/2+i+1]
		for k := range row {
			row[k] += avi * v[k]
		}
	}
}

// Quad returns x' S x. O(n^2).
func (s *Sym) Quad(x []float64) float64 {
	q := 0.0
	for i := 0; i < s.N; i++ {
		row := s.Data[i*(i+1)/2 : i*(i+1)/2+i+1]
		q += x[i] * (2*Dot(row[:i], x[:i]) + row[i]*x[i])
	}
	return q
}
