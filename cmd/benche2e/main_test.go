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
