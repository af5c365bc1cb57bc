package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kernelstream/kernelstream/internal/broker"
)

// Tests of what a production Kafka cluster does that kfake, left to itself,
// does more kindly. Each says where kfake is made to behave as Apache Kafka
// does: a log cleaner that keeps a partly cleaned batch's original last
// offset and codec, and answers a fetch at a segment's end with one batch
// (broker.CompactLikeKafka); transactions with aborted records and markers
// (kfake's own, written by kgo's transactional producer); leader moves
// (MoveTopicPartition, ShufflePartitionLeaders); topics whose
// max.message.bytes is small; a leader whose log ends below what a reader
// consumed (an unclean election, told through OffsetForLeaderEpoch).

// newBroker starts a one-broker cluster with the test topics (input,
// output, dead letters, nParts partitions each) and configs for some.
func newBroker(t *testing.T, opts broker.Options, configs map[string]map[string]string) *broker.Broker {
	t.Helper()
	b, err := broker.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	for _, topic := range []string{tIn, tOut, tDLQ} {
		if err := b.Cluster().CreateTopic(topic, nParts, configs[topic]); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestRestoreFromChangelogCompactedAsKafkaDoes: a member with an empty disk
// restores every partition from a changelog that Kafka's cleaner compacted
// (batches keep their original last offset and codec, lz4 and none; one
// batch per fetch): the learners it checkpoints are byte-equal to an
// uninterrupted run's. A reader that re-fetches from its last record + 1
// gets the same batch back for ever; the restore steps over it.
func TestRestoreFromChangelogCompactedAsKafkaDoes(t *testing.T) {
	t.Parallel()
	for _, codec := range []string{"lz4", "none"} {
		t.Run(codec, func(t *testing.T) {
			t.Parallel()
			b := newBroker(t, broker.Options{}, nil)
			addr := b.Addrs()[0]
			cfg := testConfig(t, addr, t.TempDir(), lmsSpec, nil)
			cfg.Changelog.Topic, cfg.Changelog.Compression = "cl", codec
			r := start(t, cfg)
			out := newConsumer(t, addr, tOut)
			// Rounds of records, each checkpointed before the next: the
			// first two change every key, the later ones only user-3 to
			// user-5, so that the cleaning removes those keys' early
			// bundles from batches whose other keys stay (bundles are in
			// key order: the tail goes).
			rng := rand.New(rand.NewPCG(21, 22))
			var recs []testRecord
			for round := 0; round < 6; round++ {
				var batch []testRecord
				for k := 0; k < 6; k++ {
					if round >= 2 && k < 3 {
						continue
					}
					batch = append(batch, testRecord{key: fmt.Sprintf("user-%d", k),
						value: fmt.Sprintf(`{"id":"%d-%d","x":[%.3f,%.3f,%.3f],"y":%.3f}`, k, round, rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64())})
				}
				produce(t, addr, batch)
				recs = append(recs, batch...)
				out.waitFor(30*time.Second, "the round's predictions", func(rs []outRecord) bool { return len(distinctIDs(rs)) >= len(recs) })
				ckpts := r.p.Stats().Checkpoints
				waitUntil(t, 30*time.Second, "the round checkpointed", func() bool { return r.p.Stats().Checkpoints > ckpts })
				time.Sleep(3 * cfg.CheckpointInterval) // the other partitions' checkpoints too
			}
			ref := replay(t, lmsSpec, recs, DefaultTopK)
			waitDone(t, r, out, ref)
			r.stop(t)

			ctx := testCtx(t, 90*time.Second)
			tails, stored := 0, int64(0)
			for p := int32(0); p < nParts; p++ {
				c, err := b.CompactLikeKafka(ctx, "cl", p, broker.CompactOptions{OneBatchPerFetch: true})
				if err != nil {
					t.Fatal(err)
				}
				if c.Survivors > 0 {
					stored++ // a partition with state: restored from its changelog partition
				}
				for _, bi := range c.Log {
					if !bi.Control && bi.Records > 0 && bi.LastRecord < bi.LastOffset {
						tails++
					}
				}
			}
			if tails == 0 {
				t.Fatal("the cleaning cut no batch's tail: the restore below would not meet the case it is for")
			}

			cfg.CheckpointDir = t.TempDir() // the disk is lost
			rb := start(t, cfg)
			waitUntil(t, 60*time.Second, "every partition restored from the changelog", func() bool {
				return rb.p.Ready() && rb.p.c.restores.Load() == stored
			})
			rb.stop(t) // the final checkpoints write the restored learners into Badger
			checkStates(t, ref, cfg.CheckpointDir)
			t.Logf("%d batches lost their tail to the cleaning; %d changelog records read by the restore", tails, rb.p.c.changelogRead.Load())
		})
	}
}

// TestCompactedCompressedInput: the input topic is compacted, its batches
// lz4-compressed, and Kafka's cleaner has cut the tails of some (one batch
// per fetch): every surviving record is processed once, as a replay of the
// survivors, and the processor catches up and then fetches at the pace of
// its fetch wait, not in a loop.
func TestCompactedCompressedInput(t *testing.T) {
	t.Parallel()
	b := newBroker(t, broker.Options{}, map[string]map[string]string{tIn: {"cleanup.policy": "compact"}})
	addr := b.Addrs()[0]
	// Three labelled versions of 90 keys, interleaved at random (each key's
	// versions in order): batches mix newest versions and superseded ones.
	rng := rand.New(rand.NewPCG(7, 8))
	next := make([]int, 90)
	var recs []testRecord
	for len(recs) < 3*len(next) {
		k := rng.IntN(len(next))
		if next[k] == 3 {
			continue
		}
		v := next[k]
		next[k]++
		recs = append(recs, testRecord{key: fmt.Sprintf("user-%d", k),
			value: fmt.Sprintf(`{"id":"%d-%d","x":[%.3f,%.3f,%.3f],"y":%.3f}`, k, v, rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64())})
	}
	// Small batches (a dozen records): many per partition.
	produceWith(t, addr, recs, kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.ProducerLinger(50*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1200))

	ctx := testCtx(t, 90*time.Second)
	var fetches atomic.Int64
	b.Cluster().ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		fetches.Add(1) // observes; the fixture's control, added after, answers
		return nil, nil, false
	})
	tails, survived := 0, 0
	for p := int32(0); p < nParts; p++ {
		c, err := b.CompactLikeKafka(ctx, tIn, p, broker.CompactOptions{OneBatchPerFetch: true})
		if err != nil {
			t.Fatal(err)
		}
		survived += c.Survivors
		for _, bi := range c.Log {
			if bi.Records > 0 && bi.LastRecord < bi.LastOffset {
				tails++
			}
		}
	}
	if tails == 0 {
		t.Fatal("the cleaning cut no batch's tail")
	}
	// The survivors as another client reads them (the newest version of
	// every key, and the last batch whole: Kafka does not clean the
	// active segment), replayed as the reference.
	survivors := readTopic(t, addr, tIn, survived)
	ref := replay(t, lmsSpec, survivors, DefaultTopK)
	dir := t.TempDir()
	r := start(t, testConfig(t, addr, dir, lmsSpec, nil))
	outs := waitDone(t, r, newConsumer(t, addr, tOut), ref)
	before := fetches.Load()
	time.Sleep(2 * time.Second)
	idle := fetches.Load() - before
	r.stop(t)
	checkPredictions(t, ref, outs)
	checkStates(t, ref, dir)
	// Idle, each broker is fetched from about twice a second by each client
	// (the processor's, the test's output reader); a reader stuck on a
	// cleaned batch fetches thousands of times.
	if idle > 100 {
		t.Errorf("%d fetches in 2 s once caught up: a reader is spinning", idle)
	}
	t.Logf("%d survivors of %d records, %d batches cut at their tail; %d fetches in 2 s idle", len(survivors), len(recs), tails, idle)
}

