package main

// The recommendation demo, `demo bandit` (make run-bandit): the
// consumer answers decision records ({"id","arms"}) with one bandit learner
// per user, and a simulated audience (internal/banditenv.Clicks) clicks or
// not on the chosen item; the click comes back a little later as a reward
// record ({"id","reward","arm"}) on the same input topic. The loop is
// closed through the embedded broker: the feeder reads the choices from the
// output topic. Progress shows the click rate rising above what a random
// choice among the candidates would get, next to a non-kernel baseline,
// LinUCB per user, played in-process on the same offers
// (internal/banditenv/linucb.go). The audience (-audience) is by default
// one whose users like the items near an ideal point of their own, which
// no linear score of the features ranks; -audience linear is one whose
// click probability increases with a linear score, where LinUCB is at home.

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
	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// Bandit demo defaults (used unless the flag is given).
const (
	banditDemoModels = "bkb"
	banditDemoWindow = 1000 // decisions of the "recent" click rate
	banditDemoSeed   = 1
	banditDemoPlan   = 1000000  // decisions planned when -records is 0
	banditDemoBase   = "linucb" // the baseline's name in the output
	// The default audience: preferences no linear score of the features
	// ranks, where the kernel has something to buy (docs/bandits.md).
	banditDemoAudience = banditenv.AudienceIdeal
	// The Gaussian kernel's width: about the items' median distance (1.78
	// in [-1,1]^5), where k is 0.5 between typical items. At width 1 (k
	// 0.2 there) BKB clicked at 0.565 instead of 0.606 on the ideal-point
	// audience and 0.593 instead of 0.664 on the linear one over 20000
	// decisions (docs/bandits.md).
	banditDemoSigma = 1.5
)

