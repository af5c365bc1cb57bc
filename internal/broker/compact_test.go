package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testRecord is one record a test produces; a nil value is a tombstone.
type testRecord struct {
	key   string
	value []byte
}

// testBatch is one record batch as a test produces it: producer picks the
// client (each its own producer id), records go out in one Flush.
type testBatch struct {
	producer int
	records  []string // keys; a key ending in "!" is written as a tombstone of the key without it
}

// cleanedLayout makes every case CompactLikeKafka handles, with KeepTail 1:
// a batch cleaned at its head (0), one untouched (1), one cleaned at its
// tail (2: the batch whose range outlives its last record), the only batch
// of a second producer cleaned to nothing (3: kept empty), a batch ending
// with a tombstone (4) and the active batch, whose k0 does not supersede the
// k0 of batch 1 (5).
var cleanedLayout = []testBatch{
	{0, []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"}},
	{0, []string{"k0", "k1", "k2", "k3", "k4", "k10", "k11", "k12", "k13", "k14"}},
	{0, []string{"k20", "k21", "k22", "k23", "k24"}},
	{1, []string{"k30", "k31"}},
	{0, []string{"k22", "k23", "k24", "k30", "k31", "k5!"}},
	{0, []string{"k0"}},
}

// produced is a record as produced, with the offset kfake gave it.
type produced struct {
	batch  int
	offset int64
	testRecord
}

// produceLayout writes layout to partition 0 of topic, batch by batch,
// with codec, and returns the records in offset order.
func produceLayout(t *testing.T, b *Broker, topic string, codec kgo.CompressionCodec, layout []testBatch) []produced {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clients := map[int]*kgo.Client{}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	var out []produced
	for bi, tb := range layout {
		cl := clients[tb.producer]
		if cl == nil {
			var err error
			// Manual flushing: one Flush, one batch.
			cl, err = kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.DefaultProduceTopic(topic),
				kgo.ProducerBatchCompression(codec), kgo.ManualFlushing(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			clients[tb.producer] = cl
			warmUp(ctx, t, cl, topic)
		}
		var results []chan *kgo.Record
		for _, k := range tb.records {
			r := &kgo.Record{Key: []byte(k), Value: fmt.Appendf(nil, "%s from batch %d", k, bi),
				Headers: []kgo.RecordHeader{{Key: "batch", Value: fmt.Append(nil, bi)}}}
			if k[len(k)-1] == '!' {
				r.Key, r.Value = r.Key[:len(k)-1], nil
			}
			done := make(chan *kgo.Record, 1)
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce %s: %v", r.Key, err)
				}
				done <- r
			})
			results = append(results, done)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for _, done := range results {
			r := <-done
			out = append(out, produced{batch: bi, offset: r.Offset, testRecord: testRecord{key: string(r.Key), value: r.Value}})
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	slices.SortFunc(out, func(a, b produced) int { return int(a.offset - b.offset) })
	return out
}

// warmUp makes producer cl load topic's metadata and its producer id with
// a record to partition 1, which the tests do not read: kgo partitions the
// records produced before it knows the topic in a goroutine of its own, and
// a Flush during that would split a batch.
func warmUp(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: 1, Value: []byte("warm-up")}, func(_ *kgo.Record, err error) {
		if err != nil {
			t.Errorf("warm-up record: %v", err)
		}
	})
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// kafkaSurvivors is what Kafka's cleaner keeps of recs: everything in the
// last keepTail batches; before them the latest record of each key among
// those batches, tombstones only when they are kept.
func kafkaSurvivors(recs []produced, batches, keepTail int, dropTombstones bool) []produced {
	cleanEnd := batches - keepTail
	latest := map[string]int64{}
	for _, r := range recs {
		if r.batch < cleanEnd {
			latest[r.key] = r.offset
		}
	}
	var out []produced
	for _, r := range recs {
		if r.batch >= cleanEnd || latest[r.key] == r.offset && (r.value != nil || !dropTombstones) {
			out = append(out, r)
		}
	}
	return out
}

func newCompactTopic(t *testing.T) (*Broker, string) {
	t.Helper()
	b, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	// Partition 1 and a second topic: the partitions the install must
	// leave on the broker that led them.
	for _, topic := range []string{"cleaned", "other"} {
		if err := b.Cluster().CreateTopic(topic, 2, map[string]string{"cleanup.policy": "compact"}); err != nil {
			t.Fatal(err)
		}
	}
	return b, "cleaned"
}

// TestCompactLikeKafka produces a partition with every case of the
// cleaning, compacts it and checks (i) that a read_committed kgo consumer
// gets exactly the survivors with their offsets, values and headers, and
// (ii) that the batches served on the wire are Kafka's: each cleaned batch
// keeps its range, codec, producer fields and a valid CRC, a producer's
// last batch is kept empty, and one batch per answer when so configured.
// kfake's own Compact fails (ii): it ends a partly cleaned batch at its
// last survivor, uncompressed, and drops the emptied batch.
func TestCompactLikeKafka(t *testing.T) {
	cases := []struct {
		codec          kgo.CompressionCodec
		name           string
		oneBatch, drop bool
		keepTail       int
	}{
		{kgo.NoCompression(), "none", false, false, 0},
		{kgo.NoCompression(), "none", true, true, 0},
		{kgo.Lz4Compression(), "lz4", false, true, 0},
		{kgo.Lz4Compression(), "lz4", true, false, 0},
		{kgo.ZstdCompression(), "zstd", true, false, 0},
		{kgo.GzipCompression(), "gzip", false, false, 2},
		{kgo.SnappyCompression(), "snappy", true, true, 0},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/oneBatch=%v/dropTombstones=%v/keepTail=%d", tc.name, tc.oneBatch, tc.drop, tc.keepTail), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			b, topic := newCompactTopic(t)
			recs := produceLayout(t, b, topic, tc.codec, cleanedLayout)
			keepTail := max(tc.keepTail, 1)
			want := kafkaSurvivors(recs, len(cleanedLayout), keepTail, tc.drop)

			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			pi := b.Cluster().PartitionInfo(topic, 0)
			id := b.Cluster().TopicInfo(topic).TopicID
			before, err := readLog(ctx, cl, pi.Leader, topic, id, 0, 0, pi.HighWatermark)
			if err != nil {
				t.Fatal(err)
			}
			if len(before) != len(cleanedLayout) {
				t.Fatalf("%d batches produced, want %d", len(before), len(cleanedLayout))
			}
			home := b.Cluster().LeaderFor("other", 0)

			c, err := b.CompactLikeKafka(ctx, topic, 0, CompactOptions{OneBatchPerFetch: tc.oneBatch, DropTombstones: tc.drop, KeepTail: tc.keepTail})
			if err != nil {
				t.Fatal(err)
			}
			if c.Batches != len(before) || c.Records != len(recs) || c.Survivors != len(want) {
				t.Errorf("Compacted %d batches, %d records, %d survivors; want %d, %d, %d", c.Batches, c.Records, c.Survivors, len(before), len(recs), len(want))
			}
			for _, p := range []struct {
				topic     string
				partition int32
			}{{"other", 0}, {"other", 1}, {topic, 1}} {
				if got := b.Cluster().LeaderFor(p.topic, p.partition); got != home || got == c.Node {
					t.Errorf("%s/%d led by %d after the install, all by %d before; the fixture's broker is %d", p.topic, p.partition, got, home, c.Node)
				}
			}

			// (i) A read_committed consumer gets exactly the survivors.
			got := consumeAll(t, b, topic, pi.HighWatermark)
			if len(got) != len(want) {
				t.Errorf("consumed %d records, want %d", len(got), len(want))
			}
			for i := range min(len(got), len(want)) {
				g, w := got[i], want[i]
				if g.Offset != w.offset || string(g.Key) != w.key || !slices.Equal(g.Value, w.value) || (g.Value == nil) != (w.value == nil) ||
					len(g.Headers) != 1 || string(g.Headers[0].Value) != fmt.Sprint(w.batch) {
					t.Errorf("record %d: offset %d key %s value %q headers %v; want offset %d key %s value %q batch %d",
						i, g.Offset, g.Key, g.Value, g.Headers, w.offset, w.key, w.value, w.batch)
				}
			}

			// (ii) The batches on the wire.
			cleanEnd := len(cleanedLayout) - keepTail
			var served [][]byte
			for off := int64(0); off < pi.HighWatermark; {
				raw, hwm, err := fetchRaw(ctx, cl, c.Node, topic, id, 0, off, 0)
				if err != nil {
					t.Fatal(err)
				}
				if hwm != pi.HighWatermark {
					t.Errorf("fetch at %d: high-water mark %d, want %d", off, hwm, pi.HighWatermark)
				}
				if tc.oneBatch && len(raw) != 1 || !tc.oneBatch && off == 0 && len(raw) != len(cleanedLayout) {
					t.Errorf("fetch at %d: %d batches (one batch per fetch: %v)", off, len(raw), tc.oneBatch)
				}
				if len(raw) == 0 {
					t.Fatalf("fetch at %d below the high-water mark: no batch", off)
				}
				served = append(served, raw...)
				last := raw[len(raw)-1]
				off = int64(binary.BigEndian.Uint64(last)) + int64(binary.BigEndian.Uint32(last[23:])) + 1
			}
			// Every batch of the layout is still there, at its base
			// offset: batch 3 lost all its records but is its producer's
			// last.
			byFirst := map[int64][]byte{}
			for _, raw := range served {
				byFirst[int64(binary.BigEndian.Uint64(raw))] = raw
			}
			if len(served) != len(before) {
				t.Errorf("%d batches served, want %d", len(served), len(before))
			}
			for i := range before {
				var s, o kmsg.RecordBatch
				if err := o.ReadFrom(before[i]); err != nil {
					t.Fatal(err)
				}
				raw, ok := byFirst[o.FirstOffset]
				if !ok {
					t.Errorf("batch %d (offsets %d-%d) not served", i, o.FirstOffset, o.FirstOffset+int64(o.LastOffsetDelta))
					continue
				}
				if err := s.ReadFrom(raw); err != nil {
					t.Fatalf("served batch %d: %v", i, err)
				}
				if crc := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(s.CRC) != crc {
					t.Errorf("batch %d: CRC %08x, computed %08x", i, uint32(s.CRC), crc)
				}
				n := 0
				for _, r := range want {
					if r.batch == i {
						n++
					}
				}
				if int(s.NumRecords) != n {
					t.Errorf("batch %d: %d records, want %d", i, s.NumRecords, n)
				}
				wantCodec := o.Attributes & 7
				if n == 0 {
					wantCodec = 0 // Kafka writes an emptied batch's header alone
				}
				if s.FirstOffset != o.FirstOffset || s.LastOffsetDelta != o.LastOffsetDelta || s.Attributes&7 != wantCodec ||
					s.ProducerID != o.ProducerID || s.ProducerEpoch != o.ProducerEpoch || s.FirstSequence != o.FirstSequence ||
					s.PartitionLeaderEpoch != o.PartitionLeaderEpoch || s.MaxTimestamp != o.MaxTimestamp ||
					n > 0 && s.FirstTimestamp != o.FirstTimestamp || n == 0 && s.FirstTimestamp != -1 {
					t.Errorf("batch %d served as %+v\nwritten as %+v", i, header(s), header(o))
				}
				if i >= cleanEnd || int(o.NumRecords) == n {
					if !slices.Equal(raw, before[i]) {
						t.Errorf("batch %d: kept whole but not byte for byte", i)
					}
				}
			}
			// Batch 2 is the one kafka-go's Conn cannot get past: its
			// range goes two offsets beyond its last record.
			if s := c.Log[2]; keepTail == 1 && (s.Records != 2 || s.LastRecord != s.FirstOffset+1 || s.LastOffset != s.FirstOffset+4) {
				t.Errorf("batch 2 served as %+v, want 2 records and 2 offsets cleaned at its tail", s)
			}

			// At the high-water mark a fetch waits, then answers empty;
			// past it the offset is out of range.
			start := time.Now()
			if raw, _, err := fetchRaw(ctx, cl, c.Node, topic, id, 0, pi.HighWatermark, 100*time.Millisecond); err != nil || len(raw) != 0 || time.Since(start) < 90*time.Millisecond {
				t.Errorf("fetch at the high-water mark: %d batches, %v, after %v", len(raw), err, time.Since(start))
			}
			if _, _, err := fetchRaw(ctx, cl, c.Node, topic, id, 0, pi.HighWatermark+1, 0); !errors.Is(err, kerr.OffsetOutOfRange) {
				t.Errorf("fetch past the high-water mark: %v, want OFFSET_OUT_OF_RANGE", err)
			}
			if _, err := b.CompactLikeKafka(ctx, topic, 0, CompactOptions{}); err == nil {
				t.Error("compacting the partition twice: no error")
			}
		})
	}
}

