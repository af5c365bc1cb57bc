package models_test

import (
	"testing"

	"github.com/kernelstream/kernelstream/internal/dataset"
	"github.com/kernelstream/kernelstream/internal/testdata"
	"github.com/kernelstream/kernelstream/models"
)

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
		l, err := models.New(spec, "")
		if err != nil {
			t.Fatal(err)
		}
		mistakes := 0
		for i := 0; i < n; i++ {
			x := ds.Row(i)
			p := l.Predict(x)
			if (p.Value >= 0) != (ds.Y[i] > 0) {
				mistakes++
			}
			if err := l.Update(x, p, ds.Y[i]); err != nil {
				t.Fatal(err)
			}
		}
		rate := float64(mistakes) / n
		t.Logf("%s: mistake rate %.2f%% on the first %d records", tc.alg, 100*rate, n)
		if rate > tc.bound {
			t.Errorf("%s: mistake rate %.2f%% above %.0f%%", tc.alg, 100*rate, 100*tc.bound)
		}
	}
}
