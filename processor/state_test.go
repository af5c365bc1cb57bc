package processor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/kafkaio"
)

// Tests of the state in Kafka under an operator's bad day: a zombie
// member, a recreated changelog, a topic limit below the configured one, a
// permanent write failure, a key whose pending entries outgrow a record,
// partitions added to the input, a full disk. Each fails on the changelog
// written without transactions.

// changelogConfig is testConfig with a changelog topic.
func changelogConfig(t *testing.T, addr, dir string) Config {
	cfg := testConfig(t, addr, dir, lmsSpec, nil)
	cfg.Changelog.Topic = "cl"
	return cfg
}

// restoreFresh runs a member with an empty disk until every partition with
// state has been restored from the changelog, stops it, and returns its
// checkpoint directory (readable by storedStates).
func restoreFresh(t *testing.T, addr string, restores int64) string {
	t.Helper()
	dir := t.TempDir()
	r := start(t, changelogConfig(t, addr, dir))
	waitUntil(t, 60*time.Second, "the partitions restored from the changelog", func() bool {
		return r.p.Ready() && r.p.c.restores.Load() >= restores
	})
	r.stop(t)
	return dir
}

// TestZombieIsFenced: member A is frozen past its session timeout with
// state it has not checkpointed (its heartbeats hang, as a paused VM's
// would); B takes its partitions, processes everything and checkpoints. A
// thaws, still believing it owns them, and its revoke's final checkpoint
// writes its stale state. That write is fenced by B's transactional
// producer: after B stops and the input is trimmed to the committed
// offsets, a member with an empty disk restores B's state, equal to an
// uninterrupted run's. Without fencing, A's stale marker and bundles land
// after B's and the restore takes them.
func TestZombieIsFenced(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "", shortSessions)
	addr := c.ListenAddrs()[0]
	recs := stream(6, 30, 3, 51)
	produce(t, addr, recs)
	ref := replay(t, lmsSpec, recs, DefaultTopK)

	var frozen atomic.Bool
	thaw := make(chan struct{})
	cfgA := changelogConfig(t, addr, t.TempDir())
	cfgA.SessionTimeout, cfgA.HeartbeatInterval = zombieSession, zombieSession/10
	cfgA.CheckpointInterval, cfgA.CheckpointMaxRecords = time.Hour, 1<<30 // its state stays unwritten until the revoke
	cfgA.loopHook = func(*worker) {
		if frozen.Load() {
			<-thaw
		}
	}
	a := start(t, cfgA)
	waitDone(t, a, newConsumer(t, addr, tOut), ref)

	// Freeze A: its workers stop, its heartbeats hang until the thaw.
	holdHeartbeats(t, c, &frozen, thaw)
	frozen.Store(true)

	cfgB := changelogConfig(t, addr, t.TempDir())
	cfgB.SessionTimeout, cfgB.HeartbeatInterval = zombieSession, zombieSession/10
	b := start(t, cfgB)
	waitUntil(t, 60*time.Second, "B processing every partition", func() bool {
		st := b.p.Stats()
		return b.p.Ready() && len(st.Partitions) == nParts && st.Lag == 0 && st.Checkpoints >= nParts
	})

	// Thaw A: it checkpoints its stale state on the revoke it learns of.
	frozen.Store(false)
	close(thaw)
	waitUntil(t, 30*time.Second, "A's revoke", func() bool {
		return len(a.p.Failed()) > 0 || a.p.c.checkpoints.Load() > 0
	})
	fenced := 0
	for _, err := range a.p.Failed() {
		if errors.Is(err, errPartitionFailed) && strings.Contains(err.Error(), "fenced") {
			fenced++
		}
	}
	a.stop(t)
	b.stop(t)
	if fenced == 0 {
		t.Errorf("no write of A was fenced (failed %v, checkpoints %d)", a.p.Failed(), a.p.c.checkpoints.Load())
	}
	trimToCommitted(t, addr, "g")
	checkStates(t, ref, restoreFresh(t, addr, partitionsOf(recs)))
}

