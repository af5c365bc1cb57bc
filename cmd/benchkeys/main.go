// Command benchkeys measures the consumer with many distinct routing keys
// (make bench-keys): records/s and the consumer process's resident memory
// with 1,000,000 keys and a learner cap (cache.max_learners) of 50,000, next
// to the same run with 10,000 keys, which all fit in memory (docs/scale.md).
//
//	benchkeys [-keys 1000000,10000] [-records 2000000] [-partitions 8] [-max-learners 50000] [-model SPEC] [-consumer BIN] [-dir DIR] [-log-level LEVEL]
//
// Per key count: an embedded kfake broker (in this process) is loaded with
// -records records with inline labels, then the real consumer binary runs as
// a separate process (so its memory is its own) on a fresh checkpoint
// directory with the operator defaults of config.Default except
// cache.max_learners. Keys are visited in passes over a seeded permutation:
// with K keys, record i goes to key perm[i mod K], so every key appears
// records/K times and, with K above the cap, every revisit finds its learner
// evicted (read back from Badger: the cold path at its worst).
//
// Throughput = outputs / time, between the first poll that sees an output
// and the poll that sees all of them (polls every 250 ms), so group join and
// restore are excluded. Memory: VmHWM (peak resident set) and VmRSS of the
// consumer process from /proc/<pid>/status, sampled every 250 ms, VmHWM read
// last just before SIGTERM. CPU: utime+stime of the consumer process from
// /proc/<pid>/stat, a figure less sensitive than wall time to other load on
// a shared machine.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/kernelstream/kernelstream/internal/buildinfo"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/feed"
	"github.com/kernelstream/kernelstream/internal/synth"
	"github.com/kernelstream/kernelstream/models"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchkeys:", err)
		os.Exit(1)
	}
}

