package models

import (
	"fmt"
	"math"
	"slices"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

// konsStateVersion 2 adds Y_t (ymax); a version-1 blob restores with Y_t = 1,
// the bound its rounds were taken with.
const konsStateVersion = 2

func init() {
	Register(Algorithm{
		Name:    "kons",
		Losses:  []string{"square"},
		Summary: "exact kernel online Newton step (Li & Liao 2023 Alg. 2; oracle, O(d t + t^2) per round)",
		New:     newKONS,
		// Stream default width 2 sqrt(d) (README "defaults per algorithm").
		StreamWidth: 2,
	})
}

// KONS is the exact kernel online Newton step (algorithm "kons"), the oracle
// of NONS-ALD, Algorithm 2 of J. Li and S. Liao, "Nearly Optimal Algorithms
// with Sublinear Computational Complexity for Online Kernel Regression", ICML
// 2023 [Li & Liao 2023, Sec. 4.1, Alg. 2, eq. 7]:
//
//	A_t = A_{t-1} + eta grad_t grad_t' (A_0 = mu I),  f_{t+1} = f_t - A_t^{-1} grad_t
//
// with grad_t = g_t phi(x_t), g_t = 2 (yhat_t - y_t). As written, there is
// no projection (Sec. 4.1: "for simplicity use H"). Notes and measurements:
// docs/regression.md.
//
// Finite implementation [SUGGEST], by Lemma D.1 (Woodbury). With
// D = diag(sqrt(eta) g_tau), M_t = D K_t D + mu I_t and f = sum_tau c_tau k(x_tau, .):
//
//	A_t^{-1} phi(x_t) = (1/mu) [phi(x_t) - Phi D M_t^{-1} D k_t]
//
// M_t^{-1} is kept by bordering: with z = D_{t-1} k_{t-1}(x_t),
// y1 = M_{t-1}^{-1} z, r = z'y1 and the Schur complement
// s = mu + eta g^2 (k(x,x) - r),
//
//	M_t^{-1} = [[M^{-1} + eta g^2 y1 y1'/s, -sqrt(eta) g y1/s], [., 1/s]]
//
// and the coefficient update c <- [c; 0] - (g/mu)(e_t - D M_t^{-1} D k_t)
// simplifies to c_tau += g sqrt(eta) g_tau y1_tau / s, c_t = -g/s. Rounds
// with g = 0 change nothing and store nothing.
//
// U enters only through the default step eta = 1/(4(U^2+Y^2)) (Thm. 4.6,
// |y| <= Y). [SUGGEST] A stream does not know Y, so without the param eta
// and with an unscaled target (scale.y "none") each round uses
// eta_t = 1/(4(U^2+Y_t^2)) with Y_t = max(1, max_{tau<=t} |y_tau|), kept in
// the state: A_t = mu I + sum_tau eta_tau grad_tau grad_tau', so
// D = diag(sqrt(eta_tau) g_tau) and the bordering is unchanged. On targets
// in [0, 1] (the papers' scaling) Y_t = 1, the paper's eta = 1/(4(U^2+1)),
// bit for bit. With a fixed eta and targets near 1e6 (unscaled), eta g^2
// reaches 1e12: the Schur complement's k(x,x) - z'M^{-1}z, of true size
// mu/(eta g^2), is below the rounding of the bordered M^{-1}
// (cond(M) ~ eta g^2), clamps at 0, c_t = -g/mu and the iterates diverge
// (|y_hat| 1e133, docs/regression.md). With eta_t,
// eta_t g^2 <= 2(U+Y)^2/(U^2+Y^2) <= 4 and M stays well conditioned. A
// standardised target (scale.y "standard") keeps the paper's fixed eta.
//
// Cost: O(d t + t^2) time per record, O(d t + t^2) memory, t the stored
// rounds. KONS is a test oracle, not a production learner.
//
// Parameters and their defaults:
//   - U: the bound of the default step (1; stream 3).
//   - mu: A_0 = mu I (1).
//   - eta: a fixed step (the adaptive eta_t above; 1/(4(U^2+1)) when the
//     target is standardised online).
//   - max_budget: most stored rounds (2000; stream 256), in [1, 20000]
//     [SUGGEST]. At the cap KONS stops learning: later updates are counted
//     as dropped and change nothing else.
//   - kernel.sigma (1; stream 2 sqrt(d)).
//
// Loss: square.
type KONS struct {
	kernel    Kernel
	loss      Loss
	dim       int
	u         float64
	mu        float64
	eta       float64 // params.eta when given (etaFixed), else recomputed from ymax each round
	etaFixed  bool
	maxBudget int

	// dynamic state (serialized)
	t       int
	dropped int
	ymax    float64    // Y_t = max(1, max |y|) over the rounds that stored a point
	dict    []float64  // n x d
	c       []float64  // f = sum c_i k(x_i, .)
	dg      []float64  // sqrt(eta) g_i, the diagonal of D
	minv    linalg.Sym // M^{-1}

	kv, z, y1 []float64 // scratch, capacity >= n+1
}

func newKONS(s *Setup) (Learner, error) {
	p := s.Params
	l := &KONS{
		kernel:    s.Kernel,
		loss:      s.Loss,
		dim:       s.Dim,
		u:         p.Positive("U", s.defU(1, 3)),
		mu:        p.Positive("mu", 1),
		maxBudget: p.Int("max_budget", s.defInt(2000, 256), 1, 20000),
	}
	// A standardised target (scale.y "standard", the default) is O(1) by
	// construction: the paper's fixed eta with U. Early z-scores, from the
	// statistics of two or three labels, can be large, and a running max would
	// keep them for good.
	l.etaFixed = p.Has("eta") || s.StreamY
	l.eta = p.Positive("eta", 1/(4*(l.u*l.u+1)))
	l.ymax = 1
	l.ensureScratch(1)
	return l, nil
}

func (l *KONS) ensureScratch(n int) {
	l.kv, l.z, l.y1 = growFloats(l.kv, n), growFloats(l.z, n), growFloats(l.y1, n)
}

func (l *KONS) Size() int { return len(l.c) }

// Predict keeps the numerical contract (input.go): a refused x gives a
// flagged prediction, a non-finite output is flagged ErrNumerical.
func (l *KONS) Predict(x []float64) Prediction {
	if err := checkInput(x, l.dim); err != nil {
		return invalidPrediction(err)
	}
	return finitePrediction(l.predict(x))
}

func (l *KONS) predict(x []float64) Prediction {
	kv := l.kv[:len(l.c)]
	KernelVector(l.kernel, kv, l.dict, x)
	return Prediction{Value: linalg.Dot(l.c, kv), Choice: -1, Prob: 1}
}

func (l *KONS) Update(x []float64, _ Prediction, y float64) error {
	if err := updateInputErr("kons", x, l.dim, y); err != nil {
		return err
	}
	n := len(l.c)
	if n >= l.maxBudget {
		l.t++
		l.dropped++
		return nil
	}
	kv := l.kv[:n]
	KernelVector(l.kernel, kv, l.dict, x)
	yhat := linalg.Dot(l.c, kv)
	g := l.loss.Deriv(yhat, y)
	if isBad(g) {
		return fmt.Errorf("kons: %w (gradient %v)", ErrNumerical, g)
	}
	if g == 0 {
		l.t++
		return nil
	}
	eta, ymax := l.eta, math.Max(l.ymax, math.Abs(y))
	if !l.etaFixed {
		eta = 1 / (4 * (l.u*l.u + ymax*ymax))
		if !(eta > 0) {
			// Y_t^2 overflows (|y| near 1e154 or more): the step would be 0
			// and the target's scale beyond float64; refuse the round.
			return fmt.Errorf("kons: %w (label %v: 1/(4(U^2+Y^2)) underflows)", ErrNumerical, y)
		}
	}
	kxx := l.kernel.Diag(x)
	z, y1 := l.z[:n], l.y1[:n]
	for i := range z {
		z[i] = l.dg[i] * kv[i]
	}
	l.minv.MulVec(y1, z)
	r := linalg.Dot(z, y1)
	e := eta * g * g
	s := l.mu + e*math.Max(kxx-r, 0)
	dn := math.Sqrt(eta) * g
	maxY := 0.0
	for _, v := range y1 {
		maxY = math.Max(maxY, math.Abs(v))
	}
	if isBad(s) || isBad(e*maxY*maxY/s) || isBad(g*dn*maxY/s) || isBad(dn) {
		return fmt.Errorf("kons: %w (gradient %v, Schur complement %v)", ErrNumerical, g, s)
	}
	// Commit: bordered M^{-1}, coefficients, dictionary.
	l.minv.Rank1(e/s, y1)
	l.minv.AppendDiag(1 / s)
	for k := 0; k < n; k++ {
		l.minv.Set(n, k, -dn*y1[k]/s)
	}
	for i := 0; i < n; i++ {
		l.c[i] += g * l.dg[i] * y1[i] / s
	}
	l.c = append(l.c, -g/s)
	l.dg = append(l.dg, dn)
	l.dict = append(l.dict, x...)
	l.ymax = ymax
	l.t++
	l.ensureScratch(n + 2)
	return nil
}

func (l *KONS) MarshalBinary() ([]byte, error) { return l.AppendBinary(nil) }

func (l *KONS) AppendBinary(dst []byte) ([]byte, error) {
	n := len(l.c)
	w := NewStateWriter(slices.Grow(dst, 64+8*(len(l.dict)+2*n+len(l.minv.Data))), "kons", konsStateVersion)
	w.Int(l.t)
	w.Int(l.dropped)
	w.Float(l.ymax)
	w.Floats(l.dict)
	w.Floats(l.c)
	w.Floats(l.dg)
	w.Floats(l.minv.Data)
	return w.Finish(), nil
}

func (l *KONS) UnmarshalBinary(blob []byte) error {
	r, ver, err := NewStateReader(blob, "kons", konsStateVersion)
	if err != nil {
		return err
	}
	t, dropped := r.Int(), r.Int()
	ymax := 1.0
	if ver >= 2 {
		ymax = r.Float()
	}
	dict := r.Floats(nil)
	c := r.Floats(nil)
	dg := r.Floats(nil)
	var minv linalg.Sym
	minv.Data = r.Floats(nil)
	n := len(c)
	r.Check(t >= 0 && dropped >= 0 && dropped <= t, "counters")
	r.Check(ymax >= 1 && !isBad(ymax), "target bound Y_t must be finite and >= 1")
	r.Check(n <= l.maxBudget, "more stored rounds than max_budget")
	r.Check(len(dict) == n*l.dim && len(dg) == n && len(minv.Data) == n*(n+1)/2, "shapes do not match dim")
	r.Check(linalg.AllFinite(dict) && linalg.AllFinite(c) && linalg.AllFinite(dg) && linalg.AllFinite(minv.Data), "non-finite state")
	if err := r.Err(); err != nil {
		return err
	}
	minv.N = n
	l.t, l.dropped, l.ymax, l.dict, l.c, l.dg, l.minv = t, dropped, ymax, dict, c, dg, minv
	l.kv, l.z, l.y1 = nil, nil, nil
	l.ensureScratch(n + 1)
	return nil
}