// TestZombieOutputsNeverVisible: with exactly-once outputs, member A
// predicts a stream into transactions it has not committed (its checkpoints
// 10 s apart) and is frozen past its session timeout while a worker holds
// outputs queued for its transaction (emitted, not yet handed to kgo: the
// emitter's bursts): its workers stop (loopHook) and its heartbeats hang
// (ControlKey, as a paused process's would; kfake would otherwise keep the
// member). B takes every partition, fences A's transactional ids (which
// aborts A's open transactions) and predicts the whole stream again. A is
// then thawed and hands what it had queued to its fenced transactions. A
// read_committed reader sees every prediction exactly once, each equal to
// a replay's: none of A's.
func TestZombieOutputsNeverVisible(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "", shortSessions)
	addr := c.ListenAddrs()[0]
	recs := stream(6, 60, 3, 52)
	third := len(recs) / 3
	produce(t, addr, recs[:third])

	var armed, frozen atomic.Bool
	var queuedAtFreeze atomic.Int32
	thaw := make(chan struct{})
	cfgA := changelogConfig(t, addr, t.TempDir())
	cfgA.OutputDelivery = "exactly_once"
	cfgA.SessionTimeout, cfgA.HeartbeatInterval = zombieSession, zombieSession/10
	cfgA.CheckpointInterval, cfgA.CheckpointMaxRecords = 10*time.Second, 1<<30 // its transactions stay open
	cfgA.loopHook = func(w *worker) {
		if armed.Load() && len(w.em.queued) > 0 && frozen.CompareAndSwap(false, true) {
			queuedAtFreeze.Store(int32(len(w.em.queued)))
		}
		if frozen.Load() {
			<-thaw
		}
	}
	a := start(t, cfgA)
	// A's predictions of the first third, written but not committed.
	waitDone(t, a, newConsumer(t, addr, tOut), replay(t, lmsSpec, recs[:third], DefaultTopK))

	holdHeartbeats(t, c, &frozen, thaw)
	armed.Store(true)
	produce(t, addr, recs[third:2*third]) // A freezes with some of their outputs queued
	waitUntil(t, 30*time.Second, "A frozen with outputs queued", frozen.Load)

	cfgB := changelogConfig(t, addr, t.TempDir())
	cfgB.OutputDelivery = "exactly_once"
	cfgB.SessionTimeout, cfgB.HeartbeatInterval = zombieSession, zombieSession/10
	b := start(t, cfgB)
	waitUntil(t, 60*time.Second, "B owning every partition", func() bool {
		return b.p.Ready() && len(b.p.Stats().Partitions) == nParts
	})
	produce(t, addr, recs[2*third:])
	ref := replay(t, lmsSpec, recs, DefaultTopK)
	committed := newCommittedConsumer(t, addr, tOut)
	committed.waitFor(60*time.Second, "every prediction committed by B", func(rs []outRecord) bool { return len(distinctIDs(rs)) >= len(ref.yhat) })

	close(thaw)
	frozen.Store(false)
	waitUntil(t, 30*time.Second, "A's writes refused as fenced", func() bool { return len(a.p.Failed()) > 0 })
	for part, err := range a.p.Failed() {
		if !errors.Is(err, kafkaio.ErrFenced) {
			t.Errorf("A's partition %d failed with %v, want the fencing named", part, err)
		}
	}
	a.stop(t)
	b.stop(t)

	outs := committed.waitFor(30*time.Second, "the committed predictions", func(rs []outRecord) bool { return len(distinctIDs(rs)) >= len(ref.yhat) })
	checkPredictions(t, ref, outs)
	checkCommittedOnce(t, outs)
	t.Logf("A froze with %d outputs queued in a worker's emitter", queuedAtFreeze.Load())
}

// checkCommittedOnce fails for every (key, id) that outs, as a
// read_committed reader received them, holds other than once.
func checkCommittedOnce(t *testing.T, outs []outRecord) {
	t.Helper()
	seen := map[string]int{}
	for _, o := range outs {
		seen[o.Key+"/"+string(o.ID)]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s committed %d times", id, n)
		}
	}
}

// zombieSession is the session timeout of the members of the zombie tests:
// a member frozen this long is expired and its partitions move.
const zombieSession = 2 * time.Second

// holdHeartbeats makes the heartbeats of group "g"'s only member hang while
// frozen is set, until thaw is closed, as a paused process's would: kfake
// would otherwise keep the member, whose connection stays open.
func holdHeartbeats(t *testing.T, c *kfake.Cluster, frozen *atomic.Bool, thaw <-chan struct{}) {
	t.Helper()
	info := c.GroupInfo("g")
	if info == nil || len(info.Members) != 1 {
		t.Fatalf("group: %+v", info)
	}
	member := info.Members[0].MemberID
	c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if frozen.Load() && req.(*kmsg.HeartbeatRequest).MemberID == member {
			c.SleepControl(func() { <-thaw })
		}
		return nil, nil, false
	})
}