// header is a batch without its records, for messages.
func header(b kmsg.RecordBatch) kmsg.RecordBatch {
	b.Records = nil
	return b
}

// consumeAll reads partition 0 of topic from its start to end with a
// read_committed kgo direct consumer.
func consumeAll(t *testing.T, b *Broker, topic string, end int64) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	for len(got) == 0 || got[len(got)-1].Offset < end-1 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d records up to offset %d of %d: %v", len(got), lastOffset(got), end, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Errorf("consume %s/%d: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	return got
}

func lastOffset(recs []*kgo.Record) int64 {
	if len(recs) == 0 {
		return -1
	}
	return recs[len(recs)-1].Offset
}

// TestCompactLikeKafkaTransactions: a committed transaction's records are
// cleaned as any others and its marker is served as written; an aborted
// transaction is refused, not served wrongly. kfake's Compact has no such
// refusal, and rewrites the cleaned transactional batch.
func TestCompactLikeKafkaTransactions(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			b, topic := newCompactTopic(t)
			tx, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.DefaultProduceTopic(topic), kgo.TransactionalID("tx"), kgo.ManualFlushing(),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Close()
			if err := tx.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			// One batch: the records wait for the Flush.
			warmUp(ctx, t, tx, topic)
			for _, k := range []string{"a", "b", "c"} {
				tx.Produce(ctx, &kgo.Record{Key: []byte(k), Value: []byte(k + "0")}, func(r *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce %s: %v", r.Key, err)
					}
				})
			}
			if err := tx.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatal(err)
			}
			// A plain producer supersedes c, then writes the active batch.
			plain := produceLayout(t, b, topic, kgo.Lz4Compression(), []testBatch{{0, []string{"c"}}, {0, []string{"d"}}})
			pi := b.Cluster().PartitionInfo(topic, 0)
			c, err := b.CompactLikeKafka(ctx, topic, 0, CompactOptions{OneBatchPerFetch: true})
			if !commit {
				if err == nil {
					t.Fatal("a partition with an aborted transaction compacted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The transaction's batch (0-2) keeps a and b, its marker (3) stays.
			wantLog := []BatchInfo{{0, 2, 2, 1, false}, {3, 3, 1, 3, true}, {4, 4, 1, 4, false}, {5, 5, 1, 5, false}}
			if !slices.Equal(c.Log, wantLog) {
				t.Errorf("served %+v, want %+v", c.Log, wantLog)
			}
			got := consumeAll(t, b, topic, pi.HighWatermark)
			var keys []string
			for _, r := range got {
				keys = append(keys, fmt.Sprintf("%s@%d", r.Key, r.Offset))
			}
			if want := []string{"a@0", "b@1", fmt.Sprintf("c@%d", plain[0].offset), fmt.Sprintf("d@%d", plain[1].offset)}; !slices.Equal(keys, want) {
				t.Errorf("consumed %v, want %v", keys, want)
			}
		})
	}
}

