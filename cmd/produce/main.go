// Command produce replays a dataset file or a synthetic stream into a Kafka
// topic as input records of the wire contract (docs/pipeline.md, "Records"):
//
//	produce -brokers B -topic T -data FILE|-synthetic NAME [-keys N] [-rate R] [-labels inline|delayed] [-n N]
//
// Ids are "<key>-<seq>" (seq counts each key's records from 0), so two runs
// with the same flags produce the same records. With -labels delayed each
// label follows its features as a separate {"id","y"} record, 1 to
// -max-delay records later (deterministic, from -seed), on -labels-topic when
// given.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kernelstream/kernelstream/internal/buildinfo"
	"github.com/kernelstream/kernelstream/internal/dataset"
	"github.com/kernelstream/kernelstream/internal/feed"
	"github.com/kernelstream/kernelstream/internal/synth"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "produce:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	var (
		brokers     = fs.String("brokers", "localhost:9092", "comma-separated bootstrap brokers")
		topic       = fs.String("topic", "features", "input topic")
		labelsTopic = fs.String("labels-topic", "", "topic for delayed labels (default: -topic)")
		data        = fs.String("data", "", "LIBSVM or CSV file to replay (rows in file order)")
		dim         = fs.Int("dim", 0, "feature dimension of -data (0 = inferred) or of -synthetic (0 = 8)")
		scale       = fs.Bool("scale", false, "with -data: scale features to [-1,1] and regression targets to [0,1], like eval -scale")
		synthetic   = fs.String("synthetic", "", "synthetic stream: "+strings.Join(synth.Names(), "; "))
		keys        = fs.Int("keys", 4, "number of routing keys")
		rate        = fs.Float64("rate", 0, "records per second (0 = as fast as possible)")
		labels      = fs.String("labels", "inline", "inline or delayed")
		maxDelay    = fs.Int("max-delay", 64, "with -labels delayed: a label follows its features by 1..max-delay records")
		n           = fs.Int("n", 0, "feature records to produce (0 = the whole file, or with -synthetic until Ctrl-C)")
		seed        = fs.Uint64("seed", 1, "seed of the synthetic stream and of the label delays")
		noise       = fs.Float64("noise", 0.05, "label noise of the synthetic stream (std)")
		version     = fs.Bool("version", false, "print the build and exit")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *version {
		fmt.Println("produce", buildinfo.Get())
		return nil
	}
	var src feed.Source
	switch {
	case (*data == "") == (*synthetic == ""):
		return errors.New("give exactly one of -data and -synthetic")
	case *data != "":
		set, err := dataset.Load(*data, *dim)
		if err != nil {
			return err
		}
		if *scale {
			set.ScaleFeatures()
			if !set.IsBinary() {
				set.ScaleTargets()
			}
		}
		src = feed.NewDatasetSource(set, *keys)
	default:
		if *n <= 0 {
			fmt.Fprintln(os.Stderr, "produce: no -n: the synthetic stream is endless; Ctrl-C stops it")
		}
		if *noise == 0 {
			*noise = -1 // synth: negative means none
		}
		s, err := synth.New(*synthetic, synth.Options{Keys: *keys, Dim: *dim, Noise: *noise, Seed: *seed})
		if err != nil {
			return err
		}
		src = s
	}
	f, err := feed.New(src, feed.Options{Labels: *labels, MaxDelay: *maxDelay, Seed: *seed, N: *n})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	last := start
	written, err := feed.Produce(ctx, f, feed.Target{
		Brokers: strings.Split(*brokers, ","), Topic: *topic, LabelsTopic: *labelsTopic,
	}, feed.ProduceOptions{Rate: *rate, Progress: func(w int) {
		if time.Since(last) >= time.Second {
			last = time.Now()
			fmt.Fprintf(os.Stderr, "produce: %d records (%.0f/s)\n", w, float64(w)/time.Since(start).Seconds())
		}
	}})
	secs := time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "produce: %d records (%d features) to %s in %.2fs (%.0f records/s)\n", written, f.Emitted(), *topic, secs, float64(written)/secs)
	return err
}
