package wire

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"unicode/utf8"
)

// TestOutputRoundTrip: what AppendPrediction writes is JSON that decodes
// into Output with every field as given (a non-finite number as nil).
func TestOutputRoundTrip(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		p    Prediction
		want Output
	}{{
		p: Prediction{ID: []byte(`"x\"1"`), Key: []byte("us\"er\x01"), Model: "kogd", YHat: 0.1 + 0.2, Std: math.Inf(1), HasStd: true,
			Arm: []byte(`3`), Mean: -1.5, UCB: 2, Label: -1, Updates: 7, Partition: 2, Offset: 99},
		want: Output{ID: Token(`"x\"1"`), Key: "us\"er\x01", Model: "kogd", YHat: f(0.1 + 0.2), Arm: Token(`3`), Mean: f(-1.5), UCB: f(2),
			Label: -1, NUpdates: 7, Partition: 2, Offset: 99},
	}, {
		p: Prediction{ID: []byte(`17`), Key: []byte("k"), Model: "aogd-ald", YHat: math.NaN(), Ranking: [][]byte{[]byte(`"a"`), []byte(`2`)},
			Updates: 0, Partition: 0, Offset: 1},
		want: Output{ID: Token(`17`), Key: "k", Model: "aogd-ald", Ranking: []Token{Token(`"a"`), Token(`2`)}, Offset: 1},
	}} {
		b := AppendPrediction(nil, &tc.p)
		var o Output
		if err := json.Unmarshal(b, &o); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(o, tc.want) {
			t.Errorf("%s decodes to\n%+v, want\n%+v", b, o, tc.want)
		}
		if o.ID.String() != map[bool]string{true: `x"1`, false: "17"}[tc.p.HasStd] {
			t.Errorf("id text %q", o.ID.String())
		}
	}
}

// TestOutputKeyLossless: a key that is not valid UTF-8 reads as text with
// U+FFFD in "key" (so "\xff" and "\xfe" read the same) and its bytes in
// "key_b64"; a valid key has no key_b64. (key, id) stays unique.
func TestOutputKeyLossless(t *testing.T) {
	seen := map[string]string{}
	for _, key := range []string{"user-7", "\xff", "\xfe", "a\xffb", "é", "\u2028", ""} {
		b := AppendPrediction(nil, &Prediction{ID: []byte(`"1"`), Key: []byte(key), Model: "m"})
		var o Output
		if err := json.Unmarshal(b, &o); err != nil {
			t.Fatalf("%q: %s: %v", key, b, err)
		}
		if string(o.RoutingKey()) != key {
			t.Errorf("%q: %s reads back as key %q", key, b, o.RoutingKey())
		}
		if hasB64 := o.KeyB64 != nil; hasB64 == utf8.ValidString(key) {
			t.Errorf("%q: %s: key_b64 present %v", key, b, hasB64)
		}
		dedup := string(o.RoutingKey()) + "/" + string(o.ID)
		if prev, dup := seen[dedup]; dup {
			t.Errorf("keys %q and %q give the same (key, id)", prev, key)
		}
		seen[dedup] = key
	}
}

// BenchmarkAppendPrediction encodes make bench-e2e's output: a regression
// prediction of an integer id for a short ASCII key.
func BenchmarkAppendPrediction(b *testing.B) {
	p := Prediction{ID: []byte("1234567"), Key: []byte("user-42"), Model: "aogd-ald", YHat: 0.123456789012345,
		Updates: 31250, Partition: 3, Offset: 7812345}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf = AppendPrediction(buf[:0], &p)
	}
}
