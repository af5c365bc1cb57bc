package models

import (
	"fmt"
	"math"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

// The sketch of FORKS [Wen et al. 2024, Sec. 4, eq. 3-5, 11-12]: built once
// when the budget fills (buildSketch), refreshed by every update round
// (updateRound), and the explicit feature map's Z recomputed from it
// (computeZ). See the FORKS type for the choices made.

// allocSketch sizes the stage-2 state and scratch (once, when the sketch is
// built or restored).
func (l *FORKS) allocSketch() {
	l.code = make([]int, l.budget)
	l.lm = make([]int, l.sm)
	l.lmX = make([]float64, l.sm*l.dim)
	l.phiPM = make([]float64, l.sp*l.sm)
	l.ts = newTISVD(l.sp, l.k, 2)
	l.z = make([]float64, l.sm*l.k)
	l.v = make([]float64, l.k)
	l.ainv = make([]float64, l.k*l.k)
	l.a = make([]float64, l.sp)
	l.xcols = make([]float64, 2*l.sp)
	l.gram = make([]float64, l.sm*l.sm)
	l.piv = make([]int, l.sm)
	l.tmat = make([]float64, l.sm*l.k)
	l.zNext = make([]float64, l.sm*l.k)
	l.rowNew = make([]float64, l.sm)
	l.ringX = make([]float64, l.window*l.dim)
	l.ringCode = make([]int, l.window)
	l.ringN, l.ringHead = 0, 0
}

// buildSketch is Algorithm 1 lines 8-9 (Eq. 3 with t = B, then Eq. 5): it
// builds Phi_pm, Phi_pp from the B x B kernel matrix, the rank-k
// eigen-factors of Phi_pp, Z, and the transferred w.
func (l *FORKS) buildSketch() error {
	saved := l.rng.State()
	B, sp, sm, d := l.budget, l.sp, l.sm, l.dim
	l.allocSketch()
	undo := func(err error) error {
		l.rng.SetState(saved)
		l.code, l.ts = nil, nil // allocSketch again on the next attempt
		return fmt.Errorf("forks: building the sketch: %w", err)
	}
	sv := l.st1.sv
	K := make([]float64, B*B)
	for i := 0; i < B; i++ {
		KernelVector(l.kernel, K[i*B:(i+1)*B], sv, sv[i*d:(i+1)*d])
	}
	for i := range l.code {
		b := l.rng.Intn(sp)
		if l.rng.Uint64()&1 == 1 {
			l.code[i] = -(b + 1)
		} else {
			l.code[i] = b + 1
		}
	}
	// Landmarks: s_m distinct indices, uniform without replacement ([CODE]).
	idx := make([]int, B)
	for i := range idx {
		idx[i] = i
	}
	for j := 0; j < sm; j++ {
		o := j + l.rng.Intn(B-j)
		idx[j], idx[o] = idx[o], idx[j]
		l.lm[j] = idx[j]
	}
	pp := make([]float64, sp*sp)
	for i := 0; i < B; i++ {
		bi, gi := forksDecode(l.code[i])
		for m := 0; m < B; m++ {
			bm, gm := forksDecode(l.code[m])
			pp[bi*sp+bm] += gi * gm * K[i*B+m]
		}
		for j, m := range l.lm {
			l.phiPM[bi*sm+j] += gi * K[i*B+m]
		}
	}
	if !linalg.AllFinite(pp) {
		return undo(ErrNumerical)
	}
	if err := l.ts.initFrom(pp); err != nil {
		return undo(err)
	}
	if !l.computeZ(l.z, l.ts.V, l.ts.lam, -1, nil) {
		return undo(ErrNumerical)
	}
	// w_0 = Z^T C_m^T alpha.
	cma := l.rowNew
	for j, m := range l.lm {
		s := 0.0
		for i := 0; i < B; i++ {
			s += K[i*B+m] * l.st1.alpha[i]
		}
		cma[j] = s
	}
	for i := range l.v {
		l.v[i] = 0
	}
	for j, c := range cma {
		linalg.Axpy(c, l.z[j*l.k:(j+1)*l.k], l.v)
	}
	if !linalg.AllFinite(l.v) {
		return undo(ErrNumerical)
	}
	l.fillLandmarks()
	l.resetONS()
	l.r = 0
	l.sketched = true
	l.st1.gen++
	return nil
}

func (l *FORKS) fillLandmarks() {
	d := l.dim
	for j, i := range l.lm {
		copy(l.lmX[j*d:(j+1)*d], l.st1.sv[i*d:(i+1)*d])
	}
}

// updateRound inserts x into the sketch (Eq. 11 with s_m^(t+1) = 0), runs
// TISVD on Phi_pp's rank-2 update (Eq. 12), recomputes Z (Eq. 5), resets ONS
// (w = 0, A = alpha I) and takes one ONS step on (x, y) in the new space.
func (l *FORKS) updateRound(x []float64, y float64, r int) error {
	saved := l.rng.State()
	fail := func(what string) error {
		l.rng.SetState(saved)
		return fmt.Errorf("forks: update round %d: %s: %w", r/l.rho, what, ErrNumerical)
	}
	// psi = kappa(x, SV_i) over the B support vectors; a = S_p^T psi; b = psi at the landmarks.
	KernelVector(l.kernel, l.psi, l.st1.sv, x)
	for i := range l.a {
		l.a[i] = 0
	}
	for i, c := range l.code {
		b, sg := forksDecode(c)
		l.a[b] += sg * l.psi[i]
	}
	d := l.dim
	for j := 0; j < l.ringN; j++ {
		b, sg := forksDecode(l.ringCode[j])
		l.a[b] += sg * l.kernel.Eval(x, l.ringX[j*d:(j+1)*d])
	}
	h := l.rng.Intn(l.sp)
	sg := 1.0
	if l.rng.Uint64()&1 == 1 {
		sg = -1
	}
	kap := l.kernel.Diag(x)
	if !linalg.AllFinite(l.a) || math.IsNaN(kap) || math.IsInf(kap, 0) {
		return fail("kernel column")
	}
	// X = [s, a], G = [[kappa, 1], [1, 0]]: X G X^T = kappa s s^T + s a^T + a s^T.
	sp := l.sp
	for i := range l.xcols[:sp] {
		l.xcols[i] = 0
	}
	l.xcols[h] = sg
	copy(l.xcols[sp:], l.a)
	g := [4]float64{kap, 1, 1, 0}
	if !l.ts.update(l.xcols, 2, g[:]) {
		return fail("TISVD")
	}
	// Phi_pm row h gains sg * b (b_j = psi[lm_j]).
	copy(l.rowNew, l.phiPM[h*l.sm:(h+1)*l.sm])
	for j, i := range l.lm {
		l.rowNew[j] += sg * l.psi[i]
	}
	if !l.computeZ(l.zNext, l.ts.vNext, l.ts.lamNext, h, l.rowNew) {
		return fail("feature map")
	}
	// phi in the new space: c_m(x) = psi at the landmarks.
	phi := l.phi
	for i := range phi {
		phi[i] = 0
	}
	for j, i := range l.lm {
		if c := l.psi[i]; c != 0 {
			linalg.Axpy(c, l.zNext[j*l.k:(j+1)*l.k], phi)
		}
	}
	// One ONS step from w = 0, A^{-1} = I/alpha: q = phi/alpha.
	dl := l.loss.Deriv(0, y)
	for i := range l.q {
		l.q[i] = phi[i] / l.alpha
		l.w[i] = 0
	}
	gq := dl * dl * linalg.Dot(phi, l.q)
	den := 1 + l.beta*gq
	if !(den > 0) || math.IsInf(den, 0) || !linalg.AllFinite(l.q) {
		return fail("ONS reset step")
	}
	// Commit.
	if l.window > 0 {
		copy(l.ringX[l.ringHead*d:(l.ringHead+1)*d], x)
		l.ringCode[l.ringHead] = int(sg) * (h + 1)
		l.ringHead = (l.ringHead + 1) % l.window
		l.ringN = min(l.ringN+1, l.window)
	}
	copy(l.phiPM[h*l.sm:(h+1)*l.sm], l.rowNew)
	l.ts.commit()
	l.z, l.zNext = l.zNext, l.z
	l.resetONS()
	for i := range l.v {
		l.v[i] = 0
	}
	if dl != 0 {
		if err := l.onsStep(dl, phi); err != nil { // cannot fail after the checks above
			return err
		}
		if l.eager {
			l.eagerProject(phi)
		}
	}
	l.r = r
	l.st1.gen++ // the feature map changed
	return nil
}

// computeZ writes Z = pinv(Phi_pm) V Lambda^{1/2} (sm x k) into dst, with
// Phi_pm's row h replaced by rowH when h >= 0. It reports finiteness.
//
// Z is the least-squares solution of Phi_pm Z = V Lambda^{1/2}, computed from
// the normal equations with a pivoted Cholesky factor of the sm x sm Gram
// matrix Phi_pm^T Phi_pm; pivots stop when the remaining diagonal falls to
// 1e-12 of the largest (a column whose residual after the chosen ones is
// below 1e-6 of the largest column norm counts as dependent and gets a zero
// row). With full column rank (the generic case when sp >= sm) this is
// exactly pinv; with dependent columns it is the basic instead of the
// minimum-norm solution, which gives the same features when the dependence
// comes from duplicated landmarks (repeated records in adversarial streams),
// since c_m(x) then has equal entries on them. Cost O(sp sm^2/2 + sm^3/3 +
// sp sm k); an update round at B = 200 took 11 ms with a one-sided Jacobi
// SVD of Phi_pm, 2.8 ms with a Jacobi eigensolver of the Gram matrix, and
// 0.3-1 ms with this.
func (l *FORKS) computeZ(dst, V, lam []float64, h int, rowH []float64) bool {
	sp, sm, k := l.sp, l.sm, l.k
	g := l.gram
	for i := range g {
		g[i] = 0
	}
	rhs := dst[:sm*k] // Phi_pm^T V Lambda^{1/2}, solved in place
	for i := range rhs {
		rhs[i] = 0
	}
	for r := 0; r < sp; r++ {
		row := l.phiPM[r*sm : (r+1)*sm]
		if r == h {
			row = rowH
		}
		vr := V[r*k : (r+1)*k]
		for j, a := range row {
			if a == 0 {
				continue
			}
			linalg.Axpy(a, row[j:], g[j*sm+j:(j+1)*sm])
			linalg.Axpy(a, vr, rhs[j*k:(j+1)*k])
		}
	}
	for j := 0; j < sm; j++ { // mirror the upper triangle
		for i := j + 1; i < sm; i++ {
			g[i*sm+j] = g[j*sm+i]
		}
	}
	for j := 0; j < sm; j++ {
		for i := 0; i < k; i++ {
			rhs[j*k+i] *= math.Sqrt(math.Max(lam[i], 0))
		}
	}
	rank := linalg.PivotedCholesky(g, sm, 1e-12, l.piv)
	linalg.PivotedCholeskySolve(g, sm, rank, l.piv, rhs, k, l.tmat)
	return linalg.AllFinite(rhs)
}

func forksDecode(c int) (bucket int, sign float64) {
	if c < 0 {
		return -c - 1, -1
	}
	return c - 1, 1
}
