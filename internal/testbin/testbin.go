// Package testbin builds the project's commands for the tests that run them
// as a user does, into a directory that outlives the test run: the go command
// skips the link of an output whose build ID is current, so the commands are
// relinked only when their sources change (linking eval, produce and consumer
// costs about 5 CPU-seconds, finding them current about 0.3 s).
package testbin

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Build builds the main packages pkgs (import paths or paths relative to
// root, the module's directory) and returns the directory holding the
// binaries, each named as go build names it (the last element of its path).
// The directory is under the user's cache directory, one per module checkout
// and per name, so two test packages building in parallel use different
// names; a test run of the same package beside it waits for the other's
// build. Without a user cache directory the binaries go to a test temporary
// directory and are linked every time.
func Build(t testing.TB, root, name string, pkgs ...string) string {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := cacheDir(abs, name)
	if dir == "" {
		dir = t.TempDir()
	} else {
		unlock, err := lock(filepath.Join(dir, ".lock"))
		if err != nil {
			t.Fatalf("testbin: %v", err)
		}
		defer unlock()
	}
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = abs
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %v: %v\n%s", pkgs, err, out)
	}
	return dir
}

// cacheDir is <user cache>/kernelstream-test/<name>-<checkout hash>,
// created, or "" when there is no user cache directory to create it in.
func cacheDir(root, name string) string {
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(base, "kernelstream-test", name+"-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	return dir
}