// partitionsOf is how many input partitions hold the keys of recs.
func partitionsOf(recs []testRecord) int64 {
	parts := map[int]bool{}
	for _, r := range recs {
		parts[partitionOf(&kafkaio.Record{Key: []byte(r.key)}, []int{0, 1, 2})] = true
	}
	return int64(len(parts))
}

// trimToCommitted deletes the input's records below group's committed
// offsets, as retention may.
func trimToCommitted(t *testing.T, addr, group string) {
	t.Helper()
	committed, err := broker.Committed(context.Background(), []string{addr}, group, tIn, nParts)
	if err != nil {
		t.Fatal(err)
	}
	if err := broker.DeleteRecords(context.Background(), []string{addr}, tIn, committed); err != nil {
		t.Fatal(err)
	}
}

// TestChangelogRecreatedUnderARunningMember: the changelog topic is deleted
// and created again while the member runs; its next checkpoints find it
// (the transaction's topic is gone, or the marker lands below the last
// one) and write the whole partition again, so a member with an empty disk
// restores every learner. Without it, the running member wrote only the
// keys it changed afterwards.
func TestChangelogRecreatedUnderARunningMember(t *testing.T) {
	t.Parallel()
	// With exactly_once outputs the rebuild is in the transaction that
	// commits the outputs, before Badger: when it wrote Badger first, a
	// rebuild that failed left Badger past outputs that were aborted.
	for _, delivery := range OutputDeliveries {
		t.Run(delivery, func(t *testing.T) {
			t.Parallel()
			c := startCluster(t, 0, "")
			addr := c.ListenAddrs()[0]
			first := stream(12, 10, 3, 52)
			produce(t, addr, first)
			cfg := changelogConfig(t, addr, t.TempDir())
			cfg.OutputDelivery = delivery
			r := start(t, cfg)
			out := newCommittedConsumer(t, addr, tOut)
			waitDone(t, r, out, replay(t, lmsSpec, first, DefaultTopK))
			waitUntil(t, 30*time.Second, "a checkpoint of every partition", func() bool { return r.p.Stats().Checkpoints >= nParts })

			withAdmin(t, addr, func(ctx context.Context, cl *kgo.Client) { deleteTopicWith(ctx, t, cl, "cl") })
			if err := c.CreateTopic("cl", nParts, map[string]string{"cleanup.policy": "compact"}); err != nil {
				t.Fatal(err)
			}
			// Records of two keys only: without the rebuild, the new
			// changelog would hold those two and the markers.
			var more []testRecord
			for i := 0; i < 10; i++ {
				for _, k := range []string{"user-0", "user-1"} {
					more = append(more, testRecord{key: k, value: fmt.Sprintf(`{"id":"more-%d","x":[%d,1,2],"y":1}`, i, i)})
				}
			}
			produce(t, addr, more)
			all := append(append([]testRecord(nil), first...), more...)
			ref := replay(t, lmsSpec, all, DefaultTopK)
			waitDone(t, r, out, ref)
			waitUntil(t, 60*time.Second, "the changelog written again", func() bool {
				marked := int64(0)
				for part := 0; part < nParts; part++ {
					if _, _, found, err := r.p.changelogSource().LastMarker(testCtx(t, 5*time.Second), part); err == nil && found {
						marked++
					}
				}
				return marked >= partitionsOf(all)
			})
			r.stop(t)
			checkStates(t, ref, restoreFresh(t, addr, partitionsOf(all)))
			if delivery == "exactly_once" {
				checkCommittedOnce(t, out.waitFor(10*time.Second, "the final commits", func([]outRecord) bool { return true }))
			}
		})
	}
}

