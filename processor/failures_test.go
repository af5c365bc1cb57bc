package processor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/wire"
)

// countJoins counts JoinGroup requests the cluster receives.
func countJoins(c *kfake.Cluster) *atomic.Int64 {
	var n atomic.Int64
	c.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		n.Add(1)
		return nil, nil, false
	})
	return &n
}

// runToError runs a processor that must refuse to start.
func runToError(t *testing.T, cfg Config) error {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = p.Run(ctx)
	if ctx.Err() != nil {
		t.Fatal("Run did not refuse to start")
	}
	return err
}

// TestSessionTimeoutRefused: a session timeout below the broker's minimum
// (kfake's default, as Kafka's, is 6 s) is a configuration error, returned
// with ErrClusterMismatch and the setting's value, not retried as an outage.
func TestSessionTimeoutRefused(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	cfg := testConfig(t, c.ListenAddrs()[0], t.TempDir(), lmsSpec, nil)
	cfg.SessionTimeout, cfg.HeartbeatInterval = 2*time.Second, 500*time.Millisecond
	err := runToError(t, cfg)
	if !errors.Is(err, ErrClusterMismatch) || !strings.Contains(err.Error(), "SessionTimeout 2s") {
		t.Fatalf("Run: %v, want ErrClusterMismatch naming SessionTimeout 2s", err)
	}
}

// TestStartupTopicChecks: a missing topic, labels not co-partitioned with
// the input or a changelog topic with more partitions than the input (one
// with fewer is grown: partitions were added to the input; its cleanup
// policy is checked in package changelog) is refused before joining, with
// an error naming the topic, and nothing is written to the changelog.
func TestStartupTopicChecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		opts      []kfake.Opt
		labels    bool
		changelog bool
		want      string
	}{
		{"missing DLQ", []kfake.Opt{kfake.SeedTopics(nParts, tIn, tOut)}, false, false, `DLQTopic "dlq" does not exist`},
		{"missing output", []kfake.Opt{kfake.SeedTopics(nParts, tIn, tDLQ)}, false, false, `OutputTopic "out" does not exist`},
		{"missing labels", []kfake.Opt{kfake.SeedTopics(nParts, tIn, tOut, tDLQ)}, true, false, `LabelsTopic "labels" does not exist`},
		{"labels not co-partitioned", []kfake.Opt{kfake.SeedTopics(nParts, tIn, tOut, tDLQ), kfake.SeedTopics(2, tLabels)}, true, false,
			`LabelsTopic "labels" has 2 partitions, InputTopic "in" has 3`},
		{"changelog with more partitions than the input", []kfake.Opt{kfake.SeedTopics(nParts, tIn, tOut, tDLQ), kfake.SeedTopics(4, "cl")}, false, true,
			"cl has 4 partitions, the input has 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			joins := countJoins(c)
			cfg := testConfig(t, c.ListenAddrs()[0], t.TempDir(), lmsSpec, nil)
			if tc.labels {
				cfg.LabelsTopic = tLabels
			}
			if tc.changelog {
				cfg.Changelog.Topic = "cl"
			}
			err = runToError(t, cfg)
			if !errors.Is(err, ErrClusterMismatch) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v, want ErrClusterMismatch with %q", err, tc.want)
			}
			if n := joins.Load(); n != 0 {
				t.Errorf("%d JoinGroup requests before refusing", n)
			}
			if tc.changelog {
				msgs, err := broker.ReadAll(context.Background(), c.ListenAddrs(), "cl")
				if err != nil || len(msgs) != 0 {
					t.Errorf("changelog topic after the refusal: %d records, %v", len(msgs), err)
				}
			}
		})
	}
}