// TestKafkaGoConnStuckOnCleanedBatch documents the bug class the fixture
// exists for: kafka-go's Conn, read as changelog/read.go reads it (Seek to
// the last record's offset + 1, ReadBatch), is answered with the batch
// whose cleaned tail holds that offset again, reads no record from it and
// never gets past it, while the partition holds survivors after it. kgo
// steps to the batch's last offset + 1 instead (TestCompactLikeKafka).
// Against kfake's own Compact the batch ends at its last record and the
// reading gets through, so this test fails there.
func TestKafkaGoConnStuckOnCleanedBatch(t *testing.T) {
	for name, codec := range map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "lz4": kgo.Lz4Compression()} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			b, topic := newCompactTopic(t)
			recs := produceLayout(t, b, topic, codec, cleanedLayout)
			end := recs[len(recs)-1].offset + 1
			c, err := b.CompactLikeKafka(ctx, topic, 0, CompactOptions{OneBatchPerFetch: true})
			if err != nil {
				t.Fatal(err)
			}
			stuck := c.Log[2] // two offsets cleaned at its tail
			conn, err := kafka.DialLeader(ctx, "tcp", b.Addrs()[0], topic, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			off, reads := int64(0), 0
			for ; off < end && reads < 10; reads++ {
				if _, err := conn.Seek(off, kafka.SeekAbsolute); err != nil {
					t.Fatalf("seek %d: %v", off, err)
				}
				conn.SetReadDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck // a failed read says so
				batch := conn.ReadBatch(1, 1<<20)
				for {
					m, err := batch.ReadMessage()
					if err != nil {
						break
					}
					off = m.Offset + 1
				}
				if err := batch.Close(); err != nil {
					t.Fatalf("read at %d: %v", off, err)
				}
			}
			if off != stuck.LastRecord+1 {
				t.Fatalf("kafka-go got to offset %d in %d reads; want it stuck at %d, after the last record of the batch %d-%d", off, reads, stuck.LastRecord+1, stuck.FirstOffset, stuck.LastOffset)
			}
			c.log.mu.Lock()
			again := 0
			for _, first := range c.log.servedFirstOffsets {
				if first == stuck.FirstOffset {
					again++
				}
			}
			c.log.mu.Unlock()
			if again < 3 {
				t.Errorf("the batch at %d served %d times, want one per read at %d", stuck.FirstOffset, again, off)
			}
		})
	}
}

