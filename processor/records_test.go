package processor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/changelog"
	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// Record-level behaviour through the broker-free tester (tester_test.go).

// TestDeadLettersAndGoodRecords: every kind of unusable record goes to the
// dead-letter topic unchanged, with headers naming the reason and the
// source, or is a counted drop (unknown labels); the good records around
// them give the predictions and states of a direct replay of the good ones.
func TestDeadLettersAndGoodRecords(t *testing.T) {
	t.Parallel()
	big := `{"id":"big","x":[1,2,3],"pad":"` + strings.Repeat("z", 2<<20) + `"}`
	bad := []struct {
		rec    testRecord
		reason string // "" = a counted drop, no dead letter
	}{
		{testRecord{key: "k", value: `{"id":"b1","x":[1,2,3]`}, "bad_json"},
		{testRecord{key: "k", value: `{"id":"b2","x":[1,2]}`}, "dimension"},
		{testRecord{key: "k", value: `{"id":"b3","x":[1,NaN,3]}`}, "non_finite"},
		{testRecord{key: "k", value: `{"id":"b4","x":[1,1e400,3]}`}, "non_finite"},
		{testRecord{key: "k", value: `{"id":"b5","x":[1,"2",3]}`}, "wrong_type"},
		{testRecord{key: "k", value: `{"id":"b6","y":"one"}`}, "wrong_type"},
		{testRecord{key: "", value: `{"id":"b7","x":[1,2,3]}`}, "no_key"},
		{testRecord{key: "k", value: big}, "oversized"},
		{testRecord{key: "k", value: `{"x":[1,2,3]}`}, "missing_field"},
		{testRecord{key: "k", value: `{"id":"nobody","y":1}`}, ""},
		{testRecord{key: "user-0", value: `{"id":"0","reward":1,"arm":"zzz"}`}, ""},
		{testRecord{key: "k2", value: `{"id":"p","reward":1,"arm":"zzz"}`}, "bad_fields"}, // p is a plain prediction
	}
	good := append([]testRecord{{key: "k2", value: `{"id":"p","x":[1,2,3]}`}}, stream(2, 12, 3, 5)...)
	var recs []testRecord
	for i, g := range good {
		recs = append(recs, g)
		if i < len(bad) {
			recs = append(recs, bad[i].rec)
		}
	}
	ts := newTester(t, lmsSpec, nil)
	ts.consume(recs...)
	ref := replay(t, lmsSpec, good, DefaultTopK)
	checkPredictions(t, ref, ts.emitted(tOut))
	dead := ts.emitted(tDLQ)
	var want []string
	for _, b := range bad {
		if b.reason != "" {
			want = append(want, b.reason)
		}
	}
	if len(dead) != len(want) {
		t.Fatalf("%d dead letters, want %d", len(dead), len(want))
	}
	for i, d := range dead {
		if d.headers[wire.HeaderReason] != want[i] {
			t.Errorf("dead letter %d: reason %q, want %q (error %q)", i, d.headers[wire.HeaderReason], want[i], d.headers[wire.HeaderError])
		}
		if d.headers[wire.HeaderTopic] != tIn || d.headers[wire.HeaderPartition] != "0" || d.headers[wire.HeaderOffset] == "" || d.headers[wire.HeaderError] == "" {
			t.Errorf("dead letter %d without its source headers: %v", i, d.headers)
		}
	}
	for _, b := range bad {
		found := b.reason == ""
		for _, d := range dead {
			found = found || string(d.value) == b.rec.value
		}
		if !found {
			t.Errorf("%s: dead letter value changed or missing", b.reason)
		}
	}
	st := ts.w.p.Stats()
	if st.UnknownLabels != 2 || st.DeadLetters["oversized"] != 1 {
		t.Errorf("stats: unknown labels %d, dead %v", st.UnknownLabels, st.DeadLetters)
	}
	checkStates(t, ref, ts.close())
}

