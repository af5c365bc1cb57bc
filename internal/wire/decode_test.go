package wire

import (
	"strconv"
	"strings"
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

// TestRepeatedFieldsAfterUnescaping: a field name is compared unescaped,
// as encoding/json and Python's json read it, so a field repeated with an
// escape is bad_json like a plain repetition (they would take the last
// value, the decoder used to take the first), and an escaped known name is
// that field.
func TestRepeatedFieldsAfterUnescaping(t *testing.T) {
	d := NewDecoder(3, Limits{})
	for _, in := range []string{
		`{"id":"a","\u0078":[1,2,3],"x":[4,5,6]}`,
		`{"id":"a","x":[1,2,3],"\u0078":[4,5,6]}`,
		`{"\u0069\u0064":"a","id":"b","x":[1,2,3]}`,
		`{"id":"a","y":1,"\u0079":2}`,
		`{"id":"a","reward":1,"r\u0065ward":2}`,
		`{"id":"a","x":[1,2,3],"\u0074s":1,"ts":2}`,
		`{"id":"a","arms":[{"id":"i","x":[1,2,3]}],"\u0061rms":[]}`,
		`{"id":"a","arms":[{"id":"i","\u0069d":"j","x":[1,2,3]}]}`,
		`{"id":"a","arms":[{"id":"i","x":[1,2,3],"\u0078":[4,5,6]}]}`,
	} {
		if _, err := d.Decode([]byte(in)); ReasonOf(err) != ReasonBadJSON || !strings.Contains(err.Error(), "repeated") {
			t.Errorf("%s: %v, want bad_json: repeated", in, err)
		}
	}
	for _, tc := range []struct {
		in string
		x  []float64
	}{
		{`{"\u0069d":"a","\u0078":[1,2,3]}`, []float64{1, 2, 3}},
		{`{"id":"a","x":[1,2,3],"\u00e9":[7],"\ud83d\ude00":1,"\ud800":2}`, []float64{1, 2, 3}},
		{`{"id":"a","x\n":[9],"x":[1,2,3]}`, []float64{1, 2, 3}},
	} {
		r, err := d.Decode([]byte(tc.in))
		if err != nil || !equalFloats(r.X, tc.x) {
			t.Errorf("%s: %v, x %v", tc.in, err, r)
		}
	}
}

// TestRepeatedArmIDs: two arms with the same id (the same token, or
// tokens that decode to the same value) are bad_fields naming the ids: a
// reward could not say which arm it is for. Arms are compared pairwise up
// to 8 and through a hash table beyond.
func TestRepeatedArmIDs(t *testing.T) {
	d := NewDecoder(1, Limits{})
	arms := func(ids ...string) string {
		var b strings.Builder
		b.WriteString(`{"id":"d","arms":[`)
		for i, id := range ids {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"id":` + id + `,"x":[` + strconv.Itoa(i) + `]}`)
		}
		b.WriteString(`]}`)
		return b.String()
	}
	many := func(dup int, id string) []string {
		var ids []string
		for i := 0; i < 40; i++ {
			ids = append(ids, `"item-`+strconv.Itoa(i)+`"`)
		}
		ids[dup] = id
		return ids
	}
	for _, tc := range []struct {
		ids  []string
		want string // "" = accepted
	}{
		{[]string{`"a"`, `"b"`}, ""},
		{[]string{`"a"`, `"a"`}, `bad_fields: arms[1].id "a" repeats arms[0].id "a"`},
		{[]string{`"a"`, `"b"`, `"\u0061"`}, `bad_fields: arms[2].id "\u0061" repeats arms[0].id "a"`},
		{[]string{`7`, `"7"`}, ""}, // a number and a string are different ids
		{[]string{`0`, `-0`}, `bad_fields: arms[1].id -0 repeats arms[0].id 0`},
		{[]string{`"\ud83d\ude00"`, `"😀"`}, `bad_fields: arms[1].id "😀" repeats arms[0].id "\ud83d\ude00"`},
		{many(39, `"item-39"`), ""},
		{many(39, `"item-3"`), `bad_fields: arms[39].id "item-3" repeats arms[3].id "item-3"`},
		{many(20, `"item-3\u0031"`), `bad_fields: arms[31].id "item-31" repeats arms[20].id "item-3\u0031"`},
	} {
		in := arms(tc.ids...)
		r, err := d.Decode([]byte(in))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", in, err)
		case tc.want == "" && len(r.ArmIDs) != len(tc.ids):
			t.Errorf("%s: %d arms", in, len(r.ArmIDs))
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %s", in, err, tc.want)
		}
	}
}

// TestHotPathAllocatesNothing: decoding good records (features, a decision
// of 40 arms whose ids are checked for repeats, escapes included), the
// limits, encoding their prediction into a buffer with room, and asking
// whether a nil error is a bad record allocate nothing once the buffers
// have grown.
func TestHotPathAllocatesNothing(t *testing.T) {
	var arms [][]byte
	for i := 0; i < 40; i++ {
		arms = append(arms, AppendArm(nil, "item-\u00e9"+strconv.Itoa(i), []float64{1, 2, 3}))
	}
	values := [][]byte{AppendLabeled(nil, "a", []float64{0.5, -1, 2}, 1), AppendDecision(nil, "d", arms), []byte(`{"\u0069d":"a","x":{"1":2}}`)}
	d := NewDecoder(3, Limits{})
	buf := make([]byte, 0, 4096)
	for _, v := range values {
		f := func() {
			r, err := d.Decode(v)
			if err != nil || IsBad(err) || d.Limits().Admit([]byte("k"), v) != nil {
				t.Fatal(err)
			}
			buf = AppendPrediction(buf[:0], &Prediction{ID: r.ID, Key: []byte("k\xff"), Model: "m", Ranking: r.ArmIDs})
		}
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations per record", v[:min(len(v), 40)], n)
		}
	}
}
