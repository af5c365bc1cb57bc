package main

// The benchmark's broker runs in a process of its own, as a Kafka broker
// does next to a production consumer. In the consumer's process, the
// embedded broker's garbage (it allocates a buffer for every batch it serves
// or appends: about 90 MB/s of the 190 MB/s the whole process allocated at
// 2,000 decisions/s) set the pace of the consumer's garbage collections,
// and its request loop ran among the consumer's goroutines on the same two
// Ps; neither is the engine's, so neither belongs in its latency
// (docs/scale.md, "Decision latency"). The throughput drains followed on
// 2026-11-27 evening: moved out, the broker cost the kafka-go relay, which
// waits on each request, 15 % of its throughput at the same CPU per record
// and kernelstream 2 % (docs/scale.md, "Seventh session").
// -broker-inprocess keeps the old way.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/kernelstream/kernelstream/internal/broker"
)

// childBroker is the broker process of a run.
type childBroker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addrs []string
}

// serveBrokerEnv, set to a directory in this program's environment, makes it
// the broker process of a run, its log in that directory, or in memory when
// it is memoryLog (main and, for the tests, TestMain look for it first).
const serveBrokerEnv = "BENCHE2E_SERVE_BROKER"

// memoryLog as the broker process's directory keeps its log in memory, as
// the throughput runs' broker always did: their topics are deleted after
// each drain.
const memoryLog = ":memory:"

// asChildBroker runs the broker process if serveBrokerEnv says so.
func asChildBroker() (code int, ok bool) {
	dir := os.Getenv(serveBrokerEnv)
	if dir == "" {
		return 0, false
	}
	if err := serveChildBroker(dir, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benche2e broker process:", err)
		return 1, true
	}
	return 0, true
}

// startChildBroker starts this program as the broker process and waits for
// the address it prints.
func startChildBroker(dir string, stderr io.Writer) (*childBroker, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("broker process: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), serveBrokerEnv+"="+dir)
	// Only Write: given a writer with ReadFrom (a test's bytes.Buffer),
	// exec's copier would sit in ReadFrom for the whole run and, at the
	// child's exit, cut the buffer back to its length at the start, dropping
	// what the run wrote to it meanwhile.
	cmd.Stderr = struct{ io.Writer }{stderr}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("broker process: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("broker process: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("broker process: %w", err)
	}
	c := &childBroker{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		addr, ok := strings.CutPrefix(strings.TrimSpace(l), "ADDR ")
		if !ok {
			c.stop()
			return nil, fmt.Errorf("broker process: printed %q, want its address", l)
		}
		c.addrs = strings.Split(addr, ",")
	case <-time.After(30 * time.Second):
		c.stop()
		return nil, fmt.Errorf("broker process: no address within 30 s")
	}
	return c, nil
}

// stop closes the child's stdin (its signal to stop) and waits for it,
// killing it after 10 s.
func (c *childBroker) stop() {
	c.stdin.Close()
	done := make(chan struct{})
	go func() {
		c.cmd.Wait() //nolint:errcheck // the benchmark's result is already out
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill() //nolint:errcheck
		<-done
	}
}

// serveChildBroker is the child's side: the embedded broker with its log in
// dir (on disk, as a real broker keeps it; in memory for memoryLog), its
// address on stdout, until stdin closes.
func serveChildBroker(dir string, stdin io.Reader, stdout io.Writer) error {
	bo := broker.Options{DataDir: dir}
	if dir == memoryLog {
		bo.DataDir = ""
	}
	b, err := broker.Start(bo)
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Fprintf(stdout, "ADDR %s\n", strings.Join(b.Addrs(), ","))
	io.Copy(io.Discard, stdin) //nolint:errcheck // EOF or an error: either way the parent is gone
	return nil
}
