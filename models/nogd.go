package models

import (
	"fmt"
	"math"
	"slices"

	"github.com/kernelstream/kernelstream/internal/linalg"
	"gonum.org/v1/gonum/mat"
)

func init() {
	Register(Algorithm{
		Name:    "nogd",
		Losses:  []string{"hinge", "logistic", "squared-hinge", "square"},
		Summary: "NOGD (Lu et al. 2016): budgeted KOGD, then online gradient descent on a frozen rank-k Nystrom map of the B support vectors",
		New:     newNOGD,
		// Stream default width 2 sqrt(d) (README "defaults per algorithm").
		StreamWidth: 2,
	})
}

const nogdStateVersion = 1

// NOGD is Nystrom online gradient descent (algorithm "nogd"), Algorithm 3 of
// J. Lu, S. C. H. Hoi, J. Wang, P. Zhao and Z. Liu, "Large Scale Online
// Kernel Learning", JMLR 17, 2016 [Lu et al. 2016, Alg. 3], the Nystrom
// baseline of FORKS' Table 1 [Wen et al. 2024, Sec. 6]. Notes and
// measurements: docs/forks.md.
//
// Stage 1 is kernel online gradient descent on a budget of B support vectors,
// the same stage as FORKS (budgetKOGD, budget.go, with FORKS' admission
// rule). When the budget fills, once: K = [kappa(SV_i, SV_j)] (B x B), its
// top k eigenpairs K ~ V_k D_k V_k^T, the map M = D_k^{-1/2} V_k^T (k x B)
// and phi(x) = M k_SV(x). Afterwards plain online gradient descent in R^k:
// w <- w - eta l'(w^T phi, y) phi (hinge: w += eta y phi when y f < 1). The
// support vectors and M are frozen.
//
// Choices:
//   - [CODE] w starts at the KOGD model carried over (the authors' LSOKL
//     toolbox): w = M^{+T} alpha = D_k^{1/2} V_k^T alpha, so
//     w^T phi(x) = alpha^T V_k V_k^T k_SV(x).
//   - [SUGGEST] Eigenpairs with lambda <= 1e-10 lambda_max are dropped
//     (their row of M is 0), guarding D_k^{-1/2}.
//   - The map is built as soon as the budget fills (the toolbox waits for the
//     next margin error; the model is the same).
//   - k defaults to 0.1 B as in FORKS' experiments (the toolbox uses 0.2 B).
//
// Cost per record: O(B d) in both stages (plus O(B k) in the second); the map
// is built once in O(B^2 d + B^3). Memory O(B d + B k).
//
// Parameters and their defaults:
//   - B: budget of support vectors (100), in [1, 4096].
//   - k: rank of the Nystrom map (B/10; stream 0.3 B; at least 1, at most B).
//   - eta: the step of both stages (0.2).
//   - kernel.sigma (1; stream 2 sqrt(d)).
//
// Losses: hinge (default), logistic, squared-hinge, square.
type NOGD struct {
	dim, budget, k int
	eta            float64
	kernel         Kernel
	loss           Loss
	cls            bool

	st1      budgetKOGD
	sketched bool
	m        []float64 // k x B
	w        []float64 // k

	phi, wNew []float64 // scratch
	memo      stageMemo // phi: the stage-2 features
}

