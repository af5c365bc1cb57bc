// Package testdata locates the shared benchmark datasets for tests and
// benchmarks, which skip when the datasets are not beside the checkout.
package testdata

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir returns the shared data directory (../shared/data beside the module
// root), or "" when it does not exist. KERNELSTREAM_DATA overrides it.
func Dir() string {
	if d := os.Getenv("KERNELSTREAM_DATA"); d != "" {
		return d
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	d := filepath.Join(root, "..", "shared", "data")
	if st, err := os.Stat(d); err == nil && st.IsDir() {
		return d
	}
	return ""
}

// Path returns the path of the named dataset, skipping the test when absent.
func Path(tb testing.TB, name string) string {
	tb.Helper()
	d := Dir()
	if d == "" {
		tb.Skipf("shared data directory not found; skipping test that needs %s", name)
	}
	p := filepath.Join(d, name)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("dataset %s not found: %v", name, err)
	}
	return p
}
