package main

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// syncBuffer collects the demo's output, written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDemoStopsByItself runs `demo -records N` in-process.
func TestDemoStopsByItself(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	code := run([]string{"-records", "1500", "-rate", "0", "-port", "0",
		"-http", "127.0.0.1:0", "-every", "200ms", "-models", "aogd-ald,fogd"}, &out, &out)
	text := out.String()
	if code != 0 {
		t.Fatalf("demo exit %d:\n%s", code, text)
	}
	for _, want := range []string{"kcat -b 127.0.0.1:", "-t predictions -C -o beginning -e", "predictions.fogd",
		"all 1500 records predicted and learned by every model", "final aogd-ald", "final fogd", "progressive loss"} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
}

// TestBanditDemoStopsByItself runs `demo bandit -records N`
// in-process and checks that the click rate over the last decisions ends
// clearly above the random-choice rate of the same offers. The environment
// is seeded and each user's records do not depend on timing, so the figures
// are the same on every run (0.493 over the first 1000 decisions, 0.588
// over the last 1000, random choice 0.204 at the time of writing).
func TestBanditDemoStopsByItself(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	code := run([]string{"bandit", "-records", "3000", "-rate", "0", "-port", "0",
		"-http", "127.0.0.1:0", "-every", "200ms"}, &out, &out)
	text := out.String()
	if code != 0 {
		t.Fatalf("demo exit %d:\n%s", code, text)
	}
	for _, want := range []string{"kcat -b 127.0.0.1:", "-t recommendations -C -o beginning -e", "click rate of a random choice",
		"all 3000 decisions answered and their rewards learned by every model", "final bkb"} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q:\n%s", want, text)
		}
	}
	m := regexp.MustCompile(`final bkb +3000 decisions .* first 1000 decisions: ([0-9.]+) .* last 1000 decisions: ([0-9.]+) .* random choice ([0-9.]+) `).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no final line with 3000 decisions:\n%s", text)
	}
	first, _ := strconv.ParseFloat(m[1], 64)
	last, _ := strconv.ParseFloat(m[2], 64)
	random, _ := strconv.ParseFloat(m[3], 64)
	t.Logf("click rate: first 1000 %.3f, last 1000 %.3f, random choice %.3f", first, last, random)
	if last < random+0.2 || last <= first {
		t.Errorf("click rate over the last 1000 decisions %.3f: want clearly above random %.3f and above the first 1000 (%.3f)", last, random, first)
	}

	// An unknown demo is a usage error.
	out = syncBuffer{}
	if code := run([]string{"nosuch"}, &out, &out); code != 2 {
		t.Errorf("demo nosuch: exit %d: %s", code, out.String())
	}
}
