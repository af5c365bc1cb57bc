package models

import (
	"math"
	"testing"
)

// Known-value tests for the first rounds of the kernel-selection learners of
//
//	J. Li, S. Liao, "Improved Regret Bounds for Online Kernel Selection under
//	Bandit Feedback", ECML-PKDD 2022:
//
// OKS (Algorithm 1, Remark 1), OKS++ (Sec. 3, App. F Algorithm 3) and IOKS
// (Sec. 4, Algorithm 2, eq. (4)-(6)). An independent dense implementation
// below (Gram matrices instead of the norm recurrence, bisection instead of
// Newton for IOKS's multiplier) replays the learner's sampled arms and must
// agree on p_t, q_t, the served value and every arm's function after each
// round, so any change to delta_t, eta_t, lambda_t,i or the sampling
// probabilities fails the test.

// refArm is f = sum_j a_j exp(-||s_j - x||^2 / (2 sigma^2)).
type refArm struct {
	sigma float64
	sv    [][]float64
	a     []float64
}

func (r *refArm) k(x, v []float64) float64 {
	s := 0.0
	for i := range x {
		s += (x[i] - v[i]) * (x[i] - v[i])
	}
	return math.Exp(-s / (2 * r.sigma * r.sigma))
}

func (r *refArm) f(x []float64) float64 {
	s := 0.0
	for j, v := range r.sv {
		s += r.a[j] * r.k(v, x)
	}
	return s
}

// step is eq. (2): f <- Proj_{||f||_H <= radius}(f + coef k(x,.)), the norm
// computed from the Gram matrix a'Ka.
func (r *refArm) step(x []float64, coef, radius float64) {
	r.sv = append(r.sv, append([]float64(nil), x...))
	r.a = append(r.a, coef)
	n2 := 0.0
	for i, u := range r.sv {
		for j, v := range r.sv {
			n2 += r.a[i] * r.a[j] * r.k(u, v)
		}
	}
	if n2 > radius*radius {
		for j := range r.a {
			r.a[j] *= radius / math.Sqrt(n2)
		}
	}
}

// refArmer is a reference base learner: kernel expansion or random features.
type refArmer interface {
	f(x []float64) float64
	step(x []float64, coef, radius float64)
}

// refRFArm is Sec. 5's random-feature arm: f(x) = v'z(x) with
// z(x) = D^{-1/2} [cos(w_j'x/sigma), sin(w_j'x/sigma)]_j and eq. (8)'s step
// v <- clip(v + coef z(x)) coordinate-wise; omega is the learner's frequency
// matrix (d x D, column j = w_j), the only thing taken from it.
type refRFArm struct {
	sigma, clip float64
	omega       []float64
	d, D        int
	v           []float64
}

func (r *refRFArm) z(x []float64) []float64 {
	z := make([]float64, 2*r.D)
	for j := range r.D {
		a := 0.0
		for k := range r.d {
			a += r.omega[k*r.D+j] * x[k]
		}
		z[2*j] = math.Cos(a/r.sigma) / math.Sqrt(float64(r.D))
		z[2*j+1] = math.Sin(a/r.sigma) / math.Sqrt(float64(r.D))
	}
	return z
}

func (r *refRFArm) f(x []float64) float64 {
	s := 0.0
	for j, zj := range r.z(x) {
		s += r.v[j] * zj
	}
	return s
}

func (r *refRFArm) step(x []float64, coef, _ float64) {
	for j, zj := range r.z(x) {
		r.v[j] = math.Max(-r.clip, math.Min(r.clip, r.v[j]+coef*zj))
	}
}

// refRule is one selection rule: given the played arm, p and q at prediction
// time, the square loss and its derivative, it updates its p and q and returns
// lambda_{t,I_t}.
type refRule interface {
	round(arm int, p, qArm, loss, deriv float64) (lambda float64)
	probs() (p, q []float64)
}

func refSoftmaxNeg(cum []float64, eta float64) []float64 {
	q := make([]float64, len(cum))
	s := 0.0
	for i, v := range cum {
		q[i] = math.Exp(-eta * v)
		s += q[i]
	}
	for i := range q {
		q[i] /= s
	}
	return q
}