// TestTransactionalInput: the input is written in transactions by kgo's
// transactional producer, some committed, some aborted, with the markers
// Kafka writes after each. Read read_committed (the default), no record of
// an aborted transaction reaches a learner or the output, no marker is
// dead-lettered, and the state equals a replay of the committed records;
// the position moves past the last marker (lag 0, ready).
func TestTransactionalInput(t *testing.T) {
	t.Parallel()
	b := newBroker(t, broker.Options{}, nil)
	addr := b.Addrs()[0]
	committed := stream(6, 30, 3, 31)
	aborted := stream(6, 10, 3, 32)
	for i := range aborted {
		aborted[i].value = strings.Replace(aborted[i].value, `{"id":"`, `{"id":"aborted-`, 1)
	}
	third := len(committed) / 3
	txns := []struct {
		recs   []testRecord
		commit bool
	}{
		{committed[:third], true}, {aborted[:len(aborted)/2], false}, {committed[third : 2*third], true},
		{aborted[len(aborted)/2:], false}, {committed[2*third:], true},
	}
	tx, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("input-writer"), kgo.DefaultProduceTopic(tIn))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	ctx := testCtx(t, 60*time.Second)
	base := timestamps(len(committed) + len(aborted))
	i := 0
	for _, txn := range txns {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, r := range txn.recs {
			rec := &kgo.Record{Key: []byte(r.key), Value: []byte(r.value), Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
			i++
			if err := tx.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(txn.commit)); err != nil {
			t.Fatal(err)
		}
	}
	ref := replay(t, lmsSpec, committed, DefaultTopK)
	dir := t.TempDir()
	r := start(t, testConfig(t, addr, dir, lmsSpec, nil))
	outs := waitDone(t, r, newConsumer(t, addr, tOut), ref)
	r.stop(t)
	checkPredictions(t, ref, outs)
	checkStates(t, ref, dir)
	st := r.p.Stats()
	if st.Records["dead"] != 0 {
		t.Errorf("%d dead letters (%v): transaction markers or aborted records were read as records", st.Records["dead"], st.DeadLetters)
	}
	for _, o := range outs {
		if strings.Contains(string(o.ID), "aborted-") {
			t.Fatalf("a record of an aborted transaction was predicted: %s", o.ID)
		}
	}
}

