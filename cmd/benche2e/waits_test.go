package main

import (
	"math"
	"runtime/metrics"
	"testing"
)

// TestSummarize reads waits between two readings of a histogram.
func TestSummarize(t *testing.T) {
	buckets := []float64{0, 0.001, 0.005, 0.010, 0.050, math.Inf(1)}
	h := func(counts ...uint64) metrics.Float64Histogram {
		return metrics.Float64Histogram{Counts: counts, Buckets: buckets}
	}
	for _, c := range []struct {
		name          string
		before, after metrics.Float64Histogram
		want          waitSummary
	}{
		{"nothing new", h(5, 1, 0, 0, 0), h(5, 1, 0, 0, 0), waitSummary{}},
		{"all short", h(0, 0, 0, 0, 0), h(100, 0, 0, 0, 0), waitSummary{n: 100, p99: 0.001, longest: [2]float64{0, 0.001}}},
		{"the tail since before", h(50, 0, 0, 3, 0), h(150, 0, 1, 3, 0),
			waitSummary{n: 101, p99: 0.001, longest: [2]float64{0.005, 0.010}}},
		{"one percent long", h(0, 0, 0, 0, 0), h(98, 0, 0, 1, 1),
			waitSummary{n: 100, over10: 2, p99: 0.050, longest: [2]float64{0.050, math.Inf(1)}}},
		{"no reading", metrics.Float64Histogram{}, h(1, 0, 0, 0, 0), waitSummary{}},
	} {
		if got := summarize(c.before, c.after); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
