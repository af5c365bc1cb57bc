// Command consumer is the kernelstream service: it joins the consumer group
// of its configuration, runs one online kernel learner per routing key,
// writes a prediction per input record to the output topic and checkpoints
// learner state with the input offsets in Badger and the changelog topic
// (docs/pipeline.md). The demos are cmd/demo.
//
//	consumer -config FILE           run the service (KERNELSTREAM_<SECTION>_<KEY> overrides)
//	consumer -config FILE -check    validate the configuration and exit
//	consumer -dump-state DIR        print the learners stored in a checkpoint directory
//
// Signals: SIGTERM or SIGINT cancels the processor, which finishes the
// record in hand, checkpoints every partition and leaves the group; the
// process exits 0 within shutdown.grace (a second signal exits at once, 1).
// The HTTP server on http.addr serves /metrics (Prometheus), /healthz
// (the process is alive) and /readyz (every assigned partition restored,
// none stopped by a non-retriable error).
//
// Exit status: 0 after a clean stop; 1 a runtime failure (the checkpoint
// store); 2 an invalid configuration; 3 the cluster does not match the
// configuration (a topic missing or not describable, labels not
// co-partitioned with the input); 4 the checkpoint directory holds state of
// another model spec. 3 and 4 are decided before joining the group, so a
// restart loop costs the group no rebalance.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"

	"github.com/kernelstream/kernelstream/config"
	"github.com/kernelstream/kernelstream/internal/buildinfo"
	"github.com/kernelstream/kernelstream/internal/service"
	"github.com/kernelstream/kernelstream/processor"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without os.Exit, so tests can call it.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		configPath = fs.String("config", "", "YAML configuration file (see docs/operations.md); KERNELSTREAM_<SECTION>_<KEY> variables override it")
		check      = fs.Bool("check", false, "validate the configuration and read its TLS/SASL files, print it (secrets redacted) and exit")
		dumpState  = fs.String("dump-state", "", "print every learner stored in this checkpoint directory as JSON lines and exit")
		dumpParts  = fs.Int("dump-partitions", 1024, "with -dump-state: partitions to look at (0..N-1)")
		dumpBlobs  = fs.Bool("dump-blobs", false, "with -dump-state: include each state blob (base64)")
	)
	if code, done := buildinfo.ParseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "consumer: unexpected arguments %q\n", fs.Args())
		return 2
	}
	switch {
	case *dumpState != "":
		if err := dumpStates(*dumpState, *dumpParts, *dumpBlobs, stdout); err != nil {
			fmt.Fprintln(stderr, "consumer:", err)
			return 1
		}
		return 0
	}

	cfg, err := config.Load(*configPath)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintln(stderr, "consumer:", err)
		return 2
	}
	if *check {
		// Also read the TLS and SASL files, as the service would at start.
		if _, _, err := cfg.Kafka.Security(); err != nil {
			fmt.Fprintln(stderr, "consumer:", err)
			return 2
		}
		fmt.Fprint(stdout, cfg.String())
		return 0
	}
	logger, err := newLogger(cfg.Log, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "consumer:", err)
		return 2
	}
	ctx, stop := service.SignalContext("consumer", stderr)
	defer stop()
	if err := service.Serve(ctx, cfg, logger, nil); err != nil {
		logger.Error().Err(err).Msg("consumer stopped with an error")
		return exitCode(err)
	}
	logger.Info().Msg("consumer stopped")
	return 0
}

// exitCode maps Run's error onto the documented exit status.
func exitCode(err error) int {
	switch {
	case errors.Is(err, processor.ErrClusterMismatch):
		return 3
	case errors.Is(err, processor.ErrSpecMismatch):
		return 4
	}
	return 1
}

// newLogger builds the service logger from log.level and log.format.
func newLogger(c config.Log, w io.Writer) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(c.Level)
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("log.level: %w", err)
	}
	if c.Format == "console" {
		w = service.ConsoleWriter(w)
	}
	return zerolog.New(w).Level(level).With().Timestamp().Str("service", "kernelstream").Logger(), nil
}
