package main

// The recommendation demo, `demo bandit` (make run-bandit): the
// consumer answers decision records ({"id","arms"}) with one bandit learner
// per user, and a simulated audience (internal/banditenv.Clicks) clicks or
// not on the chosen item; the click comes back a little later as a reward
// record ({"id","reward","arm"}) on the same input topic. The loop is
// closed through the embedded broker: the feeder reads the choices from the
// output topic. Progress shows the click rate rising above what a random
// choice among the candidates would get.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/config"
	"github.com/kernelstream/kernelstream/internal/banditenv"
	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/feed"
	"github.com/kernelstream/kernelstream/internal/service"
	"github.com/kernelstream/kernelstream/models"
)

// Bandit demo defaults (used unless the flag is given).
const (
	banditDemoModels = "bkb"
	banditDemoWindow = 1000 // decisions of the "recent" click rate
	banditDemoSeed   = 1
	banditDemoPlan   = 1000000 // decisions planned when -records is 0
)

// banditDemoSpec is the model of algorithm alg in the bandit demo: the
// items' dimension, a Gaussian kernel of width 1 and, for the bandit
// learners, xi = 1/2 (rewards in [0,1] are 1/2-sub-Gaussian; Calandriello et al., COLT 2019, Sec. 2),
// a constant radius beta = 1 (the theoretical radii keep exploring for
// thousands of rounds, docs/bandits.md). Other algorithms rank the
// candidates with their defaults; the demo takes the top one.
func banditDemoSpec(alg string, dim int) models.Spec {
	spec := models.Spec{Algorithm: alg, Dim: dim, Kernel: models.KernelSpec{Type: "gaussian", Sigma: 1}, Seed: banditDemoSeed}
	if l, err := models.New(spec, "probe"); err == nil {
		if _, ok := l.(models.Bandit); ok {
			spec.Params = map[string]any{"xi": 0.5, "beta": 1.0}
			if alg == "bkb" {
				// Without a cap each user's dictionary grows to the ~200
				// distinct items it pulled and a decision (a new candidate
				// set every time) costs ~40x more; 48 keeps the demo at
				// thousands of decisions per second for a click rate 0.60
				// instead of 0.66 after 12000 decisions (docs/bandits.md).
				spec.Params["max_budget"] = 48
			}
			return spec
		}
	}
	return demoSpecDim(alg, dim)
}

// demoSpecDim is demoSpec with another dimension.
func demoSpecDim(alg string, dim int) models.Spec {
	s := demoSpec(alg)
	s.Dim = dim
	return s
}

// banditLoop is one model's closed loop: decisions and rewards go to its
// input topic, its choices come back on its output topic.
type banditLoop struct {
	alg, input, output string
	spec               models.Spec
	model              demoModel
	wake               chan struct{}

	mu       sync.Mutex
	s        *banditenv.ClickStream
	n        int       // decisions answered
	clicks   int       // clicks among them
	probSum  float64   // expected clicks of the choices made
	randSum  float64   // expected clicks of random choices on the same offers
	bestSum  float64   // expected clicks of the best candidates
	recent   []bool    // the last banditDemoWindow clicks, in answer order (ring)
	bySeq    []int8    // click per plan position: -1 unknown, 0, 1
	probSeq  []float64 // click probability of the choice, per plan position
	prevN    int
	prevClks int
	errs     []error
}

func newBanditLoop(i int, alg string, env *banditenv.Clicks, n int) *banditLoop {
	l := &banditLoop{alg: alg, input: "decisions", output: "recommendations", spec: banditDemoSpec(alg, env.Config().Dim),
		wake: make(chan struct{}, 1), s: env.Stream(n), bySeq: make([]int8, n), probSeq: make([]float64, n)}
	if i > 0 {
		name := strings.NewReplacer("+", "p", "/", "_").Replace(alg)
		l.input, l.output = "decisions."+name, "recommendations."+name
	}
	l.model.alg, l.model.topic = alg, l.output
	for k := range l.bySeq {
		l.bySeq[k] = -1
	}
	return l
}

