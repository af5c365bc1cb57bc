// Package cputime reads the CPU time this process has used, the cost figure
// of the benchmarks: unlike records/s or ns/op it does not depend on how
// much of a shared machine the process got, and it counts every goroutine
// (background flushes, compactions, the embedded broker).
package cputime

import (
	"syscall"
	"time"
)

// Process is the user plus system CPU time of this process so far, or 0 if
// the system does not report it.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
