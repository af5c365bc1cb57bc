package models

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// tisvdTopK returns the k largest eigenpairs of the symmetric n x n matrix a
// (gonum oracle): values descending and vectors as the columns of an n x k Dense.
func tisvdTopK(t *testing.T, a []float64, n, k int) ([]float64, *mat.Dense) {
	t.Helper()
	var es mat.EigenSym
	if !es.Factorize(mat.NewSymDense(n, append([]float64(nil), a...)), true) {
		t.Fatal("gonum EigenSym failed")
	}
	vals := es.Values(nil)
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	out := make([]float64, k)
	v := mat.NewDense(n, k, nil)
	for i := 0; i < k; i++ {
		out[i] = vals[n-1-i]
		for r := 0; r < n; r++ {
			v.Set(r, i, vecs.At(r, n-1-i))
		}
	}
	return out, v
}

// tisvdMaxAngle is the largest principal angle (radians) between the column
// spaces of the orthonormal n x k matrices a and b.
func tisvdMaxAngle(a, b *mat.Dense) float64 {
	var m mat.Dense
	m.Mul(a.T(), b)
	var svd mat.SVD
	svd.Factorize(&m, mat.SVDNone)
	s := svd.Values(nil)
	sort.Float64s(s)
	return math.Acos(math.Min(1, s[0]))
}

func tisvdDenseV(ts *tisvd) *mat.Dense {
	return mat.NewDense(ts.n, ts.k, append([]float64(nil), ts.V...))
}

// tisvdFORKSUpdate draws a FORKS-shaped update X = [s, a], G = [[kappa,1],[1,0]]
// with s = +-e_h and a a random vector of norm scale.
func tisvdFORKSUpdate(rng *rand.Rand, n int, scale float64) ([]float64, []float64) {
	x := make([]float64, 2*n)
	x[rng.IntN(n)] = float64(2*rng.IntN(2) - 1)
	for i := 0; i < n; i++ {
		x[n+i] = scale * rng.NormFloat64() / math.Sqrt(float64(n))
	}
	return x, []float64{1, 1, 1, 0}
}

// Algorithm 2 is exact for the rank-k matrix it holds: after every update
// V Lambda V^T must equal the top-k truncation of (previous V Lambda V^T +
// Delta), computed by a full eigendecomposition. The checks every 250 steps
// show that
// round-off (orthogonality drift) does not accumulate over 1000 updates.
func TestTISVDMatchesTruncatedOracleOverManyUpdates(t *testing.T) {
	t.Parallel() // CPU-bound: beside the package's other long tests
	const n, k = 80, 10
	rng := rand.New(rand.NewPCG(7, 8))
	// Start: a PSD matrix with a decaying spectrum.
	m0 := make([]float64, n*n)
	for j := 0; j < 30; j++ {
		u := make([]float64, n)
		for i := range u {
			u[i] = rng.NormFloat64()
		}
		w := 100 * math.Pow(0.7, float64(j)) / float64(n)
		for r := 0; r < n; r++ {
			for c := 0; c < n; c++ {
				m0[r*n+c] += w * u[r] * u[c]
			}
		}
	}
	ts := newTISVD(n, k, 2)
	if err := ts.initFrom(m0); err != nil {
		t.Fatal(err)
	}
	// The oracle's running matrix is its own rank-k truncation.
	vals, vecs := tisvdTopK(t, m0, n, k)
	oracle := make([]float64, n*n)
	rebuild := func() {
		for r := 0; r < n; r++ {
			for c := 0; c < n; c++ {
				s := 0.0
				for i := 0; i < k; i++ {
					s += vecs.At(r, i) * vals[i] * vecs.At(c, i)
				}
				oracle[r*n+c] = s
			}
		}
	}
	rebuild()
	for step := 1; step <= 1000; step++ {
		x, g := tisvdFORKSUpdate(rng, n, 3)
		if !ts.update(x, 2, g) {
			t.Fatalf("step %d: non-finite update", step)
		}
		ts.commit()
		for r := 0; r < n; r++ {
			for c := 0; c < n; c++ {
				oracle[r*n+c] += x[r]*x[n+c] + x[n+r]*x[c] + g[0]*x[r]*x[c]
			}
		}
		vals, vecs = tisvdTopK(t, oracle, n, k)
		rebuild()
		if step%250 != 0 {
			continue
		}
		for i := 0; i < k; i++ {
			if d := math.Abs(ts.lam[i] - vals[i]); d > 1e-9*vals[0] {
				t.Fatalf("step %d: eigenvalue %d = %v, oracle %v", step, i, ts.lam[i], vals[i])
			}
		}
		// Gap-insensitive: the represented matrices agree.
		diff, norm := 0.0, 0.0
		for r := 0; r < n; r++ {
			for c := 0; c < n; c++ {
				s := 0.0
				for i := 0; i < k; i++ {
					s += ts.V[r*k+i] * ts.lam[i] * ts.V[c*k+i]
				}
				diff += (s - oracle[r*n+c]) * (s - oracle[r*n+c])
				norm += oracle[r*n+c] * oracle[r*n+c]
			}
		}
		if rel := math.Sqrt(diff / norm); rel > 1e-9 {
			t.Fatalf("step %d: ||V L V^T - oracle||/||oracle|| = %v", step, rel)
		}
		if ang := tisvdMaxAngle(tisvdDenseV(ts), vecs); ang > 1e-6 {
			t.Fatalf("step %d: subspace angle %v rad", step, ang)
		}
		if e := ts.orthoError(ts.V); e > 1e-9 {
			t.Fatalf("step %d: ||V^T V - I|| = %v", step, e)
		}
	}
	t.Logf("re-orthonormalisations: %d", ts.reorths)
}

