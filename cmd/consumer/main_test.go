package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/testparallel"
	"github.com/kernelstream/kernelstream/processor"
)

// asConsumer makes the test binary act as the consumer binary: the crash
// test re-executes itself with this variable set, so the consumer runs as a
// separate process without a second `go build`.
const asConsumer = "KSTEST_AS_CONSUMER"

// killAfterChangelog (a count N) makes the consumer process kill itself with
// SIGKILL after its Nth changelog write, before the Badger commit.
const killAfterChangelog = "KSTEST_KILL_AFTER_CHANGELOG"

func TestMain(m *testing.M) {
	if n, err := strconv.Atoi(os.Getenv(killAfterChangelog)); err == nil && os.Getenv(asConsumer) == "1" {
		var writes atomic.Int64
		processor.TestHookAfterChangelog = func(int) {
			if writes.Add(1) == int64(n) {
				syscall.Kill(os.Getpid(), syscall.SIGKILL) //nolint:errcheck // the process ends here
			}
		}
	}
	if os.Getenv(asConsumer) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	// The end-to-end tests mostly wait (session timeouts, paced streams).
	testparallel.Default(8)
	os.Exit(m.Run())
}

// consumerProcess is the consumer running as a child process.
type consumerProcess struct {
	cmd  *exec.Cmd
	done chan error
	log  string
	// generations is how many "assigned" lines the log (shared by all the
	// runs of a test) had before this process started.
	generations int
}

// assignedLine is what the processor logs once it is in a generation.
const assignedLine = `"message":"assigned"`