// TestSpecChangeRefusedBeforeJoin: a checkpoint directory written with
// another model spec is refused before any JoinGroup.
func TestSpecChangeRefusedBeforeJoin(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	joins := countJoins(c)
	dir := t.TempDir()
	other := lmsSpec
	other.Seed++
	old, err := New(testConfig(t, "x:1", dir, other, nil))
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.Open(checkpoint.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(old, store, nil, 1)
	w.nextIn, w.nextLab = 10, 0
	if err := store.Commit(1, &checkpoint.Checkpoint{Meta: w.encodeMeta()}); err != nil {
		t.Fatal(err)
	}
	store.Close()
	err = runToError(t, testConfig(t, c.ListenAddrs()[0], dir, lmsSpec, nil))
	if !errors.Is(err, ErrSpecMismatch) || !strings.Contains(err.Error(), "partitions 1 ") {
		t.Fatalf("Run: %v, want ErrSpecMismatch naming partition 1", err)
	}
	if n := joins.Load(); n != 0 {
		t.Errorf("%d JoinGroup requests before refusing", n)
	}
}

// TestProduceDenied: the brokers deny writes to the DLQ topic (ACL). The
// partition that needs a dead letter stops with an error naming the topic
// and the cause, the processor is not ready and counts the failure, and
// the other partitions go on predicting.
func TestProduceDenied(t *testing.T) {
	t.Parallel()
	allow := func(rt kmsg.ACLResourceType) kfake.ACL {
		return kfake.ACL{Resource: rt, Name: "*", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAll, Allow: true}
	}
	deny := kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: tDLQ, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationWrite}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(nParts, tIn, tOut, tDLQ), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("PLAIN", "admin", "admin"),
		kfake.User("PLAIN", "app", "pw", allow(kmsg.ACLResourceTypeTopic), allow(kmsg.ACLResourceTypeGroup), allow(kmsg.ACLResourceTypeCluster), deny))
	if err != nil {
		t.Fatal(err)
	}
	addr := c.ListenAddrs()[0]
	logs := &logBuffer{}
	cfg := testConfig(t, addr, t.TempDir(), lmsSpec, logs)
	cfg.SASL = &SASL{Mechanism: "plain", Username: "app", Password: "pw"}
	r := start(t, cfg)
	defer r.stop(t)

	// One key per partition; the bad record goes to the first key's partition.
	keys := map[int]string{}
	for i := 0; len(keys) < nParts; i++ {
		k := fmt.Sprintf("k%d", i)
		p := murmur2.Balance(kafka.Message{Key: []byte(k)}, 0, 1, 2)
		if _, ok := keys[p]; !ok {
			keys[p] = k
		}
	}
	adminW := &kafka.Writer{Addr: kafka.TCP(addr), Balancer: &kafka.Murmur2Balancer{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond, Transport: &kafka.Transport{SASL: plain.Mechanism{Username: "admin", Password: "admin"}}}
	defer adminW.Close()
	var msgs []kafka.Message
	msgs = append(msgs, kafka.Message{Topic: tIn, Key: []byte(keys[0]), Value: []byte(`not json`)})
	for i := 0; i < 5; i++ {
		for p := 0; p < nParts; p++ {
			msgs = append(msgs, kafka.Message{Topic: tIn, Key: []byte(keys[p]), Value: wire.AppendLabeled(nil, fmt.Sprintf("%d-%d", p, i), []float64{1, 2, 3}, 1)})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := adminW.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		f := r.p.Failed()
		st := r.p.Stats()
		if len(f) > 0 && st.PredictionsAcked >= 10 {
			if len(f) != 1 || f[0] == nil {
				t.Fatalf("failed partitions %v, want only 0", f)
			}
			if msg := f[0].Error(); !strings.Contains(msg, `"dlq"`) || !strings.Contains(strings.ToLower(msg), "authorization") {
				t.Errorf("failure %q does not name the topic and the cause", msg)
			}
			if st.FailedPartitions != 1 {
				t.Errorf("failed_partitions_total %d", st.FailedPartitions)
			}
			if r.p.Ready() {
				t.Error("ready with a failed partition")
			}
			if logs.count("partition stopped") != 1 {
				t.Errorf("partition stop logged %d times", logs.count("partition stopped"))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("failed %v, acked %d: want partition 0 failed and the 10 predictions of the others acknowledged", f, st.PredictionsAcked)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDLQDeleted: the DLQ topic is deleted while the processor runs; the
// partition that needs a dead letter stops after a few attempts with an
// error naming the topic, the others go on.
func TestDLQDeleted(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	r := start(t, testConfig(t, addr, t.TempDir(), lmsSpec, nil))
	defer r.stop(t)
	waitUntil(t, 20*time.Second, "ready", r.p.Ready)
	deleteTopic(t, addr, tDLQ)
	bad := ""
	for i := 0; bad == ""; i++ {
		if k := fmt.Sprintf("k%d", i); murmur2.Balance(kafka.Message{Key: []byte(k)}, 0, 1, 2) == 1 {
			bad = k
		}
	}
	recs := []testRecord{{key: bad, value: "not json"}}
	for i := 0; i < 30; i++ {
		recs = append(recs, testRecord{key: fmt.Sprintf("user-%d", i), value: fmt.Sprintf(`{"id":"%d","x":[1,2,3]}`, i)})
	}
	produce(t, addr, recs)
	waitUntil(t, 30*time.Second, "partition 1 failed", func() bool { return r.p.Failed()[1] != nil })
	if msg := r.p.Failed()[1].Error(); !strings.Contains(msg, `"dlq"`) {
		t.Errorf("failure %q does not name the topic", msg)
	}
	if r.p.Ready() {
		t.Error("ready with a failed partition")
	}
	// The stalled partition's lag follows the records that keep coming.
	var more []testRecord
	for i := 0; i < 10; i++ {
		more = append(more, testRecord{key: bad, value: fmt.Sprintf(`{"id":"m%d","x":[1,2,3]}`, i)})
	}
	produce(t, addr, more)
	waitUntil(t, 10*time.Second, "the failed partition's lag to grow", func() bool { return r.p.Stats().Lag >= 10 })
	// Partitions 0 and 2 keep predicting.
	waitUntil(t, 20*time.Second, "the other partitions' predictions", func() bool {
		n := 0
		for i := 0; i < 30; i++ {
			if murmur2.Balance(kafka.Message{Key: []byte(fmt.Sprintf("user-%d", i))}, 0, 1, 2) != 1 {
				n++
			}
		}
		return r.p.Stats().PredictionsAcked >= int64(n)
	})
}
