// Command benche2e measures the whole pipeline on an embedded broker (make
// bench-e2e): records/s and input-to-prediction latency of kernelstream with
// a cheap learner, next to two bare read-and-write relays, one on kafka-go and
// one on franz-go, on the same broker, topics and records.
//
//	benche2e [-n 200000] [-partitions 4] [-keys 64] [-rate 5000] [-latency-seconds 10] [-model SPEC]
//	benche2e -decisions [-users 10000] [-arms 100] [-rate 2000] [-latency-seconds 30] [-model SPEC]
//
// Throughput: N records are loaded first, then the pipeline drains them; the
// rate is (outputs - 1) / (last output timestamp - first output timestamp),
// so group join and start-up are excluded alike for every pipeline.
// Latency: with the pipeline running and ready, records are produced at
// -rate for -latency-seconds; latency = output Kafka timestamp - input Kafka
// timestamp of the same id (both set by kafka-go writers on this machine).
//
// -decisions measures bandit decisions instead (make bench-decisions; see
// decisions.go): decision and reward records of -users users at -rate
// decisions/s, latency of each decision's answer, achieved rates and CPU.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/kernelstream/kernelstream/internal/buildinfo"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kernelstream/kernelstream/config"
	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/cputime"
	"github.com/kernelstream/kernelstream/internal/feed"
	"github.com/kernelstream/kernelstream/internal/scoring"
	"github.com/kernelstream/kernelstream/internal/synth"
	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
	"github.com/kernelstream/kernelstream/processor"
)

func main() {
	if code, ok := asChildBroker(); ok {
		os.Exit(code)
	}
	if code, ok := asScoreClient(); ok {
		os.Exit(code)
	}
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benche2e:", err)
		os.Exit(1)
	}
}

// decisionsModel is the learner of -decisions: BKB with its defaults
// (docs/bandits.md) at the bench target's dimension.
const decisionsModel = `{"algorithm":"bkb","dim":16}`