type options struct {
	keys        []int
	records     int
	partitions  int
	maxLearners int
	memTableMiB int
	model       string
	dim         int
	consumer    string
	dir         string
	seed        uint64
	limit       time.Duration
	logLevel    string
	env         []string
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchkeys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	keys := fs.String("keys", "1000000,10000", "comma-separated distinct-key counts, one run each")
	fs.IntVar(&o.records, "records", 2000000, "records per run (inline labels)")
	fs.IntVar(&o.partitions, "partitions", 8, "partitions of the input and output topics")
	fs.IntVar(&o.maxLearners, "max-learners", 50000, "cache.max_learners of the consumer")
	fs.IntVar(&o.memTableMiB, "memtable-mib", 0, "checkpoint.memtable_mib of the consumer (0: its default)")
	fs.StringVar(&o.model, "model", `{"algorithm":"aogd-ald","dim":5,"kernel":{"type":"gaussian","sigma":1},"params":{"max_budget":16},"seed":1}`, "model spec (JSON)")
	fs.StringVar(&o.consumer, "consumer", "", "consumer binary (default: go build ./cmd/consumer into a temporary directory)")
	fs.StringVar(&o.dir, "dir", "", "work directory for checkpoints and logs (default: a temporary one, removed at the end)")
	fs.Uint64Var(&o.seed, "seed", 7, "seed of the key permutation and the features")
	fs.DurationVar(&o.limit, "limit", 30*time.Minute, "give up on a run after this long")
	fs.StringVar(&o.logLevel, "log-level", "warn", "log.level of the consumer (its log is consumer.log in the run's directory; see -dir)")
	env := fs.String("consumer-env", "", "comma-separated VAR=value set for the consumer process only (e.g. GODEBUG=gctrace=1, GOGC=50)")
	version := fs.Bool("version", false, "print the build and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version {
		fmt.Println("benchkeys", buildinfo.Get())
		return nil
	}
	if *env != "" {
		o.env = strings.Split(*env, ",")
	}
	for _, s := range strings.Split(*keys, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || k <= 0 {
			return fmt.Errorf("-keys: %q is not a positive integer", s)
		}
		o.keys = append(o.keys, k)
	}
	spec, err := models.ParseSpec(o.model)
	if err != nil {
		return err
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	o.dim = spec.Dim
	if o.dir == "" {
		tmp, err := os.MkdirTemp("", "benchkeys-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		o.dir = tmp
	}
	if o.consumer == "" {
		o.consumer = filepath.Join(o.dir, "consumer")
		build := exec.Command("go", "build", "-o", o.consumer, "./cmd/consumer")
		build.Stdout, build.Stderr = stderr, stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build ./cmd/consumer (run from the module root, or pass -consumer): %w", err)
		}
	}

	ctx := context.Background()
	b, err := broker.Start(broker.Options{})
	if err != nil {
		return err
	}
	defer b.Close()

	var rows []result
	for i, k := range o.keys {
		fmt.Fprintf(stderr, "== %d keys, %d records, %d partitions, cache.max_learners %d\n", k, o.records, o.partitions, o.maxLearners)
		r, err := runOnce(ctx, b, o, i, k, stderr)
		if err != nil {
			return fmt.Errorf("%d keys: %w", k, err)
		}
		rows = append(rows, r)
	}

	load, _ := os.ReadFile("/proc/loadavg")
	memTable := "default"
	if o.memTableMiB > 0 {
		memTable = strconv.Itoa(o.memTableMiB)
	}
	fmt.Fprintf(stdout, "\nembedded kfake broker, %d partitions, %d records with inline labels per run, model %s, cache.max_learners %d, checkpoint.memtable_mib %s, %d CPUs, load average at the end: %s\n\n",
		o.partitions, o.records, o.model, o.maxLearners, memTable, runtime.NumCPU(), strings.TrimSpace(string(load)))
	fmt.Fprintln(stdout, "| distinct keys | records/s | consumer CPU s | CPU µs/record | peak RSS (VmHWM) | RSS at end | learners in memory | learners on disk | checkpoints (mean ms) | Badger dir | memory hits | store reads (µs each) | new learners |")
	fmt.Fprintln(stdout, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		missCost := 0.0
		if r.reads > 0 {
			missCost = 1e6 * r.readSecs / r.reads
		}
		fmt.Fprintf(stdout, "| %d | %.0f | %.1f | %.0f | %s | %s | %.0f | %.0f | %.0f (%.1f) | %s | %.0f | %.0f (%.1f) | %.0f |\n",
			r.keys, r.rate, r.cpu, 1e6*r.cpu/float64(o.records), mib(r.hwm), mib(r.rssEnd), r.inMemory, r.onDisk,
			r.checkpoints, 1000*r.ckptMean, mib(r.diskBytes), r.hits, r.reads, missCost, r.created)
	}
	if len(rows) >= 2 && rows[len(rows)-1].rate > 0 {
		big, small := rows[0], rows[len(rows)-1]
		fmt.Fprintf(stdout, "\n%d-key / %d-key throughput: %.2f (target >= 0.8); peak RSS with %d keys %s (target < 2 GiB)\n",
			big.keys, small.keys, big.rate/small.rate, big.keys, mib(big.hwm))
	}
	return nil
}

type result struct {
	keys                  int
	rate, cpu             float64
	hwm, rssEnd           int64
	inMemory, onDisk      float64
	checkpoints, ckptMean float64
	diskBytes             int64
	hits, reads, created  float64 // learner lookups: from memory, from Badger, new keys
	readSecs              float64 // time in the Badger reads
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func runOnce(ctx context.Context, b *broker.Broker, o options, i, keys int, stderr io.Writer) (result, error) {
	res := result{keys: keys}
	in, out, dlq := fmt.Sprintf("in-%d", i), fmt.Sprintf("out-%d", i), fmt.Sprintf("dlq-%d", i)
	if err := b.CreateTopics(ctx, o.partitions, in, out, dlq); err != nil {
		return res, err
	}
	src := newKeySource(keys, o.dim, o.seed)
	f, err := feed.New(src, feed.Options{Labels: "inline", N: o.records})
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	n, err := feed.Produce(ctx, f, feed.Target{Brokers: b.Addrs(), Topic: in}, feed.ProduceOptions{Batch: 2000})
	if err != nil {
		return res, err
	}
	fmt.Fprintf(stderr, "   produced %d records in %.1f s\n", n, time.Since(t0).Seconds())

	dir := filepath.Join(o.dir, fmt.Sprintf("run-%d", i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return res, err
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	memTable := ""
	if o.memTableMiB > 0 {
		memTable = fmt.Sprintf("  memtable_mib: %d\n", o.memTableMiB)
	}
	cfg := fmt.Sprintf(`kafka:
  brokers: [%s]
  group: benchkeys-%d
  instance_id: benchkeys
  input_topic: %s
  output_topic: %s
  dlq_topic: %s
model: %s
checkpoint:
  dir: %s
%scache:
  max_learners: %d
http:
  addr: %s
log:
  level: %s
`, b.Addrs()[0], i, in, out, dlq, o.model, filepath.Join(dir, "state"), memTable, o.maxLearners, httpAddr, o.logLevel)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return res, err
	}
	logf, err := os.Create(filepath.Join(dir, "consumer.log"))
	if err != nil {
		return res, err
	}
	defer logf.Close()
	cmd := exec.Command(o.consumer, "-config", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), o.env...)
	if err := cmd.Start(); err != nil {
		return res, err
	}
	fmt.Fprintf(stderr, "   consumer pid %d, log %s\n", cmd.Process.Pid, logf.Name())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	pid := cmd.Process.Pid
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have exited
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill() //nolint:errcheck
			<-done
		}
	}

	var (
		started     time.Time
		startCount  int64
		lastReport  = time.Now()
		lastCount   int64
		deadline    = time.Now().Add(o.limit)
		total       = int64(o.records)
		finalMetric string
	)
	for {
		select {
		case err := <-done:
			return res, fmt.Errorf("consumer exited early (%v); see %s", err, logf.Name())
		case <-time.After(250 * time.Millisecond):
		}
		count, err := endOffsets(ctx, b.Addrs()[0], out, o.partitions)
		if err != nil {
			stop()
			return res, err
		}
		st := procStatus(pid)
		res.hwm = max(res.hwm, st["VmHWM"])
		now := time.Now()
		if started.IsZero() && count > 0 {
			started, startCount, lastCount, lastReport = now, count, count, now
		}
		if !started.IsZero() && now.Sub(lastReport) >= 10*time.Second {
			fmt.Fprintf(stderr, "   %8d outputs, %7.0f records/s over the last %.0f s, RSS %s, peak %s\n",
				count, float64(count-lastCount)/now.Sub(lastReport).Seconds(), now.Sub(lastReport).Seconds(), mib(st["VmRSS"]), mib(st["VmHWM"]))
			lastReport, lastCount = now, count
		}
		if count >= total {
			res.rate = float64(count-startCount) / now.Sub(started).Seconds()
			res.rssEnd = st["VmRSS"]
			res.cpu = procCPU(pid)
			finalMetric = scrape(httpAddr)
			res.hwm = max(res.hwm, procStatus(pid)["VmHWM"])
			break
		}
		if now.After(deadline) {
			stop()
			return res, fmt.Errorf("%d of %d outputs after %v; see %s", count, total, o.limit, logf.Name())
		}
	}
	res.hits = metricSum(finalMetric, "kernelstream_learner_memory_hits_total")
	res.reads = metricSum(finalMetric, "kernelstream_learner_store_reads_total")
	res.readSecs = metricSum(finalMetric, "kernelstream_learner_store_read_seconds_total")
	res.created = metricSum(finalMetric, "kernelstream_learners_created_total")
	res.inMemory = metricSum(finalMetric, "kernelstream_learners_in_memory")
	res.onDisk = metricSum(finalMetric, "kernelstream_learners_on_disk")
	res.checkpoints = metricSum(finalMetric, "kernelstream_checkpoint_duration_seconds_count")
	if res.checkpoints > 0 {
		res.ckptMean = metricSum(finalMetric, "kernelstream_checkpoint_duration_seconds_sum") / res.checkpoints
	}
	if dead := metricSum(finalMetric, "kernelstream_dead_letters_total"); dead > 0 {
		fmt.Fprintf(stderr, "   warning: %.0f dead letters\n", dead)
	}
	stop()
	res.diskBytes = dirSize(filepath.Join(dir, "state"))
	fmt.Fprintf(stderr, "   %.0f records/s, CPU %.1f s, peak RSS %s, RSS at end %s, Badger %s\n",
		res.rate, res.cpu, mib(res.hwm), mib(res.rssEnd), mib(res.diskBytes))
	return res, nil
}

