package service

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// ConsoleWriter is zerolog's human-readable format, coloured only when w is
// a terminal (colour codes in a log file or a pipe are noise).
func ConsoleWriter(w io.Writer) zerolog.ConsoleWriter {
	f, ok := w.(*os.File)
	tty := false
	if ok {
		if fi, err := f.Stat(); err == nil {
			tty = fi.Mode()&os.ModeCharDevice != 0
		}
	}
	return zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !tty}
}

// SignalContext is cancelled by the first SIGTERM or SIGINT; a second one
// exits the process at once with status 1 (an operator who insists).
func SignalContext(name string, stderr io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
			return
		}
		select {
		case s := <-ch:
			fmt.Fprintf(stderr, "%s: second %v: exiting without waiting for the checkpoint\n", name, s)
			os.Exit(1)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}
