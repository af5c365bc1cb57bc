package models

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

func init() {
	Register(Algorithm{
		Name:    "kawv",
		Losses:  []string{"square"},
		Summary: "exact Kernel-AWV (Jezequel et al. 2019 eq. 3), O(t^2) per record: the PKAWV oracle, capped at max_rounds",
		New:     newKAWV,
		// Stream default width 2 sqrt(d) (README "defaults per algorithm").
		StreamWidth: 2,
	})
}

// ErrKAWVHorizon reports an update refused because the exact Kernel-AWV
// learner already holds max_rounds instances (its memory is quadratic).
var ErrKAWVHorizon = errors.New("kawv: max_rounds reached (exact Kernel-AWV memory is O(t^2))")

const (
	kawvStateVersion = 1
	kawvMaxRounds    = 50000
	kawvDefaultRound = 10000
)

// KAWV is the exact kernelised Vovk-Azoury-Warmuth forecaster, Kernel-AWV
// (algorithm "kawv"), the oracle of the PKAWV learners, from R. Jézéquel,
// P. Gaillard and A. Rudi, "Efficient online learning with kernels for
// adversarial large scale problems", NeurIPS 2019 [Jézéquel et al. 2019,
// Sec. 2, eq. 3, Prop. 1-2]. Notes and measurements: docs/pkawv.md.
//
//	f_t = argmin_f sum_{s<t} (y_s - f(x_s))^2 + lambda ||f||^2 + f(x_t)^2,  y_hat_t = f_t(x_t)
//
// [DERIVED] With L the lower Cholesky factor of K_{t-1} + lambda I over the
// stored inputs, l = L^{-1} k_{t-1}(x_t) and z = L^{-1} Y_{t-1}:
//
//	ridge (kernel ridge regression, what the paper ran on its real data): y_hat = l'z
//	awv:  y_hat = l'z / (1 + h),  h = (k(x_t,x_t) - l'l) / lambda
//
// and the update appends the row (l', sqrt(k(x_t,x_t) + lambda - l'l)) to L
// and (y_t - l'z)/L_tt to z [SUGGEST]. Update reuses the work of the Predict
// of the same x (bitMemo).
//
// Cost: O(t d + t^2) time per record and O(t^2 + t d) memory, the cost the
// PKAWV learners avoid.
//
// Parameters and their defaults:
//   - lambda: the regulariser (1, the paper's experiments), in [1e-8, 1e8].
//   - mode: "awv" or "ridge" ("awv"); ridge is an addition, so that both
//     PKAWV modes have an oracle.
//   - max_rounds: the hard cap on stored instances (10000), in [1, 50000].
//     At the default the factor takes 400 MB; Update beyond the cap returns
//     ErrKAWVHorizon and changes nothing, Predict keeps predicting from the
//     frozen state.
//   - kernel.sigma (1; stream 2 sqrt(d)).
//
// Loss: square.
type KAWV struct {
	kernel    Kernel
	dim       int
	lambda    float64
	ridge     bool
	maxRounds int

	// state
	x []float64  // t x d stored inputs, row-major
	z []float64  // L^{-1} Y
	l linalg.Tri // Cholesky factor of K + lambda I

	// scratch
	kvec, lvec []float64
	memo       bitMemo
	memoDiag   float64
	memoLL     float64
	memoKRR    float64
}

func newKAWV(s *Setup) (Learner, error) {
	lambda := s.Params.Float("lambda", 1, 1e-8, 1e8)
	mode := s.Params.String("mode", "awv", "awv", "ridge")
	maxRounds := s.Params.Int("max_rounds", kawvDefaultRound, 1, kawvMaxRounds)
	l := &KAWV{kernel: s.Kernel, dim: s.Dim, lambda: lambda, ridge: mode == "ridge", maxRounds: maxRounds}
	l.memo = newBitMemo(s.Dim)
	return l, nil
}

func (l *KAWV) n() int { return len(l.z) }

