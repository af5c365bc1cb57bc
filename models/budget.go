package models

import (
	"fmt"
	"math"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

// The first stage that FORKS and NOGD share: kernel online gradient descent
// [Kivinen et al. 2004] on a budget of B support vectors [Wen et al. 2024,
// Alg. 1 lines 3-6] [Lu et al. 2016, Alg. 3], f = sum_i alpha_i kappa(SV_i, x). A record is
// added with the KOGD coefficient -eta l'(f, y), without shrinking the
// others, when budgetAdmit says so; when the budget fills, the learner
// builds its second stage (FORKS its sketch, NOGD its Nystrom map) from the
// B support vectors, which stay frozen from then on.

// budgetKOGD is the budgeted KOGD stage: f = sum_i alpha_i kappa(SV_i, x)
// over the n <= B support vectors.
type budgetKOGD struct {
	dim, n int
	sv     []float64 // B x dim
	alpha  []float64 // B
	kv     []float64 // B scratch
	gen    uint64    // bumped whenever the model changes (memo invalidation)
}

func (s *budgetKOGD) init(B, dim int) {
	s.dim = dim
	s.sv = make([]float64, B*dim)
	s.alpha = make([]float64, B)
	s.kv = make([]float64, B)
}

func (s *budgetKOGD) score(kernel Kernel, x []float64) float64 {
	if s.n == 0 {
		return 0
	}
	kv := s.kv[:s.n]
	KernelVector(kernel, kv, s.sv[:s.n*s.dim], x)
	return linalg.Dot(kv, s.alpha[:s.n])
}

func (s *budgetKOGD) add(x []float64, coef float64) {
	copy(s.sv[s.n*s.dim:(s.n+1)*s.dim], x)
	s.alpha[s.n] = coef
	s.n++
	s.gen++
}

func (s *budgetKOGD) pop() {
	s.n--
	s.alpha[s.n] = 0
	s.gen++
}

// marshal writes the stage-1 model: n, then its support vectors and
// coefficients.
func (s *budgetKOGD) marshal(w *StateWriter) {
	w.Int(s.n)
	w.Floats(s.sv[:s.n*s.dim])
	w.Floats(s.alpha[:s.n])
}

// budgetKOGDBlob is a stage-1 model read by decode, not yet restored.
type budgetKOGDBlob struct {
	n         int
	sv, alpha []float64
}

// decode reads what marshal wrote and checks its shapes against this
// model's budget and dimension; finiteness is checked by the caller
// (finite), after its own fields, to keep the order of the state checks.
func (s *budgetKOGD) decode(r *StateReader) budgetKOGDBlob {
	n := r.Int()
	r.Check(n >= 0 && n <= len(s.alpha), "support vector count")
	sv := r.Floats(nil)
	r.Check(len(sv) == n*s.dim, "support vector shape")
	alpha := r.Floats(nil)
	r.Check(len(alpha) == n, "coefficient count")
	return budgetKOGDBlob{n: n, sv: sv, alpha: alpha}
}

func (b budgetKOGDBlob) finite() bool { return linalg.AllFinite(b.sv) && linalg.AllFinite(b.alpha) }

// restore makes the model the decoded one (and invalidates memos).
func (s *budgetKOGD) restore(b budgetKOGDBlob) {
	s.n = b.n
	copy(s.sv, b.sv)
	copy(s.alpha, b.alpha)
	s.gen++
}

// update is the stage-1 round of Update shared by FORKS and NOGD: given the
// score f of x, add x with its KOGD coefficient when budgetAdmit says so;
// when that fills the budget, build stage 2 with full, undoing the addition
// if full fails. alg names the learner in errors; x has passed Update's
// input check (updateInputErr).
func (s *budgetKOGD) update(alg string, loss Loss, cls bool, eta float64, x []float64, f, y float64, full func() error) error {
	coef, add := budgetAdmit(loss, cls, f, y, eta)
	if !add {
		return nil
	}
	if math.IsNaN(coef) || math.IsInf(coef, 0) {
		return fmt.Errorf("%s: stage-1 coefficient %v: %w", alg, coef, ErrNumerical)
	}
	s.add(x, coef)
	if s.n == len(s.alpha) {
		if err := full(); err != nil {
			s.pop()
			return err
		}
	}
	return nil
}

// budgetAdmit decides whether stage 1 adds x and returns its KOGD
// coefficient -eta l'(f, y). Classification losses (hinge, squared hinge,
// logistic) add x when y f < 1: for hinge and squared hinge that is
// "loss > 0", for logistic, whose loss is never 0, the same margin rule
// [SUGGEST]. The square loss adds every record with f != y.
func budgetAdmit(loss Loss, cls bool, f, y, eta float64) (float64, bool) {
	dl := loss.Deriv(f, y)
	if cls {
		if y*f >= 1 {
			return 0, false
		}
	} else if dl == 0 {
		return 0, false
	}
	return -eta * dl, true
}

// stageMemo lets the Update of a two-stage learner (FORKS, NOGD) reuse the
// kernel work of the Predict that preceded it on the same x (the usual
// inline-label case), keyed on the stage-1 generation. It is invisible: a
// miss just recomputes.
type stageMemo struct {
	predictMemo
	f   float64   // stage 1
	phi []float64 // stage 2
}

// score returns the stage-1 score of x, from the memo when the last
// Predict computed it for x against the current stage-1 model.
func (m *stageMemo) score(s *budgetKOGD, kernel Kernel, x []float64) float64 {
	if m.hit(x, s.gen) {
		return m.f
	}
	return s.score(kernel, x)
}
