package main

// The scoring load of the decision mode (benche2e -decisions -score-rate
// R): POST /v1/score requests at R per second, open loop, beside the
// decision stream, each for a random user of the stream (every key is
// local: the benchmark runs one member) with -arms random items of the
// click environment as the arms, so that bkb chooses among as many
// candidates as a decision has. Latency is the client's: from sending the
// request to reading the whole answer, over a kept-alive connection. The
// client is a process of its own, as the services that ask a member are:
// in the consumer's process its goroutines waited for the consumer's Ps
// and garbage collections, which a client elsewhere does not. The load
// starts after a fifth of the run, when most users have state; answers
// from a key without state yet ("fresh") are counted apart, as their cost
// is lower (no state to decode).

import (
	"bufio"
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
	"os"
	"os/exec"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernelstream/kernelstream/internal/banditenv"
	"github.com/kernelstream/kernelstream/internal/scoring"
)

// scoreJob is what the client process is asked to do, on its stdin.
type scoreJob struct {
	URL   string   // the endpoint
	Rate  float64  // requests/s
	Arms  int      // arms per request
	Delay float64  // seconds before the first request
	Users []string // the keys to ask about
	Items []string // every item as an arm's JSON object
}

// scoreResult is what it answers, on its stdout, once its stdin closes.
type scoreResult struct {
	Lat      []float64 // ms, answers from a key with state
	FreshLat []float64 // ms, answers from a fresh learner
	Statuses map[int]int
	Errs     []string
	Sent     int
	Wall     float64 // seconds from the first request to the last
	MaxLag   float64 // ms the sender fell behind its schedule, at most
}

// scoreLoad is the parent's side: the client process of a run.
type scoreLoad struct {
	o      options
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	result chan scoreResult
	err    error

	stopOnce sync.Once
	res      *scoreResult // the client's answer, once finish has it
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

// scoreClientEnv, set in this program's environment, makes it the scoring
// client process of a -decisions run (main and TestMain look for it).
const scoreClientEnv = "BENCHE2E_SCORE_CLIENT"

// asScoreClient runs the client process if scoreClientEnv says so.
func asScoreClient() (code int, ok bool) {
	if os.Getenv(scoreClientEnv) == "" {
		return 0, false
	}
	if err := serveScoreClient(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benche2e scoring client:", err)
		return 1, true
	}
	return 0, true
}

// startScoreLoad starts the client process when -score-rate is set (nil
// otherwise); it sends until ctx ends.
func startScoreLoad(ctx context.Context, o options, env *banditenv.Clicks) *scoreLoad {
	if o.scoreRate <= 0 {
		return nil
	}
	job := scoreJob{URL: "http://" + o.serveAddr + scoring.Path, Rate: o.scoreRate, Arms: o.arms, Delay: o.latencySeconds / 5}
	for u := range env.Config().Users {
		job.Users = append(job.Users, env.User(u))
	}
	for i := range max(env.Config().Items, banditenv.DefaultClickItems) {
		x, _ := json.Marshal(env.Item(i))
		job.Items = append(job.Items, fmt.Sprintf(`{"id":%q,"x":%s}`, env.ItemID(i), x))
	}
	s := &scoreLoad{o: o, result: make(chan scoreResult, 1)}
	s.err = s.start(job)
	if s.err == nil {
		go func() {
			<-ctx.Done()
			s.stop()
		}()
	}
	return s
}

// stop closes the client's stdin: its signal to stop sending and answer.
func (s *scoreLoad) stop() { s.stopOnce.Do(func() { s.stdin.Close() }) }

// finish stops the client and waits for its answer (at most 30 s). The
// run calls it before it stops the consumer: a request sent after the
// scoring endpoint closed would fail as refused and count as an error
// (TestDecisionsSmoke met one).
func (s *scoreLoad) finish() {
	if s == nil || s.err != nil || s.res != nil {
		return
	}
	s.stop()
	select {
	case r := <-s.result:
		s.res = &r
		s.cmd.Wait() //nolint:errcheck // its result is in
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill() //nolint:errcheck
		s.err = errors.New("the client process did not answer within 30 s")
	}
}

func (s *scoreLoad) start(job scoreJob) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	s.cmd = exec.Command(self)
	s.cmd.Env = append(os.Environ(), scoreClientEnv+"=1")
	s.cmd.Stderr = os.Stderr
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		return err
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	go func() {
		var r scoreResult
		if err := json.NewDecoder(stdout).Decode(&r); err != nil {
			r.Errs = append(r.Errs, "the client's answer: "+err.Error())
		}
		s.result <- r
	}()
	return json.NewEncoder(s.stdin).Encode(job)
}

// serveScoreClient is the client's side: the job from stdin, requests
// until stdin closes, then the result on stdout.
func serveScoreClient(stdin io.Reader, stdout io.Writer) error {
	in := bufio.NewReader(stdin)
	var job scoreJob
	if err := json.NewDecoder(in).Decode(&job); err != nil {
		return fmt.Errorf("job: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, in) //nolint:errcheck // EOF or an error: either way, stop
		cancel()
	}()
	// The load generator should disturb what it measures as little as it
	// can: its bodies and answers are pooled buffers, and its collector
	// runs about a fifth as often as by default. With the default and a body
	// built anew per request (20 MB/s of garbage), the client's own
	// collections were about 1 ms of its p99 (4.5-5.8 against 3.8-4.5 ms
	// with GOGC=off in the client, 2026-11-27).
	debug.SetGCPercent(500)
	c := &scoreClient{job: job, res: scoreResult{Statuses: map[int]int{}},
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}}}
	c.run(ctx)
	c.wg.Wait()
	return json.NewEncoder(stdout).Encode(&c.res)
}

