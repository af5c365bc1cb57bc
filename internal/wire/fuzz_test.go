package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"testing"
)

// fuzzLimits are small, so that the fuzzer reaches both sides of each.
var fuzzLimits = Limits{Value: 4096, Key: 12, ID: 12}

// FuzzDecode checks the decoder against encoding/json, and the output
// encoder against the decoded record. For any key and value: nothing
// panics; Admit refuses exactly an empty or too long key and a too long
// value; whatever Decode accepts is valid JSON with no known field given
// twice (names compared unescaped, at the top and in each arm), whose id,
// x, y or reward, arm and arms encoding/json reads the same, whose ids are
// within the limit and whose arms have ids that differ as values; and the
// prediction encoded for it is JSON that reads back as the record's id,
// arms and key, byte for byte.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"id":"a","x":[1,2,3]}`, `{"id":1,"x":{"0":1e-3},"y":-1}`, `{"id":"a","y":1}`,
		`{"id":"a","arms":[{"id":"i","x":[0,0,1]}]}`, `{"id":"a","reward":0.5,"arm":"i"}`, `{"id":"\u00e9","x":[1,2,3],"ts":5,"z":[{}]}`,
		`{"id":"a","arms":[{"id":"i","x":[0,0,1]},{"id":"\u0069","x":[1,0,0]}]}`, `{"id":"a","\u0078":[1,2,3],"x":[4,5,6]}`,
		`{"id":"a","arms":[{"id":7,"x":[1,2,3]},{"id":"7","x":{"1":2}},{"x":[0,0,0],"id":-0}]}`, `{"id":"0123456789ab","delete":true}`,
		`{"id":"a","arms":[{"id":"i","\u0069d":"j","x":[1,2,3]}]}`} {
		f.Add([]byte("user-7"), []byte(s))
	}
	f.Add([]byte("\xff"), []byte(`{"id":"a","x":[1,2,3]}`))
	f.Add([]byte(""), []byte(`{"id":"a","x":[1,2,3]}`))
	f.Add([]byte("a-key-longer-than-12"), []byte(`{"id":"a","x":[1,2,3]}`))
	d := NewDecoder(3, fuzzLimits)
	f.Fuzz(func(t *testing.T, key, data []byte) {
		err := d.Limits().Admit(key, data)
		wantReason := ReasonNoKey
		switch {
		case len(data) > fuzzLimits.Value, len(key) > fuzzLimits.Key:
			wantReason = ReasonOversized
		case len(key) > 0:
			wantReason = NumReasons // admitted
		}
		if err == nil && wantReason != NumReasons || err != nil && ReasonOf(err) != wantReason {
			t.Fatalf("Admit(%q, %d bytes) = %v", key, len(data), err)
		}
		r, err := d.Decode(data)
		if err != nil {
			return
		}
		m := acceptedObject(t, data)
		checkID(t, "id", r.ID, m["id"])
		if r.Kind == KindFeatures || r.Kind == KindLabeled {
			if want := jsonVector(t, m["x"]); !equalFloats(want, r.X) {
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
		if r.Arm != nil {
			checkID(t, "arm", r.Arm, m["arm"])
		}
		if r.Kind == KindDecision {
			checkArms(t, r, m["arms"])
		}
		checkOutput(t, key, r)
	})
}

// acceptedObject is an accepted body's fields as encoding/json reads them;
// it fails unless the body is a valid JSON object whose known fields (at
// the top and in each arm) each occur once.
func acceptedObject(t *testing.T, data []byte) map[string]json.RawMessage {
	t.Helper()
	if !json.Valid(data) {
		t.Fatalf("accepted invalid JSON %q", data)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("accepted %q that encoding/json rejects: %v", data, err)
	}
	checkUniqueNames(t, data)
	return m
}

// checkID fails unless tok is raw's token and within the limit.
func checkID(t *testing.T, field string, tok []byte, raw json.RawMessage) {
	t.Helper()
	if !bytes.Equal(bytes.TrimSpace(raw), tok) || len(tok) > fuzzLimits.ID {
		t.Fatalf("%s %s, encoding/json %s (limit %d)", field, tok, raw, fuzzLimits.ID)
	}
}

// jsonVector is x as encoding/json reads it, dense or sparse, of dimension 3.
func jsonVector(t *testing.T, raw json.RawMessage) []float64 {
	t.Helper()
	var dense []float64
	var sparse map[string]float64
	want := make([]float64, 3)
	if json.Unmarshal(raw, &dense) == nil {
		copy(want, dense)
	} else if json.Unmarshal(raw, &sparse) == nil {
		for k, v := range sparse {
			i, _ := strconv.Atoi(k)
			want[i] = v
		}
	} else {
		t.Fatalf("x %s not decodable by encoding/json", raw)
	}
	return want
}

// checkArms compares a decision's arms with encoding/json's reading (the
// arm objects as maps: case-sensitive names, as the decoder's) and checks
// that no two ids are the same value.
func checkArms(t *testing.T, r *Record, raw json.RawMessage) {
	t.Helper()
	var arms []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &arms); err != nil || len(arms) != len(r.Arms) || len(r.ArmIDs) != len(arms) {
		t.Fatalf("arms %s: %v, decoded %d", raw, err, len(r.Arms))
	}
	values := map[string]int{}
	for i, a := range arms {
		checkID(t, "arms.id", r.ArmIDs[i], a["id"])
		if want := jsonVector(t, a["x"]); !equalFloats(want, r.Arms[i]) {
			t.Fatalf("arms[%d].x = %v, encoding/json %v", i, r.Arms[i], want)
		}
		v := idValue(t, a["id"])
		if j, dup := values[v]; dup {
			t.Fatalf("arms %d and %d have the same id %s", j, i, v)
		}
		values[v] = i
	}
}

