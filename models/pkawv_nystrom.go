package models

import (
	"fmt"
	"math"
	"slices"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

func init() {
	Register(Algorithm{
		Name:    "pkawv-nystrom",
		Losses:  []string{"square"},
		Summary: "projected Kernel-AWV on a KORS Nystrom dictionary with Cholesky up-dates (Jezequel et al. 2019), bounded by max_budget and history",
		New:     newPKAWVNystrom,
		// Stream default width 2 sqrt(d) (README "defaults per algorithm").
		StreamWidth: 2,
	})
}

const (
	pkawvNystromStateVersion = 1
	nystromMaxBudget         = 4096
	nystromMaxHistory        = 1 << 20
)

// PKAWVNystrom is projected Kernel-AWV with Nyström projections on a KORS
// dictionary (algorithm "pkawv-nystrom"), from R. Jézéquel, P. Gaillard and
// A. Rudi, "Efficient online learning with kernels for adversarial large
// scale problems", NeurIPS 2019 [Jézéquel et al. 2019, Sec. 3, eq. 4; Sec.
// 3.2, eq. 7 (projection on span{phi(x) : x in I_t}); Prop. 5, Thm. 6 (the
// KORS dictionary of [Calandriello et al. 2017b]); App. H, Alg. 2, and H.2,
// Nystrom_kernel_AWV and KORS]. Notes and measurements: docs/pkawv.md.
//
// With the dictionary x~_1..x~_m and H_t = K_{t,m}'K_{t,m} + lambda K_{m,m}
// (rows of x_1..x_t, the current one included), g = K_{t-1,m}' Y_{t-1}:
//
//	awv:   y_hat_t = k_m(x_t)' H_t^{-1} g                                     (App. H)
//	ridge: y_hat_t = k_m(x_t)' (H_t - k k')^{-1} g = awv / (1 - k'H_t^{-1}k)   (projected KRR)
//
// [PAPER] H_t is kept as its lower Cholesky factor L, because
// Sherman-Morrison updates of H^{-1} are numerically unstable here (App. H:
// lambda K_mm, not lambda I, regularises): each record is a rank-one update of
// L by its row (cholupdate '+', linalg.Tri.Rank1UpdateTo); a new centre
// borders L.
//
// KORS (App. H.2, function KORS): with KORS weights s_j and
// Minv = (S K_mm S + mu I)^{-1}, q = (s_j k(x~_j, x_t))_j, w = q' Minv q,
//
//	tau_t = (1+eps) (k(x_t,x_t) - w) / (k(x_t,x_t) + mu - w)       [DERIVED]
//
// which is the listing's ((1+eps)/mu)(k_tt - kbar' Mbar^{-1} kbar) with the
// bordered inverse eliminated by its Schur complement (O(m^2), no bordering
// unless x_t is taken); p_t = min(beta tau_t, 1), z_t ~ Bernoulli(p_t).
//
// [RECON] In the text of the paper this was built from, App. H's Alg. 2 is
// garbled (a truncated initialisation, the row and the column of the new
// centre mixed up); it is rebuilt from the Python listing of App. H.2, whose
// own slip (Y where the padded Yp is meant) is corrected, and checked
// numerically against the exact learner (docs/pkawv.md).
//
// Choices:
//   - [SUGGEST] KORS weight s = 1/sqrt(p): sum_j s_j^2 phi_j phi_j' is then
//     unbiased for Phi'Phi (the standard ridge-leverage reweighting). The
//     paper's code multiplies by S_j = 1/p, which shrinks tau faster for
//     covered directions (smaller dictionaries); it is not offered as a
//     param.
//   - [CODE] mu is KORS's regulariser (the theory's mu, Prop. 5); the paper's
//     code passes lambda there; its experiments use mu = lambda = 1.
//   - [CODE] Bordering: a new centre appends the row
//     (L^{-1}c, sqrt(dd - |L^{-1}c|^2)) to L, the direct form of App. H's
//     cholup(u,'+'), cholup(v,'-') pair (the same factor, one triangular
//     solve instead of two rank-one passes, and no downdate that rounding
//     could make fail). If the pivot is not positive (x_t numerically in the
//     span of the dictionary), the centre is not added; KORS already gives
//     such points p ~ 0.
//   - [CODE] Randomness without changing state in Predict: the uniform that
//     decides z_t is drawn at the end of the previous Update and stored in
//     the state, so Predict (which must not advance the state) can add x_t to
//     the dictionary exactly where Algorithm 2 does (before predicting x_t),
//     and Update reaches the same decision. The PRNG (Rand, seeded with
//     Setup.Seed) is in the state.
//   - [SUGGEST] Bounded memory. The exact algorithm needs every past input to
//     give a new centre its column over past rows. Here (a) the dictionary
//     stops growing at max_budget (no more KORS draws); (b) past inputs are
//     kept in a window of the last history records; a centre added at time t
//     gets its column entries (and its g entry) from the window only, the
//     entries of older rows are zero. H stays the Gram matrix of a masked
//     design (each row's entries for centres that joined more than history
//     records after it are 0) plus lambda K_mm, so it stays positive definite
//     and the update stays exact for that model; with history >= n it is the
//     paper's algorithm. Once the dictionary is full the window is dropped.
//     The accuracy cost is measured in docs/pkawv.md.
//   - [SUGGEST] g is maintained incrementally (O(m) per record).
//   - [CODE] Predict leaves the next factor in scratch; Update swaps it in
//     when it gets the same x with no update in between (checked bit for
//     bit, bitMemo), else recomputes. The results are identical either way.
//
// Cost: O(m d + m^2) time per record, plus O(W m d) when a centre joins
// (W = history); memory O(W d + m^2 + m d), m = the dictionary size.
//
// Parameters and their defaults (lambda, mu, beta and eps as in the paper's
// experiments):
//   - lambda: the PKAWV regulariser (1), in [1e-8, 1e8].
//   - mu: the KORS regulariser (1), in [1e-8, 1e8].
//   - beta: KORS oversampling, p_t = min(beta tau_t, 1) (1), in [1e-12, 1e12].
//   - eps: KORS accuracy (0.5), in [0, 100].
//   - max_budget: the cap on the dictionary size (256; stream 64), in [1, 4096].
//   - history: the window W of past records (4096), in [0, 2^20].
//   - mode: "awv" or "ridge" ("awv").
//   - kernel.sigma (1; stream 2 sqrt(d)).
//
// Loss: square.
type PKAWVNystrom struct {
	kernel                Kernel
	dim                   int
	lambda, mu, beta, eps float64
	ridge                 bool
	budget, history       int

	// state
	dict  []float64  // m x d centres
	w     []float64  // KORS weights 1/sqrt(p_j)
	minv  linalg.Sym // (S K_mm S + mu I)^{-1}
	fac   linalg.Tri // lower Cholesky factor of H
	g     []float64  // K' Y
	t     int        // updates
	unif  float64    // pre-drawn uniform deciding the next KORS draw
	rng   Rand
	histX []float64 // window of past inputs, ring of len(histY) rows
	histY []float64
	head  int // oldest row of the ring once it is full

	// scratch filled by prepare
	memo                    bitMemo
	next                    linalg.Tri // factor after this record's row (and centre)
	a, q, tmp, c, rowk      []float64
	gnext, zv, wv, mv, work []float64
	add, ok                 bool
	prob, kappa, gnew       float64
	predAWV, predRidge      float64
}

func newPKAWVNystrom(s *Setup) (Learner, error) {
	p := s.Params
	l := &PKAWVNystrom{
		kernel:  s.Kernel,
		dim:     s.Dim,
		lambda:  p.Float("lambda", 1, 1e-8, 1e8),
		mu:      p.Float("mu", 1, 1e-8, 1e8),
		beta:    p.Float("beta", 1, 1e-12, 1e12),
		eps:     p.Float("eps", 0.5, 0, 100),
		budget:  p.Int("max_budget", s.defInt(256, 64), 1, nystromMaxBudget),
		history: p.Int("history", 4096, 0, nystromMaxHistory),
		ridge:   p.String("mode", "awv", "awv", "ridge") == "ridge",
	}
	l.rng.Seed(s.Seed)
	l.unif = l.rng.Float64()
	l.memo = newBitMemo(s.Dim)
	return l, nil
}

func (l *PKAWVNystrom) m() int { return len(l.w) }

// prepare computes, into scratch, the KORS decision for x, the factor of H
// after x's row (and x's column when it joins) and both predictions.
func (l *PKAWVNystrom) prepare(x []float64) {
	if l.memo.hit(x, uint64(l.t)) {
		return
	}
	m := l.m()
	l.a = growFloats(l.a, m+1)
	l.q = growFloats(l.q, m)
	l.tmp = growFloats(l.tmp, m)
	KernelVector(l.kernel, l.a[:m], l.dict, x)
	l.kappa = l.kernel.Diag(x)
	l.ok = true

	// The KORS draw, while the budget allows.
	l.add, l.prob = false, 0
	if m < l.budget {
		for j := range l.q {
			l.q[j] = l.w[j] * l.a[j]
		}
		l.prob = math.Min(math.Max(l.beta*l.korsTau(l.q, l.kappa), 0), 1)
		if isBad(l.prob) {
			l.prob = 0
		}
		l.add = l.unif < l.prob
	}

	// H += a a', written into the scratch factor (the state's is untouched).
	copy(l.tmp, l.a[:m])
	l.work = growFloats(l.work, 2*m)
	l.ok = l.fac.Rank1UpdateTo(&l.next, l.tmp, l.work)
	mn := m
	l.gnext = growFloats(l.gnext, m+1)
	copy(l.gnext, l.g)
	if l.add && l.ok {
		l.border(x)
		if l.add {
			mn = m + 1
			l.a[m] = l.kappa
			l.gnext[m] = l.gnew
		}
	}
	l.zv = growFloats(l.zv, mn)
	l.wv = growFloats(l.wv, mn)
	l.predAWV, l.predRidge = 0, 0
	if mn > 0 && l.ok {
		l.next.SolveLower(l.zv, l.a[:mn])
		l.next.SolveLower(l.wv, l.gnext[:mn])
		awv := linalg.Dot(l.zv, l.wv)
		hp := linalg.Dot(l.zv, l.zv)
		l.predAWV, l.predRidge = awv, awv/(1-hp)
		if isBad(awv) || isBad(hp) {
			l.ok = false
			l.predAWV, l.predRidge = 0, 0
		} else if !(hp < 1) {
			// hp = h/(1+h) < 1 exactly; it rounds to 1 only for an
			// astronomically large leverage h (lambda near its lower bound).
			l.predRidge = awv
		}
	}
	l.memo.store(x, uint64(l.t))
}

// korsTau is KORS's approximate ridge leverage score of a point with kernel
// diagonal kappa and weighted kernel column q against the dictionary.
func (l *PKAWVNystrom) korsTau(q []float64, kappa float64) float64 {
	wq := l.minv.Quad(q)
	return (1 + l.eps) * (kappa - wq) / (kappa + l.mu - wq)
}

// border computes x's column over the window and the current row (the new
// centre's column of App. H's Algorithm 2, over the bounded window) and
// appends it to l.next; it clears l.add when the Schur complement is not
// positive.
func (l *PKAWVNystrom) border(x []float64) {
	m, d := l.m(), l.dim
	l.c = growFloats(l.c, m)
	l.rowk = growFloats(l.rowk, m)
	clear(l.c)
	dd, gnew := 0.0, 0.0
	n := len(l.histY)
	for i := 0; i < n; i++ {
		s := i
		if n == l.history {
			s = (l.head + i) % n
		}
		xs := l.histX[s*d : (s+1)*d : (s+1)*d]
		kx := l.kernel.Eval(xs, x)
		KernelVector(l.kernel, l.rowk, l.dict, xs)
		linalg.Axpy(kx, l.rowk, l.c)
		dd += kx * kx
		gnew += l.histY[s] * kx
	}
	// Current row (label 0 in AWV's Y~) and the lambda K_mm border.
	linalg.Axpy(l.kappa+l.lambda, l.a[:m], l.c)
	dd += l.kappa*l.kappa + l.lambda*l.kappa
	l.rowk = growFloats(l.rowk, m)
	l.next.SolveLower(l.rowk, l.c)
	piv := dd - linalg.Dot(l.rowk, l.rowk)
	if !(piv > 1e-12*dd) || isBad(piv) || !linalg.AllFinite(l.rowk) {
		l.add = false
		return
	}
	l.next.Append(l.rowk, math.Sqrt(piv))
	l.gnew = gnew
}

// Predict keeps the numerical contract (input.go): a refused x gives a
// flagged prediction, a non-finite output is flagged ErrNumerical.
func (l *PKAWVNystrom) Predict(x []float64) Prediction {
	if err := checkInput(x, l.dim); err != nil {
		return invalidPrediction(err)
	}
	return finitePrediction(l.predict(x))
}

func (l *PKAWVNystrom) predict(x []float64) Prediction {
	l.prepare(x)
	y := l.predAWV
	if l.ridge {
		y = l.predRidge
	}
	return Prediction{Value: y, Choice: -1, Prob: 1}
}

func (l *PKAWVNystrom) Update(x []float64, _ Prediction, y float64) error {
	if err := updateInputErr("pkawv-nystrom", x, l.dim, y); err != nil {
		return err
	}
	l.prepare(x)
	m := l.m()
	fail := func() error {
		l.memo.forget() // the scratch may have been modified below
		return fmt.Errorf("pkawv-nystrom: update %d: %w", l.t+1, ErrNumerical)
	}
	if !l.ok {
		return fail()
	}
	mn := m
	if l.add {
		mn = m + 1
	}
	linalg.Axpy(y, l.a[:mn], l.gnext[:mn])
	if !linalg.AllFinite(l.gnext[:mn]) {
		return fail()
	}
	var wNew, sc float64
	if l.add {
		// KORS bordered inverse: column wNew*q, corner kappa wNew^2 + mu.
		wNew = 1 / math.Sqrt(l.prob)
		l.mv = growFloats(l.mv, m)
		for j := range l.q {
			l.q[j] *= wNew
		}
		l.minv.MulVec(l.mv, l.q)
		sc = l.kappa*wNew*wNew + l.mu - linalg.Dot(l.q, l.mv)
		if !(sc > 0) || isBad(sc) || !linalg.AllFinite(l.mv) {
			return fail()
		}
	}
	// Commit.
	l.fac, l.next = l.next, l.fac
	l.g = append(l.g[:0], l.gnext[:mn]...)
	if l.add {
		l.minv.Rank1(1/sc, l.mv)
		for _, v := range l.mv {
			l.minv.Data = append(l.minv.Data, -v/sc)
		}
		l.minv.Data = append(l.minv.Data, 1/sc)
		l.minv.N++
		l.w = append(l.w, wNew)
		l.dict = append(l.dict, x...)
	}
	if l.m() < l.budget {
		l.push(x, y)
		l.unif = l.rng.Float64()
	} else {
		l.histX, l.histY, l.head = l.histX[:0], l.histY[:0], 0
	}
	l.t++
	l.memo.forget()
	return nil
}

// push adds (x, y) to the window, overwriting the oldest row when full.
func (l *PKAWVNystrom) push(x []float64, y float64) {
	if l.history == 0 {
		return
	}
	d := l.dim
	if len(l.histY) < l.history {
		l.histX = append(l.histX, x...)
		l.histY = append(l.histY, y)
		return
	}
	copy(l.histX[l.head*d:(l.head+1)*d], x)
	l.histY[l.head] = y
	l.head = (l.head + 1) % l.history
}

// Size is the dictionary size m.
func (l *PKAWVNystrom) Size() int { return l.m() }

func (l *PKAWVNystrom) MarshalBinary() ([]byte, error) { return l.AppendBinary(nil) }

func (l *PKAWVNystrom) AppendBinary(dst []byte) ([]byte, error) {
	size := 128 + 8*(len(l.dict)+2*len(l.w)+len(l.minv.Data)+len(l.fac.Data)+len(l.histX)+len(l.histY))
	wr := NewStateWriter(slices.Grow(dst, size), "pkawv-nystrom", pkawvNystromStateVersion)
	wr.Int(l.dim)
	wr.Int(l.t)
	wr.Float(l.unif)
	wr.Rand(&l.rng)
	wr.Floats(l.w)
	wr.Floats(l.dict)
	wr.Floats(l.g)
	wr.Floats(l.minv.Data)
	wr.Floats(l.fac.Data)
	// The window in chronological order (restored with head 0, so the sums
	// over it run in the same order).
	n, d := len(l.histY), l.dim
	wr.Int(n)
	for i := 0; i < n; i++ {
		s := i
		if n == l.history {
			s = (l.head + i) % n
		}
		for _, v := range l.histX[s*d : (s+1)*d] {
			wr.Float(v)
		}
		wr.Float(l.histY[s])
	}
	return wr.Finish(), nil
}

func (l *PKAWVNystrom) UnmarshalBinary(blob []byte) error {
	r, _, err := NewStateReader(blob, "pkawv-nystrom", pkawvNystromStateVersion)
	if err != nil {
		return err
	}
	d := r.Int()
	r.Check(d == l.dim, "dimension does not match the spec")
	t := r.Int()
	r.Check(t >= 0, "negative update count")
	unif := r.Float()
	var rng Rand
	r.Rand(&rng)
	w := r.Floats(nil)
	dict := r.Floats(nil)
	g := r.Floats(nil)
	minv := r.Floats(nil)
	fac := r.Floats(nil)
	m := len(w)
	r.Check(m <= l.budget, "dictionary larger than max_budget")
	r.Check(len(dict) == m*l.dim && len(g) == m, "dictionary shapes")
	r.Check(len(minv) == m*(m+1)/2 && len(fac) == m*(m+1)/2, "matrix sizes do not match the dictionary")
	r.Check(unif >= 0 && unif < 1, "uniform out of [0,1)")
	n := r.Int()
	r.Check(n >= 0 && n <= l.history && (n == 0 || m < l.budget), "window longer than history")
	var hx, hy []float64
	if r.err == nil {
		if n*(d+1) > len(r.b)/8 {
			r.fail("window exceeds blob")
		} else {
			hx, hy = make([]float64, 0, n*d), make([]float64, 0, n)
			for i := 0; i < n; i++ {
				for j := 0; j < d; j++ {
					hx = append(hx, r.Float())
				}
				hy = append(hy, r.Float())
			}
		}
	}
	if err := r.Err(); err != nil {
		return err
	}
	for _, v := range [][]float64{w, dict, g, minv, fac, hx, hy} {
		if !linalg.AllFinite(v) {
			return fmt.Errorf("%w: pkawv-nystrom: non-finite numbers in state", ErrState)
		}
	}
	l.t, l.unif, l.rng = t, unif, rng
	l.w, l.dict, l.g = w, dict, g
	l.minv = linalg.Sym{N: m, Data: minv}
	l.fac = linalg.Tri{N: m, Data: fac}
	l.histX, l.histY, l.head = hx, hy, 0
	l.memo.forget()
	return nil
}
