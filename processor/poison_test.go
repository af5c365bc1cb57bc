package processor

import (
	"fmt"
	"strings"
	"testing"
	"time"

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

// TestOutlierTsExpiresNothing: labels.max_ts_skew (6 h) is above
// labels.ttl (1 h), so a record whose ts is 2 h ahead of its Kafka
// timestamp passes the skew check; it must not move the watermark past
// the log's time and expire the 201 predictions pending on the partition
// (other keys' and its own): their labels, which follow, are all applied.
// Once the log's own time is 2 h later, the TTL does expire.
func TestOutlierTsExpiresNothing(t *testing.T) {
	t.Parallel()
	ts := newTester(t, lmsSpec, nil)
	var recs, labels []testRecord
	for i := 0; i < 201; i++ {
		key, id := fmt.Sprintf("user-%d", i%7), fmt.Sprintf("p%d", i)
		recs = append(recs, testRecord{key: key, value: string(wire.AppendFeatures(nil, id, []float64{1, 2, float64(i)}))})
		labels = append(labels, testRecord{key: key, value: string(wire.AppendLabel(nil, id, 1))})
	}
	ahead := ts.base.Add(2 * time.Hour).UnixMilli()
	ts.consume(recs...)
	ts.consume(testRecord{key: "other", value: fmt.Sprintf(`{"id":"o","x":[1,2,3],"ts":%d}`, ahead)})
	ts.consume(labels...)
	st := ts.w.p.Stats()
	if st.Expired["ttl"] != 0 || st.Updates != 201 || st.UnknownLabels != 0 || st.DeadLetters["bad_timestamp"] != 0 {
		t.Fatalf("after a ts 2 h ahead: expired %v, updates %d, unknown labels %d, dead letters %v (want no expiry, 201 updates)",
			st.Expired, st.Updates, st.UnknownLabels, st.DeadLetters)
	}
	if want := ts.base.UnixMilli() + int64(ts.seen); ts.w.watermark >= want {
		t.Errorf("watermark %d, beyond the log's time %d", ts.w.watermark, want)
	}
	// "o" is still pending (its own ts 2 h ahead); a record stamped more
	// than 3 h later by the log moves the watermark, and the TTL expires it.
	ts.consume(testRecord{key: "other", value: `{"id":"late","y":1}`, time: ts.base.Add(4 * time.Hour)})
	if st := ts.w.p.Stats(); st.Expired["ttl"] != 1 {
		t.Errorf("4 h later in the log's time: expired %v, want ttl 1", st.Expired)
	}
}
