package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/kernelstream/kernelstream/config"
	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/feed"
	"github.com/kernelstream/kernelstream/internal/service"
	"github.com/kernelstream/kernelstream/internal/synth"
	"github.com/kernelstream/kernelstream/models"
	"github.com/kernelstream/kernelstream/processor"
)

// DemoPort is the demo broker's default port, so the kcat command it prints
// is the same every time.
const DemoPort = 19092

type demoFlags struct {
	mode     string          // "stream" or "bandit" (the first argument)
	set      map[string]bool // flags given on the command line (the bandit demo has its own defaults)
	port     int
	records  int
	keys     int
	rate     float64
	models   string
	dir      string
	httpAddr string
	logLevel string
	every    time.Duration
	audience string // bandit demo: banditenv.AudienceIdeal or AudienceLinear
}

func (d *demoFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&d.port, "port", DemoPort, "demo broker port on 127.0.0.1 (0 = any free port)")
	fs.IntVar(&d.records, "records", 0, "stop after this many feature records are predicted and learned (bandit demo: decisions answered and rewarded) (0 = run until Ctrl-C)")
	fs.IntVar(&d.keys, "keys", 6, "routing keys of the synthetic stream (bandit demo: users, default 20)")
	fs.Float64Var(&d.rate, "rate", 2000, "feature records per second fed to the broker (bandit demo: decisions per second, default unlimited) (0 = as fast as possible)")
	fs.StringVar(&d.models, "models", "aogd-ald,nons-ald,fogd", "comma-separated algorithms, one consumer group each; the first writes to topic predictions, the others to predictions.<algorithm> (bandit demo: default bkb, topics decisions[.<algorithm>] and recommendations[.<algorithm>])")
	fs.StringVar(&d.dir, "dir", "", "empty or new directory for the demo's checkpoints, kept at exit (default: a temporary directory, removed at exit)")
	fs.StringVar(&d.httpAddr, "http", "127.0.0.1:8080", "HTTP address of the first model's /metrics /healthz /readyz (empty = none)")
	fs.StringVar(&d.logLevel, "log-level", "warn", "log level of the demo's consumers")
	fs.DurationVar(&d.every, "every", 2*time.Second, "progress interval")
	fs.StringVar(&d.audience, "audience", banditDemoAudience, "bandit demo: the simulated audience, ideal (each user clicks on items near an ideal point of its own: no linear score of the features ranks them) or linear (click probability increasing in <user preference, item>)")
}

// Demo topics and stream shape.
const (
	demoInput      = "features"
	demoDLQ        = "dead-letters"
	demoPartitions = 4
	demoDim        = 5
	demoMaxDelay   = 50
)

// demoSpec is the model of algorithm alg in the demo: the synthetic stream's
// dimension, a Gaussian kernel of width 1, the algorithm's default params,
// and the square loss when the algorithm has it (the stream is a regression
// one; some algorithms default to a classification loss).
func demoSpec(alg string) models.Spec {
	spec := models.Spec{Algorithm: alg, Dim: demoDim, Kernel: models.KernelSpec{Type: "gaussian", Sigma: 1}, Seed: 1}
	if a, ok := models.Lookup(alg); ok {
		for _, l := range a.Losses {
			if l == "square" {
				spec.Loss = "square"
			}
		}
	}
	return spec
}

// demoOutputTopic: the first model writes to "predictions".
func demoOutputTopic(i int, alg string) string {
	if i == 0 {
		return "predictions"
	}
	r := strings.NewReplacer("+", "p", "/", "_")
	return "predictions." + r.Replace(alg)
}

type demoModel struct {
	alg   string
	topic string
	mu    sync.Mutex
	p     *processor.Processor
	prev  processor.Stats
}

// set is serve's hook: it publishes the consumer's processor to stats.
func (m *demoModel) set(p *processor.Processor) {
	m.mu.Lock()
	m.p = p
	m.mu.Unlock()
}

func (m *demoModel) stats() (processor.Stats, bool) {
	m.mu.Lock()
	p := m.p
	m.mu.Unlock()
	if p == nil {
		return processor.Stats{}, false
	}
	return p.Stats(), true
}

