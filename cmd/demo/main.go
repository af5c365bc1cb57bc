// Command demo runs kernelstream end to end on one machine: an embedded
// Kafka-protocol broker, a synthetic stream and consumers of the service,
// with live progress on stderr (make run, make run-bandit).
//
//	demo [flags]          a regression stream with delayed labels, one consumer group per model
//	demo bandit [flags]   recommendations: decisions among candidate items, clicks from a simulated audience
//
// The demos are a separate command so that the service binary (cmd/consumer)
// does not link the embedded broker. Ctrl-C stops a demo (exit 0), which
// checkpoints its consumers' state first.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kernelstream/kernelstream/internal/buildinfo"
	"github.com/kernelstream/kernelstream/internal/foreground"
	"github.com/kernelstream/kernelstream/internal/service"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	d := demoFlags{mode: "stream"}
	if len(args) > 0 && (args[0] == "bandit" || args[0] == "stream") {
		d.mode, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	d.register(fs)
	if code, done := buildinfo.ParseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "demo: unexpected arguments %q (the demos are `demo` and `demo bandit`)\n", fs.Args())
		return 2
	}
	d.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { d.set[f.Name] = true })
	if code, ok := foreground.Run(); ok {
		return code // the demo ran as the terminal's foreground job
	}
	ctx, stop := service.SignalContext("demo", stderr)
	defer stop()
	if err := runDemo(ctx, d, stderr); err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	return 0
}
