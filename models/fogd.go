package models

import (
	"fmt"
	"math"
	"slices"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

func init() {
	Register(Algorithm{
		Name:    "fogd",
		Losses:  []string{"hinge", "logistic", "squared-hinge", "square"},
		Summary: "FOGD (Lu et al. 2016): online gradient descent on D random Fourier features of a Gaussian kernel",
		New:     newFOGD,
		// Stream default width 1 sqrt(d) (README "defaults per algorithm").
		StreamWidth: 1,
	})
}

const fogdStateVersion = 1

// FOGD is Fourier online gradient descent (algorithm "fogd"), Algorithm 1 of
// J. Lu, S. C. H. Hoi, J. Wang, P. Zhao and Z. Liu, "Large Scale Online
// Kernel Learning", JMLR 17, 2016 [Lu et al. 2016, Alg. 1], the
// random-feature baseline of FORKS' Table 1 [Wen et al. 2024, Sec. 6]. Notes
// and measurements: docs/forks.md.
//
// Random Fourier features of the Gaussian kernel [Rahimi & Recht 2007]:
// u_1..u_D ~ N(0, sigma^-2 I_d) and
//
//	z(x) = [cos(u_1^T x) .. cos(u_D^T x), sin(u_1^T x) .. sin(u_D^T x)] / sqrt(D)
//
// so that z(x)^T z(x') ~ exp(-||x-x'||^2 / (2 sigma^2)); then plain online
// gradient descent w <- w - eta l'(w^T z, y) z (hinge: w += eta y z when
// y f < 1).
//
// Choices:
//   - [RECON] The param D counts frequencies; the feature vector has 2D
//     entries. The default 400 is the paper's "feature dimension = 4B" read
//     as the authors' LSOKL toolbox does [CODE] (4B frequencies at B = 100).
//   - [SUGGEST] The features are scaled by 1/sqrt(D), as in Lu et al., so
//     that the default eta = 0.2 means what it means for KOGD; the toolbox's
//     unscaled features with eta = 0.002 are not reproduced.
//   - [SUGGEST] The frequencies are drawn from the key's PRNG (seeded by
//     Setup.Seed) when the learner is built and are not in the state:
//     UnmarshalBinary is always called on a learner built from the same spec
//     and key, which regenerates the same D x d matrix. The blob is then 2D
//     weights plus a counter (6.4 KB at D = 400) instead of D(d+2) numbers;
//     the price is D x d Gaussian draws when a cold key is loaded.
//   - Only the Gaussian kernel has these features; any other kernel is a spec
//     error.
//
// Cost: O(D d) time per record; O(D d) memory, of which 2D numbers are state.
//
// Parameters and their defaults:
//   - D: number of random frequencies (400), in [1, 2^20], D d at most 2^26.
//   - eta: the OGD step (0.2).
//   - kernel.sigma (1; stream sqrt(d)); the kernel must be Gaussian.
//
// Losses: hinge (default), logistic, squared-hinge, square.
type FOGD struct {
	dim, nf int
	eta     float64
	loss    Loss
	cls     bool
	u       []float64 // D x d frequencies (regenerated from the seed, not state)
	w       []float64 // 2D
	n       int       // updates seen

	zs, wNew []float64   // scratch
	memo     predictMemo // memoZ = z(memo.x); z does not depend on the state (version 0)
	memoZ    []float64
}

func newFOGD(s *Setup) (Learner, error) {
	p := s.Params
	D := p.Int("D", 400, 1, 1<<20)
	eta := p.Positive("eta", 0.2)
	if err := p.Err(); err != nil {
		return nil, err
	}
	g, ok := s.Kernel.(*Gaussian)
	if !ok {
		return nil, fmt.Errorf("%w: fogd: random Fourier features need a gaussian kernel, got %T", ErrSpec, s.Kernel)
	}
	if int64(D)*int64(s.Dim) > 1<<26 {
		return nil, fmt.Errorf("%w: fogd: D*dim = %d frequencies exceed 2^26", ErrSpec, int64(D)*int64(s.Dim))
	}
	l := &FOGD{
		dim: s.Dim, nf: D, eta: eta, loss: s.Loss, cls: s.Loss.Classification(),
		u: make([]float64, D*s.Dim), w: make([]float64, 2*D),
		zs: make([]float64, 2*D), wNew: make([]float64, 2*D),
		memo: newPredictMemo(s.Dim), memoZ: make([]float64, 2*D),
	}
	rng := NewRand(s.Seed)
	for i := range l.u {
		l.u[i] = rng.Norm() / g.Sigma
	}
	return l, nil
}

func (l *FOGD) Size() int { return l.nf }

// features writes z(x) into dst (2D).
func (l *FOGD) features(dst, x []float64) {
	scale := 1 / math.Sqrt(float64(l.nf))
	d := l.dim
	for i := 0; i < l.nf; i++ {
		a := linalg.Dot(l.u[i*d:(i+1)*d], x)
		s, c := math.Sincos(a)
		dst[i] = c * scale
		dst[l.nf+i] = s * scale
	}
}

// Predict keeps the numerical contract (input.go): a refused x gives a
// flagged prediction, a non-finite output is flagged ErrNumerical.
func (l *FOGD) Predict(x []float64) Prediction {
	if err := checkInput(x, l.dim); err != nil {
		return invalidPrediction(err)
	}
	return finitePrediction(l.predict(x))
}

func (l *FOGD) predict(x []float64) Prediction {
	l.features(l.memoZ, x)
	l.memo.store(x, 0)
	return Prediction{Value: linalg.Dot(l.w, l.memoZ), Choice: -1, Prob: 1}
}

func (l *FOGD) Update(x []float64, _ Prediction, y float64) error {
	if err := updateInputErr("fogd", x, l.dim, y); err != nil {
		return err
	}
	if l.cls {
		y = Label(y)
	}
	z := l.zs
	if l.memo.hit(x, 0) {
		copy(z, l.memoZ)
	} else {
		l.features(z, x)
	}
	f := linalg.Dot(l.w, z)
	dl := l.loss.Deriv(f, y)
	if dl != 0 {
		copy(l.wNew, l.w)
		linalg.Axpy(-l.eta*dl, z, l.wNew)
		if !linalg.AllFinite(l.wNew) {
			return fmt.Errorf("fogd: %w", ErrNumerical)
		}
		l.w, l.wNew = l.wNew, l.w
	}
	l.n++
	return nil
}

func (l *FOGD) MarshalBinary() ([]byte, error) { return l.AppendBinary(nil) }

func (l *FOGD) AppendBinary(dst []byte) ([]byte, error) {
	w := NewStateWriter(slices.Grow(dst, 64+16*l.nf), "fogd", fogdStateVersion)
	w.Int(l.n)
	w.Floats(l.w)
	return w.Finish(), nil
}

func (l *FOGD) UnmarshalBinary(blob []byte) error {
	r, _, err := NewStateReader(blob, "fogd", fogdStateVersion)
	if err != nil {
		return err
	}
	n := r.Int()
	r.Check(n >= 0, "update count")
	w := r.Floats(nil)
	r.Check(len(w) == 2*l.nf, "weight count (params.D differs?)")
	r.Check(linalg.AllFinite(w), "non-finite weights")
	if err := r.Err(); err != nil {
		return err
	}
	l.n = n
	copy(l.w, w)
	l.memo.forget()
	return nil
}
