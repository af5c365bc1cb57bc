package wire

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
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
