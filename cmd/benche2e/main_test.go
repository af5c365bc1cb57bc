package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

// TestMain lets the test binary be -decisions' broker and scoring client
// processes too.
func TestMain(m *testing.M) {
	if code, ok := asChildBroker(); ok {
		os.Exit(code)
	}
	if code, ok := asScoreClient(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestDecisionsSmoke runs the decision mode for two seconds at a small
// scale (the benchmark itself is run by hand: make bench-decisions): every
// decision is answered and the table and the CPU split come out; with
// -score-rate, the client process sends its requests beside the stream,
// every one is answered and its latency table comes out.
func TestDecisionsSmoke(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := run([]string{"-decisions", "-users", "50", "-arms", "10", "-rate", "200", "-latency-seconds", "2",
		"-score-rate", "50", "-model", `{"algorithm":"bkb","dim":4}`}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 200 |", "400 decisions; CPU by part (profile): consumer ", "goroutines waiting for a CPU"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	_, table, ok := strings.Cut(out.String(), "POST /v1/score beside the decisions, from a client process")
	if !ok || strings.Contains(table, "error:") {
		t.Fatalf("no scoring table, or an error:\n%s", out.String())
	}
	_, row, _ := strings.Cut(table, "|---:|---:|---:|---:|---:|---|---|---|")
	cells := strings.Split(strings.TrimSpace(row), "|")
	if with, fresh, other := strings.TrimSpace(cells[4]), strings.TrimSpace(cells[5]), strings.TrimSpace(cells[6]); with == "0" && fresh == "0" || other != "-" {
		t.Fatalf("answered with state %s, fresh %s, other statuses %s:\n%s", with, fresh, other, out.String())
	}
}

// TestThroughputSmoke runs the pipeline comparison at a small scale: two
// rounds each, every record drained by all three pipelines, the table with
// their rows, a ratio per round on stderr and a ratio line per relay.
func TestThroughputSmoke(t *testing.T) {
	t.Parallel()
	var out, log bytes.Buffer
	// 10,000 records: more than the franz-go relay buffers at once, so
	// its outputs' timestamps span a measurable time.
	err := run([]string{"-n", "10000", "-rounds", "2", "-rate", "500", "-latency-seconds", "0.5"}, &out, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	for _, want := range []string{"10000 records (throughput, median of 2 alternating rounds)", "| kafka-go relay", "| franz-go relay", "| kernelstream (aogd-ald, dim 5) |",
		"\nkernelstream / kafka-go relay throughput: ", "\nkernelstream / franz-go relay throughput: "} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(log.String(), "10000 records at "); n != 6 {
		t.Fatalf("%d throughput drains logged, want 6:\n%s", n, log.String())
	}
	for _, want := range []string{"round 1: kernelstream / kafka-go relay ", "round 2: kernelstream / franz-go relay "} {
		if !strings.Contains(log.String(), want) {
			t.Fatalf("log lacks %q:\n%s", want, log.String())
		}
	}
}
