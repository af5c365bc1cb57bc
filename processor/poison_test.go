package processor

import (
	"strings"
	"testing"

	"github.com/kernelstream/kernelstream/internal/wire"
)

// TestLongKeysAndIDsAreDeadLetters: between good records, a predict-only
// record with a 70 KB id (its pending entry's store key would exceed
// Badger's 65,000 bytes and fail every checkpoint), one with a 100 KB key,
// a decision with a 600-byte arm id and a reward naming one: each is
// dead-lettered "oversized" naming its field and limit, the checkpoint
// commits, and the state is the good records' alone.
func TestLongKeysAndIDsAreDeadLetters(t *testing.T) {
	t.Parallel()
	good := stream(2, 8, 3, 48)
	long := func(c string, n int) string { return strings.Repeat(c, n) }
	x := []float64{1, 2, 3}
	bad := []testRecord{
		{key: "user-0", value: string(wire.AppendFeatures(nil, long("i", 70_000), x))},
		{key: long("k", 100_000), value: string(wire.AppendFeatures(nil, "long-key", x))},
		{key: "user-1", value: string(wire.AppendDecision(nil, "d", [][]byte{wire.AppendArm(nil, "a", x), wire.AppendArm(nil, long("a", 600), x)}))},
		{key: "user-1", value: string(wire.AppendReward(nil, "d0", 1, long("a", 600)))},
	}
	want := []string{"oversized: id: 70002 bytes, above max_id_bytes = 512", "oversized: key: 100000 bytes, above max_key_bytes = 1024",
		"oversized: arms[1].id: 602 bytes, above max_id_bytes = 512", "oversized: arm: 602 bytes, above max_id_bytes = 512"}
	ts := newTester(t, lmsSpec, nil)
	ts.consume(good[:len(good)/2]...)
	ts.consume(bad...)
	ts.checkpoint()
	ts.consume(good[len(good)/2:]...)
	dead := ts.emitted(tDLQ)
	if len(dead) != len(want) {
		t.Fatalf("%d dead letters, want %d", len(dead), len(want))
	}
	for i, d := range dead {
		if d.headers[wire.HeaderError] != want[i] || d.headers[wire.HeaderReason] != "oversized" {
			t.Errorf("dead letter %d: %q (reason %q), want %q", i, d.headers[wire.HeaderError], d.headers[wire.HeaderReason], want[i])
		}
	}
	if st := ts.w.p.Stats(); st.Records["dead"] != int64(len(want)) || st.DeadLetters["oversized"] != int64(len(want)) {
		t.Errorf("stats: records %v, dead letters %v", st.Records, st.DeadLetters)
	}
	checkStates(t, replay(t, lmsSpec, good, DefaultTopK), ts.close())
}
