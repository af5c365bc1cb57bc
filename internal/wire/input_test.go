package wire

import (
	"math"
	"testing"
)

// TestInputEncoders: each encoder writes the record the decoder reads back
// as that kind, with the id, numbers (bit for bit) and arms given; a
// non-finite number, which no record may carry, is refused.
func TestInputEncoders(t *testing.T) {
	const id = `id "7"`
	x := []float64{0.1, -2.5e-7, 1234567.0000001}
	d := NewDecoder(3, Limits{})
	check := func(name string, value []byte, kind Kind, f func(r *Record) bool) {
		t.Helper()
		r, err := d.Decode(value)
		if err != nil || r.Kind != kind || Token(r.ID).String() != id || !f(r) {
			t.Errorf("%s: %s decodes to %+v, %v", name, value, r, err)
		}
	}
	check("features", AppendFeatures(nil, id, x), KindFeatures, func(r *Record) bool { return equalFloats(r.X, x) && !r.HasY })
	check("labeled", AppendLabeled(nil, id, x, -0.5), KindLabeled, func(r *Record) bool { return equalFloats(r.X, x) && r.HasY && r.Y == -0.5 })
	check("label", AppendLabel(nil, id, 3), KindLabel, func(r *Record) bool { return r.HasY && r.Y == 3 && !r.Reward })
	arms := [][]byte{AppendArm(nil, "a", x), AppendArm(nil, "b\n", []float64{1, 2, 3})}
	check("decision", AppendDecision(nil, id, arms), KindDecision, func(r *Record) bool {
		return len(r.Arms) == 2 && equalFloats(r.Arms[0], x) && Token(r.ArmIDs[1]).String() == "b\n"
	})
	check("reward", AppendReward(nil, id, 1, "b\n"), KindLabel, func(r *Record) bool { return r.Reward && r.Y == 1 && Token(r.Arm).String() == "b\n" })
	check("reward without arm", AppendReward(nil, id, 0, ""), KindLabel, func(r *Record) bool { return r.Reward && r.Arm == nil })
	if _, err := d.Decode(AppendLabel(nil, "a", math.NaN())); ReasonOf(err) != ReasonWrongType {
		t.Errorf("a NaN label: %v, want wrong_type", err)
	}
}
