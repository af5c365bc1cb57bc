package wire

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
		kind   Kind
		reason Reason // when the record is rejected
		bad    bool
		x      []float64
		y      float64
		id     string
	}{
		{in: `{"id":"a","x":[1,2.5,-3e-1]}`, kind: KindFeatures, x: []float64{1, 2.5, -0.3}, id: `"a"`},
		{in: ` { "x" : {"2": 4, "0": -1} , "id" : 17 , "y" : 0.5 } `, kind: KindLabeled, x: []float64{-1, 0, 4}, y: 0.5, id: `17`},
		{in: `{"id":"a","y":1,"ts":1700000000000}`, kind: KindLabel, y: 1, id: `"a"`},
		{in: `{"id":"a","reward":1,"arm":"i2"}`, kind: KindLabel, y: 1, id: `"a"`},
		{in: `{"id":"a","arms":[{"id":"i1","x":[1,2,3]},{"x":{"1":1},"id":2}]}`, kind: KindDecision, id: `"a"`},
		{in: `{"id":"a","x":[1,2,3],"extra":{"nested":[1,{"b":null}]}}`, kind: KindFeatures, x: []float64{1, 2, 3}, id: `"a"`},
		{in: `{"id":"a","x":[1,2]}`, bad: true, reason: ReasonDimension},
		{in: `{"id":"a","x":{"3":1}}`, bad: true, reason: ReasonDimension},
		{in: `{"id":"a","x":{"1":1,"1":2}}`, bad: true, reason: ReasonDimension},
		{in: `{"id":"a","x":[1,NaN,3]}`, bad: true, reason: ReasonNonFinite},
		{in: `{"id":"a","x":[1,-Infinity,3]}`, bad: true, reason: ReasonNonFinite},
		{in: `{"id":"a","x":[1,1e999,3]}`, bad: true, reason: ReasonNonFinite},
		{in: `{"id":"a","x":[1,"2",3]}`, bad: true, reason: ReasonWrongType},
		{in: `{"id":"a","x":"1,2,3"}`, bad: true, reason: ReasonWrongType},
		{in: `{"id":1.5,"x":[1,2,3]}`, bad: true, reason: ReasonWrongType},
		{in: `{"id":"a","y":"1"}`, bad: true, reason: ReasonWrongType},
		{in: `{"x":[1,2,3]}`, bad: true, reason: ReasonMissingField},
		{in: `{"id":"a"}`, bad: true, reason: ReasonMissingField},
		{in: `{"id":"a","x":[1,2,3],"reward":1}`, bad: true, reason: ReasonBadFields},
		{in: `{"id":"a","y":1,"reward":1}`, bad: true, reason: ReasonBadFields},
		{in: `{"id":"a","x":[1,2,3]`, bad: true, reason: ReasonBadJSON},
		{in: `{"id":"a","x":[1,2,3]} x`, bad: true, reason: ReasonBadJSON},
		{in: `{"id":"a","id":"b","x":[1,2,3]}`, bad: true, reason: ReasonBadJSON},
		{in: `[1,2,3]`, bad: true, reason: ReasonBadJSON},
		{in: "{\"id\":\"a\xff\",\"y\":1}", bad: true, reason: ReasonBadJSON},
		{in: ``, bad: true, reason: ReasonBadJSON},
	}
	d := NewDecoder(3, Limits{})
	for _, tc := range tests {
		r, err := d.Decode([]byte(tc.in))
		if tc.bad {
			if err == nil {
				t.Errorf("%s: accepted as kind %d", tc.in, r.Kind)
			} else if got := ReasonOf(err); got != tc.reason {
				t.Errorf("%s: reason %s, want %s (%v)", tc.in, got.String(), tc.reason.String(), err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if r.Kind != tc.kind || string(r.ID) != tc.id || (tc.x != nil && !equalFloats(r.X, tc.x)) || r.Y != tc.y {
			t.Errorf("%s: got kind %d id %s x %v y %v", tc.in, r.Kind, r.ID, r.X, r.Y)
		}
	}
	r, err := d.Decode([]byte(`{"id":"a","arms":[{"id":"i1","x":[1,2,3]},{"x":{"1":1},"id":2}]}`))
	if err != nil || len(r.Arms) != 2 || !equalFloats(r.Arms[1], []float64{0, 1, 0}) || string(r.ArmIDs[1]) != "2" {
		t.Fatalf("arms: %v %v %q", err, r.Arms, r.ArmIDs)
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

// FuzzDecode checks the Decoder against encoding/json: it never panics;
// whatever it accepts is valid JSON whose fields encoding/json reads the same.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"id":"a","x":[1,2,3]}`, `{"id":1,"x":{"0":1e-3},"y":-1}`, `{"id":"a","y":1}`,
		`{"id":"a","arms":[{"id":"i","x":[0,0,1]}]}`, `{"id":"a","reward":0.5,"arm":"i"}`, `{"id":"\u00e9","x":[1,2,3],"ts":5,"z":[{}]}`} {
		f.Add([]byte(s))
	}
	d := NewDecoder(3, Limits{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := d.Decode(data)
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
		if !bytes.Equal(bytes.TrimSpace(m["id"]), r.ID) {
			t.Fatalf("id %s, encoding/json %s", r.ID, m["id"])
		}
		if r.Kind == KindFeatures || r.Kind == KindLabeled {
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
			if !equalFloats(want, r.X) {
				t.Fatalf("x = %v, encoding/json %v", r.X, want)
			}
		}
		if r.HasY {
			var y float64
			raw := m["y"]
			if r.Reward {
				raw = m["reward"]
			}
			if json.Unmarshal(raw, &y) != nil || y != r.Y || math.IsInf(y, 0) {
				t.Fatalf("y = %v, encoding/json %s", r.Y, raw)
			}
		}
	})
}