func newNOGD(s *Setup) (Learner, error) {
	p := s.Params
	B := p.Int("B", 100, 1, 4096) // the B x B kernel matrix is decomposed once per key
	// k = 0.1 B as in FORKS's experiments; 0.3 B on standardised streams
	// (README "defaults per algorithm": raw cod-rna 6.5 % mistakes against 20.7 %).
	k := p.Int("k", max(1, s.defInt(B/10, 3*B/10)), 1, 4096)
	eta := p.Positive("eta", 0.2)
	if k > B {
		p.Fail("k = %d must be <= B = %d", k, B)
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	l := &NOGD{
		dim: s.Dim, budget: B, k: k, eta: eta, kernel: s.Kernel, loss: s.Loss, cls: s.Loss.Classification(),
		phi: make([]float64, k), wNew: make([]float64, k),
		memo: stageMemo{predictMemo: newPredictMemo(s.Dim), phi: make([]float64, k)},
	}
	l.st1.init(B, s.Dim)
	return l, nil
}

func (l *NOGD) Size() int { return l.st1.n }

// features writes phi(x) = M k_SV(x) into dst.
func (l *NOGD) features(dst, x []float64) {
	kv := l.st1.kv
	KernelVector(l.kernel, kv, l.st1.sv, x)
	for i := range dst {
		dst[i] = linalg.Dot(l.m[i*l.budget:(i+1)*l.budget], kv)
	}
}

// Predict keeps the numerical contract (input.go): a refused x gives a
// flagged prediction, a non-finite output is flagged ErrNumerical.
func (l *NOGD) Predict(x []float64) Prediction {
	if err := checkInput(x, l.dim); err != nil {
		return invalidPrediction(err)
	}
	return finitePrediction(l.predict(x))
}

func (l *NOGD) predict(x []float64) Prediction {
	var f float64
	if !l.sketched {
		f = l.st1.score(l.kernel, x)
		l.memo.f = f
	} else {
		l.features(l.memo.phi, x)
		f = linalg.Dot(l.w, l.memo.phi)
	}
	l.memo.store(x, l.st1.gen)
	return Prediction{Value: f, Choice: -1, Prob: 1}
}

func (l *NOGD) Update(x []float64, _ Prediction, y float64) error {
	if err := updateInputErr("nogd", x, l.dim, y); err != nil {
		return err
	}
	if l.cls {
		y = Label(y)
	}
	if !l.sketched {
		f := l.memo.score(&l.st1, l.kernel, x)
		return l.st1.update("nogd", l.loss, l.cls, l.eta, x, f, y, l.buildMap)
	}
	phi := l.phi
	if l.memo.hit(x, l.st1.gen) {
		copy(phi, l.memo.phi)
	} else {
		l.features(phi, x)
	}
	dl := l.loss.Deriv(linalg.Dot(l.w, phi), y)
	if dl == 0 {
		return nil
	}
	copy(l.wNew, l.w)
	linalg.Axpy(-l.eta*dl, phi, l.wNew)
	if !linalg.AllFinite(l.wNew) {
		return fmt.Errorf("nogd: %w", ErrNumerical)
	}
	l.w, l.wNew = l.wNew, l.w
	return nil
}

// buildMap computes M = D_k^{-1/2} V_k^T and w = D_k^{1/2} V_k^T alpha from
// the eigen-decomposition of the B x B kernel matrix (one-off, gonum).
func (l *NOGD) buildMap() error {
	B, k, d := l.budget, l.k, l.dim
	K := mat.NewSymDense(B, nil)
	sv := l.st1.sv
	for i := 0; i < B; i++ {
		for j := i; j < B; j++ {
			K.SetSym(i, j, l.kernel.Eval(sv[i*d:(i+1)*d], sv[j*d:(j+1)*d]))
		}
	}
	var es mat.EigenSym
	if !es.Factorize(K, true) {
		return fmt.Errorf("nogd: eigendecomposition of the budget kernel matrix failed: %w", ErrNumerical)
	}
	vals := es.Values(nil)
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	m := make([]float64, k*B)
	w := make([]float64, k)
	top := vals[B-1]
	for i := 0; i < k; i++ {
		src := B - 1 - i
		lam := vals[src]
		if !(lam > 1e-10*top) {
			continue
		}
		inv, sq := 1/math.Sqrt(lam), math.Sqrt(lam)
		va := 0.0
		for j := 0; j < B; j++ {
			vj := vecs.At(j, src)
			m[i*B+j] = vj * inv
			va += vj * l.st1.alpha[j]
		}
		w[i] = sq * va
	}
	if !linalg.AllFinite(m) || !linalg.AllFinite(w) {
		return fmt.Errorf("nogd: Nystrom map: %w", ErrNumerical)
	}
	l.m, l.w = m, w
	l.sketched = true
	l.st1.gen++
	return nil
}

func (l *NOGD) MarshalBinary() ([]byte, error) { return l.AppendBinary(nil) }

func (l *NOGD) AppendBinary(dst []byte) ([]byte, error) {
	n := 64 + 8*(len(l.st1.sv)+l.budget+len(l.m)+l.k)
	w := NewStateWriter(slices.Grow(dst, n), "nogd", nogdStateVersion)
	l.st1.marshal(&w)
	w.Bool(l.sketched)
	if l.sketched {
		w.Floats(l.m)
		w.Floats(l.w)
	}
	return w.Finish(), nil
}

func (l *NOGD) UnmarshalBinary(blob []byte) error {
	r, _, err := NewStateReader(blob, "nogd", nogdStateVersion)
	if err != nil {
		return err
	}
	st1 := l.st1.decode(r)
	sketched := r.Bool()
	r.Check(!sketched || st1.n == l.budget, "map built before the budget filled")
	r.Check(sketched || st1.n < l.budget, "full budget without a sketch")
	var m, w []float64
	if sketched {
		m = r.Floats(nil)
		r.Check(len(m) == l.k*l.budget, "map shape")
		w = r.Floats(nil)
		r.Check(len(w) == l.k, "weight count")
		r.Check(linalg.AllFinite(m) && linalg.AllFinite(w), "non-finite map or weights")
	}
	r.Check(st1.finite(), "non-finite support vectors")
	if err := r.Err(); err != nil {
		return err
	}
	l.st1.restore(st1)
	l.sketched = sketched
	l.m, l.w = m, w
	l.memo.forget()
	return nil
}
