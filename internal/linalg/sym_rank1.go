package linalg

// Rank1Fast sets S += a v v' like Rank1, bit for bit (every element gets the
// same single multiply-add), with the bounds checks hoisted and the loop
// unrolled by four: PKAWV-Taylor runs it once per record on an r x r inverse.
func (s *Sym) Rank1Fast(a float64, v []float64) {
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
