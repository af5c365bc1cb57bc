package processor

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"testing"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		in     string
		kind   kind
		reason reason // when the record is rejected
		bad    bool
		x      []float64
		y      float64
		id     string
	}{
		{in: `{"id":"a","x":[1,2.5,-3e-1]}`, kind: kindFeatures, x: []float64{1, 2.5, -0.3}, id: `"a"`},
		{in: ` { "x" : {"2": 4, "0": -1} , "id" : 17 , "y" : 0.5 } `, kind: kindLabeled, x: []float64{-1, 0, 4}, y: 0.5, id: `17`},
		{in: `{"id":"a","y":1,"ts":1700000000000}`, kind: kindLabel, y: 1, id: `"a"`},
		{in: `{"id":"a","reward":1,"arm":"i2"}`, kind: kindLabel, y: 1, id: `"a"`},
		{in: `{"id":"a","arms":[{"id":"i1","x":[1,2,3]},{"x":{"1":1},"id":2}]}`, kind: kindDecision, id: `"a"`},
		{in: `{"id":"a","x":[1,2,3],"extra":{"nested":[1,{"b":null}]}}`, kind: kindFeatures, x: []float64{1, 2, 3}, id: `"a"`},
		{in: `{"id":"a","x":[1,2]}`, bad: true, reason: reasonDimension},
		{in: `{"id":"a","x":{"3":1}}`, bad: true, reason: reasonDimension},
		{in: `{"id":"a","x":{"1":1,"1":2}}`, bad: true, reason: reasonDimension},
		{in: `{"id":"a","x":[1,NaN,3]}`, bad: true, reason: reasonNonFinite},
		{in: `{"id":"a","x":[1,-Infinity,3]}`, bad: true, reason: reasonNonFinite},
		{in: `{"id":"a","x":[1,1e999,3]}`, bad: true, reason: reasonNonFinite},
		{in: `{"id":"a","x":[1,"2",3]}`, bad: true, reason: reasonWrongType},
		{in: `{"id":"a","x":"1,2,3"}`, bad: true, reason: reasonWrongType},
		{in: `{"id":1.5,"x":[1,2,3]}`, bad: true, reason: reasonWrongType},
		{in: `{"id":"a","y":"1"}`, bad: true, reason: reasonWrongType},
		{in: `{"x":[1,2,3]}`, bad: true, reason: reasonMissingField},
		{in: `{"id":"a"}`, bad: true, reason: reasonMissingField},
		{in: `{"id":"a","x":[1,2,3],"reward":1}`, bad: true, reason: reasonBadFields},
		{in: `{"id":"a","y":1,"reward":1}`, bad: true, reason: reasonBadFields},
		{in: `{"id":"a","x":[1,2,3]`, bad: true, reason: reasonBadJSON},
		{in: `{"id":"a","x":[1,2,3]} x`, bad: true, reason: reasonBadJSON},
		{in: `{"id":"a","id":"b","x":[1,2,3]}`, bad: true, reason: reasonBadJSON},
		{in: `[1,2,3]`, bad: true, reason: reasonBadJSON},
		{in: "{\"id\":\"a\xff\",\"y\":1}", bad: true, reason: reasonBadJSON},
		{in: ``, bad: true, reason: reasonBadJSON},
	}
	d := newDecoder(3)
	for _, tc := range tests {
		r, err := d.decode([]byte(tc.in))
		if tc.bad {
			if err == nil {
				t.Errorf("%s: accepted as kind %d", tc.in, r.kind)
			} else if got := reasonOf(err); got != tc.reason {
				t.Errorf("%s: reason %s, want %s (%v)", tc.in, reasonNames[got], reasonNames[tc.reason], err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if r.kind != tc.kind || string(r.id) != tc.id || (tc.x != nil && !equalFloats(r.x, tc.x)) || r.y != tc.y {
			t.Errorf("%s: got kind %d id %s x %v y %v", tc.in, r.kind, r.id, r.x, r.y)
		}
	}
	r, err := d.decode([]byte(`{"id":"a","arms":[{"id":"i1","x":[1,2,3]},{"x":{"1":1},"id":2}]}`))
	if err != nil || len(r.arms) != 2 || !equalFloats(r.arms[1], []float64{0, 1, 0}) || string(r.armIDs[1]) != "2" {
		t.Fatalf("arms: %v %v %q", err, r.arms, r.armIDs)
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzDecode checks the decoder against encoding/json: it never panics;
// whatever it accepts is valid JSON whose fields encoding/json reads the same.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"id":"a","x":[1,2,3]}`, `{"id":1,"x":{"0":1e-3},"y":-1}`, `{"id":"a","y":1}`,
		`{"id":"a","arms":[{"id":"i","x":[0,0,1]}]}`, `{"id":"a","reward":0.5,"arm":"i"}`, `{"id":"\u00e9","x":[1,2,3],"ts":5,"z":[{}]}`} {
		f.Add([]byte(s))
	}
	d := newDecoder(3)
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := d.decode(data)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("accepted %q that encoding/json rejects: %v", data, err)
		}
		if !bytes.Equal(bytes.TrimSpace(m["id"]), r.id) {
			t.Fatalf("id %s, encoding/json %s", r.id, m["id"])
		}
		if r.kind == kindFeatures || r.kind == kindLabeled {
			var dense []float64
			var sparse map[string]float64
			want := make([]float64, 3)
			if json.Unmarshal(m["x"], &dense) == nil {
				copy(want, dense)
			} else if json.Unmarshal(m["x"], &sparse) == nil {
				for k, v := range sparse {
					i, _ := strconv.Atoi(k)
					want[i] = v
				}
			} else {
				t.Fatalf("x %s not decodable by encoding/json", m["x"])
			}
			if !equalFloats(want, r.x) {
				t.Fatalf("x = %v, encoding/json %v", r.x, want)
			}
		}
		if r.hasY {
			var y float64
			raw := m["y"]
			if r.reward {
				raw = m["reward"]
			}
			if json.Unmarshal(raw, &y) != nil || y != r.y || math.IsInf(y, 0) {
				t.Fatalf("y = %v, encoding/json %s", r.y, raw)
			}
		}
	})
}

func TestAppendPredictionIsJSON(t *testing.T) {
	p := prediction{id: []byte(`"x\"1"`), key: []byte("us\"er\x01\xff"), model: "kogd", yhat: 0.1 + 0.2, std: math.Inf(1), hasStd: true,
		arm: []byte(`3`), ranking: [][]byte{[]byte(`"a"`), []byte(`2`)}, label: -1, updates: 7, partition: 2, offset: 99}
	b := appendPrediction(nil, &p)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if m["y_hat"].(float64) != 0.1+0.2 || m["id"] != `x"1` || m["std"] != nil || m["n_updates"].(float64) != 7 {
		t.Fatalf("round trip: %s", b)
	}
}