// keySource yields x uniform in [-1,1]^dim and y = f(x) + noise, for keys
// visited in passes over a seeded permutation (every key once per pass).
type keySource struct {
	names []string
	perm  []int32
	seq   []int32
	i     int
	rng   *models.Rand
	dim   int
}

func newKeySource(keys, dim int, seed uint64) *keySource {
	rng := models.NewRand(seed)
	s := &keySource{names: make([]string, keys), perm: make([]int32, keys), seq: make([]int32, keys), rng: rng, dim: dim}
	width := len(strconv.Itoa(keys - 1))
	for k := range s.perm {
		s.perm[k] = int32(k)
		s.names[k] = fmt.Sprintf("user-%0*d", width, k)
	}
	for k := keys - 1; k > 0; k-- {
		j := rng.Intn(k + 1)
		s.perm[k], s.perm[j] = s.perm[j], s.perm[k]
	}
	return s
}

func (s *keySource) Next(e *synth.Example) bool {
	k := s.perm[s.i%len(s.perm)]
	s.i++
	if cap(e.X) < s.dim {
		e.X = make([]float64, s.dim)
	}
	e.X = e.X[:s.dim]
	sum := 0.0
	for j := range e.X {
		e.X[j] = 2*s.rng.Float64() - 1
		sum += e.X[j]
	}
	e.Key, e.Seq = s.names[k], int(s.seq[k])
	s.seq[k]++
	e.Y = 0.5 + 0.4*math.Sin(sum+float64(k%7)) + 0.05*s.rng.Norm()
	return true
}

