package linalg

import "math"

// Table-driven sine and cosine for random Fourier features.
//
// An argument a is split as a = k h + r with h = 2 pi / 256 and |r| <= h/2
// (three-term Cody-Waite reduction: h1 and h2 carry 30 significant bits,
// so k h1 and k h2 are exact for |k| < 2^23, i.e. |a| <= 1e5 is safe with
// a wide margin); then
//
//	sin a = S_k cos r + C_k sin r,   cos a = C_k cos r - S_k sin r
//
// with S_k, C_k = sin, cos(2 pi k / 256) from a table built once by
// math.Sincos, and short Taylor polynomials for r (|r| <= 0.0123: the
// truncation errors r^9/9! and r^8/8! are below 1e-22). The chains are short
// and branch-free, which is what makes it faster than math.Sincos.
const (
	trigTableBits = 8
	trigTableSize = 1 << trigTableBits
	trigH1        = 0.024543692590668797
	trigH2        = 1.5501462174430033e-11
	trigH3        = 8.07841090905329e-21
	trigInvH      = 40.74366543152521
	// fastTrigMax bounds the arguments reduced here; larger or non-finite
	// ones (far outside what scaled inputs produce) go to math.Sincos.
	fastTrigMax = 1e5
	// trigBias > fastTrigMax*trigInvH + 1 keeps the operand of the
	// truncating conversion positive, so truncation rounds to nearest.
	trigBias = 4074368
)

var trigSin, trigCos [trigTableSize]float64

func init() {
	for k := range trigSin {
		trigSin[k], trigCos[k] = math.Sincos(2 * math.Pi * float64(k) / trigTableSize)
	}
}

// CosSinScaled writes dst[2j] = c*cos(s*u[j]) and dst[2j+1] = c*sin(s*u[j])
// (len(dst) >= 2 len(u)): the interleaved cos/sin pairs of random Fourier
// features. It agrees with math.Sincos to within a few ulps.
func CosSinScaled(dst, u []float64, s, c float64) {
	dst = dst[:2*len(u)]
	for j, v := range u {
		a := s * v
		if !(math.Abs(a) <= fastTrigMax) {
			sn, cs := math.Sincos(a)
			dst[2*j], dst[2*j+1] = c*cs, c*sn
			continue
		}
		// round to nearest: the bias keeps the conversion operand positive
		k := int64(a*trigInvH+(trigBias+0.5)) - trigBias
		kf := float64(k)
		r := ((a - kf*trigH1) - kf*trigH2) - kf*trigH3
		z := r * r
		sr := r - r*z*(1.0/6-z*(1.0/120-z*(1.0/5040)))
		cr := 1 - z*(0.5-z*(1.0/24-z*(1.0/720)))
		i := k & (trigTableSize - 1)
		sk, ck := trigSin[i], trigCos[i]
		dst[2*j] = c * (ck*cr - sk*sr)
		dst[2*j+1] = c * (sk*cr + ck*sr)
	}
}