// TestLeaderMoves: the leaders of the input, output and changelog
// partitions move while a stream runs (MoveTopicPartition, then
// ShufflePartitionLeaders), on a three-broker cluster. After each move the
// predictions of records written after it arrive within a second; per key
// they come in input order; none is missing.
func TestLeaderMoves(t *testing.T) {
	t.Parallel()
	b := newBroker(t, broker.Options{Brokers: 3}, nil)
	addr := b.Addrs()[0]
	c := b.Cluster()
	cfg := testConfig(t, addr, t.TempDir(), lmsSpec, nil)
	cfg.Changelog.Topic = "cl"
	r := start(t, cfg)
	defer r.stop(t)
	waitUntil(t, 30*time.Second, "ready", r.p.Ready)

	in, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.DefaultProduceTopic(tIn), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ctx := testCtx(t, 90*time.Second)

	// The predictions as they arrive, read by another client meanwhile.
	type arrival struct {
		at     time.Time
		key    string
		id     string
		offset int64
	}
	arrivals := make(chan arrival, 4096)
	reader, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumeTopics(tOut), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	go func() {
		defer close(arrivals)
		for ctx.Err() == nil {
			fs := reader.PollFetches(ctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				o := newOutRecord(r.Key, r.Value, nil)
				arrivals <- arrival{now, o.Key, string(o.ID), o.Offset}
			})
		}
	}()

	// 300 records a second for 6 s; the moves at 1, 2, 3 and 4 s.
	const keys, rate = 6, 300
	sent := map[string]time.Time{} // key/id -> when it was written
	type move struct {
		at   time.Time
		what string
	}
	var moves []move
	moveAll := func(topic string) {
		for p := int32(0); p < nParts; p++ {
			if err := c.MoveTopicPartition(topic, p, (c.LeaderFor(topic, p)+1)%3); err != nil {
				t.Fatalf("move %s/%d: %v", topic, p, err)
			}
		}
		moves = append(moves, move{time.Now(), topic})
	}
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	begin := time.Now()
	var seq [keys]int
	for n := 0; time.Since(begin) < 6*time.Second; n++ {
		<-tick.C
		k := n % keys
		id := fmt.Sprintf(`"%d-%d"`, k, seq[k])
		seq[k]++
		key := fmt.Sprintf("user-%d", k)
		sent[key+"/"+id] = time.Now()
		in.Produce(ctx, &kgo.Record{Key: []byte(key), Value: []byte(fmt.Sprintf(`{"id":%s,"x":[%d,1,2],"y":1}`, id, n%7))},
			func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		switch el := time.Since(begin); {
		case len(moves) == 0 && el > time.Second:
			moveAll(tIn)
		case len(moves) == 1 && el > 2*time.Second:
			moveAll(tOut)
		case len(moves) == 2 && el > 3*time.Second:
			moveAll("cl")
		case len(moves) == 3 && el > 4*time.Second:
			c.ShufflePartitionLeaders()
			moves = append(moves, move{time.Now(), "every topic (shuffled)"})
		}
	}
	if err := in.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	arrived := map[string]time.Time{}
	lastOffset := map[string]int64{}
	for len(arrived) < len(sent) {
		a, ok := <-arrivals
		if !ok {
			t.Fatalf("%d of %d records predicted within 90 s", len(arrived), len(sent))
		}
		if _, ok := arrived[a.key+"/"+a.id]; ok {
			continue // a duplicate (the reader re-read a moved partition)
		}
		arrived[a.key+"/"+a.id] = a.at
		if prev, ok := lastOffset[a.key]; ok && a.offset < prev {
			t.Errorf("key %s: prediction of offset %d after one of offset %d", a.key, a.offset, prev)
		}
		lastOffset[a.key] = max(lastOffset[a.key], a.offset)
	}
	for id := range sent {
		if _, ok := arrived[id]; !ok {
			t.Errorf("no prediction for %s", id)
		}
	}
	// After each move, the first prediction of a record written after it
	// (within 100 ms of it) arrives within a second of the move.
	for _, m := range moves {
		var first time.Time
		for id, at := range sent {
			if at.After(m.at) && at.Before(m.at.Add(100*time.Millisecond)) {
				if a := arrived[id]; first.IsZero() || a.Before(first) {
					first = a
				}
			}
		}
		resumed := first.Sub(m.at)
		t.Logf("move of %s: predictions resumed %v after it", m.what, resumed.Round(time.Millisecond))
		if first.IsZero() || resumed > time.Second {
			t.Errorf("move of %s: predictions resumed %v after it, want within 1 s", m.what, resumed)
		}
	}
}

