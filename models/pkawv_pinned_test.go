package models

import (
	"math"
	"testing"
)

// Known values for PKAWV with Nyström projections on a KORS dictionary,
//
//	P. Jézéquel, P. Gaillard, A. Rudi, "Efficient online learning with kernels
//	for adversarial large scale problems", NeurIPS 2019,
//
// with a partial dictionary (m < t centres, max_budget reached): a dense
// reference recomputes, every round, the KORS inclusion probability
// p_t = min(beta tau_t, 1) with tau_t = (1+eps)(k_tt - w)/(k_tt + mu - w),
// w = q'(S K_mm S + mu I)^{-1} q, q_j = s_j k(x~_j, x_t) (App. H.2, KORS;
// docs/pkawv.md), the stored weight s = 1/sqrt(p), and the prediction of
// Sec. 3.2 eq. (7) / App. H Algorithm 2:
//
//	y_hat_t = k_m(x_t)' (K_{t,m}'K_{t,m} + lambda K_mm)^{-1} K_{t-1,m}' Y_{t-1}
//
// by Gaussian elimination on the normal equations, not by the learner's
// Cholesky up-dates.

// refSolve solves A x = b (A n x n, row-major, copied) by Gaussian
// elimination with partial pivoting.
func refSolve(a []float64, b []float64) []float64 {
	n := len(b)
	m := append([]float64(nil), a...)
	x := append([]float64(nil), b...)
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(m[r*n+c]) > math.Abs(m[p*n+c]) {
				p = r
			}
		}
		for k := range n {
			m[c*n+k], m[p*n+k] = m[p*n+k], m[c*n+k]
		}
		x[c], x[p] = x[p], x[c]
		for r := c + 1; r < n; r++ {
			f := m[r*n+c] / m[c*n+c]
			for k := c; k < n; k++ {
				m[r*n+k] -= f * m[c*n+k]
			}
			x[r] -= f * x[c]
		}
	}
	for r := n - 1; r >= 0; r-- {
		for k := r + 1; k < n; k++ {
			x[r] -= m[r*n+k] * x[k]
		}
		x[r] /= m[r*n+r]
	}
	return x
}

func TestPKAWVNystromPartialDictionaryMatchesDenseReference(t *testing.T) {
	const (
		lambda, mu, beta, eps = 0.7, 0.5, 1.0, 0.5
		budget                = 3
	)
	sigma := 0.8
	spec := Spec{Algorithm: "pkawv-nystrom", Dim: 2, Kernel: KernelSpec{Type: "gaussian", Sigma: sigma},
		Params: map[string]any{"lambda": lambda, "mu": mu, "beta": beta, "eps": eps, "max_budget": budget, "history": 4096}, Seed: 4}
	l := mustNew(t, spec, "pin").(*PKAWVNystrom)
	k := func(a, b []float64) float64 {
		s := (a[0]-b[0])*(a[0]-b[0]) + (a[1]-b[1])*(a[1]-b[1])
		return math.Exp(-s / (2 * sigma * sigma))
	}
	r := NewRand(21)
	var xs [][]float64
	var ys []float64
	var centres [][]float64
	var weights []float64
	for round := range 14 {
		x := []float64{2*r.Float64() - 1, 2*r.Float64() - 1}
		y := math.Sin(2*x[0]) + 0.3*x[1]
		pr := l.Predict(x)
		m := len(centres)
		if m < budget {
			// KORS: tau_t by the dense (S K_mm S + mu I)^{-1}.
			w := 0.0
			if m > 0 {
				a := make([]float64, m*m)
				q := make([]float64, m)
				for i := range m {
					q[i] = weights[i] * k(centres[i], x)
					for j := range m {
						a[i*m+j] = weights[i] * weights[j] * k(centres[i], centres[j])
					}
					a[i*m+i] += mu
				}
				v := refSolve(a, q)
				for i := range m {
					w += q[i] * v[i]
				}
			}
			tau := (1 + eps) * (1 - w) / (1 + mu - w)
			if want := math.Min(beta*tau, 1); !closeTo(l.prob, want, 1e-10) {
				t.Fatalf("round %d: KORS probability %v, reference %v", round+1, l.prob, want)
			}
			if l.add {
				centres = append(centres, x)
				weights = append(weights, 1/math.Sqrt(l.prob))
			}
		} else if l.add {
			t.Fatalf("round %d: a centre was added beyond max_budget", round+1)
		}
		xs = append(xs, x)
		// Dense eq. (7): H = sum_{s<=t} k_m(x_s) k_m(x_s)' + lambda K_mm, g = sum_{s<t} y_s k_m(x_s).
		m = len(centres)
		want := 0.0
		if m > 0 {
			h := make([]float64, m*m)
			g := make([]float64, m)
			for s, xv := range xs {
				for i := range m {
					ki := k(centres[i], xv)
					for j := range m {
						h[i*m+j] += ki * k(centres[j], xv)
					}
					if s < len(ys) {
						g[i] += ys[s] * ki
					}
				}
			}
			for i := range m {
				for j := range m {
					h[i*m+j] += lambda * k(centres[i], centres[j])
				}
			}
			alpha := refSolve(h, g)
			for i := range m {
				want += alpha[i] * k(centres[i], x)
			}
		}
		if !closeTo(pr.Value, want, 1e-9) {
			t.Fatalf("round %d (m = %d): y_hat = %v, reference %v", round+1, m, pr.Value, want)
		}
		if err := l.Update(x, pr, y); err != nil {
			t.Fatal(err)
		}
		ys = append(ys, y)
		if len(l.w) != len(weights) {
			t.Fatalf("round %d: %d KORS weights, reference %d", round+1, len(l.w), len(weights))
		}
		for i, w := range weights {
			if !closeTo(l.w[i], w, 1e-12) || l.dict[i*2] != centres[i][0] || l.dict[i*2+1] != centres[i][1] {
				t.Fatalf("round %d: centre %d (%v, weight %v), reference (%v, %v)", round+1, i, l.dict[i*2:i*2+2], l.w[i], centres[i], w)
			}
		}
	}
	if len(centres) != budget || len(centres) >= len(xs) {
		t.Fatalf("dictionary %d of %d rounds: the test wants a full, partial dictionary (m = max_budget < t)", len(centres), len(xs))
	}
}
