package linalg

// MulVecFast sets dst = S x like MulVec (dst must not alias x), with the
// row dot product split over four independent accumulators so that it is not
// bound by the latency of one floating-point add chain (about 2x faster than
// MulVec for n in the hundreds; PKAWV-Taylor runs it once per record on an
// r x r inverse). Results differ from MulVec's only by rounding.
func (s *Sym) MulVecFast(dst, x []float64) {
	n := s.N
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
