// Command soak runs the consumer for minutes to hours against the embedded
// broker at a steady rate and samples what must stay bounded: each
// consumer's state directory, its live state and its resident memory.
//
//	soak [-minutes 30] [-rate 2000] [-every 10s] [-out FILE.csv]
//	soak -report FILE.csv
//
// Three consumer processes (the README's configuration, aogd-ald, and the
// demo's other two models, nons-ald and fogd) each read the same synthetic
// stream (6 keys, dimension 5, labels delayed by 1 to 50 records) in their
// own group, with the service's defaults otherwise (changelog on). Each runs
// as its own process, so its resident memory is its own; the broker and the
// producer run in this one. At the end soak checks, per consumer, that the
// state directory stayed within 2x the live state + 64 MiB at every sample
// and that the mean resident memory of the last third of the run is within
// 10 % of its mean around two thirds (minute 20 of 30), prints a summary and
// exits 1 if a check failed. soak -report FILE checks a saved run again.
package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/buildinfo"
	"github.com/kernelstream/kernelstream/internal/feed"
	"github.com/kernelstream/kernelstream/internal/synth"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

var models = []string{"aogd-ald", "nons-ald", "fogd"}

type consumer struct {
	alg, dir, http string
	cmd            *exec.Cmd
	samples        []sample
}

type sample struct {
	at                       time.Duration
	dirBytes, live, rss, rec int64
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	minutes := fs.Float64("minutes", 30, "duration of the run")
	rate := fs.Float64("rate", 2000, "feature records per second (labels come on top)")
	every := fs.Duration("every", 10*time.Second, "sampling interval")
	csvPath := fs.String("out", "", "write the samples as CSV to this file")
	bin := fs.String("consumer", "", "consumer binary (default: built into a temporary directory)")
	again := fs.String("report", "", "only check the samples of an earlier run's -out file")
	if code, done := buildinfo.ParseFlags(fs, args, out); done {
		if code != 0 {
			return errors.New("bad flags")
		}
		return nil
	}
	if *again != "" {
		cs, err := readCSV(*again)
		if err != nil {
			return err
		}
		return report(out, cs)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	work, err := os.MkdirTemp("", "kernelstream-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if *bin == "" {
		*bin = filepath.Join(work, "consumer")
		if b, err := exec.Command("go", "build", "-o", *bin, "./cmd/consumer").CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/consumer: %v\n%s", err, b)
		}
	}
	b, err := broker.Start(broker.Options{})
	if err != nil {
		return err
	}
	defer b.Close()
	topics := []string{"features", "dead-letters"}
	for _, m := range models {
		topics = append(topics, "predictions-"+m)
	}
	if err := b.CreateTopics(ctx, 4, topics...); err != nil {
		return err
	}
	var cs []*consumer
	for _, m := range models {
		c, err := startConsumer(*bin, work, b.Addrs()[0], m)
		if err != nil {
			return err
		}
		defer c.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck
		cs = append(cs, c)
	}
	src, err := synth.New("mixed", synth.Options{Keys: 6, Dim: 5, Seed: 1})
	if err != nil {
		return err
	}
	f, err := feed.New(src, feed.Options{Labels: "delayed", MaxDelay: 50, Seed: 1})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithTimeout(ctx, time.Duration(*minutes*float64(time.Minute)))
	defer cancel()
	go feed.Produce(runCtx, f, feed.Target{Brokers: b.Addrs(), Topic: "features"}, feed.ProduceOptions{Rate: 2 * *rate}) //nolint:errcheck // ends with runCtx
	fmt.Fprintf(out, "soak: %v minutes at %g feature records/s (+ labels) into 3 consumers (%s); sampling every %v\n",
		*minutes, *rate, strings.Join(models, ", "), *every)
	start := time.Now()
	t := time.NewTicker(*every)
	defer t.Stop()
	for runCtx.Err() == nil {
		select {
		case <-runCtx.Done():
		case <-t.C:
			at := time.Since(start)
			for _, c := range cs {
				if c.cmd.ProcessState != nil {
					return fmt.Errorf("consumer %s exited: %v", c.alg, c.cmd.ProcessState)
				}
				s := c.sample(at)
				c.samples = append(c.samples, s)
				fmt.Fprintf(out, "%6.0fs %-9s dir %7.1f MiB  live %7.2f MiB  rss %7.1f MiB  records %d\n",
					at.Seconds(), c.alg, mib(s.dirBytes), mib(s.live), mib(s.rss), s.rec)
			}
		}
	}
	if *csvPath != "" {
		if err := writeCSV(*csvPath, cs); err != nil {
			return err
		}
	}
	return report(out, cs)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func startConsumer(bin, work, addr, alg string) (*consumer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	httpAddr := ln.Addr().String()
	ln.Close()
	c := &consumer{alg: alg, dir: filepath.Join(work, "state-"+alg), http: httpAddr}
	cfg := fmt.Sprintf(`kafka:
  brokers: [%s]
  group: soak-%s
  input_topic: features
  output_topic: predictions-%s
  dlq_topic: dead-letters
model:
  algorithm: %s
  dim: 5
checkpoint:
  dir: %s
http:
  addr: %s
log:
  level: warn
`, addr, alg, alg, alg, c.dir, httpAddr)
	path := filepath.Join(work, alg+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(work, alg+".log"))
	if err != nil {
		return nil, err
	}
	c.cmd = exec.Command(bin, "-config", path)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { c.cmd.Wait(); logf.Close() }() //nolint:errcheck // ProcessState tells
	return c, nil
}

// sample reads the directory's allocated size, the consumer's live state
// and records from /metrics, and its resident memory from /proc.
func (c *consumer) sample(at time.Duration) sample {
	s := sample{at: at}
	_ = filepath.WalkDir(c.dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				if st, ok := info.Sys().(*syscall.Stat_t); ok {
					s.dirBytes += st.Blocks * 512
				}
			}
		}
		return nil
	})
	if resp, err := http.Get("http://" + c.http + "/metrics"); err == nil {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			name, val, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			v, _ := strconv.ParseFloat(val, 64)
			switch {
			case name == "kernelstream_state_live_bytes":
				s.live = int64(v)
			case strings.HasPrefix(name, "kernelstream_records_total{"):
				s.rec += int64(v)
			}
		}
		resp.Body.Close()
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "VmRSS:") {
				f := strings.Fields(line)
				if len(f) >= 2 {
					kb, _ := strconv.ParseInt(f[1], 10, 64)
					s.rss = kb << 10
				}
			}
		}
	}
	return s
}

