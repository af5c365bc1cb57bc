package models

import (
	"fmt"
	"math"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

func init() {
	Register(Algorithm{
		Name:    "rf-oks++",
		Losses:  []string{"square", "logistic", "squared-hinge"},
		Summary: "RF-OKS++ (Li & Liao 2022 App. F Alg. 3): OKS++ over D random Fourier features per width; bounded memory and time",
		New: func(s *Setup) (Learner, error) {
			sigmas := oksReadSigmas(s)
			l := new(RFOKSPlus)
			l.initRFForm("rf-oks++", s, sigmas, newOKSPlusRule(s, len(sigmas)))
			return l, nil
		},
	})
	Register(Algorithm{
		Name:    "rf-ioks",
		Losses:  []string{"absolute", "square", "logistic", "hinge"},
		Summary: "RF-IOKS (Li & Liao 2022 App. F Alg. 4): IOKS over D random Fourier features per width; bounded memory and time",
		New: func(s *Setup) (Learner, error) {
			sigmas := oksReadSigmas(s)
			l := new(RFIOKS)
			l.initRFForm("rf-ioks", s, sigmas, newIOKSRule(s, len(sigmas)))
			return l, nil
		},
	})
}

// RFOKSPlus is RF-OKS++, OKS++ over random Fourier features (algorithm
// "rf-oks++"), the bounded-memory, time-budgeted form of OKSPlus from J. Li
// and S. Liao, "Improved Regret Bounds for Online Kernel Selection under
// Bandit Feedback", ECML-PKDD 2022 [Li & Liao 2022, Sec. 5, eq. 8, App. D-F,
// App. F Alg. 3]. It is one of the five kernel selectors of oksLearner
// (oks_learner.go); its arms are rfArms (rf_oks.go). Notes and measurements:
// docs/kernel-selection.md.
//
// The outer level is OKSPlus' (ctilde = c/p, no clipping). Each arm i is a
// linear model on Gaussian random Fourier features [Rahimi & Recht 2007]
//
//	z_i(x) = (1/sqrt(D)) [cos(w_1'x/sigma_i), sin(w_1'x/sigma_i), ..., cos(w_D'x/sigma_i), sin(w_D'x/sigma_i)]  in R^{2D}
//
// with f_i(x) = v_i' z_i(x) and the projected importance-weighted step of
// eq. 8:
//
//	v_i <- v_i - lambda_{t,i} l'_t z_i(x_t) / p_{t,i},   then clip every coordinate to [-clip, clip].
//
// Only the sampled arm's features are computed, so a round costs O(D d + D)
// whatever K is. The choices about the features are rfArms'.
//
// Cost: O(D d + D + K) per record; memory O(D d + K D), of which 2 K D
// weights are state.
//
// Parameters and their defaults: OKSPlus' (sigmas, U, C0, G, variant; no
// max_budget), and
//   - D: random frequencies per width (400), in [1, 65536]; the feature
//     vector has 2D entries.
//   - clip: the bound of every weight (U/sqrt(D), as the authors' code).
//
// Losses: square (default), logistic, squared-hinge.
type RFOKSPlus struct{ oksLearner }

// RFIOKS is RF-IOKS, IOKS over random Fourier features (algorithm "rf-ioks"),
// the bounded-memory, time-budgeted form of IOKS from J. Li and S. Liao,
// "Improved Regret Bounds for Online Kernel Selection under Bandit Feedback",
// ECML-PKDD 2022 [Li & Liao 2022, Sec. 5, eq. 8, App. D-F, Alg. 4]. It is one
// of the five kernel selectors of oksLearner (oks_learner.go); its arms are
// rfArms (rf_oks.go), as RFOKSPlus'. Notes and measurements:
// docs/kernel-selection.md.
//
// The outer level is IOKS', with ||z||^2 = 1 in lambda's gradient sum; each
// arm is a linear model on 2D random Fourier features of its width, stepped
// by eq. 8 and clipped coordinatewise (see RFOKSPlus).
//
// Cost: O(D d + D + K) per record; memory O(D d + K D), of which 2 K D
// weights are state.
//
// Parameters and their defaults: IOKS' (sigmas, U, T, G1, lmax, alpha, eta,
// delta, upsilon; no max_budget), and
//   - D: random frequencies per width (400), in [1, 65536].
//   - clip: the bound of every weight (U/sqrt(D), as the authors' code).
//
// Losses: absolute (default), square, logistic, hinge.
type RFIOKS struct{ oksLearner }

// maxRFFrequencies bounds D (memory D d + 2 D K floats per learner).
const maxRFFrequencies = 1 << 16

// rfArms holds the K random-feature arms of RFOKSPlus and RFIOKS and their
// shared frequency matrix [Li & Liao 2022, Sec. 5, eq. 8, App. D-F]: arm i is
// f_i(x) = v_i' z_i(x) on 2D Gaussian random Fourier features of width
// sigma_i. Choices:
//   - [RECON] The garbled covariance of the features is read as sigma^{-2} I_d:
//     w ~ N(0, sigma_i^{-2} I).
//   - [CODE] One shared matrix Omega in R^{D x d} of N(0,1) entries serves all
//     K kernels; arm i uses Omega x / sigma_i. D counts frequencies, the
//     feature vector has 2D entries (cos and sin).
//   - [CODE] [SUGGEST] clip defaults to U/sqrt(D) (D the number of
//     frequencies), as the authors' code; it bounds ||v||_2 by sqrt(2) U.
//   - [SUGGEST] Omega is drawn from a PRNG seeded by one 64-bit word taken
//     from the key's PRNG when the learner is built; the state stores that
//     word, not the D x d matrix, and Omega is regenerated from it on restore
//     when it differs. State size: 8 K (2D) bytes for the weights, 8 bytes of
//     seed and O(K) accumulators (D = 400, K = 6: about 38 KB); Omega takes
//     8 D d bytes of memory (not state) per learner.
type rfArms struct {
	dim, nf int       // input dimension, D
	seed    uint64    // seed of Omega (state)
	omega   []float64 // N(0,1) frequencies stored d x D: row k holds coordinate k of every w_j
	invSig  []float64 // 1/sigma_i
	clip    float64
	norm    float64   // 1/sqrt(D)
	w       []float64 // K x 2D weights, row-major
	// scratch caches: u = Omega x for uMemo.x; z = z_i(x) for zMemo.x and
	// the arm i = zMemo.ver
	u     []float64
	uMemo predictMemo
	nz    []int // scratch: indices of the non-zero input coordinates
	z     []float64
	zMemo predictMemo
	sArm  int
	sCoef float64
}

func newRFArms(s *Setup, sigmas []float64, u float64, rng *Rand) *rfArms {
	nf := s.Params.Int("D", 400, 1, maxRFFrequencies)
	clip := s.Params.Positive("clip", u/math.Sqrt(float64(nf)))
	if int64(nf)*int64(s.Dim) > 1<<28 {
		s.Params.Fail("D: D x dim = %d x %d frequency entries is too large", nf, s.Dim)
		nf = 1
	}
	b := &rfArms{
		dim: s.Dim, nf: nf, clip: clip, norm: 1 / math.Sqrt(float64(nf)),
		invSig: make([]float64, len(sigmas)),
		w:      make([]float64, len(sigmas)*2*nf),
		u:      make([]float64, nf), uMemo: newPredictMemo(s.Dim), nz: make([]int, 0, s.Dim),
		z: make([]float64, 2*nf), zMemo: newPredictMemo(s.Dim),
	}
	for i, sg := range sigmas {
		b.invSig[i] = 1 / sg
	}
	b.seed = rng.Uint64()
	b.omega = drawFrequencies(b.seed, nf, s.Dim)
	return b
}

// initRFForm makes l the random-feature selector name (RF-OKS++, RF-IOKS)
// with the candidate widths sigmas and the rule: its arms draw the seed of
// their frequencies from the key's PRNG, which l then keeps.
func (l *oksLearner) initRFForm(name string, s *Setup, sigmas []float64, rule oksSelectionRule) {
	rng := NewRand(s.Seed)
	arms := newRFArms(s, sigmas, rule.radius(), rng)
	l.init(name, s, sigmas, rule, arms, rng)
}

// drawFrequencies returns the D frequencies w_j ~ N(0, I_d) drawn from seed,
// w_j after w_{j-1}, stored transposed (d x D) so that Omega x is a sum of
// d contiguous axpys (and skips the zero coordinates of sparse inputs).
func drawFrequencies(seed uint64, nf, d int) []float64 {
	g := NewRand(seed)
	m := make([]float64, nf*d)
	for j := 0; j < nf; j++ {
		for k := 0; k < d; k++ {
			m[k*nf+j] = g.Norm()
		}
	}
	return m
}

// features fills b.z with z_i(x), reusing Omega x and z when x is unchanged.
func (b *rfArms) features(i int, x []float64) {
	if b.zMemo.hit(x, uint64(i)) {
		return
	}
	if !b.uMemo.hit(x, 0) {
		b.project(x)
		b.uMemo.store(x, 0)
	}
	linalg.CosSinScaled(b.z, b.u, b.invSig[i], b.norm)
	b.zMemo.store(x, uint64(i))
}

// project sets u = Omega x, eight input coordinates per pass over u (fewer
// loads and stores of u than one axpy per coordinate), skipping zeros.
func (b *rfArms) project(x []float64) {
	nf := b.nf
	u := b.u[:nf]
	nz := b.nz[:0]
	for k, v := range x {
		if v != 0 {
			nz = append(nz, k)
		}
	}
	b.nz = nz
	clear(u)
	om := b.omega
	k := 0
	for ; k+8 <= len(nz); k += 8 {
		i0, i1, i2, i3, i4, i5, i6, i7 := nz[k], nz[k+1], nz[k+2], nz[k+3], nz[k+4], nz[k+5], nz[k+6], nz[k+7]
		a0, a1, a2, a3, a4, a5, a6, a7 := x[i0], x[i1], x[i2], x[i3], x[i4], x[i5], x[i6], x[i7]
		r0, r1 := om[i0*nf : (i0+1)*nf][:len(u)], om[i1*nf : (i1+1)*nf][:len(u)]
		r2, r3 := om[i2*nf : (i2+1)*nf][:len(u)], om[i3*nf : (i3+1)*nf][:len(u)]
		r4, r5 := om[i4*nf : (i4+1)*nf][:len(u)], om[i5*nf : (i5+1)*nf][:len(u)]
		r6, r7 := om[i6*nf : (i6+1)*nf][:len(u)], om[i7*nf : (i7+1)*nf][:len(u)]
		for j := range u {
			u[j] += ((a0*r0[j] + a1*r1[j]) + (a2*r2[j] + a3*r3[j])) + ((a4*r4[j] + a5*r5[j]) + (a6*r6[j] + a7*r7[j]))
		}
	}
	for ; k+2 <= len(nz); k += 2 {
		i0, i1 := nz[k], nz[k+1]
		a0, a1 := x[i0], x[i1]
		r0, r1 := om[i0*nf : (i0+1)*nf][:len(u)], om[i1*nf : (i1+1)*nf][:len(u)]
		for j := range u {
			u[j] += a0*r0[j] + a1*r1[j]
		}
	}
	if k < len(nz) {
		i := nz[k]
		linalg.Axpy(x[i], om[i*nf:(i+1)*nf], u)
	}
}

func (b *rfArms) weights(i int) []float64 {
	n := 2 * b.nf
	return b.w[i*n : (i+1)*n : (i+1)*n]
}

func (b *rfArms) predict(i int, x []float64) float64 {
	b.features(i, x)
	return linalg.Dot(b.weights(i), b.z)
}

func (b *rfArms) stage(i int, x []float64, coef, _ float64) bool {
	// |z_j| <= 1/sqrt(D) and |v_j| <= clip, so v_j + coef z_j is finite
	// whenever coef / sqrt(D) is.
	if isBad(coef * b.norm) {
		return false
	}
	b.features(i, x)
	b.sArm, b.sCoef = i, coef
	return true
}

func (b *rfArms) commit() {
	w := b.weights(b.sArm)
	c, lim := b.sCoef, b.clip
	for j, zj := range b.z[:len(w)] {
		w[j] = min(max(w[j]+c*zj, -lim), lim)
	}
}

func (b *rfArms) size() int { return b.nf }

func (b *rfArms) marshal(w *StateWriter) {
	w.Int(b.dim)
	w.Int(b.nf)
	w.Uint(b.seed)
	w.Floats(b.w)
}

func (b *rfArms) unmarshal(r *StateReader) func() {
	r.Check(r.Int() == b.dim, "input dimension differs from the spec")
	r.Check(r.Int() == b.nf, "number of random frequencies D differs from the spec")
	seed := r.Uint()
	w := r.Floats(nil)
	r.Check(len(w) == len(b.w), "random-feature weight length")
	ok := true
	for _, v := range w {
		ok = ok && !(math.Abs(v) > b.clip) && !isBad(v)
	}
	r.Check(ok, fmt.Sprintf("random-feature weights must be finite and within clip %v", b.clip))
	return func() {
		if seed != b.seed {
			b.seed = seed
			b.omega = drawFrequencies(seed, b.nf, b.dim)
		}
		copy(b.w, w)
		b.uMemo.forget()
		b.zMemo.forget()
	}
}
