package processor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// scoreTester is a tester whose worker answers scoring requests: the test
// goroutine plays the worker, answering between the records it consumes.
type scoreTester struct {
	*tester
	m   *merger
	dec *wire.Decoder
}

func newScoreTester(t testing.TB, spec models.Spec, tune func(*Config)) *scoreTester {
	ts := newTester(t, spec, func(c *Config) {
		c.Scoring.Addr = "127.0.0.1:1"
		if tune != nil {
			tune(c)
		}
	})
	p := ts.w.p
	p.inParts.Store(1) // every key is partition 0's
	p.inGen, p.assigned[0] = true, true
	ts.w.restored = true
	m := &merger{}
	t.Cleanup(ts.w.openScoring(m))
	return &scoreTester{tester: ts, m: m, dec: wire.NewDecoder(spec.Dim, wire.Limits{})}
}

// score sends body to Processor.Score and answers, as the worker, the
// requests it makes.
func (ts *scoreTester) score(body string) (string, error) {
	ts.t.Helper()
	q, err := ts.dec.DecodeQuery([]byte(body))
	if err != nil {
		ts.t.Fatalf("query %s: %v", body, err)
	}
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := ts.w.p.Score(context.Background(), q, nil)
		done <- result{b, err}
	}()
	for {
		select {
		case r := <-ts.m.score:
			ts.m.onScore(r)
		case res := <-done:
			return string(res.b), res.err
		case <-time.After(10 * time.Second):
			ts.t.Fatal("Score did not return")
		}
	}
}

func (ts *scoreTester) state(key string) []byte {
	b, err := ts.w.cache.peek(key)
	if err != nil {
		ts.t.Fatal(err)
	}
	return b
}

// scoreHistory is a few keys' records with inline and delayed labels.
func scoreHistory(spec models.Spec, keys, n int) []testRecord {
	var recs []testRecord
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("k%d", i%keys)
		x := make([]string, spec.Dim)
		for j := range x {
			x[j] = fmt.Sprintf("%.3f", float64((i*7+j*3)%11)/10-0.5)
		}
		xs := strings.Join(x, ",")
		switch {
		case i%3 == 0:
			recs = append(recs, testRecord{key: k, value: fmt.Sprintf(`{"id":"r%d","x":[%s],"y":%.2f}`, i, xs, float64(i%5)/5)})
		default:
			recs = append(recs, testRecord{key: k, value: fmt.Sprintf(`{"id":"r%d","x":[%s]}`, i, xs)},
				testRecord{key: k, value: fmt.Sprintf(`{"id":"r%d","y":%.2f}`, i, float64(i%4)/4)})
		}
	}
	return recs
}

func armsRecord(dim, n int) string {
	var arms []string
	for a := 0; a < n; a++ {
		x := make([]string, dim)
		for j := range x {
			x[j] = fmt.Sprintf("%.2f", float64((a*5+j)%7)/7)
		}
		arms = append(arms, fmt.Sprintf(`{"id":"a%d","x":[%s]}`, a, strings.Join(x, ",")))
	}
	return "[" + strings.Join(arms, ",") + "]"
}

