package models

import (
	"fmt"
	"math"
	"sync"
)

// MaxTaylorFeatures bounds r = C(M+d, M). A PKAWV-Taylor learner keeps a
// packed r x r inverse (4 r^2 bytes): at the bound that is 268 MB per key and
// O(r^2) = 67M multiply-adds per record. d = 18 with M = 4 (r = 7315) fits;
// d = 68 with M = 4 (r = 1,028,790, 4.2 TB) is refused with a spec error.
const MaxTaylorFeatures = 8192

// taylorTable is the multi-index enumeration of the Taylor feature map of the
// Gaussian kernel for one (d, M) [Jézéquel et al. 2019, Sec. 3.1, eq. 6,
// App. D]: feature f >= 1 is feature parent[f] times x[coord[f]]/sigma times
// mult[f] (= 1/sqrt(k_coord)). For a multi-index k in N0^d with |k| <= M:
//
//	g_k(x) = exp(-||x||^2/(2 sigma^2)) * prod_i (x_i/sigma)^{k_i} / sqrt(k_i!)
//
// The g_k are orthonormal in the Gaussian RKHS (Lemma 11), so the embedding
// needs no Q^{-1/2} (App. H eq. 37 with Q = I), and sum_k g_k(x) g_k(x') is
// the order-M Taylor truncation of exp(x.x'/sigma^2) times the two
// exponential factors (Lemma 12); the truncation error is at most
// (R/sigma)^{2M+2}/(M+1)! when ||x||, ||x'|| <= R (Lemma 13).
//
// [SUGGEST] Multi-indices (r = C(M+d, M) features), not the authors' code's
// ordered tuples (sum_k d^k features): the same inner products, a smaller
// state. [SUGGEST] Every feature of degree j >= 1 is computed from one parent
// of degree j-1 by one multiplication, so a feature vector costs O(r + d)
// with no pow or factorial at run time. The table depends on (d, M) only and
// is shared by every learner with that shape.
type taylorTable struct {
	d, m   int
	parent []int32
	coord  []int32
	mult   []float64
	degree []int8 // |k| of each feature, for tests and documentation
}

// TaylorFeatureCount returns r = C(M+d, M), or an error if it exceeds
// MaxTaylorFeatures (computed without overflow).
func TaylorFeatureCount(d, m int) (int, error) {
	if d < 1 || m < 0 {
		return 0, fmt.Errorf("%w: taylor features need d >= 1 and M >= 0 (d=%d, M=%d)", ErrSpec, d, m)
	}
	// C(d+M, M) = prod_{j=1..M} (d+j)/j, exact in integers at every step.
	r := 1.0
	for j := 1; j <= m; j++ {
		r = r * float64(d+j) / float64(j)
		if r > MaxTaylorFeatures {
			break
		}
	}
	if r > MaxTaylorFeatures {
		full := math.Exp(lgammaInt(d+m+1) - lgammaInt(d+1) - lgammaInt(m+1))
		return 0, fmt.Errorf("%w: pkawv-taylor: r = C(M+d, M) = %.0f features for d=%d, M=%d exceeds the bound %d "+
			"(the packed inverse alone would need %.3g GB per key); lower M or reduce the input dimension",
			ErrSpec, math.Round(full), d, m, MaxTaylorFeatures, 4*full*full/1e9)
	}
	return int(math.Round(r)), nil
}

func lgammaInt(n int) float64 { v, _ := math.Lgamma(float64(n)); return v }

var (
	taylorMu     sync.Mutex
	taylorTables = map[[2]int]*taylorTable{}
)

// taylorTableFor returns the shared table of (d, M); r must already be checked.
func taylorTableFor(d, m int) *taylorTable {
	taylorMu.Lock()
	defer taylorMu.Unlock()
	if t, ok := taylorTables[[2]int{d, m}]; ok {
		return t
	}
	t := buildTaylorTable(d, m)
	taylorTables[[2]int{d, m}] = t
	return t
}

// buildTaylorTable enumerates multi-indices in graded order. A degree-j index
// is generated exactly once, from its parent k - e_i where i is its last
// non-zero coordinate: extending a parent whose last non-zero coordinate is
// l by e_i for every i >= l.
func buildTaylorTable(d, m int) *taylorTable {
	t := &taylorTable{d: d, m: m}
	t.parent = append(t.parent, -1)
	t.coord = append(t.coord, -1)
	t.mult = append(t.mult, 1)
	t.degree = append(t.degree, 0)
	last := []int32{0}  // last non-zero coordinate (0 for the empty index)
	count := []int32{0} // k_last of each feature
	lo, hi := 0, 1      // features of the previous degree
	for j := 1; j <= m; j++ {
		for p := lo; p < hi; p++ {
			for i := last[p]; i < int32(d); i++ {
				c := int32(1) // k_i of the child
				if i == last[p] {
					c = count[p] + 1
				}
				t.parent = append(t.parent, int32(p))
				t.coord = append(t.coord, i)
				t.mult = append(t.mult, 1/math.Sqrt(float64(c)))
				t.degree = append(t.degree, int8(j))
				last = append(last, i)
				count = append(count, c)
			}
		}
		lo, hi = hi, len(t.parent)
	}
	return t
}

// r is the number of features.
func (t *taylorTable) r() int { return len(t.parent) }

// features writes phi(x) into dst (len r) using scaled (len d) as scratch
// for x/sigma. O(r + d).
func (t *taylorTable) features(dst, scaled, x []float64, invSigma float64) {
	sq := 0.0
	for i, v := range x {
		s := v * invSigma
		scaled[i] = s
		sq += s * s
	}
	dst[0] = math.Exp(-0.5 * sq)
	parent, coord, mult := t.parent, t.coord, t.mult
	dst = dst[:len(parent)]
	for f := 1; f < len(dst); f++ {
		dst[f] = dst[parent[f]] * scaled[coord[f]] * mult[f]
	}
}