// banditDemoSpec is the model of algorithm alg in the bandit demo: the
// items' dimension, a Gaussian kernel of width banditDemoSigma and, for the bandit
// learners, xi = 1/2 (rewards in [0,1] are 1/2-sub-Gaussian; Calandriello et al., COLT 2019, Sec. 2)
// and the GP reading lambda = xi^2 (for 0/1 rewards it learns faster at the
// start than the default lambda 1: 0.606 against 0.569 over 20,000
// decisions, the same over the last 1000, docs/bandits.md), a constant radius beta = 1 (the theoretical radii keep exploring for
// thousands of rounds, docs/bandits.md). Other algorithms rank the
// candidates with their defaults; the demo takes the top one.
func banditDemoSpec(alg string, dim int) models.Spec {
	spec := models.Spec{Algorithm: alg, Dim: dim, Kernel: models.KernelSpec{Type: "gaussian", Sigma: banditDemoSigma}, Seed: banditDemoSeed}
	if l, err := models.New(spec, "probe"); err == nil {
		if _, ok := l.(models.Bandit); ok {
			spec.Params = map[string]any{"xi": 0.5, "lambda": 0.25, "beta": 1.0}
			if alg == "bkb" {
				// Without a cap each user's dictionary grows to the ~200
				// distinct items it pulled and a decision (a new candidate
				// set every time) costs ~40x more; 48 keeps the demo near
				// a thousand decisions per second or more (docs/bandits.md
				// has the click rates with and without the cap).
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

	mu     sync.Mutex
	s      *banditenv.ClickStream
	kern   clickTally // the consumer's answers
	base   clickTally // the baseline's choices on the same offers, as they are written
	player *banditenv.LinUCBPlayer
	errs   []error
}

func newBanditLoop(i int, alg string, env *banditenv.Clicks, n int) (*banditLoop, error) {
	player, err := env.NewLinUCBPlayer(banditDemoSeed, banditenv.DefaultLinUCBLambda, banditenv.DefaultLinUCBAlpha)
	if err != nil {
		return nil, err
	}
	l := &banditLoop{alg: alg, input: "decisions", output: "recommendations", spec: banditDemoSpec(alg, env.Config().Dim),
		wake: make(chan struct{}, 1), s: env.Stream(n), kern: newClickTally(n), base: newClickTally(n), player: player}
	if i > 0 {
		name := strings.NewReplacer("+", "p", "/", "_").Replace(alg)
		l.input, l.output = "decisions."+name, "recommendations."+name
	}
	l.model.alg, l.model.topic = alg, l.output
	return l, nil
}

// answer takes one output record: the chosen item is "arm" (bandit
// learners) or the head of "ranking" (regression learners).
func (l *banditLoop) answer(value []byte) {
	var o wire.Output
	if err := json.Unmarshal(value, &o); err != nil {
		l.fail(fmt.Errorf("output %s: %w", value, err))
		return
	}
	item := o.Arm.String()
	if o.Arm == nil && len(o.Ranking) > 0 {
		item = o.Ranking[0].String()
	}
	l.mu.Lock()
	out, known, err := l.s.Choose(o.ID.String(), item)
	if known {
		l.kern.add(out)
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
// done; rate caps the decisions per second (0 = none). The baseline plays
// each decision as it is written.
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
			if o, ok := l.player.Play(&rec); ok {
				l.base.add(o)
			}
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
// overall and over the last window, the baseline's click rate on the
// decisions written so far, the expected rates of random and of the best
// choices on the answered offers, and the consumer's own counters.
func (l *banditLoop) progress(dt float64) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := &l.kern
	decided, rewarded := l.s.Emitted()
	line := fmt.Sprintf("decisions %7d (%5.0f/s)  rewards %7d", decided, float64(k.n-k.prevN)/dt, rewarded)
	if k.n > 0 {
		interval := "-"
		if k.n > k.prevN {
			interval = fmt.Sprintf("%.3f", float64(k.clicks-k.prevClks)/float64(k.n-k.prevN))
		}
		line += fmt.Sprintf("  click rate %.3f  last %d: %.3f  last interval: %s  %s %.3f (last %d: %.3f)  random choice %.3f  best %.3f",
			k.rate(), len(k.recent), k.recentRate(), interval, banditDemoBase, l.base.rate(), len(l.base.recent), l.base.recentRate(),
			k.randSum/float64(k.n), k.bestSum/float64(k.n))
	}
	k.prevN, k.prevClks = k.n, k.clicks
	return line
}

// final summarizes by plan position (deterministic: each user's records,
// hence its learner's choices, do not depend on timing): the first and the
// last window of the answered decisions, for the model and for the
// baseline on the same decisions.
func (l *banditLoop) final() (model, baseline string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	seqs := l.kern.answered()
	if len(seqs) == 0 {
		return "no decision answered", "no decision answered"
	}
	// The baseline played every decision written, the answered ones among them.
	tail := fmt.Sprintf("  random choice %.3f  best %.3f", l.kern.randSum/float64(l.kern.n), l.kern.bestSum/float64(l.kern.n))
	return l.kern.summary(seqs) + tail, l.base.summary(seqs) + tail
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
	env, err := banditenv.NewClicks(banditenv.ClickConfig{Users: users, Audience: d.audience}, banditDemoSeed)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("-audience %s: %w", d.audience, err)
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
		l, err := newBanditLoop(i, a, env, n)
		if err != nil {
			return nil, nil, 0, err
		}
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
	fmt.Fprintf(out, "  audience %s: %d users, %d items with features in [-1,1]^%d; each decision offers %d random items;\n", ec.Audience, ec.Users, ec.Items, ec.Dim, ec.Candidates)
	fmt.Fprintf(out, "  click probability %s; the 1/0 reward comes 1..%d decisions of the user later\n", env.Model(), ec.MaxDelay)
	fmt.Fprintf(out, "  click rate of a random choice among the candidates: %.3f; of the best candidate: %.3f\n", env.RandomRate(), env.BestRate())
	fmt.Fprintf(out, "  baseline %s, in-process on the same offers: LinUCB per user (Li et al., WWW 2010, Algorithm 1), linear in the items' features,\n", banditDemoBase)
	fmt.Fprintf(out, "    lambda %g, alpha %g; its clicks drawn from the same click model with a PRNG of its own, its rewards delayed like the audience's\n", banditenv.DefaultLinUCBLambda, banditenv.DefaultLinUCBAlpha)
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

// banditDemoReport prints each model's final line, then the baseline's on
// the decisions the first model answered (the same figures on another
// model's: the baseline's choices do not depend on the model), and joins
// the errors.
func banditDemoReport(ctx context.Context, out io.Writer, loops []*banditLoop, errs []error) error {
	var baseline string
	for i, l := range loops {
		model, base := l.final()
		fmt.Fprintf(out, "final %-8s %s\n", l.alg, model)
		if i == 0 {
			baseline = base
		}
		for _, err := range l.errs {
			errs = append(errs, fmt.Errorf("%s: %w", l.alg, err))
		}
	}
	fmt.Fprintf(out, "final %-8s %s\n", banditDemoBase, baseline)
	if ctx.Err() != nil {
		fmt.Fprintln(out, "demo: interrupted; state checkpointed")
	}
	return errors.Join(errs...)
}