// On a real FORKS sketch, Phi_pp = S_p^T K S_p of a Gaussian kernel matrix
// that grows by one point per update (Eq. 11), kept exactly here, TISVD's
// rank-k factors after many updates must match the full decomposition of the
// exact sketch up to the truncation error TISVD cannot recover : the
// spectrum decays fast, so the leading eigenvalues and subspace agree closely.
func TestTISVDAgainstFullDecompositionOfTheSketch(t *testing.T) {
	const d, B, sp, k, inserts = 3, 60, 40, 8, 400
	rng := rand.New(rand.NewPCG(11, 12))
	kern := NewGaussian(1.5)
	point := func() []float64 {
		x := make([]float64, d)
		for i := range x {
			x[i] = rng.Float64()*2 - 1
		}
		return x
	}
	var pts [][]float64
	var bucket []int
	var sign []float64
	phi := make([]float64, sp*sp)
	add := func(x []float64) ([]float64, int, float64) {
		h, s := rng.IntN(sp), float64(2*rng.IntN(2)-1)
		a := make([]float64, sp)
		for i, p := range pts {
			a[bucket[i]] += sign[i] * kern.Eval(x, p)
		}
		kap := kern.Eval(x, x)
		for c := 0; c < sp; c++ {
			phi[h*sp+c] += s * a[c]
			phi[c*sp+h] += s * a[c]
		}
		phi[h*sp+h] += kap
		pts, bucket, sign = append(pts, x), append(bucket, h), append(sign, s)
		return a, h, s
	}
	for i := 0; i < B; i++ {
		add(point())
	}
	ts := newTISVD(sp, k, 2)
	if err := ts.initFrom(phi); err != nil {
		t.Fatal(err)
	}
	initTop := ts.lam[0]
	for i := 0; i < inserts; i++ {
		a, h, s := add(point())
		x := make([]float64, 2*sp)
		x[h] = s
		copy(x[sp:], a)
		if !ts.update(x, 2, []float64{kern.Diag(nil), 1, 1, 0}) {
			t.Fatalf("insert %d: non-finite", i)
		}
		ts.commit()
	}
	vals, vecs := tisvdTopK(t, phi, sp, k)
	t.Logf("exact top-%d: %.4g", k, vals)
	t.Logf("TISVD top-%d: %.4g", k, ts.lam)
	if vals[0] < 3*initTop {
		t.Fatalf("the sketch barely changed (%v -> %v): the test would not test tracking", initTop, vals[0])
	}
	for i := 0; i < 3; i++ {
		if rel := math.Abs(ts.lam[i]-vals[i]) / vals[i]; rel > 1e-2 {
			t.Errorf("eigenvalue %d: TISVD %v, full %v (rel %v)", i, ts.lam[i], vals[i], rel)
		}
	}
	top := func(m *mat.Dense) *mat.Dense { return mat.DenseCopyOf(m.Slice(0, sp, 0, 3)) }
	if ang := tisvdMaxAngle(top(tisvdDenseV(ts)), top(vecs)); ang > 0.05 {
		t.Errorf("top-3 subspace angle %v rad", ang)
	}
	if e := ts.orthoError(ts.V); e > 1e-9 {
		t.Errorf("||V^T V - I|| = %v", e)
	}
}

// The safeguard restores orthonormality without changing V Lambda V^T.
func TestTISVDReorthonormalisation(t *testing.T) {
	const n, k = 30, 5
	rng := rand.New(rand.NewPCG(5, 6))
	ts := newTISVD(n, k, 2)
	m := make([]float64, n*n)
	for i := 0; i < n; i++ {
		m[i*n+i] = float64(n - i)
	}
	if err := ts.initFrom(m); err != nil {
		t.Fatal(err)
	}
	copy(ts.vNext, ts.V)
	copy(ts.lamNext, ts.lam)
	for i := range ts.vNext { // perturb: no longer orthonormal
		ts.vNext[i] += 1e-4 * rng.NormFloat64()
	}
	before := make([]float64, n*n)
	for r := 0; r < n; r++ {
		for c := 0; c < n; c++ {
			for i := 0; i < k; i++ {
				before[r*n+c] += ts.vNext[r*k+i] * ts.lamNext[i] * ts.vNext[c*k+i]
			}
		}
	}
	if e := ts.orthoError(ts.vNext); e < 1e-6 {
		t.Fatalf("perturbation too small: %v", e)
	}
	ts.reorthonormalize()
	if e := ts.orthoError(ts.vNext); e > 1e-12 {
		t.Fatalf("after safeguard ||V^T V - I|| = %v", e)
	}
	for r := 0; r < n; r++ {
		for c := 0; c < n; c++ {
			s := 0.0
			for i := 0; i < k; i++ {
				s += ts.vNext[r*k+i] * ts.lamNext[i] * ts.vNext[c*k+i]
			}
			if math.Abs(s-before[r*n+c]) > 1e-10 {
				t.Fatalf("represented matrix changed at (%d,%d): %v vs %v", r, c, s, before[r*n+c])
			}
		}
	}
}
