package processor

import (
	"strings"
	"testing"

	"github.com/kernelstream/kernelstream/models"
)

// TestValidateMemTable: the memtable size is 0 (the default) or within
// [8, MaxCheckpointMemTableMiB] MiB, and an error names the field.
func TestValidateMemTable(t *testing.T) {
	spec, err := models.ParseSpec(`{"algorithm":"aogd-ald","dim":5}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mib int
		ok  bool
	}{{0, true}, {8, true}, {64, true}, {MaxCheckpointMemTableMiB, true}, {7, false}, {-1, false}, {MaxCheckpointMemTableMiB + 1, false}} {
		cfg := Config{Brokers: []string{"x:1"}, Group: "g", InputTopic: "in", OutputTopic: "out", DLQTopic: "dlq",
			Model: spec, CheckpointDir: t.TempDir(), CheckpointMemTableMiB: c.mib}
		err := cfg.Validate()
		if c.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "CheckpointMemTableMiB") {
			t.Errorf("CheckpointMemTableMiB %d: Validate() = %v", c.mib, err)
		}
	}
}
