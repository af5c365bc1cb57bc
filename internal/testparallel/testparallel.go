// Package testparallel lets a test package whose tests mostly wait (on a
// broker's session timeout, a paced stream, an outage) run more of them at
// once than the go command's default -test.parallel, GOMAXPROCS: 2 on a
// small CI machine, where those waits would otherwise queue one behind the
// other while the cores idle.
package testparallel

import (
	"flag"
	"strconv"
)

// Default sets -test.parallel to n unless the command line set it. Call it
// from TestMain before m.Run; it parses the command line (testing's flags
// must be registered, which they are once TestMain runs).
func Default(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if set || flag.Lookup("test.parallel") == nil {
		return
	}
	flag.Set("test.parallel", strconv.Itoa(n)) //nolint:errcheck // an int is a valid value
}