func refMix(q []float64, delta float64) []float64 {
	p := make([]float64, len(q))
	for i, v := range q {
		p[i] = (1-delta)*v + delta/float64(len(q))
	}
	return p
}

// refOKS: Algorithm 1 with Remark 1's constants, G = lmax = 1.
type refOKS struct {
	K, T, scale float64
	cum, p, q   []float64
}

func (r *refOKS) consts() (delta, eta, lambda float64) {
	delta = math.Pow(r.K/r.T, 1.0/3)                                // (G/lmax)^{2/3} K^{1/3} T^{-1/3}
	eta = math.Sqrt(2*(1-delta)*math.Log(r.K)) / math.Sqrt(r.K*r.T) // lmax = 1
	lambda = r.scale * math.Sqrt(delta/(r.K*r.T))                   // G = 1
	return
}

func (r *refOKS) round(arm int, p, _, loss, _ float64) float64 {
	delta, eta, lambda := r.consts()
	r.cum[arm] += loss / p
	r.q = refSoftmaxNeg(r.cum, eta)
	r.p = refMix(r.q, delta)
	return lambda
}
func (r *refOKS) probs() ([]float64, []float64) { return r.p, r.q }

// refOKSPlus: App. F Algorithm 3 (cumulative form), square loss.
type refOKSPlus struct {
	K, U, C0, G      float64
	C, Sq            float64
	D, L, p, q       []float64
	lastDelta, lastE float64
}

func (r *refOKSPlus) round(arm int, p, qArm, loss, _ float64) float64 {
	ct := loss / p
	r.C += ct
	r.Sq += qArm * ct * ct
	r.D[arm] += ct
	r.L[arm] += ct
	c1 := math.Cbrt(r.G*r.C0) * math.Pow(r.U*r.K, 2.0/3)
	delta := c1 / (2 * math.Max(c1, 2*math.Cbrt(r.C)))
	eta := math.Sqrt(2*math.Log(r.K)) / math.Sqrt(1+r.Sq)
	lambda := math.Pow(r.U, 4.0/3) * math.Pow(math.Max(r.G*r.C0*r.U*r.U*r.K*r.K, 8*r.C), -1.0/6) /
		(math.Sqrt(4.0/3) * math.Pow(r.K, 1.0/6) * math.Cbrt(r.G*r.C0) * math.Sqrt(1+r.D[arm]))
	r.q = refSoftmaxNeg(r.L, eta)
	r.p = refMix(r.q, delta)
	r.lastDelta, r.lastE = delta, eta
	return lambda
}
func (r *refOKSPlus) probs() ([]float64, []float64) { return r.p, r.q }

// refIOKS: Algorithm 2, eq. (4)-(6), alpha = 8, lmax = 1.
type refIOKS struct {
	K, U, T, G1, alpha float64
	delta              float64
	G2, eta, rho, p, q []float64
	clipped, raised    int // how often eq. (4)'s clipping and the eta increase ran
}

// newRefIOKS: eta1 = 0 and delta < 0 take the paper's values.
func newRefIOKS(k int, u, t, g1, eta1, delta float64) *refIOKS {
	r := &refIOKS{K: float64(k), U: u, T: t, G1: g1, alpha: 8, delta: delta,
		G2: make([]float64, k), eta: make([]float64, k), rho: make([]float64, k)}
	if eta1 == 0 {
		eta1 = 8 * math.Pow(r.K, 3.0/8) / (u * g1 * math.Sqrt(t*math.Log(t))) // Sec. 6, lmax = 1
	}
	if delta < 0 {
		r.delta = math.Pow(t, -0.75) // Alg. 2
	}
	for i := range r.eta {
		r.eta[i] = eta1
		r.rho[i] = 2 * r.K // [RECON] rho_1 = 2K
	}
	r.q = refMix(make([]float64, k), 1)
	r.p = append([]float64(nil), r.q...)
	return r
}

