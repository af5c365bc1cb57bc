package processor

import (
	"fmt"
	"testing"

	"github.com/kernelstream/kernelstream/models"
)

// trainedLearner is spec's learner for key "k" after n updates on standard
// normal features with uniform targets; it also returns the last features.
func trainedLearner(tb testing.TB, spec models.Spec, n int) (models.Learner, []float64) {
	tb.Helper()
	l, err := models.New(spec, "k")
	if err != nil {
		tb.Fatal(err)
	}
	rng := models.NewRand(1)
	x := make([]float64, spec.Dim)
	for range n {
		for j := range x {
			x[j] = rng.Norm()
		}
		_ = l.Update(x, l.Predict(x), rng.Float64())
	}
	return l, x
}

// BenchmarkEncodeSlot: one key's checkpoint value (n_updates prefix and
// state) for aogd-ald at dim 5 with online scaling (the default wrapper),
// by dictionary budget. The checkpoint keeps the value until its commit, so
// one allocation per key is the floor.
func BenchmarkEncodeSlot(b *testing.B) {
	for _, budget := range []int{16, 64, 256} {
		b.Run(fmt.Sprintf("budget=%d", budget), func(b *testing.B) {
			spec := models.Spec{Algorithm: "aogd-ald", Dim: 5, Seed: 1, Params: map[string]any{"max_budget": budget}}
			l, _ := trainedLearner(b, spec, 4*budget)
			s := &slot{key: "k", l: l, updates: 100}
			out, err := encodeSlot(s)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := encodeSlot(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
