package main

// What the Go runtime saw of the paced run (runtime/metrics), to tell a
// decision that waited for a CPU from one that waited for the collector:
// /sched/latencies is how long goroutines stayed runnable before they ran
// (every goroutine of this process: the consumer's with the feeder's and
// the reader's), /sched/pauses/total/gc the collector's stop-the-world
// pauses. The service exports the same two histograms (go_sched_latencies_seconds,
// go_sched_pauses_total_gc_seconds; docs/deploy.md, "Monitoring").

import (
	"fmt"
	"io"
	"math"
	"runtime/metrics"
)

var waitMetrics = []string{"/sched/latencies:seconds", "/sched/pauses/total/gc:seconds"}

// runtimeWaits is a reading of waitMetrics.
type runtimeWaits []metrics.Float64Histogram

func readWaits() runtimeWaits {
	s := make([]metrics.Sample, len(waitMetrics))
	for i, n := range waitMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	w := make(runtimeWaits, len(s))
	for i := range s {
		if s[i].Value.Kind() == metrics.KindFloat64Histogram {
			h := s[i].Value.Float64Histogram()
			w[i] = metrics.Float64Histogram{Counts: append([]uint64(nil), h.Counts...), Buckets: h.Buckets}
		}
	}
	return w
}

// waitSummary is one histogram's counts since an earlier reading.
type waitSummary struct {
	n       uint64
	over10  uint64     // at least 10 ms
	p99     float64    // upper bound of the bucket holding the 99th percentile, seconds
	longest [2]float64 // the longest one's bucket, seconds
}

func summarize(before, after metrics.Float64Histogram) waitSummary {
	var s waitSummary
	if len(after.Counts) == 0 || len(before.Counts) != len(after.Counts) {
		return s
	}
	d := make([]uint64, len(after.Counts))
	for i := range d {
		d[i] = after.Counts[i] - before.Counts[i]
		s.n += d[i]
		if d[i] > 0 {
			s.longest = [2]float64{after.Buckets[i], after.Buckets[i+1]}
			if after.Buckets[i] >= 0.010 {
				s.over10 += d[i]
			}
		}
	}
	var acc uint64
	for i := range d {
		if acc += d[i]; s.n > 0 && float64(acc) >= 0.99*float64(s.n) {
			s.p99 = after.Buckets[i+1]
			break
		}
	}
	return s
}

func ms(s float64) string {
	if math.IsInf(s, 1) {
		return "∞"
	}
	return fmt.Sprintf("%.2g", s*1000)
}

// report prints what the runtime saw since before.
func (w runtimeWaits) report(out io.Writer, before runtimeWaits) {
	if len(w) != len(waitMetrics) || len(before) != len(w) {
		return
	}
	run, gc := summarize(before[0], w[0]), summarize(before[1], w[1])
	fmt.Fprintf(out, "\nthis process's goroutines waiting for a CPU (runtime/metrics /sched/latencies, the consumer's, the feeder's and the reader's): %d sampled waits, p99 below %s ms, %d of 10 ms or more, the longest %s-%s ms; garbage collector's stop-the-world pauses: %d, the longest %s-%s ms\n",
		run.n, ms(run.p99), run.over10, ms(run.longest[0]), ms(run.longest[1]), gc.n, ms(gc.longest[0]), ms(gc.longest[1]))
}