// waitInGeneration waits until the process has logged a group assignment:
// kfake never expires a member killed while its JoinGroup or SyncGroup
// reply is in flight (Apache Kafka would, after the session timeout), so the
// tests kill a member only once it is in a generation.
func (p *consumerProcess) waitInGeneration(ctx context.Context, t *testing.T) {
	t.Helper()
	for {
		data, _ := os.ReadFile(p.log)
		if strings.Count(string(data), assignedLine) > p.generations {
			return
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("consumer exited before joining a generation (%v); log tail:\n%s", err, tail(p.log, 3000))
		case <-ctx.Done():
			t.Fatalf("consumer never joined a generation; log tail:\n%s", tail(p.log, 3000))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// startBroker is the common start of the end-to-end tests: a context that
// ends after timeout, an in-process broker, closed when the test ends, and
// the topics, each with partitions partitions. It returns the broker and the
// address the consumers are given.
func startBroker(t *testing.T, timeout time.Duration, partitions int, topics ...string) (context.Context, *broker.Broker, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	b, err := broker.Start(broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.CreateTopics(ctx, partitions, topics...); err != nil {
		t.Fatal(err)
	}
	return ctx, b, b.Addrs()[0]
}

// startConsumer starts the consumer on configPath, appending its output to
// logPath; env adds environment variables (e.g. KERNELSTREAM_* overrides).
func startConsumer(t *testing.T, configPath, logPath string, env ...string) *consumerProcess {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(logPath)
	cmd := exec.Command(os.Args[0], "-config", configPath)
	// One P per consumer: the tests run up to a dozen of them beside the
	// broker on two cores, where each runtime's spinning for work on a
	// second P cost about 9 % of the package's CPU (interleaved runs of the
	// package: 31.6 against 34.7 CPU-seconds).
	cmd.Env = append(append(os.Environ(), asConsumer+"=1", "GOMAXPROCS=1"), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &consumerProcess{cmd: cmd, done: make(chan error, 1), log: logPath,
		generations: strings.Count(string(before), assignedLine)}
	go func() { p.done <- cmd.Wait(); logf.Close() }()
	return p
}

// stop sends sig and waits up to wait for the exit; it returns the exit code.
func (p *consumerProcess) stop(t *testing.T, sig os.Signal, wait time.Duration) int {
	t.Helper()
	p.cmd.Process.Signal(sig) //nolint:errcheck // it may have exited already
	select {
	case <-p.done:
	case <-time.After(wait):
		p.cmd.Process.Kill() //nolint:errcheck
		<-p.done
		t.Errorf("consumer did not exit within %v of %v; log tail:\n%s", wait, sig, tail(p.log, 3000))
	}
	return p.cmd.ProcessState.ExitCode()
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// endOffsets sums the high watermarks of topic's partitions.
func endOffsets(ctx context.Context, addr, topic string, partitions int) (int64, []int64, error) {
	var sum int64
	ends := make([]int64, partitions)
	for p := 0; p < partitions; p++ {
		c, err := kafka.DialLeader(ctx, "tcp", addr, topic, p)
		if err != nil {
			return 0, nil, err
		}
		end, err := c.ReadLastOffset()
		c.Close()
		if err != nil {
			return 0, nil, err
		}
		ends[p] = end
		sum += end
	}
	return sum, ends, nil
}

// caughtUp reports whether group has committed the end offset of every
// partition of topic (the processor commits after its Badger checkpoint).
func caughtUp(ctx context.Context, addr, group, topic string, partitions int) (bool, error) {
	return committedEnds(ctx, addr, group, topic, partitions, false)
}

// committedEnds reports whether group's committed offsets reach the end of
// every partition of topic (skipEmpty: of every partition holding records).
func committedEnds(ctx context.Context, addr, group, topic string, partitions int, skipEmpty bool) (bool, error) {
	_, ends, err := endOffsets(ctx, addr, topic, partitions)
	if err != nil {
		return false, err
	}
	got, err := broker.Committed(ctx, []string{addr}, group, topic, partitions)
	if err != nil {
		return false, err
	}
	for p, end := range ends {
		if (end > 0 || !skipEmpty) && got[p] < end {
			return false, nil
		}
	}
	return true, nil
}

func writeConfig(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunFlags covers the paths that need no broker.
func TestRunFlags(t *testing.T) {
	dir := t.TempDir()
	good := writeConfig(t, dir, "good.yaml", "model: {algorithm: aogd-ald, dim: 3}\ncheckpoint: {dir: "+dir+"}\nkafka: {sasl: {mechanism: plain, username: u, password: topsecret}}\n")
	bad := writeConfig(t, dir, "bad.yaml", "model: {algorithm: aogd-ald, dim: 3}\nkafka: {grup: x}\n")
	var out, errb capture
	if code := run([]string{"-config", good, "-check"}, &out, &errb); code != 0 {
		t.Fatalf("-check exit %d: %s", code, errb)
	}
	if s := out.String(); !contains(s, "algorithm: aogd-ald") || contains(s, "topsecret") {
		t.Errorf("-check printed %s", s)
	}
	out, errb = capture{}, capture{}
	if code := run([]string{"-config", bad}, &out, &errb); code != 2 || !contains(errb.String(), "bad.yaml:2: unknown key kafka.grup") {
		t.Errorf("bad config: exit %d, stderr %s", code, errb)
	}
	noCA := writeConfig(t, dir, "noca.yaml", "model: {algorithm: aogd-ald, dim: 3}\nkafka: {tls: {enabled: true, ca_file: "+dir+"/missing.pem}}\n")
	errb = capture{}
	if code := run([]string{"-config", noCA, "-check"}, &out, &errb); code != 2 || !contains(errb.String(), "kafka.tls.ca_file") {
		t.Errorf("-check with a missing CA file: exit %d, stderr %s", code, errb.String())
	}
	if code := run([]string{"-config", good, "extra"}, &out, &errb); code != 2 {
		t.Errorf("extra argument: exit %d", code)
	}
}

type capture struct{ b []byte }

func (c *capture) Write(p []byte) (int, error) { c.b = append(c.b, p...); return len(p), nil }
func (c *capture) String() string              { return string(c.b) }

var _ io.Writer = (*capture)(nil)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// consumerConfig is what the end-to-end tests vary in the consumer's YAML
// configuration; the Kafka timings, checkpoint interval, HTTP, log and
// shutdown settings are the same for all of them.
type consumerConfig struct {
	brokers, group, output, dlq, dir string

	input      string // kafka.input_topic
	model      string // the body of the model: section, indented, one setting a line
	maxRecords int    // checkpoint.max_records
	cache      string // a whole cache: section, or "" for none
	extra      string // appended verbatim
	// session is kafka.session_timeout, 2 s when zero; heartbeats come
	// at a quarter of it, at most every 300 ms.
	session time.Duration
}

// singleMemberSession is the session timeout of the crash tests, whose group
// has one member, killed and restarted: the restarted member's join waits for
// the killed one's session to expire, so every kill costs this much. A
// spurious expiry there only adds a rebalance, which those tests tolerate by
// design; the tests with several live members keep 2 s, so that a member
// slowed down by a loaded machine keeps its partitions.
const singleMemberSession = time.Second

func (c consumerConfig) yaml() string {
	session := c.session
	if session == 0 {
		session = 2 * time.Second
	}
	heartbeat := min(session/4, 300*time.Millisecond)
	return fmt.Sprintf(`kafka:
  brokers: [%s]
  group: %s
  input_topic: %s
  output_topic: %s
  dlq_topic: %s
  session_timeout: %v
  heartbeat_interval: %v
  rebalance_timeout: 5s
  retry_backoff_max: 500ms
model:
%scheckpoint:
  dir: %s
  interval: 500ms
  max_records: %d
%shttp:
  addr: ""
log:
  level: info
  format: json
shutdown:
  grace: 15s
%s`, c.brokers, c.group, c.input, c.output, c.dlq, session, heartbeat, c.model, c.dir, c.maxRecords, c.cache, c.extra)
}

// fmtConfig is the configuration of the regression tests: aogd-ald on the
// 5-dimensional features topic.
func fmtConfig(brokers, group, output, dlq, dir string, extra string) string {
	return regressionConfig(brokers, group, output, dlq, dir, extra).yaml()
}

// crashConfig is fmtConfig with the session of a single member
// (singleMemberSession).
func crashConfig(brokers, group, output, dlq, dir string, extra string) string {
	c := regressionConfig(brokers, group, output, dlq, dir, extra)
	c.session = singleMemberSession
	return c.yaml()
}

func regressionConfig(brokers, group, output, dlq, dir string, extra string) consumerConfig {
	return consumerConfig{brokers: brokers, group: group, output: output, dlq: dlq, dir: dir,
		input: "features",
		model: `  algorithm: aogd-ald
  dim: 5
  kernel: {type: gaussian, sigma: 1}
  params: {max_budget: 64}
  seed: 3
`,
		maxRecords: 2000,
		extra:      extra,
	}
}

// TestExitCodesBeforeJoining: a missing topic exits 3 and a checkpoint
// directory of another model spec exits 4, both before joining the group.
func TestExitCodesBeforeJoining(t *testing.T) {
	t.Parallel()
	_, _, addr := startBroker(t, 30*time.Second, 2, "in", "out")
	dir := t.TempDir()
	body := func(seed int) string {
		return fmt.Sprintf("kafka: {brokers: [%q], input_topic: in, output_topic: out, dlq_topic: dlq}\nmodel: {algorithm: aogd-ald, dim: 3, seed: %d}\ncheckpoint: {dir: %s}\nhttp: {addr: \"\"}\nlog: {level: error}\n", addr, seed, dir)
	}
	var out, errb capture
	if code := run([]string{"-config", writeConfig(t, dir, "a.yaml", body(1))}, &out, &errb); code != 3 || !contains(errb.String(), `DLQTopic \"dlq\" does not exist`) {
		t.Errorf("missing DLQ topic: exit %d, stderr %s", code, errb.String())
	}
}

func TestExitCodeMapping(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("x: %w", processor.ErrClusterMismatch), 3},
		{fmt.Errorf("x: %w", processor.ErrSpecMismatch), 4},
		{errors.New("store"), 1},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