func (r *refIOKS) round(arm int, p, _, loss, deriv float64) float64 {
	gt := deriv / p
	r.G2[arm] += gt * gt                                  // k(x,x) = 1
	lambda := r.U / (math.Sqrt2 * math.Sqrt(1+r.G2[arm])) // eq. (6)
	m := 0.0
	for _, e := range r.eta {
		m = math.Max(m, e)
	}
	ct := loss / p // eq. (4)
	if p < m {
		ct = loss / (p + m)
		r.clipped++
	}
	qNext := func(mu float64) ([]float64, float64) { // eq. (5)
		out, s := make([]float64, len(r.q)), 0.0
		for i, q := range r.q {
			c := 0.0
			if i == arm {
				c = ct
			}
			b := math.Pow(q, 1/r.alpha-1) + r.eta[i]*(c-mu)
			if b <= 0 {
				return nil, math.Inf(1)
			}
			out[i] = math.Pow(b, r.alpha/(1-r.alpha))
			s += out[i]
		}
		return out, s
	}
	lo, hi := 0.0, ct
	for range 200 { // bisection: the sum increases with mu
		mid := (lo + hi) / 2
		if _, s := qNext(mid); s > 1 {
			hi = mid
		} else {
			lo = mid
		}
	}
	q, s := qNext(lo)
	for i := range q {
		q[i] /= s
	}
	r.q = q
	r.p = refMix(q, r.delta)
	for i, pi := range r.p {
		if 1/pi > r.rho[i] {
			r.rho[i] = 2 / pi
			r.eta[i] *= math.Exp(2 / (3 * math.Log(r.T))) // upsilon
			r.raised++
		}
	}
	return lambda
}
func (r *refIOKS) probs() ([]float64, []float64) { return r.p, r.q }

