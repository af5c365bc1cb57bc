package processor

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestBrokerAbsentAtStart: the broker is unreachable when the processor
// starts. The processor retries with backoff, is not ready, logs once per
// episode, and once the broker is up processes the whole stream: final
// states equal the direct replay and every id has a prediction.
func TestBrokerAbsentAtStart(t *testing.T) {
	t.Parallel()
	brokerTrouble(t, true, 0)
}

// TestBrokerOutage: the broker goes away in the middle of the stream (closed
// for 1 s, and a new broker started on the same port and data directory)
// with records in flight. The processor retries, logs once per episode,
// resumes and loses nothing.
func TestBrokerOutage(t *testing.T) {
	t.Parallel()
	brokerTrouble(t, false, time.Second) // several retries (backoff 100 ms doubling)
}

// brokerTrouble runs one stream, with no broker at the start until the
// processor has retried a few times if absent, and an outage of length
// outage (none if 0) once a quarter of the predictions are out. The two
// scenarios are separate tests, run side by side: each mostly waits.
func brokerTrouble(t *testing.T, absent bool, outage time.Duration) {
	if testing.Short() {
		t.Skip("takes ~5 s")
	}
	port, data := freePort(t), t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	recs := stream(6, 150, 3, 21)
	ref := replay(t, lmsSpec, recs, DefaultTopK)
	logs := &logBuffer{}
	dir := t.TempDir()
	cfg := testConfig(t, addr, dir, lmsSpec, logs)
	cfg.CheckpointMaxRecords = 10
	// The member of the generation the outage ended is gone after it; the
	// rebalance that follows waits for its session to expire.
	cfg.SessionTimeout, cfg.HeartbeatInterval = 2*time.Second, 300*time.Millisecond
	var c *kfake.Cluster
	if !absent {
		c = startCluster(t, port, data, shortSessions)
	}
	r := start(t, cfg)
	if absent {
		// Nobody listening yet: wait for a warning and two more attempts
		// (counted, not timed: a slow start under load must not make the
		// broker appear before the first attempt).
		waitUntil(t, 30*time.Second, "a warning and two retries logged without a broker", func() bool {
			return logs.count("kafka unavailable") > 0 && logs.count("still failing") >= 2
		})
		t.Logf("broker started after %d retries", logs.count("still failing"))
		if r.p.Ready() {
			t.Fatal("ready without a broker")
		}
		failed := 1 + logs.count("still failing")
		c = startCluster(t, port, data, shortSessions)
		waitUntil(t, 30*time.Second, "the metadata recovery logged", func() bool {
			return logs.hasLine(`"op":"metadata"`, "kafka reachable again")
		})
		// The next attempt reaches the broker (one more may race its
		// start): a failed metadata refresh cached by the transport for up
		// to its MetadataTTL would fail several more.
		if n := 1 + logs.count("still failing"); n > failed+1 {
			t.Errorf("%d metadata attempts failed after the broker started (%d before)", n-failed, failed)
		}
	}
	head := recs
	if outage > 0 {
		head = recs[:2*len(recs)/3]
	}
	produce(t, addr, head)
	out := newConsumer(t, addr, tOut)
	if outage > 0 {
		out.waitFor(60*time.Second, "a quarter of the predictions", func(rs []outRecord) bool { return len(distinctIDs(rs)) >= len(ref.yhat)/4 })
		c.Close() // mid-stream: records in flight
		t.Logf("broker down after %d outputs", len(out.got))
		time.Sleep(outage)
		c = startCluster(t, port, data, shortSessions)
		produce(t, addr, recs[len(head):])
	}
	waitDone(t, r, out, ref)
	out.close() // before the broker started after it
	r.stop(t)
	checkPredictions(t, ref, out.got)
	checkStates(t, ref, dir)
	warns, recovered := logs.count("kafka unavailable"), logs.count("kafka reachable again")
	t.Logf("%d outputs for %d ids; %d 'kafka unavailable' warnings, %d recoveries", len(out.got), len(ref.yhat), warns, recovered)
	if testing.Verbose() {
		t.Log(logs.b.String())
	}
	if warns == 0 || recovered == 0 {
		t.Error("outage not logged")
	}
	// Once per episode and per operation (the group, each partition's list
	// offsets and reads, the checkpoints): far fewer lines than retries
	// (one every <= 1 s for the whole outage, per operation). The Kafka
	// client's own warnings are not counted: they are kgo's, per broker
	// connection.
	if warns > 1+2*nParts+nParts {
		t.Errorf("%d warnings: not once per episode", warns)
	}
}

// shortSessions lets the broker accept a 2 s session timeout (Kafka's and
// kfake's minimum is 6 s).
var shortSessions = kfake.BrokerConfigs(map[string]string{"group.min.session.timeout.ms": "1000"})