type options struct {
	n, partitions, keys int
	rounds              int
	rate                float64
	latencySeconds      float64
	spec                models.Spec
	dir                 string
	skipRelay           bool
	skipProcessor       bool
	cpMaxRecords        int
	cpInterval          time.Duration
	memTableMiB         int
	decisions           bool
	users, arms         int
	decimals            int
	model               string // the -model text as given
	visible             bool
	stages              string // -decisions: CSV prefix of the stage timestamps
	trace               string // -decisions: runtime/trace file of the paced run
	memProfile          string
	brokerMemory        bool // -decisions: the embedded broker's log in memory (before 2026-11-27's perf33)
	brokerInProcess     bool // the embedded broker in this process (before 2026-11-27: -decisions; before that evening: throughput)
	brokers             string
	feedEvery           time.Duration
	scoreRate           float64 // -decisions: POST /v1/score requests/s beside the stream (score.go)
	serveAddr           string  // the scoring endpoint's address when scoreRate > 0
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("benche2e", flag.ContinueOnError)
	var o options
	fs.IntVar(&o.n, "n", 200000, "records for the throughput run")
	fs.IntVar(&o.rounds, "rounds", 5, "throughput drains per pipeline, the pipelines alternating; the median is reported")
	fs.IntVar(&o.partitions, "partitions", 4, "partitions of every topic")
	fs.IntVar(&o.keys, "keys", 64, "routing keys")
	fs.Float64Var(&o.rate, "rate", 5000, "records/s of the latency run")
	fs.Float64Var(&o.latencySeconds, "latency-seconds", 10, "duration of the latency run")
	fs.BoolVar(&o.visible, "visible", false, "latency until a read_committed consumer receives the output (with output.delivery exactly_once, the checkpoint's commit), not until its timestamp")
	spec := fs.String("model", `{"algorithm":"aogd-ald","dim":5,"kernel":{"type":"gaussian","sigma":1},"params":{"max_budget":16},"seed":1}`, "model spec (JSON or @file)")
	fs.StringVar(&o.dir, "dir", "", "checkpoint directory (default: a temporary one)")
	fs.BoolVar(&o.skipRelay, "skip-relay", false, "measure kernelstream only (neither relay)")
	fs.BoolVar(&o.skipProcessor, "skip-processor", false, "measure the relays only")
	fs.IntVar(&o.cpMaxRecords, "checkpoint-max-records", config.Default().Checkpoint.MaxRecords, "kernelstream's checkpoint.max_records")
	fs.DurationVar(&o.cpInterval, "checkpoint-interval", config.Default().Checkpoint.Interval, "kernelstream's checkpoint.interval")
	fs.IntVar(&o.memTableMiB, "memtable-mib", config.Default().Checkpoint.MemTableMiB, "kernelstream's checkpoint.memtable_mib")
	fs.BoolVar(&o.decisions, "decisions", false, "measure bandit decisions (defaults: -rate 2000, -latency-seconds 30, -model "+decisionsModel+")")
	fs.IntVar(&o.users, "users", 10000, "-decisions: users (routing keys)")
	fs.IntVar(&o.arms, "arms", 100, "-decisions: candidates per decision (their dimension is the model's)")
	fs.StringVar(&o.trace, "trace", "", "-decisions: write a runtime/trace of the paced run to this file (go tool trace)")
	fs.StringVar(&o.stages, "stages", "", "-decisions: write each decision's stage timestamps, the checkpoints' steps, the feeder's writes and scheduling stalls to PREFIX.{dec,ckpt,feed,stall}.csv")
	fs.IntVar(&o.decimals, "decimals", 4, "-decisions: decimals of the candidates' features in the records")
	fs.Float64Var(&o.scoreRate, "score-rate", 0, "-decisions: also send this many POST /v1/score requests/s (arms as a decision's, random users) and print their latency")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of kernelstream's first throughput drain (the broker too with -broker-inprocess) to this file the kafka-go relay's to FILE.relay and the franz-go relay's to FILE.franz (-decisions: of the paced run)")
	fs.StringVar(&o.memProfile, "memprofile", "", "-decisions: write a heap profile (allocations since the start included) at the end of the paced run")
	fs.DurationVar(&o.feedEvery, "feed-every", 3*time.Millisecond, "-decisions: the feeder writes what came due every this often (0: each decision as it comes due)")
	fs.BoolVar(&o.brokerMemory, "broker-memory", false, "-decisions: keep the embedded broker's log in memory, as before 2026-11-27 (its segments grow by copying, stalling the broker)")
	fs.BoolVar(&o.brokerInProcess, "broker-inprocess", false, "run the embedded broker in this process, as before 2026-11-27 (-decisions) and before that evening (throughput): its garbage and its request loop then share the pipelines' heap and scheduler")
	fs.StringVar(&o.brokers, "brokers", "", "-decisions: host:port,... of a Kafka cluster to use instead of the embedded broker (the topics are created if missing)")
	version := fs.Bool("version", false, "print the build and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version {
		fmt.Println("benche2e", buildinfo.Get())
		return nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.decisions {
		// The bench target of issue 13 unless told otherwise.
		if !set["rate"] {
			o.rate = 2000
		}
		if !set["latency-seconds"] {
			o.latencySeconds = 30
		}
		if !set["model"] {
			*spec = decisionsModel
		}
	}
	var err error
	o.model = *spec
	if o.spec, err = models.ParseSpec(*spec); err != nil {
		return err
	}
	if err := o.spec.Validate(); err != nil {
		return err
	}
	if o.dir == "" {
		tmp, err := os.MkdirTemp("", "benche2e-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		o.dir = tmp
	}
	if o.scoreRate > 0 {
		if o.serveAddr, err = freeLocalAddr(); err != nil {
			return err
		}
	}
	ctx := context.Background()
	if o.decisions && (o.brokers != "" || !o.brokerInProcess && !o.brokerMemory) {
		addrs := strings.Split(o.brokers, ",")
		if o.brokers == "" {
			child, err := startChildBroker(filepath.Join(o.dir, "broker"), stderr)
			if err != nil {
				return err
			}
			defer child.stop()
			addrs = child.addrs
		}
		return runDecisions(ctx, addrs, o, *cpuProfile, stdout, stderr)
	}
	if !o.decisions && !o.brokerInProcess {
		child, err := startChildBroker(memoryLog, stderr)
		if err != nil {
			return err
		}
		defer child.stop()
		return runThroughput(ctx, brokerAt(child.addrs), o, *cpuProfile, "embedded kfake broker in its own process", stdout, stderr)
	}
	bo := broker.Options{}
	if o.decisions && !o.brokerMemory {
		// The decisions' input is ~28 MB/s: kfake's in-memory log grows
		// each segment by doubling and copying it, inside the broker's one
		// request loop, which stalled every produce and fetch of the
		// process for 10-235 ms at each doubling (64 MB and more), and the
		// log lived in this process's Go heap (1.5 GB live after 30 s),
		// which no consumer next to a real broker has. On disk, as a real
		// broker keeps it: appended through the page cache, no fsync.
		bo.DataDir = filepath.Join(o.dir, "broker")
	}
	b, err := broker.Start(bo)
	if err != nil {
		return err
	}
	defer b.Close()
	if o.decisions {
		return runDecisions(ctx, b.Addrs(), o, *cpuProfile, stdout, stderr)
	}
	return runThroughput(ctx, brokerAt(b.Addrs()), o, *cpuProfile, "embedded kfake broker in this process", stdout, stderr)
}

// brokerAt is the broker a throughput run drains through: its address, and
// its topics created and deleted through the Kafka protocol, wherever it runs.
type brokerAt []string

func (b brokerAt) Addrs() []string { return b }

func (b brokerAt) CreateTopics(ctx context.Context, partitions int, topics ...string) error {
	return broker.CreateTopics(ctx, b, partitions, topics...)
}

func (b brokerAt) DeleteTopics(ctx context.Context, topics ...string) error {
	return broker.DeleteTopics(ctx, b, topics...)
}

// runThroughput drains each pipeline in turn, then measures its latency at a
// fixed rate, and prints the table and the ratios.
func runThroughput(ctx context.Context, b brokerAt, o options, cpuProfile, where string, stdout, stderr io.Writer) error {

	type row struct {
		name           string
		tput           float64
		cpuPerRecord   float64
		p50, p99, pmax float64
		latN           int
	}
	relayOut, err := relayWriterSettings()
	if err != nil {
		return err
	}
	var rows []row
	// The relays first, kernelstream last (ks): the ratios are
	// kernelstream's to each relay.
	pipelines := []struct {
		name    string
		short   string // the name in the ratio lines
		profile string // the -cpuprofile file's suffix
		skip    bool
		start   func(ctx context.Context, in, out string) (stop func() error, err error)
	}{
		{"kafka-go relay (read, write, no learning)", "kafka-go relay", ".relay", o.skipRelay, func(ctx context.Context, in, out string) (func() error, error) {
			return startRelay(ctx, b.Addrs(), in, out, o.partitions, relayOut)
		}},
		{"franz-go relay (read, write, no learning)", "franz-go relay", ".franz", o.skipRelay, func(ctx context.Context, in, out string) (func() error, error) {
			return startFranzRelay(ctx, b.Addrs(), in, out, o.partitions, relayOut)
		}},
		{fmt.Sprintf("kernelstream (%s, dim %d)", o.spec.Algorithm, o.spec.Dim), "kernelstream", "", o.skipProcessor, func(ctx context.Context, in, out string) (func() error, error) {
			return startProcessor(ctx, b.Addrs(), in, out, o)
		}},
	}
	ks := len(pipelines) - 1
	if o.rounds < 1 {
		return fmt.Errorf("-rounds %d: at least 1", o.rounds)
	}
	// Throughput: the pipelines drain in turn, rounds times, so that a
	// change in the machine's speed (a shared VM's neighbours) falls on
	// all of them; each pipeline's median round is reported.
	tputs := make([][]float64, len(pipelines))
	cpus := make([][]float64, len(pipelines))
	for round := 0; round < o.rounds; round++ {
		// Each round starts one pipeline further on, so that none
		// always drains first or always follows the same one.
		for j := range pipelines {
			i := (round + j) % len(pipelines)
			pl := pipelines[i]
			if pl.skip {
				continue
			}
			fmt.Fprintf(stderr, "== %s, throughput round %d of %d\n", pl.name, round+1, o.rounds)
			profile := ""
			if round == 0 {
				profile = cpuProfile
			}
			tput, cpu, err := drain(ctx, b, o, fmt.Sprintf("%d-%d", i, round), profile, pl.profile, pl.start)
			if err != nil {
				return err
			}
			tputs[i], cpus[i] = append(tputs[i], tput), append(cpus[i], cpu)
			fmt.Fprintf(stderr, "   %d records at %.0f records/s, %.1f CPU-us/record\n", o.n, tput, cpu)
		}
		for i, pl := range pipelines[:ks] {
			if r := len(tputs[ks]) - 1; r == round && len(tputs[i]) == round+1 && tputs[i][r] > 0 {
				fmt.Fprintf(stderr, "   round %d: kernelstream / %s %.2f\n", round+1, pl.short, tputs[ks][r]/tputs[i][r])
			}
		}
	}
	rowOf := map[int]row{} // by pipeline
	for i, pl := range pipelines {
		if pl.skip {
			continue
		}
		r := row{name: pl.name, tput: median(tputs[i]), cpuPerRecord: median(cpus[i])}
		// Latency at a fixed rate, the pipeline warmed up and ready.
		fmt.Fprintf(stderr, "== %s, latency\n", pl.name)
		lIn, lOut := fmt.Sprintf("lat-in-%d", i), fmt.Sprintf("lat-out-%d", i)
		if err := b.CreateTopics(ctx, o.partitions, lIn, lOut, fmt.Sprintf("dlq-%d", i)); err != nil {
			return err
		}
		stop, err := pl.start(ctx, lIn, lOut)
		if err != nil {
			return err
		}
		time.Sleep(500 * time.Millisecond)
		var arrivals func() map[string]time.Time
		if o.visible {
			if arrivals, err = watchArrivals(ctx, b.Addrs(), lOut); err != nil {
				return errors.Join(err, stop())
			}
		}
		nLat := int(o.rate * o.latencySeconds)
		inTimes, err := produce(ctx, b.Addrs(), lIn, o, nLat, o.rate)
		if err != nil {
			return errors.Join(err, stop())
		}
		err = waitCount(ctx, b.Addrs(), lOut, o.partitions, nLat, time.Minute)
		if err := errors.Join(err, stop()); err != nil {
			return err
		}
		msgs, err := broker.ReadAll(ctx, b.Addrs(), lOut)
		if err != nil {
			return err
		}
		lat := latencies(msgs, inTimes)
		if arrivals != nil {
			lat = arrivalLatencies(arrivals(), inTimes)
		}
		r.latN = len(lat)
		r.p50, r.p99, r.pmax = quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 1)
		fmt.Fprintf(stderr, "   latency at %.0f records/s: p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d records)\n", o.rate, r.p50, r.p99, r.pmax, r.latN)
		rows = append(rows, r)
		rowOf[i] = r
	}

	fmt.Fprintf(stdout, "\n%s, %d partitions, %d keys, %d records (throughput, median of %d alternating rounds), %.0f records/s for %.0f s (latency), GOMAXPROCS %d\n\n",
		where, o.partitions, o.keys, o.n, o.rounds, o.rate, o.latencySeconds, runtime.GOMAXPROCS(0))
	fmt.Fprintln(stdout, "| pipeline | records/s | CPU-us/record | p50 latency (ms) | p99 latency (ms) | max latency (ms) |")
	fmt.Fprintln(stdout, "|---|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(stdout, "| %s | %.0f | %.1f | %.1f | %.1f | %.1f |\n", r.name, r.tput, r.cpuPerRecord, r.p50, r.p99, r.pmax)
	}
	k, measured := rowOf[ks]
	sep := "\n"
	for i, pl := range pipelines[:ks] {
		rel, ok := rowOf[i]
		if !measured || !ok {
			continue
		}
		if rel.tput <= 0 || k.tput <= 0 {
			// Every output of the median round bore one millisecond's
			// timestamp: -n is too small to time (kgo stamps records as
			// it buffers them, thousands in a millisecond).
			fmt.Fprintf(stdout, "%skernelstream / %s throughput: n/a (%.0f against %.0f records/s: no output timestamps apart, -n too small)\n", sep, pl.short, k.tput, rel.tput)
			sep = ""
			continue
		}
		var byRound []string
		for r := range tputs[ks] {
			if r < len(tputs[i]) && tputs[i][r] > 0 {
				byRound = append(byRound, fmt.Sprintf("%.2f", tputs[ks][r]/tputs[i][r]))
			}
		}
		// The project's targets (issue 30): 0.9 of the kafka-go relay, 0.4
		// of the franz-go one; the p99 against the kafka-go relay's.
		target, p99Target := " (target >= 0.4)", ""
		if i == 0 {
			target, p99Target = " (target >= 0.9)", " (target: within 1 ms)"
		}
		fmt.Fprintf(stdout, "%skernelstream / %s throughput: %.2f (of the medians; round by round %s)%s; p99 at %.0f records/s %.1f ms against the %s's %.1f%s\n",
			sep, pl.short, k.tput/rel.tput, strings.Join(byRound, ", "), target, o.rate, k.p99, pl.short, rel.p99, p99Target)
		sep = ""
	}
	return nil
}

// drain runs one pipeline over n records produced beforehand into fresh
// topics named by tag, and returns its records/s (first output to last) and
// the process CPU per record (the broker's too when it runs in this
// process, -broker-inprocess), profiled into file+suffix
// when file is set.
func drain(ctx context.Context, b brokerAt, o options, tag, file, suffix string, start func(ctx context.Context, in, out string) (func() error, error)) (tput, cpuPerRecord float64, err error) {
	in, out := "tput-in-"+tag, "tput-out-"+tag
	if err := b.CreateTopics(ctx, o.partitions, in, out, "dlq-"+tag); err != nil {
		return 0, 0, err
	}
	defer func() { // the embedded broker keeps records in memory: give the round's back
		if derr := b.DeleteTopics(ctx, in, out, "dlq-"+tag); err == nil {
			err = derr
		}
	}()
	if _, err := produce(ctx, b.Addrs(), in, o, o.n, 0); err != nil {
		return 0, 0, err
	}
	stopProfile, err := startProfile(file, suffix)
	if err != nil {
		return 0, 0, err
	}
	runtime.GC() // the loading's and the previous round's garbage is not this drain's
	cpu0 := cputime.Process()
	stop, err := start(ctx, in, out)
	if err != nil {
		stopProfile()
		return 0, 0, err
	}
	err = waitCount(ctx, b.Addrs(), out, o.partitions, o.n, 5*time.Minute)
	cpu := cputime.Process() - cpu0
	stopProfile()
	if err := errors.Join(err, stop()); err != nil {
		return 0, 0, err
	}
	msgs, err := broker.ReadAll(ctx, b.Addrs(), out)
	if err != nil {
		return 0, 0, err
	}
	if len(msgs) < o.n {
		return 0, 0, fmt.Errorf("%s: %d of %d records in the output", out, len(msgs), o.n)
	}
	return throughput(msgs), cpu.Seconds() / float64(o.n) * 1e6, nil
}

// median of xs (nearest rank, as quantile).
func median(xs []float64) float64 {
	return quantile(slices.Sorted(slices.Values(xs)), 0.5)
}

// startProfile starts a CPU profile into file+suffix (nothing when file is
// empty); the returned function stops it.
func startProfile(file, suffix string) (func(), error) {
	if file == "" {
		return func() {}, nil
	}
	f, err := os.Create(file + suffix)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// produce writes n records with inline labels to topic and returns each
// id's input timestamp as kafka-go stamped it.
func produce(ctx context.Context, addrs []string, topic string, o options, n int, rate float64) (map[string]time.Time, error) {
	src, err := synth.New("sines", synth.Options{Keys: o.keys, Dim: o.spec.Dim, Seed: 5})
	if err != nil {
		return nil, err
	}
	f, err := feed.New(src, feed.Options{Labels: "inline", N: n})
	if err != nil {
		return nil, err
	}
	_, err = feed.Produce(ctx, f, feed.Target{Brokers: addrs, Topic: topic}, feed.ProduceOptions{Rate: rate})
	if err != nil {
		return nil, err
	}
	// The timestamps the broker stored are the ones that count.
	msgs, err := broker.ReadAll(ctx, addrs, topic)
	if err != nil {
		return nil, err
	}
	times := make(map[string]time.Time, len(msgs))
	for _, m := range msgs {
		times[recordID(m.Value)] = m.Time
	}
	return times, nil
}

// recordID is the id of an output record, or of an input record (the
// relay's output is its input): both carry "id", which is all wire.Output
// needs to find.
func recordID(v []byte) string {
	var o wire.Output
	json.Unmarshal(v, &o) //nolint:errcheck // an id-less record is simply not matched
	return o.ID.String()
}

// waitCount waits until topic holds want messages.
func waitCount(ctx context.Context, addrs []string, topic string, partitions, want int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var sum int64
		for p := 0; p < partitions; p++ {
			c, err := kafka.DialLeader(ctx, "tcp", addrs[0], topic, p)
			if err != nil {
				return err
			}
			end, err := c.ReadLastOffset()
			c.Close()
			if err != nil {
				return err
			}
			sum += end
		}
		if sum >= int64(want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d of %d outputs after %v", topic, sum, want, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func throughput(msgs []kafka.Message) float64 {
	if len(msgs) < 2 {
		return 0
	}
	first, last := msgs[0].Time, msgs[0].Time
	for _, m := range msgs {
		if m.Time.Before(first) {
			first = m.Time
		}
		if m.Time.After(last) {
			last = m.Time
		}
	}
	d := last.Sub(first).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(len(msgs)-1) / d
}

// latencies in milliseconds, one per input id (its first output).
func latencies(out []kafka.Message, in map[string]time.Time) []float64 {
	firstOut := map[string]time.Time{}
	for _, m := range out {
		id := recordID(m.Value)
		if t, ok := firstOut[id]; !ok || m.Time.Before(t) {
			firstOut[id] = m.Time
		}
	}
	lat := make([]float64, 0, len(firstOut))
	for id, t := range firstOut {
		if t0, ok := in[id]; ok {
			lat = append(lat, float64(t.Sub(t0).Microseconds())/1000)
		}
	}
	sort.Float64s(lat)
	return lat
}

// watchArrivals reads topic as a downstream service would (read_committed,
// from its start, fetches answered at once) and notes when each record id
// first arrives; the returned function stops it and gives the times.
func watchArrivals(ctx context.Context, addrs []string, topic string) (func() map[string]time.Time, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	seen := map[string]time.Time{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for rctx.Err() == nil {
			fs := cl.PollFetches(rctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				if id := recordID(r.Value); id != "" {
					if _, ok := seen[id]; !ok {
						seen[id] = now
					}
				}
			})
		}
	}()
	return func() map[string]time.Time {
		cancel()
		<-done
		cl.Close()
		return seen
	}, nil
}

// arrivalLatencies are the times from each input record to its output's
// arrival at the reader, sorted, in milliseconds.
func arrivalLatencies(arrived, in map[string]time.Time) []float64 {
	lat := make([]float64, 0, len(arrived))
	for id, t := range arrived {
		if t0, ok := in[id]; ok {
			lat = append(lat, float64(t.Sub(t0).Microseconds())/1000)
		}
	}
	sort.Float64s(lat)
	return lat
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

var runSeq atomic.Int64

// startProcessor runs kernelstream through the same configuration path as
// the service (config.Config -> ProcessorConfig -> processor.New).
func startProcessor(ctx context.Context, addrs []string, in, out string, o options) (func() error, error) {
	run := runSeq.Add(1)
	cfg := config.Default()
	if err := config.ApplyEnv(&cfg, os.Environ()); err != nil { // e.g. KERNELSTREAM_OUTPUT_COMPRESSION=none
		return nil, err
	}
	cfg.Kafka.Brokers = addrs
	cfg.Kafka.Group = fmt.Sprintf("bench-%d", run)
	cfg.Kafka.InputTopic, cfg.Kafka.OutputTopic = in, out
	cfg.Kafka.DLQTopic = "dlq-" + strings.TrimPrefix(strings.TrimPrefix(out, "tput-out-"), "lat-out-")
	cfg.Kafka.InstanceID = "bench"
	cfg.Model = o.spec
	cfg.Checkpoint.Dir = fmt.Sprintf("%s/run-%d", o.dir, run)
	cfg.Checkpoint.MaxRecords, cfg.Checkpoint.Interval = o.cpMaxRecords, o.cpInterval
	cfg.Checkpoint.MemTableMiB = o.memTableMiB
	cfg.Serve.Addr = o.serveAddr // "" unless -score-rate
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger, reg := zerolog.New(os.Stderr).Level(zerolog.WarnLevel), prometheus.NewRegistry()
	lastRegistry = reg
	pcfg, err := cfg.ProcessorConfig(logger, reg)
	if err != nil {
		return nil, err
	}
	p, err := processor.New(pcfg)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	if o.serveAddr != "" {
		srv, err := scoring.Start(cfg, p, logger, reg)
		if err != nil {
			cancel()
			return nil, err
		}
		go func() { <-runCtx.Done(); srv.Shutdown() }()
	}
	go func() { done <- p.Run(runCtx) }()
	for !p.Ready() {
		select {
		case err := <-done:
			cancel()
			return nil, fmt.Errorf("processor stopped: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return func() error { cancel(); return <-done }, nil
}

// relayWriterSettings gives the relays' producers kernelstream's output
// settings (config.Default with the environment's overrides): the same
// compression, and its linger (kafka-go's Writer has no zero batch timeout,
// which it reads as 1 s: a nanosecond sends each call's messages at once).
func relayWriterSettings() (writerSettings, error) {
	cfg := config.Default()
	if err := config.ApplyEnv(&cfg, os.Environ()); err != nil {
		return writerSettings{}, err
	}
	var w writerSettings
	if err := w.compression.UnmarshalText([]byte(cfg.Output.Compression)); err != nil {
		return writerSettings{}, fmt.Errorf("output.compression: %w", err)
	}
	var ok bool
	if w.franzCompression, ok = franzCodecs[cfg.Output.Compression]; !ok {
		return writerSettings{}, fmt.Errorf("output.compression %q: no franz-go codec", cfg.Output.Compression)
	}
	w.batchTimeout = max(cfg.Output.BatchTimeout, time.Nanosecond)
	w.linger = cfg.Output.BatchTimeout
	return w, nil
}

type writerSettings struct {
	batchTimeout     time.Duration // kafka-go's
	compression      kafka.Compression
	linger           time.Duration // franz-go's: 0 is no wait there
	franzCompression kgo.CompressionCodec
}

// franzCodecs are output.compression's values as franz-go's codecs.
var franzCodecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

// startRelay is the baseline: per partition, a kafka-go Reader feeding a
// kafka-go Writer (RequireAll; compression and batch timeout from
// settings), batching whatever has arrived, without decoding anything.
func startRelay(ctx context.Context, addrs []string, in, out string, partitions int, settings writerSettings) (func() error, error) {
	runCtx, cancel := context.WithCancel(ctx)
	w := &kafka.Writer{
		Addr: kafka.TCP(addrs...), Topic: out, Balancer: &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: settings.batchTimeout, BatchSize: 1000, BatchBytes: 64 << 20,
		Compression: settings.compression,
	}
	var wg sync.WaitGroup
	errs := make([]error, partitions)
	for p := 0; p < partitions; p++ {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: addrs, Topic: in, Partition: p, MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 250 * time.Millisecond})
		ch := make(chan kafka.Message, 4096)
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(ch)
			defer r.Close()
			for {
				m, err := r.ReadMessage(runCtx)
				if err != nil {
					return
				}
				ch <- m
			}
		}()
		go func() {
			defer wg.Done()
			batch := make([]kafka.Message, 0, 1000)
			for m := range ch {
				batch = append(batch[:0], kafka.Message{Key: m.Key, Value: m.Value})
			drain:
				for len(batch) < cap(batch) {
					select {
					case m, ok := <-ch:
						if !ok {
							break drain
						}
						batch = append(batch, kafka.Message{Key: m.Key, Value: m.Value})
					default:
						break drain
					}
				}
				if err := w.WriteMessages(runCtx, batch...); err != nil && runCtx.Err() == nil {
					errs[p] = err
					return
				}
			}
		}()
	}
	return func() error {
		cancel()
		wg.Wait()
		w.Close()
		return errors.Join(errs...)
	}, nil
}

// startFranzRelay is the franz-go baseline: one kgo client reads every
// partition of in (assigned directly, as the kafka-go relay's Readers are;
// read_committed) and produces each record's key and value unchanged to out
// (idempotent, acks from all replicas, compression and linger from
// settings, keys hashed with murmur2 as the kafka-go relay's balancer does),
// without decoding anything. Produce is asynchronous: kgo batches whatever
// is buffered per partition and blocks the loop when its buffer is full.
func startFranzRelay(ctx context.Context, addrs []string, in, out string, partitions int, settings writerSettings) (func() error, error) {
	start := make(map[int32]kgo.Offset, partitions)
	for p := range partitions {
		start[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{in: start}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// The kafka-go relay's Readers: 16 MiB a partition, 250 ms waits.
		kgo.FetchMaxPartitionBytes(16<<20), kgo.FetchMaxWait(250*time.Millisecond),
		kgo.DefaultProduceTopic(out), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(settings.franzCompression), kgo.ProducerLinger(settings.linger),
		// kgo stamps a record when Produce buffers it, kafka-go and
		// kernelstream when they encode its batch, and the throughput is
		// read from the output's timestamps: with kgo's default buffer
		// (50,000 records) the last ones were stamped 35-80 ms before
		// they were written, up to a fifth of a 200,000-record drain.
		// Bounded to what the kafka-go relay writes at once (1,000
		// records a partition), the gap was 1-6 ms and the drain took
		// no longer (within the shared machine's noise).
		kgo.MaxBufferedRecords(1000*partitions))
	if err != nil {
		return nil, fmt.Errorf("franz-go relay %s -> %s: %w", in, out, err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var (
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		if runCtx.Err() == nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			cancel()
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for runCtx.Err() == nil {
			fs := cl.PollFetches(runCtx)
			fs.EachError(func(t string, p int32, err error) {
				fail(fmt.Errorf("franz-go relay: read %s/%d: %w", t, p, err))
			})
			fs.EachRecord(func(r *kgo.Record) {
				cl.Produce(runCtx, &kgo.Record{Key: r.Key, Value: r.Value}, func(r *kgo.Record, err error) {
					if err != nil {
						fail(fmt.Errorf("franz-go relay: write to %s: %w", out, err))
					}
				})
			})
		}
	}()
	return func() error {
		cancel()
		<-done
		cl.Close()
		mu.Lock()
		defer mu.Unlock()
		return errors.Join(errs...)
	}, nil
}