// TestChangelogLimitBelowTheCheckpoint: the changelog topic exists with a
// max.message.bytes of 16 KiB, below both the configured limit and one
// checkpoint of 400 changed keys. The producer splits the checkpoint into
// batches under the topic's real limit, every checkpoint commits, and a
// member with an empty disk restores all of it. Sent as one batch, the
// checkpoint was refused, carried into the next, larger one, for ever.
func TestChangelogLimitBelowTheCheckpoint(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	if err := c.CreateTopic("cl", nParts, map[string]string{"cleanup.policy": "compact", "max.message.bytes": "16384"}); err != nil {
		t.Fatal(err)
	}
	recs := stream(400, 2, 3, 53)
	produce(t, addr, recs)
	ref := replay(t, lmsSpec, recs, DefaultTopK)
	cfg := changelogConfig(t, addr, t.TempDir())
	cfg.MaxLearners, cfg.CheckpointMaxRecords = 1000, 100000
	r := start(t, cfg)
	waitDone(t, r, newConsumer(t, addr, tOut), ref)
	r.stop(t)
	st := r.p.Stats()
	if st.CheckpointsAbandoned != 0 || len(r.p.Failed()) != 0 {
		t.Fatalf("%d checkpoints abandoned, failed %v", st.CheckpointsAbandoned, r.p.Failed())
	}
	checkStates(t, ref, restoreFresh(t, addr, partitionsOf(recs)))
}

// TestChangelogWriteRefused: writes to the changelog are denied (ACL): the
// partitions stop loudly (not ready, failed_partitions_total, an error
// naming the topic) instead of carrying every abandoned checkpoint's
// changes into the next while reporting ready.
func TestChangelogWriteRefused(t *testing.T) {
	t.Parallel()
	addr, admin := deniedChangelog(t)
	cfg := changelogConfig(t, addr, t.TempDir())
	cfg.SASL = &SASL{Mechanism: "plain", Username: "app", Password: "pw"}
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	r := start(t, cfg)
	defer r.stop(t)
	produceAs(t, admin, 30)
	waitUntil(t, 60*time.Second, "the partitions failed", func() bool { return len(r.p.Failed()) > 0 })
	if r.p.Ready() {
		t.Error("ready with partitions that cannot checkpoint")
	}
	for part, err := range r.p.Failed() {
		if !strings.Contains(err.Error(), `cl/`) || !strings.Contains(strings.ToLower(err.Error()), "authoriz") {
			t.Errorf("partition %d: %v does not name the changelog and the cause", part, err)
		}
	}
	// The alerts' series: failed partitions now (not a total that one
	// restart resets), and each failed partition's position ahead of its
	// last checkpoint (0: it never checkpointed).
	waitUntil(t, 10*time.Second, "the failure in the metrics", func() bool {
		v, failed := gathered(t, reg), r.p.Failed()
		if v["kernelstream_failed_partitions"] != float64(len(failed)) {
			return false
		}
		for part := range failed {
			l := "{partition=" + itoa(part) + "}"
			if !(v["kernelstream_partition_offset"+l] > v["kernelstream_partition_checkpointed_offset"+l]) {
				return false
			}
		}
		return true
	})
}

// TestChangelogRefusedAtRestore: a member with local state starts with the
// changelog enabled, and writes to the changelog are denied: the restore
// cannot write the local state to it. The partitions stop loudly; the
// process does not exit (it did, as a store failure, and so did every
// member the partitions moved to, through the group).
func TestChangelogRefusedAtRestore(t *testing.T) {
	t.Parallel()
	addr, admin := deniedChangelog(t)
	dir := t.TempDir()
	cfg := testConfig(t, addr, dir, lmsSpec, nil)
	cfg.SASL = &SASL{Mechanism: "plain", Username: "app", Password: "pw"}
	produceAs(t, admin, 30)
	r := start(t, cfg)
	waitUntil(t, 60*time.Second, "a checkpoint of the local state", func() bool { return r.p.Stats().Checkpoints >= 1 })
	r.stop(t)

	cfg.Changelog.Topic = "cl"
	r = start(t, cfg)
	defer r.stop(t) // Run returns nil: the process stayed up
	waitUntil(t, 60*time.Second, "the partitions with local state failed", func() bool { return len(r.p.Failed()) > 0 })
	if r.p.Ready() {
		t.Error("ready with partitions that cannot restore")
	}
	for part, err := range r.p.Failed() {
		if !strings.Contains(err.Error(), "restore") || !strings.Contains(strings.ToLower(err.Error()), "authoriz") {
			t.Errorf("partition %d: %v does not name the restore and the cause", part, err)
		}
	}
}