// TestDecisionsAndRankings: `arms` records answered by a bandit learner
// (Choose, then the reward observed through the pending map) and by a
// regression learner (a top-k ranking; the reward of a named arm applied by
// Update), equal to a direct replay.
func TestDecisionsAndRankings(t *testing.T) {
	t.Parallel()
	for _, spec := range []models.Spec{{Algorithm: "ptest-ucb", Dim: 3, Seed: 11}, lmsSpec} {
		t.Run(spec.Algorithm, func(t *testing.T) {
			recs := decisionStream(spec.Algorithm == lmsSpec.Algorithm)
			ts := newTester(t, spec, func(c *Config) { c.TopK = 3 })
			ts.consume(recs...)
			ref := replay(t, spec, recs, 3)
			outs := ts.emitted(tOut)
			checkPredictions(t, ref, outs)
			for id, o := range distinctIDs(outs) {
				if d, ok := ref.dec[id]; ok {
					if o.Arm == nil || o.UCB == nil || *o.UCB != d.UCB || o.Std == nil || *o.Std != d.Std {
						t.Errorf("%s: decision %s, want arm %d ucb %v", id, o.value, d.Arm, d.UCB)
					}
				}
				if want, ok := ref.rank[id]; ok {
					got, _ := json.Marshal(o.Ranking)
					if string(got) != "["+strings.Join(want, ",")+"]" {
						t.Errorf("%s: ranking %s, want %v", id, got, want)
					}
				}
			}
			if st := ts.w.p.Stats(); st.Decisions != int64(len(ref.yhat)) || st.Rewards == 0 {
				t.Errorf("stats: %+v", st)
			}
			checkStates(t, ref, ts.close())
		})
	}
}

// decisionStream: 3 users, 30 decisions each among 6 arms; 3 of 4 rewarded,
// some naming their arm (for the regression learner's ranking).
func decisionStream(namedArms bool) []testRecord {
	rng := models.NewRand(3)
	var recs []testRecord
	for i := 0; i < 30; i++ {
		for k := 0; k < 3; k++ {
			key := fmt.Sprintf("u%d", k)
			var arms [][]byte
			for a := 0; a < 6; a++ {
				arms = append(arms, wire.AppendArm(nil, fmt.Sprintf("item%d", a), []float64{rng.Float64(), rng.Float64(), float64(a) / 6}))
			}
			id := fmt.Sprintf("d%d", i)
			recs = append(recs, testRecord{key: key, value: string(wire.AppendDecision(nil, id, arms))})
			if i%4 != 3 {
				arm := ""
				if namedArms && i%2 == 1 {
					arm = "item0"
				}
				recs = append(recs, testRecord{key: key, value: string(wire.AppendReward(nil, id, rng.Float64(), arm))})
			}
		}
	}
	return recs
}

// TestLabelJoinAndExpiry: delayed labels on the labels topic join their
// predictions; labels that come after their entry expired by event time or
// by count are counted as unknown, and the expiries are counted by cause.
func TestLabelJoinAndExpiry(t *testing.T) {
	t.Parallel()
	ts := newTester(t, lmsSpec, func(c *Config) { c.MaxPending = 2 })
	x := `"x":[0.1,0.2,0.3]`
	ts.consume(
		testRecord{key: "k", value: `{"id":"a",` + x + `}`},
		testRecord{key: "k", value: `{"id":"b",` + x + `}`},
		testRecord{key: "k", value: `{"id":"c",` + x + `}`}, // evicts a (count bound 2)
		testRecord{topic: tLabels, key: "k", value: `{"id":"b","y":1}`},
		testRecord{topic: tLabels, key: "k", value: `{"id":"a","y":1}`}, // expired: unknown
		// 2 h later in event time, and in the log's time: the watermark
		// moves no further than the Kafka timestamp (guard.go).
		testRecord{key: "k", value: `{"id":"d",` + x + `,"ts":` + fmt.Sprint(ts.base.Add(2*time.Hour).UnixMilli()) + `}`, time: ts.base.Add(2 * time.Hour)},
		testRecord{topic: tLabels, key: "k", value: `{"id":"c","y":1}`, time: ts.base.Add(2 * time.Hour)}, // expired by TTL
	)
	st := ts.w.p.Stats()
	if st.Updates != 1 || st.UnknownLabels != 2 {
		t.Errorf("updates %d (want 1: b), unknown labels %d (want 2: a, c)", st.Updates, st.UnknownLabels)
	}
	if st.Expired["count"] != 1 || st.Expired["ttl"] != 1 {
		t.Errorf("expiries %v, want count 1 and ttl 1", st.Expired)
	}
	if len(ts.emitted(tOut)) != 4 {
		t.Errorf("%d predictions, want 4", len(ts.emitted(tOut)))
	}
}

