package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kernelstream/kernelstream/config"
	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/feed"
	"github.com/kernelstream/kernelstream/internal/service"
	"github.com/kernelstream/kernelstream/internal/synth"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sumMetric adds up every sample of the metric family name in a Prometheus
// text exposition.
func sumMetric(text, name string) (float64, bool) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? ([0-9.eE+-]+)$`)
	found := false
	sum := 0.0
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err == nil {
			sum += v
			found = true
		}
	}
	return sum, found
}

// TestServeEndpoints runs the service in-process against an embedded broker:
// /healthz answers at once, /readyz turns 200 once the partitions are
// restored, /metrics shows the counters moving as records flow and the lag
// back at 0 at the end, and cancelling (what SIGTERM does) returns nil.
func TestServeEndpoints(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := broker.Start(broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.CreateTopics(ctx, 2, "features", "predictions", "dead-letters"); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Kafka.Brokers = b.Addrs()
	cfg.Kafka.SessionTimeout, cfg.Kafka.HeartbeatInterval = 2*time.Second, 300*time.Millisecond
	cfg.Model.Algorithm, cfg.Model.Dim = "aogd-ald", 5
	cfg.Checkpoint.Dir = t.TempDir()
	cfg.Checkpoint.Interval = 200 * time.Millisecond
	cfg.HTTP.Addr = freeAddr(t)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + cfg.HTTP.Addr
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- service.Serve(runCtx, cfg, zerolog.Nop(), nil) }()

	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case err := <-done:
				t.Fatalf("serve returned while waiting for %s: %v", what, err)
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s", what)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	waitFor("/healthz", func() bool { code, _ := get(base + "/healthz"); return code == 200 })
	waitFor("/readyz", func() bool { code, _ := get(base + "/readyz"); return code == 200 })

	produce := func(n int, seed uint64) {
		src, _ := synth.New("sines", synth.Options{Keys: 4, Dim: 5, Seed: seed})
		f, _ := feed.New(src, feed.Options{Labels: "delayed", MaxDelay: 10, Seed: seed, N: n})
		if _, err := feed.Produce(ctx, f, feed.Target{Brokers: b.Addrs(), Topic: "features"}, feed.ProduceOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	metric := func(name string) float64 {
		_, text := get(base + "/metrics")
		v, ok := sumMetric(text, name)
		if !ok {
			t.Fatalf("/metrics has no %s; families: %s", name, families(text))
		}
		return v
	}
	produce(500, 1)
	waitFor("500 predictions", func() bool { return metric("kernelstream_predictions_total") >= 500 })
	produce(700, 2)
	waitFor("1200 predictions", func() bool { return metric("kernelstream_predictions_total") >= 1200 })
	waitFor("1200 updates", func() bool { return metric("kernelstream_updates_total") >= 1200 })
	waitFor("lag 0", func() bool { return metric("kernelstream_partition_lag_records") == 0 })
	if _, text := get(base + "/metrics"); !strings.Contains(text, "go_goroutines") {
		t.Error("/metrics lacks the Go collector")
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after cancel: %v", err)
		}
	case <-time.After(cfg.Shutdown.Grace):
		t.Fatalf("serve did not return within shutdown.grace %v", cfg.Shutdown.Grace)
	}
	if code, _ := get(base + "/healthz"); code == 200 {
		t.Error("HTTP server still up after shutdown")
	}
}

func families(text string) string {
	var names []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "# TYPE kernelstream") {
			names = append(names, strings.Fields(line)[2])
		}
	}
	return fmt.Sprint(names)
}
