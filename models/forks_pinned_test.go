package models

import (
	"math"
	"testing"
)

// Known values for FORKS's second-order step, Eq. 10 of
//
//	L. Wen et al., "Fast Second-Order Online Kernel Learning Through
//	Incremental Matrix Sketching and Decomposition" (arXiv 2410.11188 v2),
//	Sec. 3, Eq. 10a-10b (Algorithm 1 lines 13-20), eager projection (docs/forks.md):
//
//	g_t = l'(phi_t^T w, y_t) phi_t,  A_t = A_{t-1} + beta g_t g_t^T,
//	v = w - A_t^{-1} g_t,  w <- argmin_{|phi_t^T u| <= C} ||u - v||_{A_t}
//	   = v - (phi_t^T v - C sign) A_t^{-1} phi_t / (phi_t^T A_t^{-1} phi_t)  when |phi_t^T v| > C.
//
// The reference keeps A itself (not its inverse) and solves with Gaussian
// elimination; the learner keeps A^{-1} by Sherman-Morrison. The feature
// map phi (Eq. 5) is the learner's: the step is what is pinned here.
func TestFORKSSecondOrderStepMatchesDenseReference(t *testing.T) {
	const (
		beta, alpha, C = 0.5, 0.01, 1.0
		B, k           = 12, 3
	)
	spec := Spec{Algorithm: "forks", Dim: 2, Loss: "hinge", Kernel: KernelSpec{Type: "gaussian", Sigma: 0.7},
		Params: map[string]any{"B": B, "k": k, "rho": 1000000, "beta": beta, "alpha": alpha, "C": C}, Seed: 2}
	l := mustNew(t, spec, "pin").(*FORKS)
	r := NewRand(17)
	next := func() ([]float64, float64) {
		x := []float64{2*r.Float64() - 1, 2*r.Float64() - 1}
		y := 1.0
		if x[0]*x[1]+0.1*x[0] < 0 {
			y = -1
		}
		return x, y
	}
	for i := 0; !l.sketched; i++ { // stage 1 (KOGD) until the budget fills
		if i > 10000 {
			t.Fatal("the sketch was never built")
		}
		x, y := next()
		if err := l.Update(x, l.Predict(x), y); err != nil {
			t.Fatal(err)
		}
	}
	// The reference starts from the learner's (w, A) when stage 2 begins.
	w := append([]float64(nil), l.v...)
	a := make([]float64, k*k) // A = (A^{-1})^{-1}, column by column
	for j := range k {
		e := make([]float64, k)
		e[j] = 1
		col := refSolve(l.ainv, e)
		for i := range k {
			a[i*k+j] = col[i]
		}
	}
	phi := make([]float64, k)
	steps, projected := 0, 0
	for round := range 40 {
		x, y := next()
		pr := l.Predict(x)
		l.features(phi, x)
		f := 0.0
		for i := range k {
			f += phi[i] * w[i]
		}
		if !closeTo(pr.Value, f, 1e-9) {
			t.Fatalf("round %d: f = %v, reference %v", round+1, pr.Value, f)
		}
		if y*f < 1 { // hinge: l' = -y on a margin error, else no step
			steps++
			g := make([]float64, k)
			for i := range k {
				g[i] = -y * phi[i]
			}
			for i := range k {
				for j := range k {
					a[i*k+j] += beta * g[i] * g[j]
				}
			}
			ag := refSolve(a, g)
			for i := range k {
				w[i] -= ag[i] // Eq. 10a
			}
			z := 0.0
			for i := range k {
				z += phi[i] * w[i]
			}
			if math.Abs(z) > C { // Eq. 10b
				projected++
				aphi := refSolve(a, phi)
				den := 0.0
				for i := range k {
					den += phi[i] * aphi[i]
				}
				h := math.Copysign(math.Abs(z)-C, z)
				for i := range k {
					w[i] -= h / den * aphi[i]
				}
			}
		}
		if err := l.Update(x, pr, y); err != nil {
			t.Fatal(err)
		}
		for i := range k {
			if !closeTo(l.v[i], w[i], 1e-8) {
				t.Fatalf("round %d: w = %v, reference %v", round+1, l.v, w)
			}
		}
	}
	if steps == 0 || projected == 0 {
		t.Fatalf("%d steps, %d projections: the stream must exercise both halves of Eq. 10", steps, projected)
	}
}