// TestBatchesNearMaxMessageBytes: the output topic's max.message.bytes is
// 64 KiB and every prediction carries a propagated 1 KiB header, and 600
// dead letters of 1,950 bytes each (with their five headers) go to a topic
// at Kafka's default limit; the bytes are random, so lz4 does not shrink
// the batches under the limits. Batches are bounded by their encoded size,
// headers and framing included: nothing is refused, no partition stops,
// everything arrives.
func TestBatchesNearMaxMessageBytes(t *testing.T) {
	t.Parallel()
	b := newBroker(t, broker.Options{}, map[string]map[string]string{tOut: {"max.message.bytes": "65536"}})
	addr := b.Addrs()[0]
	// Random bytes: the limit counts the batch as sent (compressed), so
	// the test's bytes must not compress.
	rng := rand.New(rand.NewPCG(5, 6))
	random := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return string(b)
	}
	var recs []testRecord
	traces := map[string]string{} // the header of each prediction's input, by id
	bad := 0
	for i := 0; i < 1800; i++ {
		key := fmt.Sprintf("user-%d", i%9)
		if i%3 == 2 {
			recs = append(recs, testRecord{key: key, value: "!" + random(1949)}) // not JSON: a dead letter
			bad++
			continue
		}
		recs = append(recs, testRecord{key: key, value: fmt.Sprintf(`{"id":"%d","x":[%d,1,2],"y":1}`, i, i%5)})
		traces[fmt.Sprintf(`"%d"`, i)] = random(1024)
	}
	produceWith(t, addr, recs, kgo.ProducerLinger(20*time.Millisecond), func(r *kgo.Record) {
		var v struct{ ID json.RawMessage }
		if json.Unmarshal(r.Value, &v) == nil {
			r.Headers = []kgo.RecordHeader{{Key: "traceparent", Value: []byte(traces[string(v.ID)])}}
		}
	})
	cfg := testConfig(t, addr, t.TempDir(), lmsSpec, nil)
	cfg.PropagateHeaders = []string{"traceparent"}
	cfg.BatchTimeout = 50 * time.Millisecond // full batches
	r := start(t, cfg)
	defer r.stop(t)
	want := len(recs) - bad
	outs := newConsumer(t, addr, tOut).waitFor(60*time.Second, "every prediction", func(rs []outRecord) bool { return len(distinctIDs(rs)) >= want })
	dead := newConsumer(t, addr, tDLQ).waitFor(60*time.Second, "every dead letter", atLeast(bad))
	if f := r.p.Failed(); len(f) > 0 {
		t.Fatalf("partitions failed: %v", f)
	}
	for _, o := range outs {
		if o.headers["traceparent"] != traces[string(o.ID)] {
			t.Fatalf("prediction %s lacks its input's header", o.ID)
		}
	}
	for _, d := range dead {
		if len(d.value) != 1950 {
			t.Fatalf("a dead letter of %d bytes, want the record unchanged (1950)", len(d.value))
		}
	}
}