// TestDeleteKey: a delete record erases its key's learner and pending
// entries at its offset; the key's next record starts a fresh learner, and
// the checkpoint holds exactly what a replay of the records after the
// delete gives.
func TestDeleteKey(t *testing.T) {
	t.Parallel()
	before := stream(2, 10, 3, 41)
	after := stream(2, 6, 3, 42)
	ts := newTester(t, lmsSpec, func(c *Config) { c.MaxLearners = 1 }) // the erased key may be evicted, or not
	ts.consume(before...)
	ts.checkpoint() // the key's old state is in Badger
	ts.consume(
		testRecord{key: "user-0", value: `{"id":"del-1","delete":true}`},
		testRecord{key: "user-1", value: `{"id":"del-2","delete":true,"x":[1,2,3]}`}, // bad: dead letter
	)
	if st := ts.w.p.Stats(); st.Records["delete"] != 1 || st.DeadLetters["bad_fields"] != 1 {
		t.Fatalf("stats: %+v", st)
	}
	ts.consume(after...)
	ts.consume(testRecord{key: "user-1", value: `{"id":"del-3","delete":true}`}) // and never seen again
	// Reference: user-0 starts afresh with the records after the delete;
	// user-1 is gone.
	var ref []testRecord
	for _, r := range after {
		if r.key != "user-1" {
			ref = append(ref, r)
		}
	}
	want := replay(t, lmsSpec, ref, DefaultTopK)
	checkStates(t, want, ts.close())
}

// TestDeleteKeyDuringCheckpoint: a key erased, then seen again while the
// checkpoint that deletes it from Badger is in flight, starts afresh: its
// old state, still in Badger until that commit lands, is not read back.
func TestDeleteKeyDuringCheckpoint(t *testing.T) {
	t.Parallel()
	before := stream(2, 10, 3, 41)
	after := stream(2, 6, 3, 42)
	ts := newTester(t, lmsSpec, func(c *Config) { c.MaxLearners = 1 })
	ts.consume(before...)
	ts.checkpoint() // the old states are in Badger
	ts.consume(testRecord{key: "user-0", value: `{"id":"del-1","delete":true}`})
	snap, err := ts.w.takeSnapshot() // holds the delete of user-0, not yet committed
	if err != nil || snap == nil {
		t.Fatalf("snapshot: %v %v", snap, err)
	}
	ts.consume(after...) // user-0 comes back before the delete is in Badger
	if err := ts.w.storeSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	ts.w.cache.committed(snap.fresh)
	var ref []testRecord // user-0 from scratch after the delete; user-1 throughout
	for _, r := range before {
		if r.key == "user-1" {
			ref = append(ref, r)
		}
	}
	ref = append(ref, after...)
	checkStates(t, replay(t, lmsSpec, ref, DefaultTopK), ts.close())
}

// TestDeleteKeyChangelog: the checkpoint after a delete writes, in its
// transaction, the tombstone of the key's bundle and of each of its pending
// entries, so that compaction removes all of it: the erasure waits for no
// later checkpoint.
func TestDeleteKeyChangelog(t *testing.T) {
	t.Parallel()
	ts := newTester(t, lmsSpec, nil)
	ts.w.p.cfg.Changelog.Topic = "cl" // after the restore: the tester has no broker to restore from
	ts.consume(stream(2, 5, 3, 43)...)
	pendingOf := func(key string) int {
		n := 0
		for k := range ts.w.pend.m {
			if string(routingOf([]byte(k))) == key {
				n++
			}
		}
		return n
	}
	pending := pendingOf("user-0")
	if pending == 0 {
		t.Fatal("user-0 has no pending entry: the test would not see their tombstones")
	}
	ts.checkpoint() // the key's bundle and pending records are in the changelog
	ts.consume(testRecord{key: "user-0", value: `{"id":"d","delete":true}`})
	snap, err := ts.w.takeSnapshot()
	if err != nil || snap == nil {
		t.Fatal(snap, err)
	}
	var bundleTomb, marker bool
	pendingTombs := 0
	for _, m := range snap.changelog {
		d, err := changelog.Decode(m.Key, m.Value)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case d.Marker != nil:
			marker = true
		case string(d.Routing) == "user-0":
			bundleTomb = d.Bundle == nil
		case d.PendingKey != nil && string(routingOf(d.PendingKey)) == "user-0":
			if d.Pending != nil {
				t.Fatalf("an entry of the erased key is written: %q", d.PendingKey)
			}
			pendingTombs++
		}
	}
	if !bundleTomb || !marker || pendingTombs != pending {
		t.Fatalf("tombstone of the bundle %v, marker %v, tombstones of pending entries %d of %d", bundleTomb, marker, pendingTombs, pending)
	}
}

// TestRefusedInputIsADeadLetter: an x the learner refuses (its squared norm
// overflows the kernel) is dead-lettered, not emitted, and the key's state
// is untouched.
func TestRefusedInputIsADeadLetter(t *testing.T) {
	t.Parallel()
	spec := models.Spec{Algorithm: "kogd", Dim: 3, Kernel: models.KernelSpec{Type: "gaussian", Sigma: 1}, Seed: 3}
	if err := spec.Validate(); err != nil {
		t.Skipf("kogd: %v", err)
	}
	good := stream(1, 6, 3, 44)
	ts := newTester(t, spec, nil)
	ts.consume(good...)
	ts.consume(testRecord{key: "user-0", value: `{"id":"huge","x":[1e200,1e200,1]}`})
	if dead := ts.emitted(tDLQ); len(dead) != 1 || dead[0].headers[wire.HeaderReason] != "non_finite" {
		t.Fatalf("dead letters %+v", dead)
	}
	checkStates(t, replay(t, spec, good, DefaultTopK), ts.close())
}

