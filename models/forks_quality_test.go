package models_test

import (
	"math"
	"testing"

	"github.com/kernelstream/kernelstream/internal/dataset"
	"github.com/kernelstream/kernelstream/internal/testdata"
	"github.com/kernelstream/kernelstream/models"
)

// forksQualityCheck runs FORKS, NOGD and FOGD at the paper's Table 1 sizes
// (sigma 2, features in [-1, 1]) on n records, predict then update, and
// fails when a mistake rate exceeds its bound.
func forksQualityCheck(t *testing.T, d, n int, row func(int) []float64, y func(int) float64, bounds map[string]float64) {
	t.Helper()
	for _, tc := range []struct {
		alg    string
		params map[string]any
	}{
		{"forks", map[string]any{"B": 100, "rho": 2000}},
		{"nogd", map[string]any{"B": 100, "k": 10}},
		{"fogd", map[string]any{"D": 400}},
	} {
		spec := models.Spec{Algorithm: tc.alg, Dim: d, Kernel: models.KernelSpec{Sigma: 2}, Params: tc.params, Seed: 1, Scale: models.ScaleSpec{X: "none", Y: "none"}} // the paper's offline scaling
		l, err := models.New(spec, "")
		if err != nil {
			t.Fatal(err)
		}
		mistakes := 0
		for i := 0; i < n; i++ {
			x := row(i)
			p := l.Predict(x)
			if (p.Value >= 0) != (y(i) > 0) {
				mistakes++
			}
			if err := l.Update(x, p, y(i)); err != nil {
				t.Fatal(err)
			}
		}
		rate := float64(mistakes) / float64(n)
		t.Logf("%s: mistake rate %.2f%% on %d records", tc.alg, 100*rate, n)
		if rate > bounds[tc.alg] {
			t.Errorf("%s: mistake rate %.2f%% above %.0f%%", tc.alg, 100*rate, 100*bounds[tc.alg])
		}
	}
}

// TestFORKSQualitySynthetic is the always-running twin of
// TestFORKSQualityCodRNAPrefix: the same learners and settings on 8,000
// records of a synthetic 8-d stream in [-1, 1]^8 whose label is the sign of a
// smooth function (a curved boundary, 10 % of the labels flipped, so the best
// possible rate is 10 %). Measured: forks 20.6 %, nogd 19.9 %, fogd 17.1 %
// (as on cod-rna, FOGD is best at this width); the bounds leave 3 points.
func TestFORKSQualitySynthetic(t *testing.T) {
	t.Parallel()
	const n, d = 8000, 8
	r := models.NewRand(5)
	xs := make([][]float64, n)
	ys := make([]float64, n)
	for i := range xs {
		x := make([]float64, d)
		for j := range x {
			x[j] = 2*r.Float64() - 1
		}
		f := math.Sin(2*x[0]) + x[1]*x[2] - 0.5*x[3] + 0.3*math.Cos(3*x[4]) - 0.1
		ys[i] = 1
		if f < 0 {
			ys[i] = -1
		}
		if r.Float64() < 0.1 {
			ys[i] = -ys[i]
		}
		xs[i] = x
	}
	forksQualityCheck(t, d, n, func(i int) []float64 { return xs[i] }, func(i int) float64 { return ys[i] },
		map[string]float64{"forks": 0.24, "nogd": 0.23, "fogd": 0.20})
}

// A quick prequential check on a prefix of cod-rna (scaled to [-1,1],
// permutation seed 1) at the paper's Table 1 sizes. The bounds are honest
// margins over what the learners reach (docs/forks.md has the full-length
// 20-permutation figures); the majority class alone makes 33.3% mistakes.
func TestFORKSQualityCodRNAPrefix(t *testing.T) {
	t.Parallel() // CPU-bound: beside the package's other long tests
	ds, err := dataset.Load(testdata.Path(t, "cod-rna.libsvm"), 8)
	if err != nil {
		t.Fatal(err)
	}
	ds.ScaleFeatures()
	ds = ds.Permute(dataset.Permutation(ds.Len(), 1))
	const n = 8000
	forksQualityCheck(t, 8, n, ds.Row, func(i int) float64 { return ds.Y[i] },
		map[string]float64{"forks": 0.17, "nogd": 0.20, "fogd": 0.15})
}