// TestTruncationDetected: the leader of an input partition changes and the
// new one's log ends below what the processor consumed (an unclean leader
// election: kfake moves the leader, and answers the OffsetForLeaderEpoch
// that franz-go sends to validate its position with an end offset below
// it, as the new leader of a truncated log does). The truncation is
// detected, logged at warn with the partition and offsets, counted, and
// listed by Events (/readyz); reading goes on where the log diverged.
func TestTruncationDetected(t *testing.T) {
	t.Parallel()
	b := newBroker(t, broker.Options{Brokers: 2}, nil)
	addr := b.Addrs()[0]
	recs := stream(6, 20, 3, 41)
	produce(t, addr, recs)
	logs := &logBuffer{}
	r := start(t, testConfig(t, addr, t.TempDir(), lmsSpec, logs))
	defer r.stop(t)
	ref := replay(t, lmsSpec, recs, DefaultTopK)
	waitDone(t, r, newConsumer(t, addr, tOut), ref)

	c := b.Cluster()
	part := int32(0) // the partition with the most records
	for p := int32(1); p < nParts; p++ {
		if c.PartitionInfo(tIn, p).HighWatermark > c.PartitionInfo(tIn, part).HighWatermark {
			part = p
		}
	}
	pi := c.PartitionInfo(tIn, part)
	end := pi.HighWatermark
	truncatedTo := end / 2
	c.ControlKey(int16(kmsg.OffsetForLeaderEpoch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		q := req.(*kmsg.OffsetForLeaderEpochRequest)
		if len(q.Topics) != 1 || q.Topics[0].Topic != tIn || len(q.Topics[0].Partitions) != 1 || q.Topics[0].Partitions[0].Partition != part {
			c.KeepControl()
			return nil, nil, false
		}
		resp := q.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = tIn
		rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.EndOffset = part, q.Topics[0].Partitions[0].LeaderEpoch, truncatedTo
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	if err := c.MoveTopicPartition(tIn, part, (pi.Leader+1)%2); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the truncation detected", func() bool { return r.p.Stats().Truncations > 0 })
	ev := r.p.Events()
	if len(ev) == 0 || ev[len(ev)-1].Kind != "truncation" || ev[len(ev)-1].Topic != tIn || ev[len(ev)-1].Partition != int(part) ||
		!strings.Contains(ev[len(ev)-1].Detail, fmt.Sprintf("consumed to offset %d, resumed at %d", end, truncatedTo)) {
		t.Errorf("events %v, want the truncation of %s/%d from %d to %d", ev, tIn, part, end, truncatedTo)
	}
	if !logs.hasLine(`"level":"warn"`, fmt.Sprintf(`"partition":%d`, part), fmt.Sprintf(`"consumed_to":%d`, end), fmt.Sprintf(`"resumed_at":%d`, truncatedTo), "log truncation detected") {
		t.Error("no warning naming the partition and the offsets")
	}
}

// readTopic reads n records of topic from its start with a kgo consumer,
// read_committed, in offset order per partition.
func readTopic(t *testing.T, addr, topic string, n int) []testRecord {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t, 30*time.Second)
	var out []testRecord
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records of %s: %v", len(out), n, topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, testRecord{key: string(r.Key), value: string(r.Value)})
		})
	}
	return out
}

// produceWith writes recs with a kgo producer with opts (a func(*kgo.Record)
// among them edits each record first), murmur2-partitioned by key,
// timestamps increasing.
func produceWith(t *testing.T, addr string, recs []testRecord, opts ...any) {
	t.Helper()
	kopts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(tIn)}
	var edit func(*kgo.Record)
	for _, o := range opts {
		switch o := o.(type) {
		case kgo.Opt:
			kopts = append(kopts, o)
		case func(*kgo.Record):
			edit = o
		}
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t, 60*time.Second)
	base := timestamps(len(recs))
	for i, r := range recs {
		topic := r.topic
		if topic == "" {
			topic = tIn
		}
		rec := &kgo.Record{Topic: topic, Key: []byte(r.key), Value: []byte(r.value), Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
		if edit != nil {
			edit(rec)
		}
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// timestamps reserves n increasing timestamps after those of earlier
// produce calls, as produce does, and returns the first.
func timestamps(n int) time.Time {
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	lastBaseMu.Lock()
	defer lastBaseMu.Unlock()
	if !lastBase.IsZero() && !base.After(lastBase) {
		base = lastBase.Add(time.Millisecond)
	}
	lastBase = base.Add(time.Duration(n) * time.Millisecond)
	return base
}
