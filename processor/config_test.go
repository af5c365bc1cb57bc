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

// TestValidateRecordLimits: the limits on keys and ids must fit Badger's
// keys, and a changelog record when the changelog is on.
func TestValidateRecordLimits(t *testing.T) {
	spec, err := models.ParseSpec(`{"algorithm":"aogd-ald","dim":5}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key, id, changelog int
		ok                 bool
	}{{0, 0, 0, true}, {0, 0, DefaultChangelogMaxMessageBytes, true}, {60000, 4000, DefaultChangelogMaxMessageBytes, true},
		{65000, 0, 0, false}, {1024, 64000, 0, false}, {2000, 0, 2048, false}, {-1, 0, 0, false}} {
		cfg := Config{Brokers: []string{"x:1"}, Group: "g", InputTopic: "in", OutputTopic: "out", DLQTopic: "dlq",
			Model: spec, CheckpointDir: t.TempDir(), MaxKeyBytes: c.key, MaxIDBytes: c.id}
		if c.changelog > 0 {
			cfg.Changelog = ChangelogConfig{Topic: "cl", MaxMessageBytes: c.changelog}
		}
		err := cfg.Validate()
		if c.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "MaxKeyBytes") {
			t.Errorf("MaxKeyBytes %d, MaxIDBytes %d, changelog %d: Validate() = %v", c.key, c.id, c.changelog, err)
		}
	}
}