// answer takes one output record: the chosen item is "arm" (bandit
// learners) or the head of "ranking" (regression learners).
func (l *banditLoop) answer(value []byte) {
	var o struct {
		ID      string   `json:"id"`
		Arm     string   `json:"arm"`
		Ranking []string `json:"ranking"`
	}
	if err := json.Unmarshal(value, &o); err != nil {
		l.fail(fmt.Errorf("output %s: %w", value, err))
		return
	}
	item := o.Arm
	if item == "" && len(o.Ranking) > 0 {
		item = o.Ranking[0]
	}
	l.mu.Lock()
	out, known, err := l.s.Choose(o.ID, item)
	if known {
		l.n++
		c := int8(0)
		if out.Click {
			l.clicks++
			c = 1
		}
		l.probSum += out.Prob
		l.randSum += out.Random
		l.bestSum += out.Best
		if len(l.recent) < banditDemoWindow {
			l.recent = append(l.recent, out.Click)
		} else {
			l.recent[l.n%banditDemoWindow] = out.Click
		}
		l.bySeq[out.Seq], l.probSeq[out.Seq] = c, out.Prob
	}
	l.mu.Unlock()
	if err != nil {
		l.fail(err)
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *banditLoop) fail(err error) {
	l.mu.Lock()
	if len(l.errs) < 5 {
		l.errs = append(l.errs, err)
	}
	l.mu.Unlock()
}

// read follows the output topic from its start.
func (l *banditLoop) read(ctx context.Context, addr string) {
	if err := broker.Follow(ctx, []string{addr}, l.output, demoPartitions, 50*time.Millisecond, func(m kafka.Message) { l.answer(m.Value) }); err != nil {
		l.fail(err)
	}
}

// feed writes every record that can be written (decisions, and the rewards
// of answered decisions), waits for answers, and again, until the stream is
// done; rate caps the decisions per second (0 = none).
func (l *banditLoop) feed(ctx context.Context, addr string, rate float64) error {
	w := feed.NewWriter(feed.Target{Brokers: []string{addr}}, l.input)
	defer w.Close()
	start := time.Now()
	var rec banditenv.ClickRecord
	var msgs []kafka.Message
	for {
		l.mu.Lock()
		decided, _ := l.s.Emitted()
		limit := 1000
		if rate > 0 {
			limit = min(limit, max(int(time.Since(start).Seconds()*rate)-decided, 0))
		}
		msgs = msgs[:0]
		nDec := 0
		// A decision past the rate's allowance waits (and the rewards behind it).
		for limit > 0 && len(msgs) < 1000 && l.s.Next(&rec) {
			msgs = append(msgs, kafka.Message{Key: append([]byte(nil), rec.Key...), Value: append([]byte(nil), rec.Value...)})
			if !rec.Reward {
				if nDec++; nDec >= limit {
					break
				}
			}
		}
		done := l.s.Done()
		l.mu.Unlock()
		if len(msgs) > 0 {
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				return fmt.Errorf("write %s: %w", l.input, err)
			}
			continue
		}
		if done {
			return nil
		}
		wait := time.Second
		if rate > 0 && limit == 0 {
			wait = time.Duration(float64(time.Second) / rate)
		}
		select {
		case <-l.wake:
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// progress is the live line: decisions and their rate, the click rate
// overall and over the last window, the baselines on the same offers, and
// the consumer's own counters.
func (l *banditLoop) progress(dt float64) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	decided, rewarded := l.s.Emitted()
	line := fmt.Sprintf("decisions %7d (%5.0f/s)  rewards %7d", decided, float64(l.n-l.prevN)/dt, rewarded)
	if l.n > 0 {
		rc := 0
		for _, c := range l.recent {
			if c {
				rc++
			}
		}
		interval := "-"
		if l.n > l.prevN {
			interval = fmt.Sprintf("%.3f", float64(l.clicks-l.prevClks)/float64(l.n-l.prevN))
		}
		line += fmt.Sprintf("  click rate %.3f  last %d: %.3f  last interval: %s  random choice %.3f  best %.3f",
			float64(l.clicks)/float64(l.n), len(l.recent), float64(rc)/float64(len(l.recent)), interval,
			l.randSum/float64(l.n), l.bestSum/float64(l.n))
	}
	l.prevN, l.prevClks = l.n, l.clicks
	return line
}

// final summarizes by plan position (deterministic: each user's records,
// hence its learner's choices, do not depend on timing): the first and the
// last window of the answered decisions.
func (l *banditLoop) final() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var seqs []int
	for k, c := range l.bySeq {
		if c >= 0 {
			seqs = append(seqs, k)
		}
	}
	if len(seqs) == 0 {
		return "no decision answered"
	}
	w := min(banditDemoWindow, max(len(seqs)/3, 1))
	rateOf := func(ks []int) (clicks, expected float64) {
		for _, k := range ks {
			clicks += float64(l.bySeq[k])
			expected += l.probSeq[k]
		}
		return clicks / float64(len(ks)), expected / float64(len(ks))
	}
	fc, fe := rateOf(seqs[:w])
	lc, le := rateOf(seqs[len(seqs)-w:])
	return fmt.Sprintf("%d decisions  click rate %.3f  first %d decisions: %.3f (expected %.3f)  last %d decisions: %.3f (expected %.3f)  random choice %.3f  best %.3f",
		len(seqs), float64(l.clicks)/float64(l.n), w, fc, fe, w, lc, le, l.randSum/float64(l.n), l.bestSum/float64(l.n))
}

func runBanditDemo(ctx context.Context, d demoFlags, out io.Writer) error {
	env, loops, rate, err := banditDemoSetup(d)
	if err != nil {
		return err
	}
	dir, removeDir, err := demoStateDir(d.dir, "kernelstream-bandit-demo-")
	if err != nil {
		return err
	}
	defer removeDir()
	topics := []string{demoDLQ}
	for _, l := range loops {
		topics = append(topics, l.input, l.output)
	}
	b, addr, err := startDemoBroker(ctx, d.port, topics)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := banditDemoIntro(out, &d, env, loops, addr, topics); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait, errs, err := startBanditLoops(runCtx, cancel, out, d, loops, addr, dir, rate)
	if err != nil {
		return err
	}
	loopErrs := banditDemoProgress(runCtx, cancel, out, d, loops)
	cancel()
	wait()
	return banditDemoReport(ctx, out, loops, append(errs(), loopErrs...))
}

// banditDemoSetup builds the click environment and one closed loop per
// model of -models, and decides the feed rate and the decisions planned.
func banditDemoSetup(d demoFlags) (*banditenv.Clicks, []*banditLoop, float64, error) {
	algs := d.models
	if !d.set["models"] {
		algs = banditDemoModels
	}
	users := 0 // the environment's default
	if d.set["keys"] {
		users = d.keys
	}
	env, err := banditenv.NewClicks(banditenv.ClickConfig{Users: users}, banditDemoSeed)
	if err != nil {
		return nil, nil, 0, err
	}
	rate := d.rate
	if !d.set["rate"] {
		// As fast as the loop goes: at a capped rate the feeder writes
		// tiny batches and the consumer's fetches were seen timing out
		// against the embedded broker (throughput fell to ~100/s).
		rate = 0
	}
	n := d.records
	if n <= 0 {
		n = banditDemoPlan
	}
	var loops []*banditLoop
	for i, a := range strings.Split(algs, ",") {
		a = strings.TrimSpace(a)
		l := newBanditLoop(i, a, env, n)
		if err := l.spec.Validate(); err != nil {
			return nil, nil, 0, fmt.Errorf("-models %s: %w", a, err)
		}
		loops = append(loops, l)
	}
	return env, loops, rate, nil
}

// banditDemoIntro prints what the demo runs and how to look at it (and
// resolves the HTTP address's port 0 in d).
func banditDemoIntro(out io.Writer, d *demoFlags, env *banditenv.Clicks, loops []*banditLoop, addr string, topics []string) error {
	ec := env.Config()
	n := d.records
	if n <= 0 {
		n = banditDemoPlan
	}
	var err error
	fmt.Fprintf(out, "kernelstream bandit demo: embedded Kafka broker on %s, topics %s (%d partitions)\n", addr, strings.Join(topics, ", "), demoPartitions)
	fmt.Fprintf(out, "  audience: %d users, %d items with features in [-1,1]^%d; each decision offers %d random items;\n", ec.Users, ec.Items, ec.Dim, ec.Candidates)
	fmt.Fprintf(out, "  click probability sigmoid(%g + %g <user preference, item>); the 1/0 reward comes 1..%d decisions of the user later\n", ec.Bias, ec.Scale, ec.MaxDelay)
	fmt.Fprintf(out, "  click rate of a random choice among the candidates: %.3f; of the best candidate: %.3f\n", env.RandomRate(), env.BestRate())
	for _, l := range loops {
		js, _ := json.Marshal(l.spec)
		fmt.Fprintf(out, "  %s: one learner per user %s, input %s, output %s\n", l.alg, js, l.input, l.output)
	}
	fmt.Fprintf(out, "  read the decisions with kcat:  kcat -b %s -t %s -C -o beginning -e\n", addr, loops[0].output)
	if d.httpAddr != "" {
		if d.httpAddr, err = resolveDemoHTTP(d.httpAddr); err != nil {
			return err
		}
		fmt.Fprintf(out, "  metrics of %s: http://%s/metrics  (also /healthz, /readyz)\n", loops[0].alg, d.httpAddr)
	}
	if d.records > 0 {
		fmt.Fprintf(out, "  stops after %d decisions and their rewards; Ctrl-C stops earlier\n", d.records)
	} else {
		fmt.Fprintf(out, "  Ctrl-C stops (checkpoint, leave the group, exit); at most %d decisions\n", n)
	}
	return nil
}

// startBanditLoops starts, per model, the consumer, the reader of its
// decisions and the feeder of its decision records; wait waits for them
// all, errs returns what they returned.
func startBanditLoops(runCtx context.Context, cancel context.CancelFunc, out io.Writer, d demoFlags, loops []*banditLoop, addr, dir string, rate float64) (wait func(), errs func() []error, err error) {
	logger := zerolog.New(service.ConsoleWriter(out)).Level(parseLevel(d.logLevel)).With().Timestamp().Logger()
	var wg sync.WaitGroup
	results := make([]error, 2*len(loops))
	for i, l := range loops {
		cfg, err := demoConsumerConfig(i, "bandit-demo-", l.alg, addr, l.input, l.output, l.spec, dir, d.httpAddr, func(cfg *config.Config) {
			// The closed loop leaves the input idle while the feeder waits
			// for choices; an idle fetch that overruns kafka-go's deadline
			// under load is retried after a backoff, which this keeps short.
			cfg.Kafka.RetryBackoffMax = 200 * time.Millisecond
		})
		if err != nil {
			return nil, nil, err
		}
		wg.Add(3)
		go func() {
			defer wg.Done()
			results[2*i] = service.Serve(runCtx, cfg, logger.With().Str("model", l.alg).Logger(), l.model.set)
			if results[2*i] != nil {
				cancel()
			}
		}()
		go func() {
			defer wg.Done()
			l.read(runCtx, addr)
		}()
		go func() {
			defer wg.Done()
			if err := l.feed(runCtx, addr, rate); err != nil && !errors.Is(err, context.Canceled) {
				results[2*i+1] = err
				cancel()
			}
		}()
	}
	return wg.Wait, func() []error { return results }, nil
}

// banditDemoProgress prints the progress every -every until the planned
// decisions are done (or ctx ends), and collects the loops' errors.
func banditDemoProgress(runCtx context.Context, cancel context.CancelFunc, out io.Writer, d demoFlags, loops []*banditLoop) []error {
	var loopErrs []error
	start := time.Now()
	demoProgress(runCtx, d.every, start, func(now time.Time, dt float64) bool {
		fmt.Fprintf(out, "[%5.0fs]\n", now.Sub(start).Seconds())
		done := d.records > 0
		for _, l := range loops {
			fmt.Fprintf(out, "  %-8s %s\n", l.alg, l.progress(dt))
			s, ok := l.model.stats()
			if !ok {
				fmt.Fprintf(out, "  %-8s consumer starting\n", "")
				done = false
				continue
			}
			var dead int64
			for _, v := range s.DeadLetters {
				dead += v
			}
			mean := 0.0
			if s.Rewards > 0 {
				mean = s.RewardSum / float64(s.Rewards)
			}
			fmt.Fprintf(out, "  %-8s consumer: decisions %d  rewards learned %d (mean reward %.3f)  pending %d  dead %d\n", "", s.Decisions, s.Updates, mean, s.Pending, dead)
			l.mu.Lock()
			streamDone := l.s.Done()
			for _, err := range l.errs {
				loopErrs = append(loopErrs, fmt.Errorf("%s: %w", l.alg, err))
			}
			failed := len(l.errs) > 0
			l.errs = nil
			l.mu.Unlock()
			if failed {
				cancel()
			}
			if !streamDone || s.Decisions < int64(d.records) || s.Updates < int64(d.records) {
				done = false
			}
		}
		if done {
			fmt.Fprintf(out, "demo: all %d decisions answered and their rewards learned by every model; stopping\n", d.records)
		}
		return done
	})
	return loopErrs
}

// banditDemoReport prints each model's final line and joins the errors.
func banditDemoReport(ctx context.Context, out io.Writer, loops []*banditLoop, errs []error) error {
	for _, l := range loops {
		fmt.Fprintf(out, "final %-8s %s\n", l.alg, l.final())
		for _, err := range l.errs {
			errs = append(errs, fmt.Errorf("%s: %w", l.alg, err))
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(out, "demo: interrupted; state checkpointed")
	}
	return errors.Join(errs...)
}
