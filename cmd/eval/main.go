// Command eval replays a dataset through one learner in the online protocol
// (predict, then update) and reports what the papers report: progressive MSE,
// mistake rate, mean loss, dictionary size and time per pass. With -bandit it
// plays a synthetic kernel bandit instead. Flags and output: README.md, "Offline evaluation".
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kernelstream/kernelstream/internal/buildinfo"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code (0 ok, 2 usage
// or input error) and never panics on bad input.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.data, "data", "", "dataset `FILE` (LIBSVM 1-based, or CSV with the label first when the name ends in .csv)")
	fs.StringVar(&o.model, "model", "", "model `SPEC` as JSON, or @file")
	fs.BoolVar(&o.scale, "scale", false, "map features to [-1,1] and regression targets to [0,1] by the file's min and max")
	fs.Func("shuffle", "permute the records with `SEED` (repeat i uses SEED+i; also seeds the -adversarial block draw)", func(s string) error {
		v, err := parseUint(s)
		o.shuffle, o.shuffled = v, true
		return err
	})
	fs.IntVar(&o.repeat, "repeat", 1, "number of passes `N` (learner seed model.seed+i, permutation SEED+i)")
	fs.StringVar(&o.key, "key", "", "routing `KEY` whose per-key seed the learner gets, as in the consumer")
	fs.StringVar(&o.dump, "dump", "", "write `FILE` with 'index y y_hat' per record of the first pass")
	fs.IntVar(&o.limit, "limit", 0, "use only the first `N` records of the file (after -scale, before -shuffle and -adversarial); 0 = all")
	fs.IntVar(&o.adversarial, "adversarial", 0, "build FORKS' adversarial stream: 500 blocks, each instance repeated `R` times, labels flipped on even blocks")
	fs.IntVar(&o.blocks, "blocks", 500, "number of blocks `B` of the -adversarial stream")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress on stderr")
	fs.StringVar(&o.bandit, "bandit", "", "play a synthetic bandit `ENV` instead of a dataset (gp: reward drawn from the kernel's RKHS)")
	fs.IntVar(&o.arms, "arms", 100, "bandit: number of arms `A`")
	fs.IntVar(&o.dim, "dim", 5, "bandit: arm dimension `D`")
	fs.IntVar(&o.rounds, "rounds", 1000, "bandit: number of rounds `T`")
	fs.IntVar(&o.window, "window", 0, "bandit: also report regret, time per round and dictionary per window of `W` rounds (0 = off)")
	fs.Func("seed", "bandit: environment `SEED` (default 1)", func(s string) error {
		v, err := parseUint(s)
		o.seed, o.seeded = v, true
		return err
	})
	if code, done := buildinfo.ParseFlags(fs, args, stdout); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "eval: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if !o.quiet {
		o.progress = stderr
	}
	result, err := evaluate(&o)
	if err != nil {
		fmt.Fprintf(stderr, "eval: %s\n", oneLine(err))
		return 2
	}
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(result); err != nil {
		fmt.Fprintf(stderr, "eval: %v\n", err)
		return 2
	}
	return 0
}

func parseUint(s string) (uint64, error) {
	var v uint64
	_, err := fmt.Sscan(s, &v)
	if err != nil {
		return 0, fmt.Errorf("want a non-negative integer, got %q", s)
	}
	return v, nil
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
