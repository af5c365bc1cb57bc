package processor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// withAdmin calls fn with a franz-go client of the broker at addr and a
// 10 s deadline.
func withAdmin(t *testing.T, addr string, fn func(ctx context.Context, cl *kgo.Client)) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fn(ctx, cl)
}

// deleteTopic deletes a topic.
func deleteTopic(t *testing.T, addr, topic string) {
	t.Helper()
	withAdmin(t, addr, func(ctx context.Context, cl *kgo.Client) {
		deleteTopicWith(ctx, t, cl, topic)
	})
}

func deleteTopicWith(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr(topic)
	del.Topics = append(del.Topics, dt)
	del.TopicNames = []string{topic}
	if _, err := del.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
}

// recreateInput deletes the input topic and creates it again, empty.
func recreateInput(t *testing.T, addr string) {
	t.Helper()
	withAdmin(t, addr, func(ctx context.Context, cl *kgo.Client) {
		deleteTopicWith(ctx, t, cl, tIn)
		cr := kmsg.NewPtrCreateTopicsRequest()
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = tIn, nParts, 1
		cr.Topics = append(cr.Topics, ct)
		res, err := cr.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if code := res.Topics[0].ErrorCode; code != 0 {
			t.Fatalf("create topic: error code %d", code)
		}
	})
}

// TestLagFromTheStart: a partition that starts with a backlog shows it in
// Stats.Lag before its worker handles a record. The worker publishes its
// lag when it may wait or every publishEvery records, and the probe's
// answers go through the worker, so a backlog read without a pause showed
// lag 0 until the partition ran dry: "lag 0 and ready" (waitDone) then
// stopped runs before their last record (TestBackpressureOnHeldLearners).
func TestLagFromTheStart(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	recs := stream(6, 10, 3, 5)
	produce(t, addr, recs)
	cfg := testConfig(t, addr, t.TempDir(), lmsSpec, nil)
	release := make(chan struct{})
	cfg.loopHook = func(*worker) { <-release } // no worker handles a record until released
	r := start(t, cfg)
	waitUntil(t, 30*time.Second, "every partition started", r.p.Ready)
	lag := r.p.Stats().Lag
	close(release)
	if lag != int64(len(recs)) {
		t.Errorf("lag %d before any record was handled, want the %d records in the input", lag, len(recs))
	}
	r.stop(t)
}

// TestOffsetOutOfRange: the input topic is recreated while the checkpoint
// holds offsets past its new end. Each kafka.offset_reset policy is applied,
// counted, and the partitions do not hang with lag 0.
func TestOffsetOutOfRange(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"earliest", "latest", "fail"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			c := startCluster(t, 0, "")
			addr := c.ListenAddrs()[0]
			dir := t.TempDir()
			recs := stream(6, 20, 3, 5)
			want := len(replay(t, lmsSpec, recs, DefaultTopK).yhat)
			produce(t, addr, recs)
			cfg := testConfig(t, addr, dir, lmsSpec, nil)
			cfg.OffsetReset = policy
			r := start(t, cfg)
			out := newConsumer(t, addr, tOut)
			out.waitFor(30*time.Second, "first run's predictions", func(rs []outRecord) bool { return len(distinctIDs(rs)) >= want })
			r.stop(t)

			recreateInput(t, addr)
			fresh := []testRecord{}
			for i := 0; i < 6; i++ {
				fresh = append(fresh, testRecord{key: fmt.Sprintf("user-%d", i), value: fmt.Sprintf(`{"id":"new-%d","x":[1,2,3]}`, i)})
			}
			produce(t, addr, fresh)
			before := len(out.got)
			r = start(t, cfg)
			defer r.stop(t)
			newIDs := func(rs []outRecord) int {
				n := 0
				for id := range distinctIDs(rs[before:]) {
					if len(id) > 0 && containsNew(id) {
						n++
					}
				}
				return n
			}
			switch policy {
			case "earliest":
				out.waitFor(30*time.Second, "the recreated topic's predictions", func(rs []outRecord) bool { return newIDs(rs) >= len(fresh) })
			case "latest":
				waitUntil(t, 30*time.Second, "ready", r.p.Ready)
				produce(t, addr, []testRecord{{key: "user-0", value: `{"id":"new-after","x":[1,2,3]}`}})
				out.waitFor(30*time.Second, "the record produced after the reset", func(rs []outRecord) bool { return newIDs(rs) >= 1 })
				if n := newIDs(out.got); n != 1 {
					t.Errorf("%d predictions of records before the end, want only the one after", n)
				}
			case "fail":
				waitUntil(t, 30*time.Second, "a failed partition", func() bool { return len(r.p.Failed()) > 0 })
				if r.p.Ready() {
					t.Error("ready with a failed partition")
				}
			}
			if n := r.p.Stats().OffsetResets[policy]; n == 0 {
				t.Errorf("offset_resets_total{policy=%s} = 0", policy)
			}
		})
	}
}

func containsNew(id string) bool {
	for i := 0; i+4 <= len(id); i++ {
		if id[i:i+4] == "new-" {
			return true
		}
	}
	return false
}

// waitUntil polls cond until it holds or fails after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInputRecreatedWhileRunning: the input topic is recreated under a
// running processor; the probe sees the log end below the readers'
// positions and applies offset_reset earliest: the new records get their
// predictions.
func TestInputRecreatedWhileRunning(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	recs := stream(6, 20, 3, 9)
	want := len(replay(t, lmsSpec, recs, DefaultTopK).yhat)
	produce(t, addr, recs)
	r := start(t, testConfig(t, addr, t.TempDir(), lmsSpec, nil))
	defer r.stop(t)
	out := newConsumer(t, addr, tOut)
	out.waitFor(30*time.Second, "the first predictions", func(rs []outRecord) bool { return len(distinctIDs(rs)) >= want })
	recreateInput(t, addr)
	var fresh []testRecord
	for i := 0; i < 6; i++ {
		fresh = append(fresh, testRecord{key: fmt.Sprintf("user-%d", i), value: fmt.Sprintf(`{"id":"new-%d","x":[1,2,3]}`, i)})
	}
	produce(t, addr, fresh)
	out.waitFor(30*time.Second, "the recreated topic's predictions", func(rs []outRecord) bool {
		n := 0
		for id := range distinctIDs(rs) {
			if containsNew(id) {
				n++
			}
		}
		return n >= len(fresh)
	})
	if n := r.p.Stats().OffsetResets["earliest"]; n == 0 {
		t.Error("offset_resets_total{policy=earliest} = 0")
	}
}
