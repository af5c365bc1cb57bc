package processor

import (
	"fmt"
	"slices"
	"strings"
)

// The values of Config's enumerated fields, in the order the docs list them.
// config validates its keys against the same lists.
var (
	StartOffsets     = []string{"earliest", "latest"}
	OffsetResets     = []string{"earliest", "latest", "fail"}
	WrongPartitions  = []string{"count", "dead_letter"}
	Compressions     = []string{"none", "gzip", "snappy", "lz4", "zstd"}
	IsolationLevels  = []string{"read_committed", "read_uncommitted"}
	SASLMechanisms   = []string{"plain", "scram-sha-256", "scram-sha-512"}
	OutputDeliveries = []string{"at_least_once", "exactly_once"}
)

// CheckChoice returns nil when v is one of choices, else an error that says
// what is accepted: `"x": want a, b or c`.
func CheckChoice(v string, choices []string) error {
	if slices.Contains(choices, v) {
		return nil
	}
	want := choices[len(choices)-1]
	if len(choices) > 1 {
		want = strings.Join(choices[:len(choices)-1], ", ") + " or " + want
	}
	return fmt.Errorf("%q: want %s", v, want)
}
