package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestDecisionsSmoke runs the decision mode for one second at a small scale
// (the benchmark itself is run by hand: make bench-decisions): every
// decision is answered and the table and the CPU split come out.
func TestDecisionsSmoke(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := run([]string{"-decisions", "-users", "50", "-arms", "10", "-rate", "200", "-latency-seconds", "1",
		"-model", `{"algorithm":"bkb","dim":4}`}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 200 |", "200 decisions; CPU by part (profile): consumer "} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestThroughputSmoke runs the pipeline comparison at a small scale: two
// alternating rounds each, every record drained by both pipelines, the
// table with both rows and the ratio line.
func TestThroughputSmoke(t *testing.T) {
	t.Parallel()
	var out, log bytes.Buffer
	err := run([]string{"-n", "2000", "-rounds", "2", "-rate", "500", "-latency-seconds", "0.5"}, &out, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	for _, want := range []string{"2000 records (throughput, median of 2 alternating rounds)", "| kafka-go relay", "| kernelstream (aogd-ald, dim 5) |", "kernelstream / relay throughput: "} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(log.String(), "2000 records at "); n != 4 {
		t.Fatalf("%d throughput rounds logged, want 4:\n%s", n, log.String())
	}
}
