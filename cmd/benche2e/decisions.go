package main

// The decision mode (make bench-decisions, benche2e -decisions): the
// latency of bandit decisions through the real consumer on the embedded
// broker, at a fixed rate, over many users (issue 13's bench target: 100
// candidates of dimension 16, 2,000 decisions/s, 10,000 users).
//
// Records are the recommendation demo's (docs/bandits.md, "Records"): the
// click environment of internal/banditenv with -users users, 500 items of
// dimension spec.Dim rounded to -decimals decimals and -arms candidates per
// decision; each user's reward comes back as a reward record just before
// its next decision (1..3 of its decisions later), naming the arm the
// consumer chose, so every learner grows as in the demo. Users are drawn
// at random, so at 2,000 decisions/s over 10,000 users a user decides about
// every 5 s and its learner has seen a few rewards by the end.
//
// The feeder is open-loop: it writes the decisions due at -rate (with the
// rewards that have come due) every few milliseconds, whatever the answers
// do, and stamps each record's Kafka timestamp itself just before the
// write. Latency of a decision = output record timestamp (set by the
// consumer's writer) - input timestamp, as in the latency run of the
// record pipeline; "read" latency = when this process's reader got the
// output - input timestamp (the record latency plus the broker's fetch
// path). If the feeder falls behind its schedule the decisions go out late
// and are stamped late: the table says how far behind it fell, and the
// achieved rates say what was sustained.
//
// CPU: the process's user+system time over the paced run (broker, feeder,
// reader and consumer together) and the consumer's share from a CPU
// profile of the run, in which every goroutine the consumer starts carries
// the pprof label part=consumer (the feeder and reader part=bench; the
// broker and the runtime's own GC workers none). Some of kafka-go's
// connection goroutines show up without a label, so the consumer's share is
// a lower bound (docs/bandits.md).

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/kernelstream/kernelstream/internal/banditenv"
	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/cputime"
	"github.com/kernelstream/kernelstream/internal/wire"
)

// decisionRun is one paced decision run: the click stream, the input time
// of each decision and what came back.
type decisionRun struct {
	mu       sync.Mutex
	s        *banditenv.ClickStream
	inTime   map[string]time.Time // input record timestamp per decision id
	answered map[string]bool
	recLat   []float64 // ms, output timestamp - input timestamp, answer order
	readLat  []float64 // ms, read time - input timestamp
	firstOut time.Time
	lastOut  time.Time
	errs     []error
	maxLag   time.Duration // how far behind its schedule the feeder fell
	fed      int
	feedDur  time.Duration
	stages   *stageLog // -stages
}

