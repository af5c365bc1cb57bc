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

// MulVec sets dst = S x (dst must not alias x). O(n^2). The row dot product
// is split over four accumulators so it is not bound by the latency of one
// add chain (about 2x faster than a plain loop for n in the hundreds).
func (s *Sym) MulVec(dst, x []float64) {
	n := s.N
	if len(x) < n || len(dst) < n {
		badLength("Sym.MulVec", "dst or x", min(len(x), len(dst)), n)
	}
	dst = dst[:n]
	x = x[:n]
	clear(dst)
	for i := 0; i < n; i++ {
		o := i * (i + 1) / 2
		row := s.Data[o : o+i+1 : o+i+1]
		xi := x[i]
		lo := dst[:i:i]
		xr := x[:i:i]
		var a0, a1, a2, a3 float64
		k := 0
		for ; k+3 < i; k += 4 {
			r0, r1, r2, r3 := row[k], row[k+1], row[k+2], row[k+3]
			a0 += r0 * xr[k]
			a1 += r1 * xr[k+1]
			a2 += r2 * xr[k+2]
			a3 += r3 * xr[k+3]
			lo[k] += r0 * xi
			lo[k+1] += r1 * xi
			lo[k+2] += r2 * xi
			lo[k+3] += r3 * xi
		}
		for ; k < i; k++ {
			a0 += row[k] * xr[k]
			lo[k] += row[k] * xi
		}
		dst[i] += (a0 + a1) + (a2 + a3) + row[i]*xi
	}
}

// Rank1 sets S += a v v'. O(n^2), unrolled by four with bounds checks hoisted.
func (s *Sym) Rank1(a float64, v []float64) {
	if len(v) < s.N {
		badLength("Sym.Rank1", "v", len(v), s.N)
	}
	v = v[:s.N]
	for i := 0; i < s.N; i++ {
		o := i * (i + 1) / 2
		row := s.Data[o : o+i+1 : o+i+1]
		vr := v[: i+1 : i+1]
		avi := a * v[i]
		k := 0
		for ; k+3 < len(row); k += 4 {
			row[k] += avi * vr[k]
			row[k+1] += avi * vr[k+1]
			row[k+2] += avi * vr[k+2]
			row[k+3] += avi * vr[k+3]
		}
		for ; k < len(row); k++ {
			row[k] += avi * vr[k]
		}
	}
}

// Quad returns x' S x. O(n^2).
func (s *Sym) Quad(x []float64) float64 {
	if len(x) < s.N {
		badLength("Sym.Quad", "x", len(x), s.N)
	}
	q := 0.0
	for i := 0; i < s.N; i++ {
		row := s.Data[i*(i+1)/2 : i*(i+1)/2+i+1]
		q += x[i] * (2*Dot(row[:i], x[:i]) + row[i]*x[i])
	}
	return q
}