// TestCompactLikeKafkaLaterPartition: a partition kfake places on the
// fixture's broker after the install (a topic created later) and fetched
// together with the fixture's partition is moved away, and a consumer of
// both gets the records of both. Against kfake's own Compact there is no
// fixture broker and the test fails.
func TestCompactLikeKafkaLaterPartition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, topic := newCompactTopic(t)
	recs := produceLayout(t, b, topic, kgo.Lz4Compression(), cleanedLayout)
	want := kafkaSurvivors(recs, len(cleanedLayout), 1, false)
	c, err := b.CompactLikeKafka(ctx, topic, 0, CompactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// kfake draws a new partition's leader among both brokers: create
	// topics until one lands on the fixture's.
	var later string
	for i := 0; later == "" && i < 20; i++ {
		name := fmt.Sprintf("later-%d", i)
		if err := b.Cluster().CreateTopic(name, 1, nil); err != nil {
			t.Fatal(err)
		}
		if b.Cluster().LeaderFor(name, 0) == c.Node {
			later = name
		}
	}
	if later == "" {
		t.Fatal("no topic of 20 placed on the fixture's broker")
	}
	p, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.DefaultProduceTopic(later))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("later")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}, later: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var survivors, others int
	for survivors < len(want) || others < 1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d survivors and %d of 1 records of %s: %v", survivors, len(want), others, later, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Topic == later {
				others++
			} else {
				survivors++
			}
		})
	}
	if survivors != len(want) || others != 1 {
		t.Errorf("consumed %d survivors and %d records of %s, want %d and 1", survivors, others, later, len(want))
	}
	if got := b.Cluster().LeaderFor(later, 0); got == c.Node {
		t.Errorf("%s/0 still on the fixture's broker %d", later, got)
	}
}