// TestWarmRestore: a partition restored from the changelog starts with its
// learners in memory (not in Badger), serves them on their keys' next
// records, and moves them into Badger a chunk per checkpoint, with no
// Badger meta until the last chunk is in; then Badger holds exactly the
// state of an uninterrupted run.
func TestWarmRestore(t *testing.T) {
	t.Parallel()
	first, then := stream(40, 3, 3, 45), stream(10, 2, 3, 46) // 30 keys reach Badger only by the chunks
	src := newTester(t, lmsSpec, nil)
	src.w.p.cfg.Changelog.Topic = "cl" // after the restore: the tester has no broker to restore from
	src.consume(first...)
	st := changelogState(t, src)

	ts := newTester(t, lmsSpec, nil)
	if err := ts.w.applyChangelog(st); err != nil {
		t.Fatal(err)
	}
	if err := ts.w.restore(-1, -1); err != nil {
		t.Fatal(err)
	}
	if n := len(ts.w.cache.warm.idle); n != 40 {
		t.Fatalf("%d learners warm after the restore, want 40", n)
	}
	ts.next[tIn] = ts.w.nextIn
	ts.w.cache.warm.limit = 1 // one learner per checkpoint
	checkpoints := 0
	for i, r := range then {
		ts.consume(r)
		if i%3 == 0 {
			ts.checkpoint()
			checkpoints++
			_, hasMeta, err := ts.store.Meta(0)
			if err != nil {
				t.Fatal(err)
			}
			if warming := len(ts.w.cache.warm.idle) > 0; hasMeta == warming {
				t.Fatalf("checkpoint %d: Badger meta %v while %d learners are still warm", checkpoints, hasMeta, len(ts.w.cache.warm.idle))
			}
		}
	}
	for len(ts.w.cache.warm.idle) > 0 {
		ts.checkpoint()
	}
	if _, hasMeta, _ := ts.store.Meta(0); !hasMeta {
		t.Fatal("no Badger meta once every restored learner is in")
	}
	checkStates(t, replay(t, lmsSpec, append(append([]testRecord(nil), first...), then...), DefaultTopK), ts.close())
}

// TestRestoreAfterAbandonedFirstCheckpoint: a run killed during its first
// checkpoint leaves bundles without a marker; the next run starts afresh and
// numbers its checkpoints from 1 again, so its first marker carries the
// same sequence number as those bundles. The keys the new marker's
// checkpoint did not write keep the abandoned bundles, whose states hold
// records far beyond the marker: the restore must treat them as ahead (skip
// their records below the bundles' offsets), or it applies those records
// twice.
func TestRestoreAfterAbandonedFirstCheckpoint(t *testing.T) {
	t.Parallel()
	recs := stream(3, 10, 3, 61) // user-0, user-1, user-2, user-0, ...
	abandoned := newTester(t, lmsSpec, nil)
	abandoned.w.p.cfg.Changelog.Topic = "cl"
	abandoned.consume(recs...)
	old := changelogState(t, abandoned) // its marker never reached Kafka

	fresh := newTester(t, lmsSpec, nil)
	fresh.w.p.cfg.Changelog.Topic = "cl"
	fresh.consume(recs[0])
	st := changelogState(t, fresh)
	if st.Marker.Seq != old.Bundles["user-1"].Seq {
		t.Fatalf("the scenario needs equal sequence numbers: marker %d, abandoned bundle %d", st.Marker.Seq, old.Bundles["user-1"].Seq)
	}
	for k, b := range old.Bundles {
		if _, written := st.Bundles[k]; !written {
			st.Bundles[k] = b // the newest record of a key the fresh run did not write
		}
	}

	ts := newTester(t, lmsSpec, nil)
	if err := ts.w.applyChangelog(st); err != nil {
		t.Fatal(err)
	}
	if len(ts.w.skip) != 2 {
		t.Errorf("%d keys ahead of the marker, want 2 (user-1, user-2)", len(ts.w.skip))
	}
	if err := ts.w.restore(-1, -1); err != nil {
		t.Fatal(err)
	}
	ts.next[tIn] = ts.w.nextIn
	ts.consume(recs[1:]...)
	checkStates(t, replay(t, lmsSpec, recs, DefaultTopK), ts.close())
}
