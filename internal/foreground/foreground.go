//go:build linux

// Package foreground lets an interactive command own Ctrl-C.
//
// `make run` starts the demo through make and `go run`. Ctrl-C sends SIGINT
// to the terminal's whole foreground process group, so make and `go run`
// receive it too: the demo exits 0 after its clean shutdown, but `go run`
// reports exit 1 and GNU make re-raises SIGINT on itself (exit 130), whatever
// the demo did. A job-control shell avoids this by giving each job its own
// process group; Run does the same for one command: it re-executes the
// program as a new process group that becomes the terminal's foreground, so
// Ctrl-C reaches the demo alone, and exits with the demo's status.
package foreground

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// childEnv marks the re-executed program, which must not re-execute again.
const childEnv = "KERNELSTREAM_FOREGROUND_CHILD"

// Run re-executes the running program in its own foreground process group
// when standard input is a terminal, waits for it, hands the terminal back
// and returns its exit code with ok = true; the caller then exits with it.
// It returns ok = false, having done nothing, when standard input is not a
// terminal (tests, CI, pipes), in the re-executed child, or when the
// terminal cannot be handed over; the caller then simply goes on.
func Run() (code int, ok bool) {
	if os.Getenv(childEnv) != "" {
		return 0, false
	}
	tty := int(os.Stdin.Fd())
	orig, err := unix.IoctlGetInt(tty, unix.TIOCGPGRP)
	if err != nil {
		return 0, false // not a terminal
	}
	exe, err := os.Executable()
	if err != nil {
		return 0, false
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: tty}
	// The parent leaves the terminal to the child: it must neither die of
	// a stray Ctrl-C nor stop when it takes the terminal back from the
	// background (SIGTTOU).
	signal.Ignore(os.Interrupt, syscall.SIGTTOU, syscall.SIGTTIN)
	defer signal.Reset(os.Interrupt, syscall.SIGTTOU, syscall.SIGTTIN)
	if err := cmd.Start(); err != nil {
		return 0, false
	}
	err = cmd.Wait()
	_ = unix.IoctlSetPointerInt(tty, unix.TIOCSPGRP, orig)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, true
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), true
		}
		return exit.ExitCode(), true
	}
	return 1, true
}
