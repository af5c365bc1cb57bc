package models

// KONS: exact kernel online Newton step, the oracle for NONS-ALD.
//
// Paper: J. Li, S. Liao, ICML 2023, Sec. 4.1, Algorithm 2, eq. (7):
// A_t = A_{t-1} + eta grad_t grad_t' (A_0 = mu I), f_{t+1} = f_t - A_t^{-1} grad_t,
// grad_t = g_t phi(x_t), g_t = 2 (yhat_t - y_t). As written, no projection
// (Sec. 4.1: "for simplicity use H"). Notes: docs/regression.md.
//
// Finite implementation ([SUGGEST], via Lemma D.1 / Woodbury). With
// D = diag(sqrt(eta) g_tau), M_t = D K_t D + mu I_t and f = sum_tau c_tau k(x_tau, .):
//
//	A_t^{-1} phi(x_t) = (1/mu) [phi(x_t) - Phi D M_t^{-1} D k_t]
//
// M_t^{-1} is kept by bordering: with z = D_{t-1} k_{t-1}(x_t),
// y1 = M_{t-1}^{-1} z, r = z'y1 and the Schur complement s = mu + eta g^2 (k(x,x) - r),
//
//	M_t^{-1} = [[M^{-1} + eta g^2 y1 y1'/s, -sqrt(eta) g y1/s], [., 1/s]]
//
// and the coefficient update c <- [c; 0] - (g/mu)(e_t - D M_t^{-1} D k_t)
// simplifies to c_tau += g sqrt(eta) g_tau y1_tau / s, c_t = -g/s. O(t d + t^2)
// per round. Rounds with g = 0 change nothing and store nothing.
//
// U enters only through the default eta = 1/(4(U^2+1)) (Thm 4.6 with Y = 1).
// Cap: the cost is O(t^2) per round and memory O(t^2), so the number of stored
// rounds is bounded by max_budget (default 2000, at most 20000). At the cap KONS
// stops learning: later updates are counted as dropped and change nothing else.
// KONS is a test oracle, not a production learner.
import (
	"fmt"
	"math"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

const konsStateVersion = 1

func init() {
	Register(Algorithm{
		Name:    "kons",
		Losses:  []string{"square"},
		Summary: "exact kernel online Newton step (paper 000 Alg. 2; oracle, O(d t + t^2) per round)",
		New:     newKONS,
		// Stream default width 2 sqrt(d) (README "defaults per algorithm").
		StreamWidth: 2,
	})
}

type kons struct {
	kern      Kernel
	loss      Loss
	d         int
	u         float64
	mu        float64
	eta       float64
	maxBudget int

	// dynamic state (serialized)
	t       int
	dropped int
	dict    []float64  // n x d
	c       []float64  // f = sum c_i k(x_i, .)
	dg      []float64  // sqrt(eta) g_i, the diagonal of D
	minv    linalg.Sym // M^{-1}

	kv, z, y1 []float64 // scratch, capacity >= n+1
}

func newKONS(s *Setup) (Learner, error) {
	p := s.Params
	l := &kons{
		kern:      s.Kernel,
		loss:      s.Loss,
		d:         s.Dim,
		u:         p.Positive("U", s.defU(1, 3)),
		mu:        p.Positive("mu", 1),
		maxBudget: p.Int("max_budget", s.defInt(2000, 256), 1, 20000),
	}
	l.eta = p.Positive("eta", 1/(4*(l.u*l.u+1)))
	l.ensureScratch(1)
	return l, nil
}

func (l *kons) ensureScratch(n int) {
	l.kv, l.z, l.y1 = growBuf(l.kv, n), growBuf(l.z, n), growBuf(l.y1, n)
}

func (l *kons) Size() int { return len(l.c) }

// Predict keeps the numerical contract (input.go): a refused x gives a
// flagged prediction, a non-finite output is flagged ErrNumerical.
func (l *kons) Predict(x []float64) Prediction {
	if err := checkInput(x, l.d); err != nil {
		return invalidPrediction(err)
	}
	return finitePrediction(l.predict(x))
}

func (l *kons) predict(x []float64) Prediction {
	kv := l.kv[:len(l.c)]
	KernelVector(l.kern, kv, l.dict, x)
	return Prediction{Value: linalg.Dot(l.c, kv), Choice: -1, Prob: 1}
}

func (l *kons) Update(x []float64, _ Prediction, y float64) error {
	if err := updateInputErr("kons", x, l.d, y); err != nil {
		return err
	}
	if isBad(y) || !linalg.AllFinite(x) {
		return fmt.Errorf("kons: %w (label %v or features)", ErrNumerical, y)
	}
	n := len(l.c)
	if n >= l.maxBudget {
		l.t++
		l.dropped++
		return nil
	}
	kv := l.kv[:n]
	KernelVector(l.kern, kv, l.dict, x)
	yhat := linalg.Dot(l.c, kv)
	g := l.loss.Deriv(yhat, y)
	if isBad(g) {
		return fmt.Errorf("kons: %w (gradient %v)", ErrNumerical, g)
	}
	if g == 0 {
		l.t++
		return nil
	}
	kxx := l.kern.Diag(x)
	z, y1 := l.z[:n], l.y1[:n]
	for i := range z {
		z[i] = l.dg[i] * kv[i]
	}
	l.minv.MulVec(y1, z)
	r := linalg.Dot(z, y1)
	e := l.eta * g * g
	s := l.mu + e*math.Max(kxx-r, 0)
	dn := math.Sqrt(l.eta) * g
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
	l.t++
	l.ensureScratch(n + 2)
	return nil
}

func (l *kons) MarshalBinary() ([]byte, error) {
	n := len(l.c)
	w := NewStateWriter(make([]byte, 0, 64+8*(len(l.dict)+2*n+len(l.minv.Data))), "kons", konsStateVersion)
	w.Int(l.t)
	w.Int(l.dropped)
	w.Floats(l.dict)
	w.Floats(l.c)
	w.Floats(l.dg)
	w.Floats(l.minv.Data)
	return w.Finish(), nil
}

func (l *kons) UnmarshalBinary(blob []byte) error {
	r, _, err := NewStateReader(blob, "kons", konsStateVersion)
	if err != nil {
		return err
	}
	t, dropped := r.Int(), r.Int()
	dict := r.Floats(nil)
	c := r.Floats(nil)
	dg := r.Floats(nil)
	var minv linalg.Sym
	minv.Data = r.Floats(nil)
	n := len(c)
	r.Check(t >= 0 && dropped >= 0 && dropped <= t, "counters")
	r.Check(n <= l.maxBudget, "more stored rounds than max_budget")
	r.Check(len(dict) == n*l.d && len(dg) == n && len(minv.Data) == n*(n+1)/2, "shapes do not match dim")
	r.Check(linalg.AllFinite(dict) && linalg.AllFinite(c) && linalg.AllFinite(dg) && linalg.AllFinite(minv.Data), "non-finite state")
	if err := r.Err(); err != nil {
		return err
	}
	minv.N = n
	l.t, l.dropped, l.dict, l.c, l.dg, l.minv = t, dropped, dict, c, dg, minv
	l.kv, l.z, l.y1 = nil, nil, nil
	l.ensureScratch(n + 1)
	return nil
}