func runDecisions(ctx context.Context, addrs []string, o options, cpuProfile string, stdout, stderr io.Writer) error {
	var stages *stageLog
	if o.stages != "" {
		stages = newStageLog()
		done := make(chan struct{})
		defer close(done)
		go stages.sleeper(done)
	}
	env, err := banditenv.NewClicks(banditenv.ClickConfig{Users: o.users, Dim: o.spec.Dim, Candidates: o.arms, Decimals: o.decimals}, 1)
	if err != nil {
		return err
	}
	n := int(o.rate * o.latencySeconds)
	in, out := "lat-in-dec", "lat-out-dec" // startProcessor derives dlq-dec
	if err := broker.CreateTopics(ctx, addrs, o.partitions, in, out, "dlq-dec"); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "== decisions: %d users, %d candidates of dimension %d, %.0f decisions/s for %.0f s, model %s\n",
		o.users, o.arms, o.spec.Dim, o.rate, o.latencySeconds, o.model)

	var stop func() error
	pprof.Do(ctx, pprof.Labels("part", "consumer"), func(ctx context.Context) {
		stop, err = startProcessor(ctx, addrs, in, out, o)
	})
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			stop() //nolint:errcheck // an earlier error is the one reported
		}
	}()
	time.Sleep(500 * time.Millisecond)

	load0, _ := os.ReadFile("/proc/loadavg")
	r := &decisionRun{s: env.Stream(n), inTime: make(map[string]time.Time, n), answered: make(map[string]bool, n), stages: stages}
	var prof bytes.Buffer
	if err := pprof.StartCPUProfile(&prof); err != nil {
		return err
	}
	stopTrace, err := startTrace(o.trace)
	if err != nil {
		return err
	}
	cpu0, waits0 := cputime.Process(), readWaits()
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var feedErr error
	feedErrs := make(chan error, 1)
	var score *scoreLoad // -score-rate: POST /v1/score beside the stream (score.go)
	pprof.Do(runCtx, pprof.Labels("part", "bench"), func(ctx context.Context) {
		score = startScoreLoad(ctx, o, env)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := broker.Follow(ctx, addrs, out, o.partitions, 100*time.Millisecond, r.answer); err != nil {
				r.fail(err)
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if feedErr = r.feed(ctx, addrs, in, o.rate, n, o.feedEvery); feedErr != nil {
				feedErrs <- feedErr
			}
		}()
	})
	// Wait for every decision's answer (the feeder ends when all are written).
	progress := time.NewTicker(5 * time.Second)
	deadline := time.Now().Add(time.Duration(o.latencySeconds*float64(time.Second)) + time.Minute)
	prevN, t0 := 0, time.Now()
	for {
		r.mu.Lock()
		got, fed, errs := len(r.recLat), r.fed, len(r.errs)+len(feedErrs)
		r.mu.Unlock()
		if got >= n || errs > 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-progress.C:
			// The interval's latencies, copied only now: copied every
			// 20 ms, up to 10,000 of them, they were 4 MB/s of garbage in
			// the consumer's process, under the lock the reader takes.
			r.mu.Lock()
			window := append([]float64(nil), r.recLat[prevN:got]...)
			r.mu.Unlock()
			sort.Float64s(window)
			fmt.Fprintf(stderr, "   [%3.0fs] fed %d, answered %d (%.0f/s), p99 of the interval %.1f ms\n",
				time.Since(t0).Seconds(), fed, got, float64(got-prevN)/5, quantile(window, 0.99))
			prevN = got
		case <-time.After(20 * time.Millisecond):
		}
	}
	progress.Stop()
	cpu, waits := cputime.Process()-cpu0, readWaits()
	pprof.StopCPUProfile()
	traceErr := stopTrace()
	cancel()
	wg.Wait()
	score.finish() // before the consumer and its scoring endpoint stop
	stopped = true
	if err := errors.Join(append(r.errs, stop(), ignoreCanceled(feedErr), traceErr)...); err != nil {
		return err
	}
	if len(r.recLat) < n {
		return fmt.Errorf("%d of %d decisions answered", len(r.recLat), n)
	}
	if cpuProfile != "" {
		if err := os.WriteFile(cpuProfile, prof.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if o.memProfile != "" {
		f, err := os.Create(o.memProfile)
		if err != nil {
			return err
		}
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return err
		}
		f.Close()
	}
	if stages != nil {
		if err := stages.write(o.stages); err != nil {
			return err
		}
	}
	byPart, err := profileByLabel(prof.Bytes(), "part")
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}

	sort.Float64s(r.recLat)
	sort.Float64s(r.readLat)
	wall := r.lastOut.Sub(r.firstOut).Seconds()
	answered := 0.0
	if wall > 0 {
		answered = float64(len(r.recLat)-1) / wall
	}
	consumer := byPart["consumer"].Seconds()
	load, _ := os.ReadFile("/proc/loadavg")
	where := "embedded kfake broker in its own process"
	switch {
	case o.brokers != "":
		where = "brokers " + o.brokers
	case o.brokerInProcess || o.brokerMemory:
		where = "embedded kfake broker in this process"
	}
	fmt.Fprintf(stdout, "\n%s, %d partitions, %d users, %d candidates of dimension %d (%d decimals), model %s, GOMAXPROCS %d, load average at the start: %s, at the end: %s\n\n",
		where, o.partitions, o.users, o.arms, o.spec.Dim, o.decimals, o.model, runtime.GOMAXPROCS(0), loadAvg(load0), loadAvg(load))
	fmt.Fprintln(stdout, "| decisions/s target | fed/s | answered/s | feeder behind (max ms) | p50 / p99 / max latency (ms) | p50 / p99 / max read latency (ms) | process CPU (cores) | consumer CPU (cores) | consumer CPU-µs/decision |")
	fmt.Fprintln(stdout, "|---:|---:|---:|---:|---|---|---:|---:|---:|")
	fmt.Fprintf(stdout, "| %.0f | %.0f | %.0f | %.0f | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | %.2f | %.2f | %.0f |\n",
		o.rate, float64(r.fed)/r.feedDur.Seconds(), answered, float64(r.maxLag.Microseconds())/1000,
		quantile(r.recLat, 0.5), quantile(r.recLat, 0.99), quantile(r.recLat, 1),
		quantile(r.readLat, 0.5), quantile(r.readLat, 0.99), quantile(r.readLat, 1),
		cpu.Seconds()/wall, consumer/wall, consumer/float64(n)*1e6)
	fmt.Fprintf(stdout, "\n%d decisions; CPU by part (profile): consumer %.1f s, bench feeder+reader %.1f s, broker and runtime %.1f s; process total %.1f s\n",
		n, consumer, byPart["bench"].Seconds(), byPart[""].Seconds(), cpu.Seconds())
	waits.report(stdout, waits0)
	score.report(stdout)
	return nil
}

