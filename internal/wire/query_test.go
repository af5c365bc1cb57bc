package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeQuery: scoring requests decode with the records' syntax for x
// and arms; what is not a query is refused with a message naming the field.
func TestDecodeQuery(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       *Query
		err        string // "" = no error
	}{
		{"prediction", `{"key":"u1","x":[1,2,3]}`, &Query{Key: []byte("u1"), X: []float64{1, 2, 3}}, ""},
		{"sparse x, id echoed", `{"id":"q7","key":"u1","x":{"2":5}}`, &Query{Key: []byte("u1"), ID: []byte(`"q7"`), X: []float64{0, 0, 5}}, ""},
		{"escaped key", `{"key":"u\u00e9\n","x":[1,2,3]}`, &Query{Key: []byte("u\u00e9\n"), X: []float64{1, 2, 3}}, ""},
		{"key_b64", `{"key_b64":"/w==","x":[1,2,3]}`, &Query{Key: []byte{0xff}, X: []float64{1, 2, 3}}, ""},
		{"decision", `{"key":"u1","arms":[{"id":"a","x":[1,2,3]},{"id":7,"x":[0,0,1]}]}`,
			&Query{Key: []byte("u1"), Arms: [][]float64{{1, 2, 3}, {0, 0, 1}}, ArmIDs: [][]byte{[]byte(`"a"`), []byte(`7`)}}, ""},
		{"no key", `{"x":[1,2,3]}`, nil, "key is required"},
		{"empty key", `{"key":"","x":[1,2,3]}`, nil, "key is required"},
		{"key not a string", `{"key":7,"x":[1,2,3]}`, nil, "key: want a string"},
		{"key twice", `{"key":"a","key_b64":"YQ==","x":[1,2,3]}`, nil, "key and key_b64"},
		{"bad base64", `{"key_b64":"!!","x":[1,2,3]}`, nil, "key_b64: not standard base64"},
		{"key too long", `{"key":"` + strings.Repeat("k", 1025) + `","x":[1,2,3]}`, nil, "key: 1025 bytes, above max_key_bytes = 1024"},
		{"neither x nor arms", `{"key":"u1"}`, nil, "want x (a prediction) or arms"},
		{"both", `{"key":"u1","x":[1,2,3],"arms":[{"id":1,"x":[1,2,3]}]}`, nil, "x and arms together"},
		{"a label", `{"key":"u1","x":[1,2,3],"y":1}`, nil, "scoring never changes state"},
		{"unknown field", `{"key":"u1","xx":[1,2,3]}`, nil, `unknown field "xx"`},
		{"wrong dimension", `{"key":"u1","x":[1,2]}`, nil, "x: length 2, model.dim is 3"},
		{"NaN", `{"key":"u1","x":[1,NaN,2]}`, nil, "x: NaN or Infinity"},
		{"arm without x", `{"key":"u1","arms":[{"id":1}]}`, nil, "arms: each arm needs id and x"},
		{"repeated arm", `{"key":"u1","arms":[{"id":1,"x":[1,2,3]},{"id":1,"x":[1,2,3]}]}`, nil, "arms[1].id 1 repeats arms[0].id 1"},
		{"not an object", `[1]`, nil, "not a JSON object"},
		{"trailing data", `{"key":"u1","x":[1,2,3]} x`, nil, "trailing data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := NewDecoder(3, Limits{}).DecodeQuery([]byte(tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(QueryError(err), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(q, tc.want) {
				t.Fatalf("got %+v, want %+v", q, tc.want)
			}
		})
	}
	if _, err := NewDecoder(3, Limits{Value: 10}).DecodeQuery([]byte(`{"key":"u1","x":[1,2,3]}`)); err == nil || !strings.Contains(err.Error(), "body: 24 bytes, above max_value_bytes = 10") {
		t.Fatalf("oversized body: %v", err)
	}
}

// TestAppendScore: an answer is the output record's object with the state's
// offsets and the fresh mark, and reads back as an Output.
func TestAppendScore(t *testing.T) {
	p := &Prediction{ID: []byte("null"), Key: []byte("u1"), Model: "bkb", YHat: 0.5, Std: 0.25, HasStd: true,
		Arm: []byte(`"a"`), Mean: 0.5, UCB: 1, Updates: 3, Partition: 2, Offset: 40}
	for _, tc := range []struct {
		fresh bool
		lab   int64
		want  string
	}{
		{false, -1, `{"id":null,"key":"u1","model":"bkb","y_hat":0.5,"std":0.25,"arm":"a","mean":0.5,"ucb":1,"n_updates":3,"partition":2,"offset":40}`},
		{true, 12, `{"id":null,"key":"u1","model":"bkb","y_hat":0.5,"std":0.25,"arm":"a","mean":0.5,"ucb":1,"n_updates":3,"partition":2,"offset":40,"labels_offset":12,"fresh":true}`},
	} {
		got := string(AppendScore(nil, p, tc.fresh, tc.lab))
		if got != tc.want {
			t.Fatalf("AppendScore:\n got %s\nwant %s", got, tc.want)
		}
		var o Output
		if err := json.Unmarshal([]byte(got), &o); err != nil || *o.UCB != 1 {
			t.Fatalf("reads back as %+v, %v", o, err)
		}
	}
}
