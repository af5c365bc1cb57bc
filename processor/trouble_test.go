package processor

import (
	"fmt"
	"testing"
	"time"
)

// TestBrokerTrouble: the broker is unreachable when the processor starts,
// then goes away for a few seconds in the middle of the stream (closed, and a new
// broker started on the same port and data directory). The processor
// retries with backoff, logs once per episode, resumes and loses nothing:
// final states equal the direct replay and every id has a prediction.
func TestBrokerTrouble(t *testing.T) {
	const outage = 3 * time.Second // several retries at RetryBackoffMax 1 s
	t.Parallel()
	if testing.Short() {
		t.Skip("takes ~10 s")
	}
	port, data := freePort(t), t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	recs := stream(6, 150, 3, 21)
	ref := replay(t, lmsSpec, recs, DefaultTopK)
	logs := &logBuffer{}
	dir := t.TempDir()
	cfg := testConfig(t, addr, dir, lmsSpec, logs)
	cfg.CheckpointMaxRecords = 10
	r := start(t, cfg)
	time.Sleep(1500 * time.Millisecond) // nobody listening yet: several retries
	if r.p.Ready() {
		t.Fatal("ready without a broker")
	}
	c := startCluster(t, port, data)
	produce(t, addr, recs[:2*len(recs)/3])
	out := newConsumer(t, addr, tOut)
	out.waitFor(60*time.Second, "a quarter of the predictions", func(rs []outRecord) bool { return len(distinctIDs(rs)) >= len(ref.yhat)/4 })
	c.Close() // mid-stream: records in flight
	t.Logf("broker down after %d outputs", len(out.got))
	time.Sleep(outage)
	c = startCluster(t, port, data)
	defer c.Close()
	produce(t, addr, recs[2*len(recs)/3:])
	waitDone(t, r, out, ref)
	r.stop(t)
	checkPredictions(t, ref, out.got)
	checkStates(t, ref, dir)
	warns, recovered := logs.count("kafka unavailable"), logs.count("kafka reachable again")
	t.Logf("%d outputs for %d ids; %d 'kafka unavailable' warnings, %d recoveries", len(out.got), len(ref.yhat), warns, recovered)
	if testing.Verbose() {
		t.Log(logs.b.String())
	}
	if warns == 0 || recovered == 0 {
		t.Error("outages not logged")
	}
	// Once per episode and per operation (group, 2 fetchers per partition at
	// most, one producer per partition), two episodes: far fewer lines than
	// retries (one every <= 1 s for the whole outage, per operation).
	if warns > 2*(1+2*nParts+nParts) {
		t.Errorf("%d warnings: not once per episode", warns)
	}
}