// buffers holds the client's request bodies and answers.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

type scoreClient struct {
	job    scoreJob
	client *http.Client
	mu     sync.Mutex
	res    scoreResult
	wg     sync.WaitGroup
}

func (c *scoreClient) run(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Duration(c.job.Delay * float64(time.Second))):
	}
	rng := rand.New(rand.NewPCG(7, 33))
	items := len(c.job.Items)
	idx := make([]int, items) // the items, shuffled in part for each request
	for i := range idx {
		idx[i] = i
	}
	users := make([]string, len(c.job.Users))
	for i, u := range c.job.Users {
		users[i] = strconv.Quote(u)
	}
	sem := make(chan struct{}, 64)
	start := time.Now()
	at := func(n int) time.Time { return start.Add(time.Duration(float64(n) / c.job.Rate * float64(time.Second))) }
	for n := 0; ; {
		due := int(time.Since(start).Seconds() * c.job.Rate)
		if due <= n {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(at(n + 1))):
			}
			continue
		}
		if lag := float64(time.Since(at(n+1)).Microseconds()) / 1000; lag > c.res.MaxLag {
			c.res.MaxLag = lag
		}
		for ; n < due; n++ {
			b := buffers.Get().(*bytes.Buffer)
			b.Reset()
			b.WriteString(`{"key":`)
			b.WriteString(users[rng.IntN(len(users))])
			b.WriteString(`,"arms":[`)
			for a := range min(c.job.Arms, items) { // distinct items, as a decision offers
				j := a + rng.IntN(items-a)
				idx[a], idx[j] = idx[j], idx[a]
				if a > 0 {
					b.WriteByte(',')
				}
				b.WriteString(c.job.Items[idx[a]])
			}
			b.WriteString("]}")
			sem <- struct{}{}
			c.wg.Add(1)
			go func() {
				defer func() { buffers.Put(b); <-sem; c.wg.Done() }()
				c.one(ctx, b.Bytes())
			}()
		}
		c.mu.Lock()
		c.res.Sent, c.res.Wall = n, time.Since(start).Seconds()
		c.mu.Unlock()
	}
}

// one sends a request and records its latency; requests cut short by the
// end of the run are not counted.
func (c *scoreClient) one(ctx context.Context, body []byte) {
	t0 := time.Now()
	req, err := http.NewRequest(http.MethodPost, c.job.URL, bytes.NewReader(body))
	if err != nil {
		c.fail(err)
		return
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			c.fail(err)
		}
		return
	}
	buf := buffers.Get().(*bytes.Buffer)
	defer buffers.Put(buf)
	buf.Reset()
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	b := buf.Bytes()
	ms := float64(time.Since(t0).Microseconds()) / 1000
	if err != nil {
		if ctx.Err() == nil {
			c.fail(err)
		}
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res.Statuses[resp.StatusCode]++
	switch {
	case resp.StatusCode != http.StatusOK:
		if len(c.res.Errs) < 3 {
			c.res.Errs = append(c.res.Errs, fmt.Sprintf("status %d: %s", resp.StatusCode, b))
		}
	case bytes.Contains(b, []byte(`"fresh":true`)):
		c.res.FreshLat = append(c.res.FreshLat, ms)
	default:
		c.res.Lat = append(c.res.Lat, ms)
	}
}

func (c *scoreClient) fail(err error) {
	c.mu.Lock()
	if len(c.res.Errs) < 3 {
		c.res.Errs = append(c.res.Errs, err.Error())
	}
	c.mu.Unlock()
}

// report prints the scoring table (nothing without a scoring load).
func (s *scoreLoad) report(w io.Writer) {
	if s == nil {
		return
	}
	fmt.Fprintf(w, "\nPOST /v1/score beside the decisions, from a client process: %d arms per request, %s\n\n", s.o.arms, s.o.serveAddr)
	s.finish()
	if s.err != nil {
		fmt.Fprintf(w, "error: the client process: %v\n", s.err)
		return
	}
	r := *s.res
	sort.Float64s(r.Lat)
	sort.Float64s(r.FreshLat)
	all := append(append([]float64(nil), r.Lat...), r.FreshLat...)
	sort.Float64s(all)
	fmt.Fprintln(w, "| requests/s target | sent/s | sender behind (max ms) | answered with state | fresh | other statuses | p50 / p99 / max, keys with state (ms) | p50 / p99 / max, all (ms) |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---|---|---|")
	other := []string{}
	for code, n := range r.Statuses {
		if code != http.StatusOK {
			other = append(other, fmt.Sprintf("%d: %d", code, n))
		}
	}
	sort.Strings(other)
	fmt.Fprintf(w, "| %.0f | %.0f | %.1f | %d | %d | %s | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f |\n",
		s.o.scoreRate, float64(r.Sent)/r.Wall, r.MaxLag, len(r.Lat), len(r.FreshLat), strings.Join(append(other, ""), " ")+"-",
		quantile(r.Lat, 0.5), quantile(r.Lat, 0.99), quantile(r.Lat, 1), quantile(all, 0.5), quantile(all, 0.99), quantile(all, 1))
	for _, e := range r.Errs {
		fmt.Fprintf(w, "error: %s\n", e)
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
