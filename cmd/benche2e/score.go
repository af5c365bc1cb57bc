package main

// The scoring load of the decision mode (benche2e -decisions -score-rate
// R): POST /v1/score requests at R per second, open loop, beside the
// decision stream, each for a random user of the stream (every key is
// local: the benchmark runs one member) with -arms random items of the
// click environment as the arms, so that bkb chooses among as many
// candidates as a decision has. Latency is the client's: from sending the
// request to reading the whole answer, over a kept-alive connection, in
// this process (which also runs the broker, the feeder and the consumer).
// The load starts after a fifth of the run, when most users have state;
// answers from a key without state yet ("fresh") are counted apart, as
// their cost is lower (no state to decode).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernelstream/kernelstream/internal/banditenv"
	"github.com/kernelstream/kernelstream/internal/scoring"
)

type scoreLoad struct {
	o        options
	env      *banditenv.Clicks
	client   *http.Client
	mu       sync.Mutex
	lat      []float64 // ms, answers from a key with state
	freshLat []float64 // ms, answers from a fresh learner
	statuses map[int]int
	errs     []error
	sent     int
	start    time.Time
	end      time.Time
	maxLag   time.Duration
	wg       sync.WaitGroup
}

// freeLocalAddr is a free 127.0.0.1 port for the scoring endpoint.
func freeLocalAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startScoreLoad starts the scoring load when -score-rate is set (nil
// otherwise); it runs until ctx ends.
func startScoreLoad(ctx context.Context, o options, env *banditenv.Clicks) *scoreLoad {
	if o.scoreRate <= 0 {
		return nil
	}
	s := &scoreLoad{o: o, env: env, statuses: map[int]int{},
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}}}
	s.wg.Add(1)
	go s.run(ctx)
	return s
}

func (s *scoreLoad) run(ctx context.Context) {
	defer s.wg.Done()
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Duration(s.o.latencySeconds / 5 * float64(time.Second))):
	}
	rng := rand.New(rand.NewPCG(7, 33))
	users, items := s.env.Config().Users, max(s.env.Config().Items, banditenv.DefaultClickItems)
	arms := make([]string, items) // each item as an arm, encoded once
	for i := range arms {
		x, _ := json.Marshal(s.env.Item(i))
		arms[i] = fmt.Sprintf(`{"id":%q,"x":%s}`, s.env.ItemID(i), x)
	}
	sem := make(chan struct{}, 64)
	s.start = time.Now()
	for n := 0; ; {
		due := int(time.Since(s.start).Seconds() * s.o.scoreRate)
		if due <= n {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(s.start.Add(time.Duration(float64(n+1) / s.o.scoreRate * float64(time.Second))))):
			}
			continue
		}
		if lag := time.Since(s.start.Add(time.Duration(float64(n+1) / s.o.scoreRate * float64(time.Second)))); lag > s.maxLag {
			s.maxLag = lag
		}
		for ; n < due; n++ {
			var b strings.Builder
			fmt.Fprintf(&b, `{"key":%q,"arms":[`, s.env.User(rng.IntN(users)))
			for a, i := range rng.Perm(items)[:min(s.o.arms, items)] { // distinct items, as a decision offers
				if a > 0 {
					b.WriteByte(',')
				}
				b.WriteString(arms[i])
			}
			b.WriteString("]}")
			sem <- struct{}{}
			s.wg.Add(1)
			go func(body string) {
				defer func() { <-sem; s.wg.Done() }()
				s.one(ctx, body)
			}(b.String())
		}
		s.mu.Lock()
		s.sent, s.end = n, time.Now()
		s.mu.Unlock()
	}
}