// idValue is an id as its readers compare it: a string's value, or an
// integer's (of any size; -0 is 0).
func idValue(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return "s:" + s
	}
	n, ok := new(big.Int).SetString(string(bytes.TrimSpace(raw)), 10)
	if !ok {
		t.Fatalf("id %s is neither a string nor an integer", raw)
	}
	return "n:" + n.String()
}

// checkUniqueNames fails if a known field name occurs twice in the object,
// or in one of its arms, names read unescaped by encoding/json.
func checkUniqueNames(t *testing.T, data []byte) {
	t.Helper()
	var top map[string]json.RawMessage
	_ = json.Unmarshal(data, &top)
	check := func(obj json.RawMessage, known ...string) {
		dec := json.NewDecoder(bytes.NewReader(obj))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return
		}
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			name := tok.(string)
			for _, k := range known {
				if name == k && seen[k] {
					t.Fatalf("field %q given twice in %s", k, obj)
				}
			}
			seen[name] = true
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				t.Fatal(err)
			}
		}
	}
	check(data, "id", "x", "y", "reward", "arm", "arms", "ts", "delete")
	var arms []json.RawMessage
	if json.Unmarshal(top["arms"], &arms) == nil {
		for _, a := range arms {
			check(a, "id", "x")
		}
	}
}

// checkOutput encodes the prediction a record gets and reads it back.
func checkOutput(t *testing.T, key []byte, r *Record) {
	t.Helper()
	p := Prediction{ID: r.ID, Key: key, Model: "m", YHat: r.Y, Arm: r.Arm}
	if r.Kind == KindDecision {
		p.Ranking = r.ArmIDs
	}
	b := AppendPrediction(nil, &p)
	var o Output
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("output %s: %v", b, err)
	}
	if !bytes.Equal(o.ID, r.ID) || !bytes.Equal(o.RoutingKey(), key) || !bytes.Equal(o.Arm, r.Arm) || len(o.Ranking) != len(p.Ranking) {
		t.Fatalf("output %s reads back as %+v", b, o)
	}
	for i := range o.Ranking {
		if !bytes.Equal(o.Ranking[i], p.Ranking[i]) {
			t.Fatalf("output %s: ranking[%d] %s, want %s", b, i, o.Ranking[i], p.Ranking[i])
		}
	}
}

