//go:build linux

package foreground

import (
	"os"
	"testing"
)

// Without a terminal on standard input (tests, CI, pipes) Run must leave
// the program alone; the terminal path is checked by hand (docs/operations.md).
func TestRunWithoutTerminal(t *testing.T) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	saved := os.Stdin
	os.Stdin = devnull
	defer func() { os.Stdin = saved }()
	if _, ok := Run(); ok {
		t.Fatal("Run re-executed without a terminal")
	}
	t.Setenv(childEnv, "1")
	if _, ok := Run(); ok {
		t.Fatal("Run re-executed inside the child")
	}
}
