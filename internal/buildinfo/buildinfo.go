// Package buildinfo says which build of kernelstream is running: the
// -version flag of every command and the kernelstream_build_info metric.
package buildinfo

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Version is the release name, set at link time:
//
//	go build -ldflags "-X github.com/kernelstream/kernelstream/internal/buildinfo.Version=v1.2.0" ./cmd/consumer
//
// Empty means "take the module version or the VCS revision Go recorded".
var Version = ""

// Info describes one build.
type Info struct {
	Version   string // release name, module version, or "devel"
	Revision  string // VCS commit, "" when built outside a checkout
	Modified  bool   // the checkout had uncommitted changes
	GoVersion string
}

// Get reads the build information the Go toolchain embedded in the binary.
func Get() Info {
	i := Info{Version: Version, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
	}
	if i.Version == "" {
		i.Version = "devel"
	}
	return i
}

// String is the one line printed by -version, e.g.
// "consumer devel (revision 153a1d6c0ffe, modified) go1.26.8".
func (i Info) String() string {
	rev := i.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		rev = "unknown"
	}
	if i.Modified {
		rev += ", modified"
	}
	return fmt.Sprintf("%s (revision %s) %s", i.Version, rev, i.GoVersion)
}

// Collector is the kernelstream_build_info gauge: always 1, with the build
// as labels, so dashboards can show which version each pod runs.
func Collector() prometheus.Collector {
	i := Get()
	rev := i.Revision
	if i.Modified {
		rev += "-modified"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "kernelstream_build_info",
		Help:        "Build of the running binary (value 1): version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": rev, "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}

// ParseFlags adds -version to fs and parses args, the common start of every
// command. done reports that the command should exit now with code: after
// -h (0, the usage printed by the flag package), a bad flag (2) or -version
// (0, "name <build>" printed to stdout).
func ParseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) (code int, done bool) {
	version := fs.Bool("version", false, "print the build and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	if *version {
		fmt.Fprintln(stdout, fs.Name(), Get())
		return 0, true
	}
	return 0, false
}
