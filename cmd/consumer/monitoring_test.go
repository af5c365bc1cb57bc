package main

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kernelstream/kernelstream/config"
	"github.com/kernelstream/kernelstream/internal/service"
)

// describedNames is a Registerer that remembers the fully-qualified name of
// every metric registered through it. Gather would miss the vectors that
// have no series yet (lag per partition before any assignment).
type describedNames struct {
	prometheus.Registerer
	names map[string]bool
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d *describedNames) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = true
		}
	}
	return d.Registerer.Register(c)
}

func (d *describedNames) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

// TestMonitoringUsesExistingMetrics checks that every kernelstream_ metric
// named by the alert rules and the Grafana dashboard under deployments/ is
// one the service registers, so a renamed metric cannot leave an alert
// silently evaluating to nothing.
func TestMonitoringUsesExistingMetrics(t *testing.T) {
	cfg := config.Default()
	cfg.Model.Algorithm, cfg.Model.Dim = "aogd-ald", 3
	cfg.Checkpoint.Dir = t.TempDir()
	cfg.HTTP.Addr = ""
	reg := &describedNames{Registerer: prometheus.NewRegistry(), names: map[string]bool{}}
	if _, err := service.NewProcessor(cfg, zerolog.Nop(), reg); err != nil {
		t.Fatal(err)
	}
	if len(reg.names) < 10 {
		t.Fatalf("only %d metric names registered: %v", len(reg.names), reg.names)
	}
	files := []string{
		"../../deployments/k8s/monitoring/prometheusrule.yaml",
		"../../deployments/grafana/kernelstream.json",
	}
	used := regexp.MustCompile(`\b(kernelstream_[a-z_]+|process_[a-z_]+|go_[a-z_]+)\b`)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, m := range used.FindAllString(string(data), -1) {
			seen[m] = true
		}
		if len(seen) == 0 {
			t.Errorf("%s names no metric", f)
		}
		var missing []string
		for name := range seen {
			if !reg.names[name] && !reg.names[histogramBase.ReplaceAllString(name, "")] {
				missing = append(missing, name)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s uses metrics the service does not register: %v", filepath.Base(f), missing)
		}
	}
}

var histogramBase = regexp.MustCompile(`_(bucket|sum|count)$`)