// FuzzDecodeQuery checks the scoring request decoder (the body of POST
// /v1/score, from the network) against encoding/json. For any body: nothing
// panics; whatever DecodeQuery accepts is valid JSON with only the query's
// fields, each once, a key (key's string value, or key_b64's bytes) within
// the limit, and exactly one of x and arms, which encoding/json reads the
// same (arms with distinct ids); and decoding it again gives the same query.
func FuzzDecodeQuery(f *testing.F) {
	for _, s := range []string{`{"key":"u1","x":[1,2,3]}`, `{"key":"u1","id":7,"x":{"2":0.5}}`,
		`{"key_b64":"/w==","arms":[{"id":"i","x":[0,0,1]},{"id":"j","x":[1, 0.25 ,-3]}]}`, `{"key":"u\u0031","x":[ 1e3 ,2,3]}`,
		`{"key":"u1","x":[1,2,3],"y":1}`, `{"key":"u1","key_b64":"dTE=","x":[1,2,3]}`, `{"key":"","x":[1,2,3]}`,
		`{"key":"u1","arms":[{"id":"i","x":[0.12345678901234567,0,1]},{"id":"i","x":[1,0,0]}]}`, `{"key":"u1","x":[1,2]}`,
		`{"key":"u1","x":[1,2,3,4]}`, `{"key":"u1","x":[1,2,3],"z":1}`} {
		f.Add([]byte(s))
	}
	d := NewDecoder(3, fuzzLimits)
	f.Fuzz(func(t *testing.T, data []byte) {
		q, err := d.DecodeQuery(data)
		if err != nil {
			if _, ok := err.(*BadRecord); !ok {
				t.Fatalf("error %v (%T) is not a *BadRecord", err, err)
			}
			return
		}
		m := acceptedObject(t, data)
		for name := range m {
			switch name {
			case "key", "key_b64", "id", "x", "arms":
			default:
				t.Fatalf("accepted field %q", name)
			}
		}
		var key []byte
		if raw, ok := m["key"]; ok {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				t.Fatalf("key %s is not a string", raw)
			}
			key = []byte(s)
		} else {
			var s string
			if json.Unmarshal(m["key_b64"], &s) != nil {
				t.Fatalf("key_b64 %s is not a string", m["key_b64"])
			}
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				t.Fatalf("key_b64 %q: %v", s, err)
			}
			key = b
		}
		if !bytes.Equal(key, q.Key) || len(key) == 0 || len(key) > fuzzLimits.Key {
			t.Fatalf("key %q, encoding/json %q (limit %d)", q.Key, key, fuzzLimits.Key)
		}
		if raw, ok := m["id"]; ok {
			checkID(t, "id", q.ID, raw)
		}
		switch {
		case (q.X != nil) == (q.Arms != nil):
			t.Fatalf("x %v and arms %v: want exactly one", q.X, q.Arms)
		case q.X != nil:
			if want := jsonVector(t, m["x"]); !equalFloats(want, q.X) {
				t.Fatalf("x = %v, encoding/json %v", q.X, want)
			}
		default:
			checkArms(t, &Record{Arms: q.Arms, ArmIDs: q.ArmIDs}, m["arms"])
		}
		first := *q
		first.Key, first.ID = bytes.Clone(q.Key), bytes.Clone(q.ID)
		first.X = append([]float64(nil), q.X...)
		again, err := d.DecodeQuery(data)
		if err != nil || !bytes.Equal(again.Key, first.Key) || !bytes.Equal(again.ID, first.ID) || !equalFloats(again.X, first.X) {
			t.Fatalf("decoded again: %+v, %v; first %+v", again, err, first)
		}
	})
}