func writeCSV(path string, cs []*consumer) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := csv.NewWriter(f)
	w.Write([]string{"seconds", "model", "dir_bytes", "live_bytes", "rss_bytes", "records"}) //nolint:errcheck
	for _, c := range cs {
		for _, s := range c.samples {
			w.Write([]string{strconv.FormatFloat(s.at.Seconds(), 'f', 0, 64), c.alg, strconv.FormatInt(s.dirBytes, 10), //nolint:errcheck
				strconv.FormatInt(s.live, 10), strconv.FormatInt(s.rss, 10), strconv.FormatInt(s.rec, 10)})
		}
	}
	w.Flush()
	return w.Error()
}

// report checks the two bounds per consumer and prints a summary line each.
// Resident memory is judged on averages, not single samples: a Go heap
// breathes between collections (tens of MiB here), and "flat" is about
// growth. The reference is the mean over the minute around two thirds of the
// run (minute 20 of 30), compared with the mean of the last third.
func report(out io.Writer, cs []*consumer) error {
	failed := false
	for _, c := range cs {
		n := len(c.samples)
		if n < 6 {
			return fmt.Errorf("%s: %d samples: run longer", c.alg, n)
		}
		worst, worstAt := 0.0, time.Duration(0)
		dirOK := true
		for _, s := range c.samples {
			bound := 2*s.live + 64<<20
			if s.dirBytes > bound {
				dirOK = false
			}
			if r := float64(s.dirBytes) / float64(bound); r > worst {
				worst, worstAt = r, s.at
			}
		}
		end := c.samples[n-1].at
		mark := end * 2 / 3
		var refSum, refN, lastSum, lastN float64
		lo, hi := c.samples[n-1].rss, c.samples[n-1].rss
		for _, s := range c.samples {
			if d := s.at - mark; d >= -30*time.Second && d <= 30*time.Second {
				refSum, refN = refSum+float64(s.rss), refN+1
			}
			if s.at > mark {
				lastSum, lastN = lastSum+float64(s.rss), lastN+1
				lo, hi = min(lo, s.rss), max(hi, s.rss)
			}
		}
		ref, last := refSum/refN, lastSum/lastN
		rssOK := last <= 1.1*ref && last >= 0.9*ref
		final := c.samples[n-1]
		fmt.Fprintf(out, "%-9s dir <= 2 live + 64 MiB at every sample: %v (closest: %.0f%% of the bound, at %.0fs); rss: mean of the last third %.1f MiB vs %.1f MiB around %.0fs, within 10%%: %v (samples %.1f-%.1f MiB); final dir %.1f MiB, live %.2f MiB, records %d\n",
			c.alg, dirOK, 100*worst, worstAt.Seconds(), last/(1<<20), ref/(1<<20), mark.Seconds(), rssOK, mib(lo), mib(hi), mib(final.dirBytes), mib(final.live), final.rec)
		failed = failed || !dirOK || !rssOK
	}
	if failed {
		return errors.New("a bound was exceeded")
	}
	return nil
}

// readCSV loads the samples a run wrote with -out, for -report.
func readCSV(path string) ([]*consumer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, err
	}
	byAlg := map[string]*consumer{}
	var cs []*consumer
	for i, r := range rows {
		if i == 0 || len(r) != 6 {
			continue
		}
		c, ok := byAlg[r[1]]
		if !ok {
			c = &consumer{alg: r[1]}
			byAlg[r[1]] = c
			cs = append(cs, c)
		}
		var v [5]int64
		for j, k := range []int{0, 2, 3, 4, 5} {
			if v[j], err = strconv.ParseInt(r[k], 10, 64); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
			}
		}
		c.samples = append(c.samples, sample{at: time.Duration(v[0]) * time.Second, dirBytes: v[1], live: v[2], rss: v[3], rec: v[4]})
	}
	return cs, nil
}