func (l *KAWV) prepare(x []float64) {
	t := l.n()
	if l.memo.hit(x, uint64(t)) {
		return
	}
	if cap(l.kvec) < t+1 {
		l.kvec = make([]float64, t, 2*t+16)
		l.lvec = make([]float64, t, 2*t+16)
	}
	l.kvec, l.lvec = l.kvec[:t], l.lvec[:t]
	KernelVector(l.kernel, l.kvec, l.x, x)
	l.l.SolveLower(l.lvec, l.kvec)
	l.memoDiag = l.kernel.Diag(x)
	l.memoLL = linalg.Dot(l.lvec, l.lvec)
	l.memoKRR = linalg.Dot(l.lvec, l.z)
	l.memo.store(x, uint64(t))
}

// Predict keeps the numerical contract (input.go): a refused x gives a
// flagged prediction, a non-finite output is flagged ErrNumerical.
func (l *KAWV) Predict(x []float64) Prediction {
	if err := checkInput(x, l.dim); err != nil {
		return invalidPrediction(err)
	}
	return finitePrediction(l.predict(x))
}

func (l *KAWV) predict(x []float64) Prediction {
	l.prepare(x)
	y := l.memoKRR
	if !l.ridge {
		y /= 1 + (l.memoDiag-l.memoLL)/l.lambda
	}
	return Prediction{Value: y, Choice: -1, Prob: 1}
}

func (l *KAWV) Update(x []float64, _ Prediction, y float64) error {
	if err := updateInputErr("kawv", x, l.dim, y); err != nil {
		return err
	}
	if l.n() >= l.maxRounds {
		return fmt.Errorf("%w (max_rounds = %d)", ErrKAWVHorizon, l.maxRounds)
	}
	l.prepare(x)
	piv := l.memoDiag + l.lambda - l.memoLL
	if !(piv > 0) || math.IsInf(piv, 0) {
		return fmt.Errorf("kawv: update %d: %w", l.n()+1, ErrNumerical)
	}
	ltt := math.Sqrt(piv)
	znew := (y - l.memoKRR) / ltt
	if isBad(znew) || !linalg.AllFinite(l.lvec) {
		return fmt.Errorf("kawv: update %d: %w", l.n()+1, ErrNumerical)
	}
	l.l.Append(l.lvec, ltt)
	l.z = append(l.z, znew)
	l.x = append(l.x, x...)
	l.memo.forget()
	return nil
}

// Size is the number of stored instances.
func (l *KAWV) Size() int { return l.n() }

func (l *KAWV) MarshalBinary() ([]byte, error) { return l.AppendBinary(nil) }

func (l *KAWV) AppendBinary(dst []byte) ([]byte, error) {
	w := NewStateWriter(slices.Grow(dst, 64+8*(len(l.x)+len(l.z)+len(l.l.Data))), "kawv", kawvStateVersion)
	w.Int(l.dim)
	w.Floats(l.x)
	w.Floats(l.z)
	w.Floats(l.l.Data)
	return w.Finish(), nil
}

func (l *KAWV) UnmarshalBinary(blob []byte) error {
	r, _, err := NewStateReader(blob, "kawv", kawvStateVersion)
	if err != nil {
		return err
	}
	d := r.Int()
	r.Check(d == l.dim, "dimension does not match the spec")
	x := r.Floats(nil)
	z := r.Floats(nil)
	tri := r.Floats(nil)
	t := len(z)
	r.Check(t <= l.maxRounds, "more instances than max_rounds")
	r.Check(len(x) == t*l.dim, "stored inputs do not match the label count")
	r.Check(len(tri) == t*(t+1)/2, "factor size does not match the instance count")
	if err := r.Err(); err != nil {
		return err
	}
	if !linalg.AllFinite(x) || !linalg.AllFinite(z) || !linalg.AllFinite(tri) {
		return fmt.Errorf("%w: kawv: non-finite numbers in state", ErrState)
	}
	l.x, l.z, l.l = x, z, linalg.Tri{N: t, Data: tri}
	l.memo.forget()
	return nil
}
