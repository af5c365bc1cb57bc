package wire

import (
	"strings"
	"testing"
)

// TestLimits: every byte string that reaches the state (key, id, a
// reward's arm, each arm's id) and the value they come in is refused above
// its limit, as an oversized dead letter naming the field and the limit;
// at the limit it passes.
func TestLimits(t *testing.T) {
	lim := Limits{Value: 200, Key: 8, ID: 10}
	id := func(n int) string { return `"` + strings.Repeat("i", n-2) + `"` } // a token of n bytes
	for _, tc := range []struct {
		name       string
		key, value string
		want       string // "" = accepted; else the dead letter's message
	}{
		{"key at the limit", "12345678", `{"id":"a","x":[1,2,3]}`, ""},
		{"key above", "123456789", `{"id":"a","x":[1,2,3]}`, "oversized: key: 9 bytes, above max_key_bytes = 8"},
		{"no key", "", `{"id":"a","x":[1,2,3]}`, "no_key: the message key routes the record to its learner"},
		{"value above", "k", `{"id":"a","x":[1,2,3],"pad":"` + strings.Repeat("z", 200) + `"}`, "oversized: value: 231 bytes, above max_value_bytes = 200"},
		{"id at the limit", "k", `{"id":` + id(10) + `,"x":[1,2,3]}`, ""},
		{"id above", "k", `{"id":` + id(11) + `,"x":[1,2,3]}`, "oversized: id: 11 bytes, above max_id_bytes = 10"},
		{"integer id above", "k", `{"id":12345678901,"y":1}`, "oversized: id: 11 bytes, above max_id_bytes = 10"},
		{"escapes count as written", "k", `{"id":"\u00e9\u00e9","y":1}`, "oversized: id: 14 bytes, above max_id_bytes = 10"},
		{"arm above", "k", `{"id":"a","reward":1,"arm":` + id(11) + `}`, "oversized: arm: 11 bytes, above max_id_bytes = 10"},
		{"an arm's id above", "k", `{"id":"a","arms":[{"id":"i","x":[1,2,3]},{"id":` + id(11) + `,"x":[1,2,3]}]}`, "oversized: arms[1].id: 11 bytes, above max_id_bytes = 10"},
		{"arm ids at the limit", "k", `{"id":"a","arms":[{"id":` + id(10) + `,"x":[1,2,3]}]}`, ""},
	} {
		d := NewDecoder(3, lim)
		err := d.Limits().Admit([]byte(tc.key), []byte(tc.value))
		if err == nil {
			_, err = d.Decode([]byte(tc.value))
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
}

// TestDefaultLimits: a decoder given no limits takes the documented
// defaults.
func TestDefaultLimits(t *testing.T) {
	if got := NewDecoder(1, Limits{}).Limits(); got != (Limits{Value: 1 << 20, Key: 1024, ID: 512}) {
		t.Fatalf("default limits %+v", got)
	}
}
