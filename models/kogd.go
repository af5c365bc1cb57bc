package models

import (
	"fmt"
	"math"
	"slices"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

const kogdStateVersion = 1

func init() {
	Register(Algorithm{
		Name:    "kogd",
		Losses:  []string{"square"},
		Summary: "exact kernel online gradient descent with ball projection (Li & Liao 2023 eq. 2-3; oracle, O(d t) per round)",
		New:     newKOGD,
		// Stream default width 2 sqrt(d) (README "defaults per algorithm").
		StreamWidth: 2,
	})
}

// KOGD is exact kernel online gradient descent with projection onto the RKHS
// ball (algorithm "kogd"), the reference oracle of J. Li and S. Liao, "Nearly
// Optimal Algorithms with Sublinear Computational Complexity for Online Kernel
// Regression", ICML 2023 [Li & Liao 2023, Sec. 2, eq. 2-3]; kernel online
// gradient descent is that of [Kivinen et al. 2004]. Notes and measurements:
// docs/regression.md.
//
// Each label takes the functional gradient step fbar = f - eta_t g k(x,.),
// g = l'(f(x), y) (eq. 2), then projects onto the ball of radius U,
// f = min{1, U/||fbar||_H} fbar (eq. 3):
//   - f = sum_i a_i k(s_i, .) over every past instance with a nonzero
//     gradient (the paper's S); a round with g = 0 changes nothing.
//   - The rate is the constant eta when given; otherwise the adaptive
//     eta_t = U / sqrt(1 + sum_{tau<=t} ||grad_tau||_H^2), with
//     ||grad||^2 = g^2 k(x,x) (the rate of AOGD-ALD's analysis).
//   - ||f||_H^2 is tracked by the exact recurrence
//     ||f - c k(x,.)||^2 = ||f||^2 - 2 c f(x) + c^2 k(x,x), clamped at 0.
//   - Update recomputes f(x) with the current function rather than trusting
//     p.Value: the recurrence needs the current f(x), and with inline labels
//     the two are equal.
//
// Cost: O(d t) time and memory per record, t the stored instances.
//
// Parameters and their defaults:
//   - eta: constant rate (0: the adaptive rate above).
//   - U: radius of the RKHS ball (2; stream 8).
//   - max_budget: most stored instances (100000; stream 1024), in [1, 2^22].
//     [SUGGEST] Memory is O(d t), so the dictionary is bounded; at the cap
//     KOGD stops learning: the dictionary and coefficients are frozen and
//     later updates are counted as dropped. KOGD is an oracle; a capped
//     stream should use AOGD-ALD, which keeps learning at its cap.
//   - kernel.sigma (1; stream 2 sqrt(d)).
//
// Loss: square.
type KOGD struct {
	kernel    Kernel
	loss      Loss
	dim       int
	eta       float64 // constant rate; 0 selects the adaptive rate
	u         float64 // radius of the RKHS ball
	maxBudget int

	// dynamic state (serialized)
	t       int       // labels received
	dropped int       // updates dropped at the cap
	g2      float64   // 1 + sum ||grad||_H^2 (adaptive rate accumulator)
	n2      float64   // ||f||_H^2
	dict    []float64 // len(a) x d, row-major
	a       []float64 // dual coefficients

	kv []float64 // scratch: kernel vector, len(a)
}

func newKOGD(s *Setup) (Learner, error) {
	p := s.Params
	l := &KOGD{
		kernel:    s.Kernel,
		loss:      s.Loss,
		dim:       s.Dim,
		eta:       p.Positive("eta", 0),
		u:         p.Positive("U", s.defU(2, 8)),
		maxBudget: p.Int("max_budget", s.defInt(100000, 1024), 1, 1<<22),
		g2:        1,
	}
	return l, nil
}

func (l *KOGD) Size() int { return len(l.a) }

// Predict keeps the numerical contract (input.go): a refused x gives a
// flagged prediction, a non-finite output is flagged ErrNumerical.
func (l *KOGD) Predict(x []float64) Prediction {
	if err := checkInput(x, l.dim); err != nil {
		return invalidPrediction(err)
	}
	return finitePrediction(l.predict(x))
}

func (l *KOGD) predict(x []float64) Prediction {
	kv := l.kv[:len(l.a)]
	KernelVector(l.kernel, kv, l.dict, x)
	return Prediction{Value: linalg.Dot(l.a, kv), Choice: -1, Prob: 1}
}

func (l *KOGD) Update(x []float64, _ Prediction, y float64) error {
	if err := updateInputErr("kogd", x, l.dim, y); err != nil {
		return err
	}
	if len(l.a) >= l.maxBudget {
		l.t++
		l.dropped++
		return nil
	}
	kv := l.kv[:len(l.a)]
	KernelVector(l.kernel, kv, l.dict, x)
	yhat := linalg.Dot(l.a, kv)
	g := l.loss.Deriv(yhat, y)
	if isBad(g) {
		return fmt.Errorf("kogd: %w (gradient %v)", ErrNumerical, g)
	}
	if g == 0 {
		l.t++
		return nil
	}
	kxx := l.kernel.Diag(x)
	g2 := l.g2 + g*g*kxx
	eta := l.eta
	if eta == 0 {
		eta = l.u / math.Sqrt(g2)
	}
	c := eta * g
	n2 := l.n2 - 2*c*yhat + c*c*kxx
	if isBad(g2) || isBad(c) || isBad(n2) {
		return fmt.Errorf("kogd: %w (rate accumulator %v, step %v, norm^2 %v)", ErrNumerical, g2, c, n2)
	}
	// Commit: append x with coefficient -eta g (eq. 2), then project (eq. 3).
	l.dict = append(l.dict, x...)
	l.a = append(l.a, -c)
	l.kv = append(l.kv[:len(l.a)-1], 0)
	l.g2 = g2
	l.n2 = math.Max(n2, 0)
	if l.n2 > l.u*l.u {
		linalg.Scale(l.u/math.Sqrt(l.n2), l.a)
		l.n2 = l.u * l.u
	}
	l.t++
	return nil
}

func (l *KOGD) MarshalBinary() ([]byte, error) { return l.AppendBinary(nil) }

func (l *KOGD) AppendBinary(dst []byte) ([]byte, error) {
	w := NewStateWriter(slices.Grow(dst, 64+8*(len(l.dict)+len(l.a))), "kogd", kogdStateVersion)
	w.Int(l.t)
	w.Int(l.dropped)
	w.Float(l.g2)
	w.Float(l.n2)
	w.Floats(l.dict)
	w.Floats(l.a)
	return w.Finish(), nil
}

func (l *KOGD) UnmarshalBinary(blob []byte) error {
	r, _, err := NewStateReader(blob, "kogd", kogdStateVersion)
	if err != nil {
		return err
	}
	t, dropped := r.Int(), r.Int()
	g2, n2 := r.Float(), r.Float()
	dict := r.Floats(nil)
	a := r.Floats(nil)
	r.Check(t >= 0 && dropped >= 0 && dropped <= t, "counters")
	r.Check(g2 >= 1 && !isBad(g2) && n2 >= 0 && n2 <= l.u*l.u*(1+1e-12), "accumulators")
	r.Check(len(dict) == len(a)*l.dim, "dictionary shape does not match dim")
	r.Check(len(a) <= l.maxBudget, "dictionary larger than max_budget")
	r.Check(linalg.AllFinite(dict) && linalg.AllFinite(a), "non-finite coefficients")
	if err := r.Err(); err != nil {
		return err
	}
	l.t, l.dropped, l.g2, l.n2, l.dict, l.a = t, dropped, g2, n2, dict, a
	l.kv = make([]float64, len(a), len(a)+1)
	return nil
}
