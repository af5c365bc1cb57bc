// Command broker runs the embedded Kafka-protocol broker (franz-go's kfake)
// alone, with the topics a kernelstream configuration names, for trying the
// service by hand: start it, then the consumer and the producer against it.
//
//	broker [-config FILE] [-port 19092] [-partitions 4] [-data-dir DIR]
//
// It is a development tool, not a Kafka: one process, no replication, the
// log in memory unless -data-dir is given. Ctrl-C stops it (exit 0).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kernelstream/kernelstream/config"
	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/buildinfo"
	"github.com/kernelstream/kernelstream/internal/foreground"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		configPath = fs.String("config", "", "kernelstream configuration whose topics (input, output, dead-letter, labels) are created; empty = the defaults' topics")
		port       = fs.Int("port", 19092, "listening port on 127.0.0.1")
		partitions = fs.Int("partitions", 4, "partitions of every topic created")
		dataDir    = fs.String("data-dir", "", "keep the log in this directory across restarts; empty = in memory")
	)
	if code, done := buildinfo.ParseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "broker: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *partitions < 1 {
		fmt.Fprintln(stderr, "broker: -partitions must be at least 1")
		return 2
	}
	// Only the topic names are used: the configuration need not be complete
	// (a model is not required to start a broker).
	cfg, err := config.Load(*configPath)
	if err != nil {
		fmt.Fprintln(stderr, "broker:", err)
		return 2
	}
	if code, ok := foreground.Run(); ok {
		return code // ran as the terminal's foreground job: Ctrl-C reaches it alone
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, cfg.Kafka, *port, *partitions, *dataDir, stdout); err != nil {
		fmt.Fprintln(stderr, "broker:", err)
		return 1
	}
	return 0
}

// topics lists the topics of k that the consumer reads or writes and does
// not create itself.
func topics(k config.Kafka) []string {
	var ts []string
	for _, t := range []string{k.InputTopic, k.OutputTopic, k.DLQTopic, k.LabelsTopic} {
		if t != "" {
			ts = append(ts, t)
		}
	}
	return ts
}

func serve(ctx context.Context, k config.Kafka, port, partitions int, dataDir string, out io.Writer) error {
	b, err := broker.Start(broker.Options{Port: port, DataDir: dataDir})
	if err != nil {
		return err
	}
	defer b.Close()
	ts := topics(k)
	if err := b.CreateTopics(ctx, partitions, ts...); err != nil {
		return err
	}
	fmt.Fprintf(out, "broker: listening on %s; topics %s (%d partitions each); Ctrl-C stops it\n",
		strings.Join(b.Addrs(), ","), strings.Join(ts, ", "), partitions)
	<-ctx.Done()
	fmt.Fprintln(out, "broker: stopped")
	return nil
}