// TestScoreEqualsNextOutput: the answer to a query equals, byte for byte,
// the output record the worker emits when the same x or arms come next as
// a record with the same id: the same state, the same code path for the
// output's fields. Scoring leaves the state's bytes as they were (a
// sampling learner's PRNG included: the record after the queries gets the
// answer the queries got), and a key with no state gets a fresh learner's
// answer, marked fresh. Keys are queried in turn, so that a reloaded copy
// that kept anything of the key it answered before would show.
func TestScoreEqualsNextOutput(t *testing.T) {
	gauss := models.KernelSpec{Type: "gaussian", Sigma: 1}
	for _, tc := range []struct {
		name  string
		spec  models.Spec
		query string // x or arms
	}{
		{"prediction/aogd-ald", models.Spec{Algorithm: "aogd-ald", Dim: 3, Kernel: gauss, Seed: 1}, `"x":[0.1,-0.2,0.3]`},
		{"ranking/aogd-ald", models.Spec{Algorithm: "aogd-ald", Dim: 3, Kernel: gauss, Seed: 1}, `"arms":` + armsRecord(3, 12)},
		{"classification/fogd", models.Spec{Algorithm: "fogd", Dim: 3, Loss: "hinge", Kernel: gauss, Seed: 2, Params: map[string]any{"D": 16}}, `"x":[0.1,-0.2,0.3]`},
		{"sampling/oks++", models.Spec{Algorithm: "oks++", Dim: 3, Kernel: models.KernelSpec{Type: "gaussian"}, Seed: 5, Params: map[string]any{"sigmas": []any{0.5, 1.0, 2.0}}}, `"x":[0.4,0.2,-0.3]`},
		{"ranking/oks++", models.Spec{Algorithm: "oks++", Dim: 3, Kernel: models.KernelSpec{Type: "gaussian"}, Seed: 5, Params: map[string]any{"sigmas": []any{0.5, 1.0, 2.0}}}, `"arms":` + armsRecord(3, 5)},
		{"decision/bkb", models.Spec{Algorithm: "bkb", Dim: 3, Kernel: gauss, Seed: 3, Params: map[string]any{"beta": 0.5, "qbar": 2}}, `"arms":` + armsRecord(3, 8)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newScoreTester(t, tc.spec, nil)
			if tc.spec.Algorithm == "bkb" {
				// Decisions and their rewards.
				for i := 0; i < 30; i++ {
					k := fmt.Sprintf("k%d", i%3)
					ts.consume(testRecord{key: k, value: fmt.Sprintf(`{"id":"d%d","arms":%s}`, i, armsRecord(3, 8))})
					out := ts.emitted(tOut)
					ts.consume(testRecord{key: k, value: fmt.Sprintf(`{"id":"d%d","reward":%.1f,"arm":%s}`, i, float64(i%3)/2, []byte(out[len(out)-1].Arm))})
				}
			} else {
				ts.consume(scoreHistory(tc.spec, 3, 60)...)
			}
			if n := len(ts.emitted(tDLQ)); n > 0 {
				t.Fatalf("%d dead letters: %s", n, ts.emitted(tDLQ)[0].headers)
			}
			// Key after key: a learner that answered one key's query is
			// reloaded with the next key's state (models.Reloader).
			for _, key := range []string{"k1", "k0", "k2", "new-key"} {
				before := ts.state(key)
				query := fmt.Sprintf(`{"id":"q-%s","key":%q,%s}`, key, key, tc.query)
				first, err := ts.score(query)
				if err != nil {
					t.Fatal(err)
				}
				second, err := ts.score(query)
				if err != nil {
					t.Fatal(err)
				}
				if first != second {
					t.Fatalf("two queries, two answers:\n%s\n%s", first, second)
				}
				if after := ts.state(key); !bytes.Equal(before, after) {
					t.Fatalf("scoring changed the state of %s", key)
				}
				fresh := strings.HasSuffix(first, `,"fresh":true}`)
				if fresh != (before == nil) {
					t.Fatalf("key %s (state %d bytes): answer %s", key, len(before), first)
				}
				ts.consume(testRecord{key: key, value: strings.Replace(query, fmt.Sprintf(`"key":%q,`, key), "", 1)})
				outs := ts.emitted(tOut)
				emitted := string(outs[len(outs)-1].value)
				if want := strings.Replace(first, `,"fresh":true}`, "}", 1); emitted != want {
					t.Fatalf("key %s:\nscore   %s\nemitted %s", key, first, emitted)
				}
				t.Logf("%s", first)
			}
		})
	}
}

