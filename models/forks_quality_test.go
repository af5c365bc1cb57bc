package models_test

import (
	"math"
	"testing"

	"github.com/kernelstream/kernelstream/internal/dataset"
	"github.com/kernelstream/kernelstream/internal/testdata"
	"github.com/kernelstream/kernelstream/models"
)

// forksQualityRun feeds n records to a learner of spec, predict then update,
// and returns its mistake rate.
func forksQualityRun(t *testing.T, spec models.Spec, n int, row func(int) []float64, y func(int) float64) float64 {
	t.Helper()
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
	return float64(mistakes) / float64(n)
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
	for _, tc := range []struct {
		alg    string
		params map[string]any
		bound  float64
	}{
		{"forks", map[string]any{"B": 100, "rho": 2000}, 0.24},
		{"nogd", map[string]any{"B": 100, "k": 10}, 0.23},
		{"fogd", map[string]any{"D": 400}, 0.20},
	} {
		spec := models.Spec{Algorithm: tc.alg, Dim: d, Kernel: models.KernelSpec{Sigma: 2}, Params: tc.params, Seed: 1, Scale: models.ScaleSpec{X: "none", Y: "none"}}
		rate := forksQualityRun(t, spec, n, func(i int) []float64 { return xs[i] }, func(i int) float64 { return ys[i] })
		t.Logf("%s: mistake rate %.2f%%", tc.alg, 100*rate)
		if rate > tc.bound {
			t.Errorf("%s: mistake rate %.2f%% above %.0f%%", tc.alg, 100*rate, 100*tc.bound)
		}
	}
}

// A quick prequential check on a prefix of cod-rna (scaled to [-1,1],
// permutation seed 1) at the paper's Table 1 sizes. The bounds are honest
// margins over what the learners reach (docs/forks.md has the full-length
// 20-permutation figures); the majority class alone makes 33.3% mistakes.
func TestFORKSQualityCodRNAPrefix(t *testing.T) {
	ds, err := dataset.Load(testdata.Path(t, "cod-rna.libsvm"), 8)
	if err != nil {
		t.Fatal(err)
	}
	ds.ScaleFeatures()
	ds = ds.Permute(dataset.Permutation(ds.Len(), 1))
	const n = 8000
	for _, tc := range []struct {
		alg    string
		params map[string]any
		bound  float64
	}{
		{"forks", map[string]any{"B": 100, "rho": 2000}, 0.17},
		{"nogd", map[string]any{"B": 100, "k": 10}, 0.20},
		{"fogd", map[string]any{"D": 400}, 0.15},
	} {
		spec := models.Spec{Algorithm: tc.alg, Dim: 8, Kernel: models.KernelSpec{Sigma: 2}, Params: tc.params, Seed: 1, Scale: models.ScaleSpec{X: "none", Y: "none"}} // the paper's offline scaling
		rate := forksQualityRun(t, spec, n, ds.Row, func(i int) float64 { return ds.Y[i] })
		t.Logf("%s: mistake rate %.2f%% on the first %d records", tc.alg, 100*rate, n)
		if rate > tc.bound {
			t.Errorf("%s: mistake rate %.2f%% above %.0f%%", tc.alg, 100*rate, 100*tc.bound)
		}
	}
}
