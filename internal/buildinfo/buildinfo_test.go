package buildinfo

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestVersionOverride(t *testing.T) {
	defer func(v string) { Version = v }(Version)
	Version = "v9.9.9"
	if got := Get().String(); !strings.HasPrefix(got, "v9.9.9 (revision ") {
		t.Errorf("String() = %q", got)
	}
	Version = ""
	if Get().Version == "" {
		t.Error("empty version without an override")
	}
}

func TestCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector())
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "kernelstream_build_info" || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v, %v", mfs, err)
	}
	if v := mfs[0].GetMetric()[0].GetGauge().GetValue(); v != 1 {
		t.Errorf("value %v, want 1", v)
	}
}