func runDemo(ctx context.Context, d demoFlags, out io.Writer) error {
	if d.mode == "bandit" {
		return runBanditDemo(ctx, d, out)
	}
	algs := strings.Split(d.models, ",")
	for i, a := range algs {
		algs[i] = strings.TrimSpace(a)
		if err := demoSpec(algs[i]).Validate(); err != nil {
			return fmt.Errorf("-models %s: %w", algs[i], err)
		}
	}
	dir, removeDir, err := demoStateDir(d.dir, "kernelstream-demo-")
	if err != nil {
		return err
	}
	defer removeDir()
	topics := []string{demoInput, demoDLQ}
	ms := make([]*demoModel, len(algs))
	for i, a := range algs {
		ms[i] = &demoModel{alg: a, topic: demoOutputTopic(i, a)}
		topics = append(topics, ms[i].topic)
	}
	b, addr, err := startDemoBroker(ctx, d.port, topics)
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Fprintf(out, "kernelstream demo: embedded Kafka broker on %s, topics %s (%d partitions)\n", addr, strings.Join(topics, ", "), demoPartitions)
	fmt.Fprintf(out, "  stream: synthetic \"mixed\", %d keys, dim %d, labels delayed by 1..%d records, %g records/s\n", d.keys, demoDim, demoMaxDelay, d.rate)
	fmt.Fprintf(out, "  read the predictions with kcat:  kcat -b %s -t %s -C -o beginning -e\n", addr, ms[0].topic)
	fmt.Fprintf(out, "  follow them live:                kcat -b %s -t %s -C -o end\n", addr, ms[0].topic)
	if d.httpAddr != "" {
		if d.httpAddr, err = resolveDemoHTTP(d.httpAddr); err != nil {
			return err
		}
		fmt.Fprintf(out, "  metrics of %s: http://%s/metrics  (also /healthz, /readyz)\n", algs[0], d.httpAddr)
	}
	if d.records > 0 {
		fmt.Fprintf(out, "  stops after %d feature records; Ctrl-C stops earlier\n", d.records)
	} else {
		fmt.Fprintln(out, "  Ctrl-C stops (checkpoint, leave the group, exit)")
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	logger := zerolog.New(service.ConsoleWriter(out)).Level(parseLevel(d.logLevel)).With().Timestamp().Logger()
	var wg sync.WaitGroup
	errs := make([]error, len(ms)+1)
	for i, m := range ms {
		cfg, err := demoConsumerConfig(i, "demo-", m.alg, addr, demoInput, m.topic, demoSpec(m.alg), dir, d.httpAddr, nil)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = service.Serve(runCtx, cfg, logger.With().Str("model", m.alg).Logger(), m.set)
			if errs[i] != nil {
				cancel()
			}
		}()
	}

	// The feeder: the same code path as cmd/produce.
	src, err := synth.New("mixed", synth.Options{Keys: d.keys, Dim: demoDim, Seed: 1})
	if err != nil {
		return err
	}
	f, err := feed.New(src, feed.Options{Labels: "delayed", MaxDelay: demoMaxDelay, Seed: 1, N: d.records})
	if err != nil {
		return err
	}
	var produced sync.Mutex
	written := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Rate counts feature records; each has a label record too.
		_, err := feed.Produce(runCtx, f, feed.Target{Brokers: []string{addr}, Topic: demoInput}, feed.ProduceOptions{
			Rate:     2 * d.rate,
			Progress: func(n int) { produced.Lock(); written = n; produced.Unlock() },
		})
		if err != nil && !errors.Is(err, context.Canceled) {
			errs[len(ms)] = err
			cancel()
		}
	}()

	start := time.Now()
	lastWritten := 0
	demoProgress(runCtx, d.every, start, func(now time.Time, dt float64) bool {
		produced.Lock()
		w := written
		produced.Unlock()
		fmt.Fprintf(out, "[%5.0fs] produced %d records (%.0f/s)\n", now.Sub(start).Seconds(), w, float64(w-lastWritten)/dt)
		done := d.records > 0
		for _, m := range ms {
			s, ok := m.stats()
			if !ok {
				fmt.Fprintf(out, "  %-14s starting\n", m.alg)
				done = false
				continue
			}
			fmt.Fprintf(out, "  %-14s %s\n", m.alg, progressLine(s, m.prev, dt))
			m.prev = s
			if s.Predictions < int64(d.records) || s.Updates < int64(d.records) {
				done = false
			}
		}
		lastWritten = w
		if done {
			fmt.Fprintf(out, "demo: all %d records predicted and learned by every model; stopping\n", d.records)
		}
		return done
	})
	cancel()
	wg.Wait()
	for _, m := range ms {
		if s, ok := m.stats(); ok {
			fmt.Fprintf(out, "final %-14s %s\n", m.alg, progressLine(s, processor.Stats{}, time.Since(start).Seconds()))
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(out, "demo: interrupted; state checkpointed")
	}
	return errors.Join(errs...)
}