func (s *scoreLoad) one(ctx context.Context, body string) {
	t0 := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.o.serveAddr+scoring.Path, strings.NewReader(body))
	if err != nil {
		s.fail(err)
		return
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			s.fail(err)
		}
		return
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	ms := float64(time.Since(t0).Microseconds()) / 1000
	if err != nil {
		s.fail(err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statuses[resp.StatusCode]++
	switch {
	case resp.StatusCode != http.StatusOK:
		if len(s.errs) < 3 {
			s.errs = append(s.errs, fmt.Errorf("status %d: %s", resp.StatusCode, b))
		}
	case bytes.Contains(b, []byte(`"fresh":true`)):
		s.freshLat = append(s.freshLat, ms)
	default:
		s.lat = append(s.lat, ms)
	}
}

func (s *scoreLoad) fail(err error) {
	s.mu.Lock()
	if len(s.errs) < 3 {
		s.errs = append(s.errs, err)
	}
	s.mu.Unlock()
}

// report prints the scoring table (nothing without a scoring load).
func (s *scoreLoad) report(w io.Writer) {
	if s == nil {
		return
	}
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	sort.Float64s(s.lat)
	sort.Float64s(s.freshLat)
	all := append(append([]float64(nil), s.lat...), s.freshLat...)
	sort.Float64s(all)
	wall := s.end.Sub(s.start).Seconds()
	fmt.Fprintf(w, "\nPOST /v1/score beside the decisions: %d arms per request, %s\n\n", s.o.arms, s.o.serveAddr)
	fmt.Fprintln(w, "| requests/s target | sent/s | sender behind (max ms) | answered with state | fresh | other statuses | p50 / p99 / max, keys with state (ms) | p50 / p99 / max, all (ms) |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---|---|---|")
	other := []string{}
	for code, n := range s.statuses {
		if code != http.StatusOK {
			other = append(other, fmt.Sprintf("%d: %d", code, n))
		}
	}
	sort.Strings(other)
	fmt.Fprintf(w, "| %.0f | %.0f | %.1f | %d | %d | %s | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f |\n",
		s.o.scoreRate, float64(s.sent)/wall, float64(s.maxLag.Microseconds())/1000, len(s.lat), len(s.freshLat), strings.Join(append(other, ""), " ")+"-",
		quantile(s.lat, 0.5), quantile(s.lat, 0.99), quantile(s.lat, 1), quantile(all, 0.5), quantile(all, 0.99), quantile(all, 1))
	for _, err := range s.errs {
		fmt.Fprintf(w, "error: %v\n", err)
	}
	if q, within, n, err := serverSide(lastRegistry, 0.99, 0.002); err == nil && n > 0 {
		fmt.Fprintf(w, "\nserver side (kernelstream_score_duration_seconds{outcome=\"answered\"}, from the request's arrival to its answer, without the client's and the HTTP stack's waits): %d answered, p99 %.2f ms (interpolated in its bucket), %.2f %% within 2 ms\n",
			n, q*1000, within*100)
	}
}

// lastRegistry is the metrics registry of the last consumer startProcessor
// started.
var lastRegistry *prometheus.Registry

// serverSide reads the answered requests' duration histogram from reg: its
// q-quantile (linear within the bucket, as Prometheus' histogram_quantile
// does), the share of requests within limit (also interpolated), and the
// count.
func serverSide(reg *prometheus.Registry, q, limit float64) (quantile, within float64, n uint64, err error) {
	if reg == nil {
		return 0, 0, 0, errors.New("no registry")
	}
	mfs, err := reg.Gather()
	if err != nil {
		return 0, 0, 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != "kernelstream_score_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			answered := false
			for _, l := range m.GetLabel() {
				answered = answered || l.GetName() == "outcome" && l.GetValue() == "answered"
			}
			if !answered {
				continue
			}
			h := m.GetHistogram()
			n = h.GetSampleCount()
			if n == 0 {
				return 0, 0, 0, nil
			}
			rank := q * float64(n)
			lo, below := 0.0, 0.0
			quantile = math.Inf(1)
			for _, b := range h.GetBucket() {
				up, c := b.GetUpperBound(), float64(b.GetCumulativeCount())
				if limit >= lo && limit <= up && c > below {
					within = (below + (c-below)*(limit-lo)/(up-lo)) / float64(n)
				}
				if math.IsInf(quantile, 1) && c >= rank {
					quantile = lo + (up-lo)*(rank-below)/(c-below)
				}
				lo, below = up, c
			}
			if limit > lo {
				within = below / float64(n)
			}
			return quantile, within, n, nil
		}
	}
	return 0, 0, 0, nil
}