// deniedChangelog starts a broker with ACLs on which user app may do
// everything but write to the changelog topic "cl", and returns its
// address and an admin client.
func deniedChangelog(t *testing.T) (string, *kgo.Client) {
	t.Helper()
	allow := func(rt kmsg.ACLResourceType) kfake.ACL {
		return kfake.ACL{Resource: rt, Name: "*", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAll, Allow: true}
	}
	deny := kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "cl", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationWrite}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(nParts, tIn, tOut, tDLQ), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("PLAIN", "admin", "admin"),
		kfake.User("PLAIN", "app", "pw", allow(kmsg.ACLResourceTypeTopic), allow(kmsg.ACLResourceTypeGroup), allow(kmsg.ACLResourceTypeCluster),
			allow(kmsg.ACLResourceTypeTransactionalId), deny))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(plainAuth("admin", "admin")), kgo.DefaultProduceTopic(tIn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	return addr, admin
}

// produceAs writes n labelled records of n keys with cl.
func produceAs(t *testing.T, cl *kgo.Client, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf(`{"id":"%d","x":[1,2,3],"y":1}`, i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPendingEntriesOutgrowARecord: one key has 300 pending entries, about
// 33 KB of them, and the changelog topic takes records of 8 KiB: pending
// entries are records of their own, so the key's checkpoint is written and
// restored. In one bundle with its learner, the key stopped the whole
// process (and the next owner's, through the group).
func TestPendingEntriesOutgrowARecord(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	if err := c.CreateTopic("cl", nParts, map[string]string{"cleanup.policy": "compact", "max.message.bytes": "8192"}); err != nil {
		t.Fatal(err)
	}
	var recs []testRecord
	for i := 0; i < 300; i++ {
		recs = append(recs, testRecord{key: "hot", value: fmt.Sprintf(`{"id":"%d","x":[%d.5,1.25,2.75]}`, i, i%7)})
	}
	produce(t, addr, recs)
	ref := replay(t, lmsSpec, recs, DefaultTopK)
	r := start(t, changelogConfig(t, addr, t.TempDir()))
	waitDone(t, r, newConsumer(t, addr, tOut), ref)
	r.stop(t)
	if f := r.p.Failed(); len(f) > 0 {
		t.Fatalf("failed partitions %v", f)
	}
	dir := restoreFresh(t, addr, 1)
	checkStates(t, ref, dir)
	if n := storedPending(t, dir); n != 300 {
		t.Errorf("%d pending entries restored, want 300", n)
	}
}

// TestInputPartitionsAdded: partitions are added to the input between two
// runs; the changelog, created with the old count, is grown to the new one
// instead of the member refusing to start (every member, a crash loop),
// and the new partitions' records are processed and checkpointed.
func TestInputPartitionsAdded(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	produce(t, addr, stream(6, 5, 3, 54))
	dir := t.TempDir()
	r := start(t, changelogConfig(t, addr, dir))
	waitUntil(t, 30*time.Second, "checkpoints", func() bool { return r.p.Stats().Checkpoints > 0 && r.p.Stats().Lag == 0 })
	r.stop(t)
	withAdmin(t, addr, func(ctx context.Context, cl *kgo.Client) {
		req := kmsg.NewPtrCreatePartitionsRequest()
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = tIn, nParts+2
		req.Topics = append(req.Topics, rt)
		if _, err := req.RequestWith(ctx, cl); err != nil {
			t.Fatal(err)
		}
	})
	r = start(t, changelogConfig(t, addr, dir))
	defer r.stop(t)
	waitUntil(t, 60*time.Second, "every partition, the added ones too", func() bool {
		return r.p.Ready() && len(r.p.Stats().Partitions) == nParts+2
	})
	if n := len(c.PartitionInfos("cl")); n != nParts+2 {
		t.Fatalf("changelog has %d partitions, want %d", n, nParts+2)
	}
}

// TestDiskNearlyFull: with less free space than checkpoint.min_free_mib the
// partitions neither read nor checkpoint, the processor is not ready and
// the free space is exported; nothing is written that Badger would need to
// extend a memory-mapped file for.
func TestDiskNearlyFull(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	produce(t, addr, stream(6, 5, 3, 55))
	cfg := changelogConfig(t, addr, t.TempDir())
	cfg.CheckpointMinFreeMiB = 1 << 40 // more than any disk has
	r := start(t, cfg)
	defer r.stop(t)
	time.Sleep(3 * time.Second)
	st := r.p.Stats()
	if r.p.Ready() || st.Checkpoints != 0 || st.Predictions != 0 {
		t.Fatalf("ready %v, %d checkpoints, %d predictions with the disk full", r.p.Ready(), st.Checkpoints, st.Predictions)
	}
	if free := r.p.c.disk.free.Load(); free <= 0 {
		t.Fatalf("free space %d not exported", free)
	}
}

// storedPending counts the pending entries of a checkpoint directory.
func storedPending(t *testing.T, dir string) int {
	t.Helper()
	s := openStore(t, dir)
	defer s.Close()
	n := 0
	for p := 0; p < nParts; p++ {
		if err := s.EachPending(p, func(_, _ []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func openStore(t *testing.T, dir string) *checkpoint.Store {
	t.Helper()
	s, err := checkpoint.Open(checkpoint.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func plainAuth(user, pass string) sasl.Mechanism {
	return plain.Auth{User: user, Pass: pass}.AsMechanism()
}

// TestExactlyOnceOutputs: with output.delivery exactly_once a member is
// killed between checkpoints (no final checkpoint: its open transaction
// holds predictions already written), and another resumes. A
// read_committed reader of the output sees every prediction exactly once,
// each equal to a direct replay's; the killed member's uncommitted ones
// were aborted by the resuming member's fencing.
func TestExactlyOnceOutputs(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	recs := stream(6, 40, 3, 56)
	half := len(recs) / 2
	produce(t, addr, recs[:half])
	dir := t.TempDir()
	cfg := changelogConfig(t, addr, dir)
	// A checkpoint every 40 records, none by time within the test (15 s
	// is the longest interval exactly_once allows): the last records of
	// each partition stay in an open transaction when the member dies.
	cfg.OutputDelivery, cfg.CheckpointInterval, cfg.CheckpointMaxRecords = "exactly_once", 15*time.Second, 40
	cfg.crashOnStop = true
	committed := newCommittedConsumer(t, addr, tOut)
	everything := newConsumer(t, addr, tOut) // read_uncommitted: sees the open transaction's records too
	a := start(t, cfg)
	committed.waitFor(60*time.Second, "committed predictions", func(rs []outRecord) bool { return len(rs) > 0 })
	firstHalf := len(replay(t, lmsSpec, recs[:half], DefaultTopK).yhat)
	everything.waitFor(60*time.Second, "the first half predicted", func(rs []outRecord) bool { return len(distinctIDs(rs)) >= firstHalf })
	a.stop(t) // killed: what it wrote since its last checkpoint is in an open transaction
	cfg.CheckpointInterval = 300 * time.Millisecond

	produce(t, addr, recs[half:])
	cfg.crashOnStop = false
	ref := replay(t, lmsSpec, recs, DefaultTopK)
	b := start(t, cfg)
	outs := committed.waitFor(60*time.Second, "every prediction committed", func(rs []outRecord) bool { return len(distinctIDs(rs)) >= len(ref.yhat) })
	b.stop(t)
	outs = committed.waitFor(10*time.Second, "the final commits", func([]outRecord) bool { return true })
	checkPredictions(t, ref, outs)
	checkCommittedOnce(t, outs)
	all := everything.waitFor(10*time.Second, "every record written", func(rs []outRecord) bool { return len(rs) > len(outs) })
	t.Logf("%d predictions written, %d committed (the rest aborted with the killed member's transaction)", len(all), len(outs))
}

// newCommittedConsumer is newConsumer reading read_committed, as the
// downstream of exactly-once outputs must.
func newCommittedConsumer(t *testing.T, addr, topic string) *consumer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	c := &consumer{t: t, cl: cl, close: sync.OnceFunc(cl.Close)}
	t.Cleanup(c.close)
	return c
}

// TestTransactionPastItsTimeout: with exactly_once outputs a worker stalls
// (a long GC pause, a frozen disk) with its transaction open, past the
// transaction timeout; the coordinator aborts the transaction and bumps
// the producer's epoch. A coordinator cannot tell that from a zombie's
// late write, so the partition fails loudly (not ready, the error names
// the fencing) instead of writing again; the other partitions go on. A
// restarted member resumes it from its last checkpoint, and every
// prediction is committed exactly once.
func TestTransactionPastItsTimeout(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	recs := stream(6, 40, 3, 57)
	half := len(recs) / 2
	produce(t, addr, recs[:half])
	cfg := changelogConfig(t, addr, t.TempDir())
	cfg.OutputDelivery, cfg.CheckpointInterval, cfg.txnTimeout = "exactly_once", 200*time.Millisecond, time.Second
	var armed, slept atomic.Bool
	var turns [nParts]atomic.Int32
	stalled := make(chan int, 1)
	cfg.loopHook = func(w *worker) {
		// The stall comes right after the worker handed outputs to the
		// transaction (it queues them, up to emitBatch, until it would
		// wait): a transaction that nothing was produced in yet is not
		// open on the coordinator, and its timeout would not run.
		if armed.Load() && turns[w.part].Add(1) >= 20 && len(w.em.queued) > 0 && slept.CompareAndSwap(false, true) {
			w.em.flush(w.hard)
			stalled <- w.part
			time.Sleep(2500 * time.Millisecond) // the open transaction outlives its timeout
		}
	}
	committed := newCommittedConsumer(t, addr, tOut)
	r := start(t, cfg)
	first := len(replay(t, lmsSpec, recs[:half], DefaultTopK).yhat)
	committed.waitFor(60*time.Second, "the first half committed", func(rs []outRecord) bool { return len(distinctIDs(rs)) >= first })
	armed.Store(true)
	produce(t, addr, recs[half:])
	part := <-stalled
	waitUntil(t, 30*time.Second, "the stalled partition failed", func() bool { return r.p.Failed()[part] != nil })
	if err := r.p.Failed()[part]; !errors.Is(err, kafkaio.ErrFenced) {
		t.Errorf("partition %d failed with %v, want the fencing named", part, err)
	}
	if len(r.p.Failed()) != 1 || r.p.Ready() {
		t.Errorf("failed %v, ready %v: want only the stalled partition failed, and not ready", r.p.Failed(), r.p.Ready())
	}
	r.stop(t)

	cfg.loopHook = nil
	ref := replay(t, lmsSpec, recs, DefaultTopK)
	r = start(t, cfg)
	defer r.stop(t)
	outs := committed.waitFor(60*time.Second, "every prediction committed", func(rs []outRecord) bool { return len(distinctIDs(rs)) >= len(ref.yhat) })
	checkPredictions(t, ref, outs)
	checkCommittedOnce(t, outs)
}

// TestInputPartitionsAddedWhileRunning: two members run when a partition is
// added to the input; only one of them can be assigned it. Both count it
// afterwards, so that the partitioner check (wrong_partition) of the other
// does not judge keys by the old count: with dead_letter, it dead-lettered
// records its producer had placed right.
func TestInputPartitionsAddedWhileRunning(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	produce(t, addr, stream(6, 5, 3, 58))
	config := func() Config {
		cfg := changelogConfig(t, addr, t.TempDir())
		cfg.partitionWatch = 200 * time.Millisecond
		return cfg
	}
	a := start(t, config())
	defer a.stop(t)
	b := start(t, config())
	defer b.stop(t)
	waitUntil(t, 60*time.Second, "both members in a generation with every partition", func() bool {
		return a.p.Ready() && b.p.Ready() && len(a.p.Stats().Partitions)+len(b.p.Stats().Partitions) == nParts &&
			len(a.p.Stats().Partitions) > 0 && len(b.p.Stats().Partitions) > 0
	})
	withAdmin(t, addr, func(ctx context.Context, cl *kgo.Client) {
		req := kmsg.NewPtrCreatePartitionsRequest()
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = tIn, nParts+1
		req.Topics = append(req.Topics, rt)
		if _, err := req.RequestWith(ctx, cl); err != nil {
			t.Fatal(err)
		}
	})
	waitUntil(t, 60*time.Second, "the added partition assigned", func() bool {
		return a.p.Ready() && b.p.Ready() && len(a.p.Stats().Partitions)+len(b.p.Stats().Partitions) == nParts+1
	})
	for name, r := range map[string]*running{"a": a, "b": b} {
		if n := r.p.inParts.Load(); n != nParts+1 {
			t.Errorf("member %s counts %d input partitions, want %d", name, n, nParts+1)
		}
	}
}