// loadAvg is the 1, 5 and 15 minute load averages of /proc/loadavg.
func loadAvg(b []byte) string {
	f := bytes.Fields(b)
	return string(bytes.Join(f[:min(3, len(f))], []byte(" ")))
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (r *decisionRun) fail(err error) {
	r.mu.Lock()
	if len(r.errs) < 5 {
		r.errs = append(r.errs, err)
	}
	r.mu.Unlock()
}

// feedBatch bounds the records of one write of the feeder.
const feedBatch = 200

// feed writes the n decisions of the stream at rate, with the rewards that
// come due between them, stamping each batch with the time of its write.
//
// The client is kgo's producer without linger, as the engine's output
// producer is: a write goes out at once. (Until 2026-11-27 it was a
// kafka-go Writer, whose 2 ms batch timeout was in every latency, and
// whose timer the Go runtime's idle GC workers delayed by 10-15 ms at each
// garbage collection of the process: the feeder's write, not the engine,
// made most of the p99.) Keys go to partitions by murmur2, as kafka-go's
// Murmur2Balancer and the Java client place them.
func (r *decisionRun) feed(ctx context.Context, addrs []string, topic string, rate float64, n int, every time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		// A decision record is ~14 KB: a feeder that fell behind must not
		// make a batch over the broker's 1 MB message.max.bytes.
		kgo.ProducerBatchMaxBytes(900<<10))
	if err != nil {
		return err
	}
	defer cl.Close()
	var rec banditenv.ClickRecord
	var recs []*kgo.Record
	var ids []string
	// The records' buffers are reused from write to write (ProduceSync
	// returns when kgo is done with them): new ones were 27 MB/s of garbage
	// in the consumer's process, whose collections they helped pace.
	var pool []kgo.Record
	start := time.Now()
	var last time.Time
	decided := 0
	for decided < n {
		if wait := time.Until(last.Add(every)); every > 0 && wait > 0 {
			// One write every `every`: what comes due meanwhile goes in
			// the next.
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		due := min(n, int(time.Since(start).Seconds()*rate))
		if due <= decided {
			next := start.Add(time.Duration(float64(decided+1) / rate * float64(time.Second)))
			select {
			case <-time.After(time.Until(next)):
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		if lag := time.Since(start.Add(time.Duration(float64(decided+1) / rate * float64(time.Second)))); lag > r.maxLag {
			r.maxLag = lag
		}
		recs, ids = recs[:0], ids[:0]
		r.mu.Lock()
		for decided < due && len(recs) < feedBatch && r.s.Next(&rec) {
			if len(recs) == len(pool) {
				pool = append(pool, kgo.Record{})
			}
			kr := &pool[len(recs)]
			*kr = kgo.Record{Key: append(kr.Key[:0], rec.Key...), Value: append(kr.Value[:0], rec.Value...)}
			recs = append(recs, kr)
			if !rec.Reward {
				decided++
				ids = append(ids, rec.ID)
			}
		}
		r.mu.Unlock()
		if len(recs) == 0 { // every user in reach waits for an answer
			time.Sleep(time.Millisecond)
			continue
		}
		now := time.Now()
		last = now
		for _, kr := range recs {
			kr.Timestamp = now
		}
		r.mu.Lock()
		for _, id := range ids {
			r.inTime[id] = now
		}
		r.fed = decided
		r.mu.Unlock()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("write %s: %w", topic, err)
		}
		if r.stages != nil {
			r.stages.mu.Lock()
			r.stages.writes = append(r.stages.writes, [3]int64{now.UnixNano(), time.Now().UnixNano(), int64(len(recs))})
			r.stages.mu.Unlock()
		}
	}
	r.mu.Lock()
	r.feedDur = time.Since(start)
	r.mu.Unlock()
	return nil
}

// answer takes one output record: it times the decision's first answer
// and hands the chosen arm to the click stream (which then releases the
// decision's reward).
func (r *decisionRun) answer(m kafka.Message) {
	at := time.Now()
	var o wire.Output
	if err := json.Unmarshal(m.Value, &o); err != nil {
		r.fail(fmt.Errorf("output %s: %w", m.Value, err))
		return
	}
	v := struct{ ID, Arm string }{o.ID.String(), o.Arm.String()}
	r.mu.Lock()
	t0, ok := r.inTime[v.ID]
	if ok && !r.answered[v.ID] {
		r.answered[v.ID] = true
		// The output's timestamp against the input's, both as Kafka keeps
		// them (milliseconds): until 2026-11-27 the input's was the
		// feeder's clock to the nanosecond, which made every latency 0.5 ms
		// shorter on average than the timestamps say.
		r.recLat = append(r.recLat, float64(m.Time.Sub(time.UnixMilli(t0.UnixMilli())).Microseconds())/1000)
		r.readLat = append(r.readLat, float64(at.Sub(t0).Microseconds())/1000)
		if r.firstOut.IsZero() || m.Time.Before(r.firstOut) {
			r.firstOut = m.Time
		}
		if m.Time.After(r.lastOut) {
			r.lastOut = m.Time
		}
		if r.stages != nil {
			r.stages.mu.Lock()
			r.stages.outs = append(r.stages.outs, stageOut{id: v.ID, part: o.Partition, offset: o.Offset, in: t0.UnixNano(), outTs: m.Time.UnixNano(), read: at.UnixNano()})
			r.stages.mu.Unlock()
		}
	}
	_, _, err := r.s.Choose(v.ID, v.Arm)
	r.mu.Unlock()
	if !ok {
		err = errors.Join(err, fmt.Errorf("output for %q, a decision not fed", v.ID))
	}
	if err != nil {
		r.fail(err)
	}
}

// profileByLabel adds up the CPU time of a gzipped pprof CPU profile by the
// value of one label ("" for samples without it). It reads the few fields
// of profile.proto it needs (sample_type 1, sample 2 with value 2 and label
// 3, string_table 6) with protowire, which the module already depends on.
func profileByLabel(gz []byte, key string) (map[string]time.Duration, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	type sample struct {
		values []int64
		labels [][2]int64 // key, str (string table indices)
	}
	var (
		strs    []string
		types   [][2]int64 // type, unit
		samples []sample
	)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil, protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		msg, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		switch num {
		case 1:
			f := messageInts(msg)
			types = append(types, [2]int64{first(f[1]), first(f[2])})
		case 2:
			f := messageInts(msg)
			s := sample{values: f[2]}
			for _, l := range messageBytes(msg, 3) {
				lf := messageInts(l)
				s.labels = append(s.labels, [2]int64{first(lf[1]), first(lf[2])})
			}
			samples = append(samples, s)
		case 6:
			strs = append(strs, string(msg))
		}
	}
	str := func(i int64) string {
		if i < 0 || int(i) >= len(strs) {
			return ""
		}
		return strs[i]
	}
	vi := -1
	for i, t := range types {
		if str(t[0]) == "cpu" && str(t[1]) == "nanoseconds" {
			vi = i
		}
	}
	if vi < 0 {
		return nil, fmt.Errorf("no cpu/nanoseconds sample type")
	}
	out := map[string]time.Duration{}
	for _, s := range samples {
		if vi >= len(s.values) {
			continue
		}
		part := ""
		for _, l := range s.labels {
			if str(l[0]) == key {
				part = str(l[1])
			}
		}
		out[part] += time.Duration(s.values[vi])
	}
	return out, nil
}

func first(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

// messageInts returns the integer fields of a protobuf message by field
// number, packed repeated fields unpacked.
func messageInts(b []byte) map[protowire.Number][]int64 {
	out := map[protowire.Number][]int64{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return out
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return out
			}
			out[num] = append(out[num], int64(v))
			b = b[n:]
		case protowire.BytesType:
			p, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return out
			}
			b = b[n:]
			for len(p) > 0 { // a packed varint list (or a message: ignored by callers)
				v, k := protowire.ConsumeVarint(p)
				if k < 0 {
					break
				}
				out[num] = append(out[num], int64(v))
				p = p[k:]
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return out
			}
			b = b[n:]
		}
	}
	return out
}

// messageBytes returns the length-delimited fields num of a message.
func messageBytes(b []byte, num protowire.Number) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		nm, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return out
		}
		b = b[n:]
		if typ == protowire.BytesType {
			p, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return out
			}
			if nm == num {
				out = append(out, p)
			}
			b = b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(nm, typ, b); n < 0 {
			return out
		}
		b = b[n:]
	}
	return out
}