// demoStateDir returns the directory of the demo's checkpoints and what
// removes it at exit: dir when given (it must be empty or new: the demo's
// broker starts empty every run, so checkpoints of an earlier run would point
// at offsets that no longer exist), else a new temporary directory named
// from prefix, removed at exit.
func demoStateDir(dir, prefix string) (string, func(), error) {
	if dir != "" {
		if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
			return "", nil, fmt.Errorf("-dir %s is not empty: the demo's broker starts empty, so give a new directory", dir)
		}
		return dir, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

// startDemoBroker starts the demo's embedded broker on port and creates the
// topics, each with demoPartitions partitions; it returns the broker (the
// caller closes it) and its address.
func startDemoBroker(ctx context.Context, port int, topics []string) (*broker.Broker, string, error) {
	b, err := broker.Start(broker.Options{Port: port})
	if err != nil {
		return nil, "", fmt.Errorf("%w (is another demo running? try -port 0)", err)
	}
	if err := b.CreateTopics(ctx, demoPartitions, topics...); err != nil {
		b.Close()
		return nil, "", err
	}
	return b, b.Addrs()[0], nil
}

// resolveDemoHTTP resolves port 0 of the -http address now, so that the
// printed URL is the real one.
func resolveDemoHTTP(addr string) (string, error) {
	if _, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return "", fmt.Errorf("-http: %w", err)
		}
		addr = ln.Addr().String()
		ln.Close()
	}
	return addr, nil
}

// demoConsumerConfig is the validated configuration of the demo's i-th
// consumer (group groupPrefix+alg): short session timeouts, a checkpoint a
// second in its own subdirectory of dir, and the HTTP server (httpAddr) on
// the first consumer only. tune, if not nil, adjusts it before validation.
func demoConsumerConfig(i int, groupPrefix, alg, addr, input, output string, spec models.Spec, dir, httpAddr string, tune func(*config.Config)) (config.Config, error) {
	cfg := config.Default()
	cfg.Kafka.Brokers = []string{addr}
	cfg.Kafka.Group = groupPrefix + alg
	cfg.Kafka.InputTopic, cfg.Kafka.OutputTopic, cfg.Kafka.DLQTopic = input, output, demoDLQ
	cfg.Kafka.SessionTimeout, cfg.Kafka.HeartbeatInterval = 3*time.Second, 500*time.Millisecond
	cfg.Kafka.InstanceID = "demo"
	cfg.Model = spec
	cfg.Checkpoint.Dir = fmt.Sprintf("%s/%d-%s", dir, i, strings.ReplaceAll(alg, "+", "p"))
	cfg.Checkpoint.Interval = time.Second
	cfg.Shutdown.Grace = 10 * time.Second
	cfg.HTTP.Addr = ""
	if i == 0 {
		cfg.HTTP.Addr = httpAddr
	}
	if tune != nil {
		tune(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		return config.Config{}, err
	}
	return cfg, nil
}

// demoProgress calls report every interval until ctx ends or report returns
// true (the demo reached its target); dt is the time since the previous call
// (since start for the first).
func demoProgress(ctx context.Context, every time.Duration, start time.Time, report func(now time.Time, dt float64) (done bool)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	last := start
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		dt := now.Sub(last).Seconds()
		last = now
		if report(now, dt) {
			return
		}
	}
}

// progressLine: records/s over the interval, counts, progressive loss (since
// the start) and the loss over the last interval alone.
func progressLine(s, prev processor.Stats, dt float64) string {
	var recs, prevRecs int64
	for _, n := range s.Records {
		recs += n
	}
	for _, n := range prev.Records {
		prevRecs += n
	}
	var dead int64
	for _, n := range s.DeadLetters {
		dead += n
	}
	recent := "-"
	if dc := s.LossCount - prev.LossCount; dc > 0 {
		recent = fmt.Sprintf("%.5f", (s.LossSum-prev.LossSum)/float64(dc))
	}
	return fmt.Sprintf("records %8d (%6.0f/s)  predictions %8d  updates %8d  progressive loss %.5f  (last interval %s)  pending %5d  dead %d",
		recs, float64(recs-prevRecs)/dt, s.Predictions, s.Updates, s.ProgressiveLoss, recent, s.Pending, dead)
}

func parseLevel(s string) zerolog.Level {
	l, err := zerolog.ParseLevel(s)
	if err != nil {
		return zerolog.WarnLevel
	}
	return l
}
