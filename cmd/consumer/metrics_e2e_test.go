package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/internal/feed"
	"github.com/kernelstream/kernelstream/internal/synth"
)

const (
	metricsPartitions = 4
	metricsKeys       = 12
	metricsBacklog    = 10000 // features (+ as many delayed labels) loaded before the consumer starts
	metricsLive       = 6000  // features (+ labels) produced while it runs
	metricsLiveRate   = 3000  // records/s of the live part
)

// sample is one scrape of /metrics.
type sample struct {
	records, predictions, updates, lag float64
}

// TestMetricsEndToEnd runs the consumer binary as a separate process with
// its HTTP server and scrapes /metrics every 100 ms while it drains a
// backlog and then a live stream: the counters of records, predictions and
// updates only grow and are seen moving mid-stream, the partition lag is
// seen above 0 and ends at 0, and the final figures match the stream exactly
// (one prediction per feature record, one update per label, no dead letter,
// nothing left pending). Then a second member on an empty disk takes over the
// group: its /readyz turns 200 only once it has replayed the whole log
// (replayed_records_total = every input record) and it emitted nothing.
func TestMetricsEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end metrics test")
	}
	ctx, b, addr := startBroker(t, 2*time.Minute, metricsPartitions, "features", "out-m", "dlq-m")
	// The backlog, written before the consumer starts; the live part (same
	// keys, another seed) is produced while it runs.
	stream := func(seed uint64, n int) *feed.Feed {
		src, _ := synth.New("sines", synth.Options{Keys: metricsKeys, Dim: 5, Seed: seed})
		f, _ := feed.New(src, feed.Options{Labels: "delayed", MaxDelay: 20, Seed: seed, N: n})
		return f
	}
	backlog, err := feed.Produce(ctx, stream(31, metricsBacklog), feed.Target{Brokers: b.Addrs(), Topic: "features"}, feed.ProduceOptions{})
	if err != nil || backlog != 2*metricsBacklog {
		t.Fatalf("backlog: %d records, %v", backlog, err)
	}

	dir := t.TempDir()
	cfg := writeConfig(t, dir, "m.yaml", fmtConfig(addr, "metrics", "out-m", "dlq-m", filepath.Join(dir, "state-1"), ""))
	httpAddr := freeAddr(t)
	base := "http://" + httpAddr
	// Without the changelog: the second member rebuilds by replaying the input,
	// which is what its readiness is tested against (the changelog restore is
	// tested in changelog_test.go).
	p := startConsumer(t, cfg, filepath.Join(dir, "m1.log"), "KERNELSTREAM_HTTP_ADDR="+httpAddr, "POD_NAME=metrics-1", "KERNELSTREAM_CHANGELOG_ENABLED=false")
	defer func() {
		if p.cmd.ProcessState == nil {
			p.stop(t, syscall.SIGKILL, 10*time.Second)
		}
	}()
	waitHTTP := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case err := <-p.done:
				p.done <- err
				t.Fatalf("consumer exited while waiting for %s (%v); log tail:\n%s", what, err, tail(p.log, 3000))
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s; log tail:\n%s", what, tail(p.log, 3000))
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	waitHTTP("/healthz", func() bool { code, _ := get(base + "/healthz"); return code == 200 })
	// The backlog can drain within a few hundred milliseconds of the
	// partitions being restored, so the lag is also watched, every 20 ms,
	// while waiting for readiness and during the first part of the run.
	var lagSeen atomic.Bool
	watchLag := func() {
		if _, text := get(base + "/metrics"); text != "" {
			if v, ok := sumMetric(text, "kernelstream_partition_lag_records"); ok && v > 0 {
				lagSeen.Store(true)
			}
		}
	}
	waitHTTP("/readyz", func() bool { watchLag(); code, _ := get(base + "/readyz"); return code == 200 })
	lagWatchDone := make(chan struct{})
	go func() {
		defer close(lagWatchDone)
		for i := 0; i < 100 && !lagSeen.Load() && ctx.Err() == nil; i++ {
			watchLag()
			time.Sleep(20 * time.Millisecond)
		}
	}()

	// The live part of the stream, paced, while the backlog drains.
	var liveDone atomic.Bool
	prodErr := make(chan error, 1)
	go func() {
		n, err := feed.Produce(ctx, stream(32, metricsLive), feed.Target{Brokers: b.Addrs(), Topic: "features"}, feed.ProduceOptions{Rate: metricsLiveRate})
		if err == nil && n != 2*metricsLive {
			t.Errorf("live stream: %d records, want %d", n, 2*metricsLive)
		}
		liveDone.Store(true)
		prodErr <- err
	}()

	scrape := func() (sample, string) {
		_, text := get(base + "/metrics")
		var s sample
		for _, m := range []struct {
			name string
			v    *float64
		}{{"kernelstream_records_total", &s.records}, {"kernelstream_predictions_total", &s.predictions},
			{"kernelstream_updates_total", &s.updates}, {"kernelstream_partition_lag_records", &s.lag}} {
			v, ok := sumMetric(text, m.name)
			if !ok && m.name != "kernelstream_partition_lag_records" { // the lag appears with the first record
				t.Fatalf("/metrics has no %s; families: %s", m.name, families(text))
			}
			*m.v = v
		}
		return s, text
	}
	const total = 2 * (metricsBacklog + metricsLive)
	var samples []sample
	var last string
	for {
		s, text := scrape()
		samples = append(samples, s)
		last = text
		// The latency histogram is observed when the output is
		// acknowledged, after the prediction is counted.
		acked, _ := sumMetric(text, "kernelstream_input_to_prediction_seconds_count")
		if liveDone.Load() && s.records >= total && s.lag == 0 && s.updates >= metricsBacklog+metricsLive && acked >= metricsBacklog+metricsLive {
			break
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("consumer exited mid-stream (%v); log tail:\n%s", err, tail(p.log, 3000))
		case <-ctx.Done():
			t.Fatalf("stream not processed in time: last sample %+v; log tail:\n%s", s, tail(p.log, 3000))
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := <-prodErr; err != nil {
		t.Fatal(err)
	}

	// Counters only grow, move while the stream is processed, and the lag
	// is seen above 0 before it returns to 0.
	moving, lagged := 0, false
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		if b.records < a.records || b.predictions < a.predictions || b.updates < a.updates {
			t.Errorf("scrape %d: a counter went down: %+v after %+v", i, b, a)
		}
		if b.records > a.records && b.predictions > a.predictions && b.updates > a.updates {
			moving++
		}
		lagged = lagged || a.lag > 0
	}
	<-lagWatchDone
	lagged = lagged || lagSeen.Load()
	t.Logf("%d scrapes, %d with records, predictions and updates all moving; lag seen above 0: %v", len(samples), moving, lagged)
	if moving < 3 {
		t.Errorf("counters moved together in only %d of %d scrapes: %+v", moving, len(samples), samples)
	}
	if !lagged {
		t.Errorf("the lag gauge never showed the %d-record backlog", 2*metricsBacklog)
	}

	// Final figures: exactly the stream.
	want := map[string]float64{
		`kernelstream_records_total{kind="features"}`:     metricsBacklog + metricsLive,
		`kernelstream_records_total{kind="label"}`:        metricsBacklog + metricsLive,
		"kernelstream_predictions_total":                  metricsBacklog + metricsLive,
		"kernelstream_updates_total":                      metricsBacklog + metricsLive,
		"kernelstream_dead_letters_total":                 0,
		"kernelstream_unknown_labels_total":               0,
		"kernelstream_pending_labels":                     0,
		"kernelstream_replayed_records_total":             0,
		"kernelstream_partition_lag_records":              0,
		"kernelstream_learners_in_memory":                 metricsKeys,
		"kernelstream_input_to_prediction_seconds_count":  metricsBacklog + metricsLive,
		`kernelstream_progressive_loss{model="aogd-ald"}`: -1, // present, checked below
	}
	for name, w := range want {
		got, ok := metricValue(last, name)
		switch {
		case !ok:
			t.Errorf("/metrics lacks %s", name)
		case w >= 0 && got != w:
			t.Errorf("%s = %v, want %v", name, got, w)
		case w < 0 && !(got > 0 && got < 1):
			t.Errorf("%s = %v, want a square loss in (0,1) on targets in [0,1]", name, got)
		}
	}
	// The stream ended: wait for the checkpoint that covers it, then the
	// stored learners count.
	waitHTTP("a checkpoint of every key", func() bool {
		_, text := scrape()
		v, _ := sumMetric(text, "kernelstream_learners_on_disk")
		c, _ := sumMetric(text, "kernelstream_checkpoint_duration_seconds_count")
		return v == metricsKeys && c > 0
	})
	for {
		if ok, err := caughtUp(ctx, addr, "metrics", "features", metricsPartitions); err == nil && ok {
			break
		}
		waitHTTP("the group commit", func() bool { return true })
		time.Sleep(100 * time.Millisecond)
	}
	p.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck
	select {
	case <-p.done:
	case <-time.After(crashGrace):
		t.Fatalf("consumer did not exit within %v of SIGTERM", crashGrace)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d after SIGTERM; log tail:\n%s", code, tail(p.log, 3000))
	}

	// A member with an empty disk takes over: ready only after the replay.
	cfg2 := writeConfig(t, dir, "m2.yaml", fmtConfig(addr, "metrics", "out-m", "dlq-m", filepath.Join(dir, "state-2"), ""))
	p = startConsumer(t, cfg2, filepath.Join(dir, "m2.log"), "KERNELSTREAM_HTTP_ADDR="+httpAddr, "POD_NAME=metrics-2", "KERNELSTREAM_CHANGELOG_ENABLED=false")
	waitHTTP("/healthz of the second member", func() bool { code, _ := get(base + "/healthz"); return code == 200 })
	notReady := 0
	waitHTTP("/readyz of the second member", func() bool {
		code, _ := get(base + "/readyz")
		if code == 503 {
			notReady++
		}
		return code == 200
	})
	_, text := scrape()
	replayed, _ := sumMetric(text, "kernelstream_replayed_records_total")
	preds, _ := sumMetric(text, "kernelstream_predictions_total")
	t.Logf("second member: /readyz 503 on %d polls, then 200 with %v records replayed", notReady, replayed)
	if replayed != total || preds != 0 {
		t.Errorf("second member ready with %v records replayed (want all %d) and %v predictions emitted (want 0)", replayed, total, preds)
	}
	p.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck
	select {
	case <-p.done:
	case <-time.After(crashGrace):
		t.Fatalf("second member did not exit within %v of SIGTERM", crashGrace)
	}
}

// metricValue returns the sample of name{labels} exactly as exposed, or
// the sum over every label set of a bare name.
func metricValue(text, name string) (float64, bool) {
	if !strings.HasSuffix(name, "}") {
		return sumMetric(text, name)
	}
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}
