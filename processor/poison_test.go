package processor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
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

// TestOneOutcomePerRecord: every input is counted once in records_total,
// in its kind when used and as "dead" when dead-lettered, whatever found it
// unusable (the decoder, the timestamp check, the pending entry, the
// learner's numerical guard).
func TestOneOutcomePerRecord(t *testing.T) {
	t.Parallel()
	ts := newTester(t, lmsSpec, nil)
	kms := ts.base.UnixMilli()
	x := []float64{1, 2, 3}
	recs := []testRecord{
		{key: "k", value: string(wire.AppendFeatures(nil, "a", x))},                                     // features
		{key: "k", value: string(wire.AppendLabeled(nil, "b", x, 1))},                                   // labeled
		{key: "k", value: fmt.Sprintf(`{"id":"c","x":[1,2,3],"y":1,"ts":%d}`, kms*1000)},                // dead: bad_timestamp
		{key: "k", value: `{"id":"d","x":[1,2]}`},                                                       // dead: dimension
		{key: "k", value: string(wire.AppendReward(nil, "a", 1, "i"))},                                  // dead: bad_fields (a is no decision)
		{key: "k", value: string(wire.AppendDecision(nil, "e", [][]byte{wire.AppendArm(nil, "i", x)}))}, // decision
		{key: "k", value: string(wire.AppendReward(nil, "e", 1, "j"))},                                  // dead: unknown_arm
		{key: "k", value: string(wire.AppendLabeled(nil, "f", []float64{100, 100, 100}, 1e308))},        // dead: non_finite (guard)
		{key: "k", value: string(wire.AppendLabel(nil, "a", 1))},                                        // label
		{key: "k", value: string(wire.AppendLabel(nil, "nobody", 1))},                                   // label (unknown id: counted drop)
	}
	ts.consume(recs...)
	st := ts.w.p.Stats()
	want := map[string]int64{"features": 1, "labeled": 1, "label": 2, "decision": 1, "dead": 5, "delete": 0}
	total := int64(0)
	for kind, n := range st.Records {
		total += n
		if n != want[kind] {
			t.Errorf("records_total{kind=%q} = %d, want %d", kind, n, want[kind])
		}
	}
	if total != int64(len(recs)) {
		t.Errorf("%d records counted for %d inputs", total, len(recs))
	}
	if n := len(ts.emitted(tDLQ)); n != 5 {
		t.Errorf("%d dead letters, want 5", n)
	}
}

// TestRefusedLabelIsADeadLetter: a y or reward the numerical guard refuses
// is dead-lettered non_finite, as an x the learner refuses is, and leaves
// the state as it was: the learner, and the pending entry, whose good label
// then applies. An inline y refused so is dead-lettered after its
// prediction (predict first).
func TestRefusedLabelIsADeadLetter(t *testing.T) {
	t.Parallel()
	huge := []float64{100, 100, 100} // with y = 1e308 the update overflows
	for _, tc := range []struct {
		name    string
		spec    models.Spec
		recs    []testRecord
		good    []testRecord // the records that shape the state
		updates int64
	}{{
		name:    "delayed label",
		updates: 1,
		spec:    lmsSpec,
		recs: []testRecord{{key: "k", value: string(wire.AppendFeatures(nil, "a", huge))}, {key: "k", value: string(wire.AppendLabel(nil, "a", 1e308))},
			{key: "k", value: string(wire.AppendLabel(nil, "a", 1))}},
		good: []testRecord{{key: "k", value: string(wire.AppendFeatures(nil, "a", huge))}, {key: "k", value: string(wire.AppendLabel(nil, "a", 1))}},
	}, {
		name:    "reward",
		updates: 1,
		spec:    models.Spec{Algorithm: "ptest-ucb", Dim: 3, Seed: 11},
		recs: []testRecord{{key: "k", value: string(wire.AppendDecision(nil, "d", [][]byte{wire.AppendArm(nil, "i", huge)}))},
			{key: "k", value: string(wire.AppendReward(nil, "d", 1e308, ""))}, {key: "k", value: string(wire.AppendReward(nil, "d", 1, "i"))}},
		good: []testRecord{{key: "k", value: string(wire.AppendDecision(nil, "d", [][]byte{wire.AppendArm(nil, "i", huge)}))},
			{key: "k", value: string(wire.AppendReward(nil, "d", 1, "i"))}},
	}, {
		name: "inline label",
		spec: lmsSpec,
		recs: []testRecord{{key: "k", value: string(wire.AppendLabeled(nil, "a", huge, 1e308))}},
		good: []testRecord{{key: "k", value: string(wire.AppendFeatures(nil, "a", huge))}}, // predicted, not updated, nothing pending
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTester(t, tc.spec, nil)
			ts.consume(tc.recs...)
			dead := ts.emitted(tDLQ)
			if len(dead) != 1 || dead[0].headers[wire.HeaderReason] != "non_finite" || !strings.Contains(dead[0].headers[wire.HeaderError], "numerical guard") {
				t.Fatalf("dead letters %+v, want one non_finite from the numerical guard", dead)
			}
			st := ts.w.p.Stats()
			if st.NumericalRejections != 1 || st.Pending != 0 || st.Updates != tc.updates {
				t.Errorf("stats: %d numerical rejections, %d pending, %d updates", st.NumericalRejections, st.Pending, st.Updates)
			}
			if n := len(ts.emitted(tOut)); n != 1 {
				t.Errorf("%d outputs, want 1", n)
			}
			checkStates(t, replay(t, tc.spec, tc.good, DefaultTopK), ts.close())
		})
	}
}
