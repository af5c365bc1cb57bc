package models

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// nonsEigenOracle is NONS-ALD in the paper's own form (docs/regression.md): Nystrom
// features Sigma^{-1/2} U' kS(x) from the eigendecomposition of K_S, the
// transition Q_{j,j-1} = Sigma_j^{-1/2} U_j' K_{S(j),S(j-1)} U_{j-1} Sigma_{j-1}^{-1/2},
// A <- mu I + Q (A - mu I) Q' (Lemma 4.2), w <- Q w (Lemma 4.3), the lazy
// projection (8) with the old-basis features, and a dense A solved afresh.
// It is slow (O(j^3) per round) and exists only to check the Cholesky form.
type nonsEigenOracle struct {
	kern                   Kernel
	u, mu, eta, alpha      float64
	maxJ                   int
	S                      [][]float64
	vecs                   *mat.Dense // U_j
	vals                   []float64  // Sigma_j
	A                      *mat.Dense
	w                      []float64
	pending                bool
	projections, additions int
}

func (o *nonsEigenOracle) kS(x []float64) []float64 {
	k := make([]float64, len(o.S))
	for i, s := range o.S {
		k[i] = o.kern.Eval(s, x)
	}
	return k
}

// features returns Sigma^{-1/2} U' kS(x) for the current basis.
func (o *nonsEigenOracle) features(x []float64) []float64 {
	j := len(o.S)
	k := o.kS(x)
	phi := make([]float64, j)
	for c := 0; c < j; c++ {
		s := 0.0
		for r := 0; r < j; r++ {
			s += o.vecs.At(r, c) * k[r]
		}
		phi[c] = s / math.Sqrt(o.vals[c])
	}
	return phi
}

func (o *nonsEigenOracle) solveA(b []float64) []float64 {
	var v mat.VecDense
	if err := v.SolveVec(o.A, mat.NewVecDense(len(b), append([]float64(nil), b...))); err != nil {
		panic(err)
	}
	return v.RawVector().Data
}

func (o *nonsEigenOracle) clip(v float64) float64 { return math.Max(-o.u, math.Min(o.u, v)) }

// step runs one round and returns the paper's prediction yhat_t.
func (o *nonsEigenOracle) step(x []float64, y float64) float64 {
	j := len(o.S)
	phiOld := o.features(x)
	if o.pending && j > 0 {
		yt := s0Dot(o.w, phiOld)
		if m := yt - o.clip(yt); m != 0 {
			v := o.solveA(phiOld)
			den := s0Dot(phiOld, v)
			for i := range o.w {
				o.w[i] -= m / den * v[i]
			}
			o.projections++
		}
	}
	alphaT := math.Max(o.kern.Diag(x)-s0Dot(phiOld, phiOld), 0) // ||phi_old||^2 = kS' K^{-1} kS
	phi := phiOld
	if j < o.maxJ && alphaT > aldAddFloor && (alphaT > o.alpha || j == 0) {
		o.additions++
		oldVecs, oldVals := o.vecs, o.vals
		o.S = append(o.S, x)
		n := j + 1
		K := mat.NewSymDense(n, nil)
		for a := 0; a < n; a++ {
			for b := a; b < n; b++ {
				K.SetSym(a, b, o.kern.Eval(o.S[a], o.S[b]))
			}
		}
		var eig mat.EigenSym
		if !eig.Factorize(K, true) {
			panic("eigendecomposition failed")
		}
		o.vals = eig.Values(nil)
		o.vecs = new(mat.Dense)
		eig.VectorsTo(o.vecs)
		if j == 0 {
			o.A = mat.NewDense(1, 1, []float64{o.mu})
			o.w = []float64{0}
		} else {
			// Q = Sig_n^{-1/2} U_n' K[:, :j] U_o Sig_o^{-1/2}   (n x j)
			var left, right, Q mat.Dense
			kcols := mat.NewDense(n, j, nil)
			for a := 0; a < n; a++ {
				for b := 0; b < j; b++ {
					kcols.Set(a, b, K.At(a, b))
				}
			}
			left.Mul(o.vecs.T(), kcols) // n x j
			right.Mul(&left, oldVecs)   // n x j
			Q.CloneFrom(&right)
			for a := 0; a < n; a++ {
				for b := 0; b < j; b++ {
					Q.Set(a, b, Q.At(a, b)/math.Sqrt(o.vals[a])/math.Sqrt(oldVals[b]))
				}
			}
			Am := mat.DenseCopyOf(o.A)
			for a := 0; a < j; a++ {
				Am.Set(a, a, Am.At(a, a)-o.mu)
			}
			var QA, QAQ mat.Dense
			QA.Mul(&Q, Am)
			QAQ.Mul(&QA, Q.T())
			for a := 0; a < n; a++ {
				QAQ.Set(a, a, QAQ.At(a, a)+o.mu)
			}
			o.A = &QAQ
			nw := make([]float64, n)
			for a := 0; a < n; a++ {
				for b := 0; b < j; b++ {
					nw[a] += Q.At(a, b) * o.w[b]
				}
			}
			o.w = nw
		}
		phi = o.features(x)
	}
	yhat := s0Dot(o.w, phi)
	g := 2 * (yhat - y)
	n := len(phi)
	for a := 0; a < n; a++ {
		for b := 0; b < n; b++ {
			o.A.Set(a, b, o.A.At(a, b)+o.eta*g*g*phi[a]*phi[b])
		}
	}
	grad := make([]float64, n)
	for a := range grad {
		grad[a] = g * phi[a]
	}
	step := o.solveA(grad)
	for a := range o.w {
		o.w[a] -= step[a]
	}
	o.pending = true
	return yhat
}

func s0Dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// The paper's eigen form and the shipped Cholesky form must make the same
// predictions (docs/regression.md), including rounds where the W_t projection is
// active (U = 0.6 on targets in about [0, 1]).
func TestSeed000NONSALDEigenFormAgrees(t *testing.T) {
	t.Parallel() // CPU-bound: beside the package's other long tests
	for _, c := range []struct {
		d            int
		sigma, alpha float64
		U, mu        float64
		n            int
	}{
		{3, 0.8, 0.01, 0.6, 1, 300},
		{5, 1.5, 0.002, 0.7, 5, 300},
		{2, 0.5, 0.05, 0.5, 15, 200},
	} {
		xs, ys := s0Data(c.n, c.d, 11)
		eta := 1 / (4 * (c.U*c.U + 1))
		l := mustNew(t, gaussianSpec("nons-ald", c.d, c.sigma, map[string]any{"alpha": c.alpha, "U": c.U, "mu": c.mu}), "key")
		o := &nonsEigenOracle{kern: NewGaussian(c.sigma), u: c.U, mu: c.mu, eta: eta, alpha: c.alpha, maxJ: 1024}
		worst := 0.0
		for i, x := range xs {
			p := l.Predict(x)
			want := o.step(x, ys[i])
			worst = math.Max(worst, math.Abs(p.Value-want))
			if err := l.Update(x, p, ys[i]); err != nil {
				t.Fatal(err)
			}
		}
		if worst > 1e-9 {
			t.Errorf("%+v: max |cholesky - eigen| = %g", c, worst)
		}
		if l.Size() != len(o.S) || o.projections == 0 || o.additions < 5 {
			t.Errorf("%+v: sizes %d vs %d, projections %d: the test is not exercising the algorithm", c, l.Size(), len(o.S), o.projections)
		}
		t.Logf("%+v: J=%d projections=%d max|diff|=%.3g", c, l.Size(), o.projections, worst)
	}
}
