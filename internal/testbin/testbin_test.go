package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildReusesCurrentBinary: a second Build of unchanged sources keeps the
// binary file (the go command touches a current output but replaces a
// relinked one, so the same file means no link), the binary runs, and a
// source change is rebuilt.
func TestBuildReusesCurrentBinary(t *testing.T) {
	root := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/hello\n\ngo 1.21\n")
	write("main.go", "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n")
	// A user cache directory of the test's own; the go command keeps its
	// build cache (which defaults to a directory under the user cache).
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOCACHE", strings.TrimSpace(string(gocache)))
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())

	dir := Build(t, root, "hello", ".")
	bin := filepath.Join(dir, "hello")
	first, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if again := Build(t, root, "hello", "."); again != dir {
		t.Fatalf("second build in %s, first in %s", again, dir)
	}
	second, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(first, second) {
		t.Errorf("unchanged sources relinked: %s was replaced", bin)
	}
	out, err := exec.Command(bin).Output()
	if err != nil || strings.TrimSpace(string(out)) != "hello" {
		t.Fatalf("%s: %q, %v", bin, out, err)
	}

	write("main.go", "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"changed\") }\n")
	Build(t, root, "hello", ".")
	out, err = exec.Command(bin).Output()
	if err != nil || strings.TrimSpace(string(out)) != "changed" {
		t.Fatalf("after a source change %s printed %q, %v", bin, out, err)
	}
}
