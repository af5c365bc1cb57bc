package processor

import "testing"

func TestCheckChoice(t *testing.T) {
	for _, tc := range []struct {
		v       string
		choices []string
		want    string // "" = accepted
	}{
		{"lz4", Compressions, ""},
		{"brotli", Compressions, `"brotli": want none, gzip, snappy, lz4 or zstd`},
		{"", WrongPartitions, `"": want count or dead_letter`},
		{"only", []string{"only"}, ""},
		{"other", []string{"only"}, `"other": want only`},
	} {
		err := CheckChoice(tc.v, tc.choices)
		if (err == nil) != (tc.want == "") || (err != nil && err.Error() != tc.want) {
			t.Errorf("CheckChoice(%q): %v, want %q", tc.v, err, tc.want)
		}
	}
}