func endOffsets(ctx context.Context, addr, topic string, partitions int) (int64, error) {
	var sum int64
	for p := 0; p < partitions; p++ {
		c, err := kafka.DialLeader(ctx, "tcp", addr, topic, p)
		if err != nil {
			return 0, err
		}
		end, err := c.ReadLastOffset()
		c.Close()
		if err != nil {
			return 0, err
		}
		sum += end
	}
	return sum, nil
}

// procStatus reads the Vm* lines of /proc/<pid>/status in bytes.
func procStatus(pid int) map[string]int64 {
	out := map[string]int64{}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || !strings.HasPrefix(name, "Vm") {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 2 && fields[1] == "kB" {
			if v, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
				out[name] = v << 10
			}
		}
	}
	return out
}

// procCPU is utime+stime of pid in seconds (fields 14 and 15 of
// /proc/<pid>/stat, in clock ticks of 1/100 s on Linux).
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return math.NaN()
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return math.NaN()
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 13 {
		return math.NaN()
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return math.NaN()
	}
	return (u + s) / 100
}

func scrape(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricSum adds up every sample of a metric family in a Prometheus text
// exposition.
func metricSum(text, name string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? ([0-9.eE+-]+)$`)
	sum := 0.0
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		if v, err := strconv.ParseFloat(m[2], 64); err == nil {
			sum += v
		}
	}
	return sum
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func dirSize(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error { //nolint:errcheck // best effort
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}