func closeTo(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

func TestOKSFamilyFirstRoundsMatchDenseReference(t *testing.T) {
	sigmas := []float64{0.5, 2}
	const T = 1000
	cases := []struct {
		alg    string
		params map[string]any
		ref    func() refRule
		radius float64
		tol    float64
		yScale float64 // 0: 1
	}{
		{"oks", map[string]any{"T": T, "G": 1, "lmax": 1, "lambda_scale": 25},
			func() refRule {
				return &refOKS{K: 2, T: T, scale: 25, cum: make([]float64, 2), p: []float64{0.5, 0.5}, q: []float64{0.5, 0.5}}
			}, math.Inf(1), 1e-12, 1},
		{"oks++", map[string]any{"U": 1, "C0": 4, "G": 1},
			func() refRule {
				return &refOKSPlus{K: 2, U: 1, C0: 4, G: 1, D: make([]float64, 2), L: make([]float64, 2), p: []float64{0.5, 0.5}, q: []float64{0.5, 0.5}}
			}, 1, 1e-12, 1},
		{"rf-oks++", map[string]any{"U": 1, "C0": 4, "G": 1, "D": 8, "clip": 0.3},
			func() refRule {
				return &refOKSPlus{K: 2, U: 1, C0: 4, G: 1, D: make([]float64, 2), L: make([]float64, 2), p: []float64{0.5, 0.5}, q: []float64{0.5, 0.5}}
			}, 1, 1e-9, 1},
		{"rf-ioks", map[string]any{"U": 1, "T": T, "G1": 4, "lmax": 1, "D": 8, "clip": 0.3},
			func() refRule { return newRefIOKS(2, 1, T, 4, 0, -1) }, 1, 1e-9, 1},
		{"ioks", map[string]any{"U": 1, "T": T, "G1": 4, "lmax": 1},
			func() refRule { return newRefIOKS(2, 1, T, 4, 0, -1) }, 1, 1e-9, 1},
		// A large eta_1 reaches eq. (4)'s clipping and Alg. 2's eta increase.
		{"ioks", map[string]any{"U": 1, "T": T, "G1": 4, "lmax": 1, "eta": 0.45, "delta": 0.001},
			func() refRule { return newRefIOKS(2, 1, T, 4, 0.45, 0.001) }, 1, 1e-9, 8},
	}
	xs := [][]float64{{0.1, -0.4}, {0.7, 0.2}, {-0.3, 0.5}, {0.1, -0.4}, {0.9, -0.8}, {-0.6, -0.1},
		{0.4, 0.4}, {-0.9, 0.3}, {0.2, -0.7}, {0.5, 0.9}, {-0.2, -0.2}, {0.8, -0.1},
		{-0.5, 0.6}, {0.3, 0.1}, {-0.7, -0.9}, {0.6, -0.5}, {0.0, 0.8}, {-0.1, 0.3}}
	ys := []float64{0.8, -0.5, 1.5, 0.3, -1.2, 0.6, -0.9, 1.1, 0.2, -0.4, 1.3, -1.0, 0.5, -0.7, 0.9, 1.4, -0.3, 0.1}
	probe := []float64{0.2, 0.1}
	for _, tc := range cases {
		t.Run(tc.alg, func(t *testing.T) {
			params := map[string]any{"sigmas": []any{sigmas[0], sigmas[1]}}
			for k, v := range tc.params {
				params[k] = v
			}
			l := oksOf(mustNew(t, Spec{Algorithm: tc.alg, Dim: 2, Loss: "square", Params: params, Seed: 3}, "pin"))
			ref := tc.ref()
			arms := []refArmer{&refArm{sigma: sigmas[0]}, &refArm{sigma: sigmas[1]}}
			if rf, ok := l.arms.(*rfArms); ok {
				om := append([]float64(nil), rf.omega...)
				for i, sg := range sigmas {
					arms[i] = &refRFArm{sigma: sg, clip: 0.3, omega: om, d: 2, D: 8, v: make([]float64, 16)}
				}
			}
			played := map[int]bool{}
			yScale := tc.yScale
			if yScale == 0 {
				yScale = 1
			}
			for r, x := range xs {
				y := ys[r] * yScale
				rp, rq := ref.probs()
				pr := l.Predict(x)
				i := pr.Choice
				played[i] = true
				if !closeTo(pr.Prob, rp[i], tc.tol) || !closeTo(pr.Value, arms[i].f(x), tc.tol) {
					t.Fatalf("round %d: p = %v value = %v, reference p = %v value = %v", r+1, pr.Prob, pr.Value, rp[i], arms[i].f(x))
				}
				if tc.alg == "oks++" && !closeTo(pr.Aux, rq[i], tc.tol) {
					t.Fatalf("round %d: q = %v, reference %v", r+1, pr.Aux, rq[i])
				}
				if err := l.Update(x, pr, y); err != nil {
					t.Fatal(err)
				}
				d := pr.Value - y
				lambda := ref.round(i, pr.Prob, pr.Aux, d*d, 2*d)
				arms[i].step(x, -lambda*2*d/pr.Prob, tc.radius) // f - lambda l' k(x,.) / p
				rp, _ = ref.probs()
				if ri, ok := ref.(*refIOKS); ok {
					// Alg. 2's thresholds and step sizes: rho_i = 2/p_i and eta_i *= upsilon when raised.
					lr := l.rule.(*ioksRule)
					for j := range arms {
						if !closeTo(lr.rho[j], ri.rho[j], tc.tol) || !closeTo(lr.eta[j], ri.eta[j], tc.tol) {
							t.Fatalf("round %d: rho_%d = %v eta_%d = %v, reference %v %v", r+1, j, lr.rho[j], j, lr.eta[j], ri.rho[j], ri.eta[j])
						}
					}
				}
				for j := range arms {
					if !closeTo(l.p[j], rp[j], tc.tol) {
						t.Fatalf("round %d: p_%d = %v, reference %v", r+1, j, l.p[j], rp[j])
					}
					if got, want := l.arms.predict(j, probe), arms[j].f(probe); !closeTo(got, want, tc.tol) {
						t.Fatalf("round %d: f_%d(probe) = %v, reference %v", r+1, j, got, want)
					}
				}
			}
			if r, ok := ref.(*refIOKS); ok && r.delta == 0.001 && (r.clipped == 0 || r.raised == 0) {
				t.Fatalf("the large-eta case ran the clipping %d times and the eta increase %d times: both must run", r.clipped, r.raised)
			}
			if len(played) < 2 {
				t.Fatalf("the seed played only arms %v: pick one that plays both", played)
			}
		})
	}
}