// TestScoreStates: every place a key's state can be in the worker's cache
// (in memory, evicted and held, checkpointed in Badger only, erased)
// answers with that state, and the statuses a request meets while the
// partition is restored, elsewhere or refused.
func TestScoreStates(t *testing.T) {
	spec := models.Spec{Algorithm: "aogd-ald", Dim: 3, Kernel: models.KernelSpec{Type: "gaussian", Sigma: 1}, Seed: 1}
	ts := newScoreTester(t, spec, nil) // MaxLearners 4
	ts.consume(scoreHistory(spec, 8, 80)...)
	query := func(key string) string { return fmt.Sprintf(`{"key":%q,"x":[0.3,0.1,-0.2]}`, key) }
	check := func(what, key string, wantUpdates int) {
		t.Helper()
		got, err := ts.score(query(key))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		want := fmt.Sprintf(`"n_updates":%d,"partition":0,"offset":%d`, wantUpdates, ts.next[tIn])
		if !strings.Contains(got, want) || strings.Contains(got, "fresh") != (wantUpdates == 0) {
			t.Fatalf("%s: %s, want %s", what, got, want)
		}
	}
	// 8 keys, 4 in memory: k0..k3 were evicted and are held in memory.
	check("evicted, held", "k0", 10)
	check("in memory", "k7", 10)
	ts.checkpoint()
	check("in Badger only", "k1", 10)
	ts.consume(testRecord{key: "k2", value: `{"id":"del","delete":true}`})
	check("erased, not yet checkpointed", "k2", 0)
	ts.checkpoint()
	check("erased and checkpointed", "k2", 0)

	for _, tc := range []struct {
		name    string
		set     func()
		body    string
		outcome ScoreOutcome
		msg     string
	}{
		{"restoring", func() { ts.w.restored = false }, query("k1"), ScoreUnavailable, "being restored"},
		{"not yet restored here", func() { ts.w.p.assigned[0] = false }, query("k1"), ScoreUnavailable, "being restored"},
		{"rebalancing", func() { ts.w.p.inGen = false }, query("k1"), ScoreUnavailable, "rebalancing"},
		{"owner unknown", func() { delete(ts.w.p.assigned, 0) }, query("k1"), ScoreUnavailable, "owner is not known yet"},
		{"elsewhere", func() {
			delete(ts.w.p.assigned, 0)
			ts.w.p.owners.Store(&map[int]owner{0: {id: "member-b", addr: "10.0.0.2:8081"}})
		}, query("k1"), ScoreElsewhere, "owned by member member-b"},
		{"refused x", nil, `{"key":"k1","x":[1e200,1e200,1e200]}`, ScoreRefused, "x: "},
		{"quarantined", func() { ts.w.quarantine = map[string]error{"k1": errors.New("bad blob")} }, query("k1"), ScoreFailed, "quarantined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ts.w.p
			defer func() {
				p.inGen, p.assigned[0], ts.w.restored, ts.w.quarantine = true, true, true, nil
				p.owners.Store(nil)
			}()
			if tc.set != nil {
				tc.set()
			}
			got, err := ts.score(tc.body)
			var se *ScoreError
			if !errors.As(err, &se) || se.Outcome != tc.outcome || !strings.Contains(se.Msg, tc.msg) || se.Partition != 0 {
				t.Fatalf("answer %s, error %#v; want outcome %d with %q", got, err, tc.outcome, tc.msg)
			}
			if se.Retryable() != (tc.outcome == ScoreUnavailable) {
				t.Fatalf("retryable %v", se.Retryable())
			}
			if tc.outcome == ScoreElsewhere && se.Owner != "10.0.0.2:8081" {
				t.Fatalf("owner %q", se.Owner)
			}
		})
	}
}

// TestScoreDuringSnapshot: requests waiting while the worker takes a
// snapshot are answered in the middle of it (every snapshotYield learners),
// each with exactly the answer it gets before the snapshot, whether its
// learner is already encoded or not yet.
func TestScoreDuringSnapshot(t *testing.T) {
	spec := models.Spec{Algorithm: "aogd-ald", Dim: 3, Kernel: models.KernelSpec{Type: "gaussian", Sigma: 1}, Seed: 1}
	ts := newScoreTester(t, spec, func(c *Config) { c.MaxLearners = 1000 })
	const keys = 4 * snapshotYield
	ts.consume(scoreHistory(spec, keys, 5*keys)...)
	query := func(k int) string { return fmt.Sprintf(`{"key":"k%d","x":[0.3,0.1,-0.2]}`, k) }
	want := make([]string, keys)
	for k := range want {
		got, err := ts.score(query(k))
		if err != nil {
			t.Fatal(err)
		}
		want[k] = got
	}

	// The requests wait on the worker before the snapshot starts.
	got := make([]string, keys)
	errs := make([]error, keys)
	var wg sync.WaitGroup
	for k := range got {
		q, err := wire.NewDecoder(spec.Dim, wire.Limits{}).DecodeQuery([]byte(query(k))) // a query is its decoder's
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := ts.w.p.Score(context.Background(), q, nil)
			got[k], errs[k] = string(b), err
		}()
	}
	time.Sleep(100 * time.Millisecond)
	inSnapshot, during := false, 0
	serve, answer := ts.w.cache.meanwhile, ts.m.onScore
	ts.w.cache.meanwhile = func() { inSnapshot = true; serve(); inSnapshot = false }
	ts.m.onScore = func(r *scoreReq) {
		if inSnapshot {
			during++
		}
		answer(r)
	}
	ts.checkpoint()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for waiting := true; waiting; {
		select {
		case r := <-ts.m.score:
			ts.m.onScore(r)
		case <-done:
			waiting = false
		case <-time.After(10 * time.Second):
			t.Fatal("requests left unanswered")
		}
	}
	if during == 0 {
		t.Fatal("no request was answered during the snapshot")
	}
	for k := range got {
		if errs[k] != nil || got[k] != want[k] {
			t.Fatalf("k%d: %s (%v), want %s", k, got[k], errs[k], want[k])
		}
	}
	t.Logf("%d of %d requests answered during the snapshot", during, keys)
}
