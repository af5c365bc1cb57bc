package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CompactOptions configures CompactLikeKafka. The zero value cleans all but
// the last batch, keeps tombstones and answers fetches with as many batches
// as the request's max bytes allow.
type CompactOptions struct {
	// KeepTail is the number of batches at the log's end left as written:
	// the active segment, which Kafka never cleans. As in Kafka, records
	// in it do not supersede older records of their key either (the
	// cleaner's offset map stops where the cleanable range does). Below 1
	// means 1.
	KeepTail int
	// OneBatchPerFetch answers every fetch with the single batch that holds
	// the fetch offset, as Kafka does when that batch ends a segment: a
	// client that re-fetches from its last record + 1 after a batch whose
	// tail was cleaned gets that batch again.
	OneBatchPerFetch bool
	// DropTombstones removes tombstones that are the latest record of
	// their key too, as Kafka does once delete.retention.ms has passed.
	DropTombstones bool
}

// Compacted tells what CompactLikeKafka did, for a test's assertions.
type Compacted struct {
	Node      int32       // the broker that now leads the partition and answers its fetches
	Batches   int         // record batches read, control batches included
	Records   int         // data records read
	Survivors int         // data records served
	Log       []BatchInfo // the batches served, in offset order

	log *kafkaLog
}

// BatchInfo is one record batch as the fixture serves it.
type BatchInfo struct {
	FirstOffset, LastOffset int64 // the range of the batch as written, kept by the cleaning
	Records                 int   // records served in it
	LastRecord              int64 // offset of its last record served; -1 for a batch emptied and kept
	Control                 bool  // a transaction marker
}

// CompactLikeKafka compacts partition partition of topic as Apache Kafka's log cleaner
// would and from then on answers that partition's Fetch requests itself, as
// Kafka does; kfake's own Cluster.Compact is kinder than Kafka (it rewrites a
// partly cleaned batch uncompressed, ending at its last surviving record), so
// a client that mishandles a cleaned batch passes against it and fails
// against Kafka. What the fixture does, as Kafka's cleaner:
//
//   - a record survives iff it is the latest record of its key in the
//     cleaned range (all batches but the last KeepTail), and is no tombstone
//     when DropTombstones is set; records without a key are removed;
//   - a batch whose records all survive is served byte for byte; one that
//     lost some is re-encoded with the same base offset, last offset delta,
//     attributes (codec included), producer id, epoch and base sequence,
//     timestamps and leader epoch, its surviving records byte for byte
//     (offset and timestamp deltas unchanged), compressed again with the
//     batch's codec, length and CRC-32C recomputed;
//   - a batch that lost all its records is dropped, unless it is the last
//     data batch of its producer id (>= 0) in the log: then it is kept empty,
//     as Kafka's DefaultRecordBatch.writeEmptyHeader writes it (no records,
//     uncompressed, first timestamp -1, the same range and producer fields),
//     so that the producer's last sequence survives;
//   - control batches (transaction markers) are kept as they are, and the
//     records of committed transactions are cleaned as any others.
//
// The partition is moved to a broker of its own (added to the cluster:
// franz-go sends one Fetch per broker for all the partitions that broker
// leads, and the fixture must answer whole requests), every other partition
// back to the leader it had, and from then on that broker answers Fetch
// requests for the partition from the cleaned log: from the first batch
// whose last offset is at or past the fetch offset, one batch or as many as
// the request's max bytes allow (always one at least), with the high-water
// mark, last stable offset and log start offset the partition had, no fetch
// session (the client then sends full requests), in the request's form
// (topic IDs from fetch v13). A fetch at the high-water mark waits up to
// min(MaxWaitMillis, 200 ms) and answers empty; one below the log start or
// past the high-water mark answers OFFSET_OUT_OF_RANGE. Other requests
// (ListOffsets, Produce, groups) stay kfake's.
//
// Limits: records produced to the partition afterwards are stored by kfake
// but never served (tests compact once, at the end); a partition holding an
// aborted or open transaction is refused (serving one needs the aborted
// transactions index Kafka sends with read_committed fetches); a re-encoded
// batch keeps its first and max timestamps, where Kafka rebuilds them from
// its survivors (a record's timestamp as read is the same either way);
// adding the broker moves group
// coordinators and bumps every partition's leader epoch, which clients
// recover from by refreshing their metadata; a partition kfake places on
// the fixture's broker later (a topic created afterwards) is answered
// NOT_LEADER_OR_FOLLOWER in a fetch that also names the fixture's
// partition, and moved to another broker. A partition is compacted once.
func (b *Broker) CompactLikeKafka(ctx context.Context, topic string, partition int32, o CompactOptions) (*Compacted, error) {
	where := fmt.Sprintf("compact like Kafka %s/%d", topic, partition)
	key := fmt.Sprintf("%s\x00%d", topic, partition)
	b.mu.Lock()
	if b.compacted[key] {
		b.mu.Unlock()
		return nil, fmt.Errorf("%s: compacted already", where)
	}
	if b.compacted == nil {
		b.compacted = map[string]bool{}
	}
	b.compacted[key] = true
	b.mu.Unlock()
	c, err := b.compactLikeKafka(ctx, topic, partition, o)
	if err != nil {
		b.mu.Lock()
		delete(b.compacted, key)
		b.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return c, nil
}

func (b *Broker) compactLikeKafka(ctx context.Context, topic string, partition int32, o CompactOptions) (*Compacted, error) {
	ti := b.cluster.TopicInfo(topic)
	pi := b.cluster.PartitionInfo(topic, partition)
	if ti == nil || pi == nil {
		return nil, errors.New("no such topic partition")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addrs...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	raw, err := readLog(ctx, cl, pi.Leader, topic, ti.TopicID, partition, pi.LogStartOffset, pi.HighWatermark)
	if err != nil {
		return nil, err
	}
	batches := make([]logBatch, len(raw))
	dec := kgo.DefaultDecompressor()
	for i, r := range raw {
		if batches[i], err = parseBatch(r, dec); err != nil {
			return nil, err
		}
	}
	served, err := cleanLog(batches, o)
	if err != nil {
		return nil, err
	}
	node, err := b.isolate(ctx, cl, topic, partition)
	if err != nil {
		return nil, err
	}
	l := &kafkaLog{
		c: b.cluster, node: node, home: pi.Leader, topic: topic, id: ti.TopicID, partition: partition,
		logStart: pi.LogStartOffset, hwm: pi.HighWatermark, oneBatch: o.OneBatchPerFetch,
		batches: served,
	}
	b.cluster.ControlKey(int16(kmsg.Fetch), l.fetch)
	res := &Compacted{Node: node, Batches: len(batches), log: l}
	for _, lb := range batches {
		if !lb.control() {
			res.Records += len(lb.recs)
		}
	}
	for _, s := range served {
		res.Log = append(res.Log, s.info)
		if !s.info.Control {
			res.Survivors += s.info.Records
		}
	}
	return res, nil
}

// isolate adds a broker, makes it the leader of the partition and puts
// every other partition back on the leader it had (adding a broker makes
// kfake draw every partition's leader anew).
func (b *Broker) isolate(ctx context.Context, cl *kgo.Client, topic string, partition int32) (int32, error) {
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("metadata: %w", err)
	}
	node, _, err := b.cluster.AddNode(-1, 0)
	if err != nil {
		return 0, fmt.Errorf("add a broker: %w", err)
	}
	if err := b.cluster.MoveTopicPartition(topic, partition, node); err != nil {
		return 0, fmt.Errorf("move to broker %d: %w", node, err)
	}
	for _, t := range meta.Topics {
		if t.Topic == nil {
			continue
		}
		for _, p := range t.Partitions {
			if (*t.Topic == topic && p.Partition == partition) || p.Leader < 0 {
				continue
			}
			if err := b.cluster.MoveTopicPartition(*t.Topic, p.Partition, p.Leader); err != nil {
				return 0, fmt.Errorf("move %s/%d back to broker %d: %w", *t.Topic, p.Partition, p.Leader, err)
			}
		}
	}
	return node, nil
}

// readLog returns every record batch of the partition from offset from to
// end as broker node serves them (read_uncommitted), raw.
func readLog(ctx context.Context, cl *kgo.Client, node int32, topic string, id [16]byte, partition int32, from, end int64) ([][]byte, error) {
	var out [][]byte
	for off := from; off < end; {
		raw, _, err := fetchRaw(ctx, cl, node, topic, id, partition, off, 0)
		if err != nil {
			return nil, err
		}
		if len(raw) == 0 {
			return nil, fmt.Errorf("fetch at %d below the high-water mark %d: no batch", off, end)
		}
		for _, r := range raw {
			out = append(out, r)
			off = int64(binary.BigEndian.Uint64(r)) + int64(binary.BigEndian.Uint32(r[23:])) + 1
		}
	}
	return out, nil
}

// fetchRaw sends one read_uncommitted Fetch for the partition at offset
// to broker node and returns the record batches of the answer, split but
// not decoded, and the high-water mark. A partial batch at the end (cut by
// the max bytes) is left out.
func fetchRaw(ctx context.Context, cl *kgo.Client, node int32, topic string, id [16]byte, partition int32, offset int64, maxWait time.Duration) ([][]byte, int64, error) {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = int32(maxWait / time.Millisecond)
	req.MaxBytes = 64 << 20
	req.SessionEpoch = -1 // no fetch session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id // the request's version picks which one goes on the wire
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 64<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Broker(int(node)).Request(ctx, req)
	if err != nil {
		return nil, 0, fmt.Errorf("fetch at %d from broker %d: %w", offset, node, err)
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, 0, fmt.Errorf("fetch at %d from broker %d: %w", offset, node, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, 0, fmt.Errorf("fetch at %d from broker %d: answer of %d topics", offset, node, len(resp.Topics))
	}
	sp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
		return nil, 0, fmt.Errorf("fetch at %d from broker %d: %w", offset, node, err)
	}
	var out [][]byte
	for rest := sp.RecordBatches; len(rest) >= 12; {
		n := 12 + int(int32(binary.BigEndian.Uint32(rest[8:])))
		if n < 61 || n > len(rest) {
			break
		}
		out = append(out, rest[:n:n])
		rest = rest[n:]
	}
	return out, sp.HighWatermark, nil
}

// logBatch is a record batch read from the partition: its header, the wire
// bytes, and its records decompressed.
type logBatch struct {
	kmsg.RecordBatch
	raw  []byte
	recs []logRecord
}

func (lb *logBatch) control() bool { return lb.Attributes&0x20 != 0 }
func (lb *logBatch) lastOffset() int64 {
	return lb.FirstOffset + int64(lb.LastOffsetDelta)
}

// logRecord is one record of a batch and its encoding (length prefix
// included), which a re-encoded batch copies as it is.
type logRecord struct {
	offset     int64
	key, value []byte
	raw        []byte
}

func parseBatch(raw []byte, dec kgo.Decompressor) (logBatch, error) {
	lb := logBatch{raw: raw}
	if err := lb.ReadFrom(raw); err != nil {
		return lb, fmt.Errorf("batch at %d: %w", int64(binary.BigEndian.Uint64(raw)), err)
	}
	if lb.Magic != 2 {
		return lb, fmt.Errorf("batch at %d: magic %d, not 2", lb.FirstOffset, lb.Magic)
	}
	data, err := dec.Decompress(lb.Records, kgo.CompressionCodecType(lb.Attributes&7))
	if err != nil {
		return lb, fmt.Errorf("batch at %d: decompress: %w", lb.FirstOffset, err)
	}
	for len(data) > 0 {
		l, n := kbin.Varint(data)
		if n == 0 || l < 0 || n+int(l) > len(data) {
			return lb, fmt.Errorf("batch at %d: record %d truncated", lb.FirstOffset, len(lb.recs))
		}
		var r kmsg.Record
		if err := r.ReadFrom(data[:n+int(l)]); err != nil {
			return lb, fmt.Errorf("batch at %d: record %d: %w", lb.FirstOffset, len(lb.recs), err)
		}
		lb.recs = append(lb.recs, logRecord{offset: lb.FirstOffset + int64(r.OffsetDelta), key: r.Key, value: r.Value, raw: data[:n+int(l)]})
		data = data[n+int(l):]
	}
	if len(lb.recs) != int(lb.NumRecords) {
		return lb, fmt.Errorf("batch at %d: %d records, its header says %d", lb.FirstOffset, len(lb.recs), lb.NumRecords)
	}
	return lb, nil
}

// servedBatch is a batch of the cleaned log, encoded.
type servedBatch struct {
	info BatchInfo
	raw  []byte
}

// cleanLog computes what Kafka's cleaner leaves of batches (see
// CompactLikeKafka).
func cleanLog(batches []logBatch, o CompactOptions) ([]servedBatch, error) {
	if err := checkTransactions(batches); err != nil {
		return nil, err
	}
	cleanEnd := max(len(batches)-max(o.KeepTail, 1), 0)
	latest := map[string]int64{}
	for _, lb := range batches[:cleanEnd] {
		if lb.control() {
			continue
		}
		for _, r := range lb.recs {
			if r.key != nil {
				latest[string(r.key)] = r.offset
			}
		}
	}
	// Kafka keeps the last batch of every producer it still tracks,
	// emptied if need be: the producer state rebuilt from the log needs its
	// last sequence.
	lastOfProducer := map[int64]int{}
	for i, lb := range batches {
		if !lb.control() && lb.ProducerID >= 0 {
			lastOfProducer[lb.ProducerID] = i
		}
	}
	var out []servedBatch
	for i := range batches {
		lb := &batches[i]
		if i >= cleanEnd || lb.control() {
			out = append(out, servedBatch{info: lb.info(lb.recs), raw: lb.raw})
			continue
		}
		var keep []logRecord
		for _, r := range lb.recs {
			if r.key != nil && latest[string(r.key)] == r.offset && (r.value != nil || !o.DropTombstones) {
				keep = append(keep, r)
			}
		}
		switch {
		case len(keep) == len(lb.recs):
			out = append(out, servedBatch{info: lb.info(keep), raw: lb.raw})
		case len(keep) > 0:
			raw, err := lb.encode(keep)
			if err != nil {
				return nil, err
			}
			out = append(out, servedBatch{info: lb.info(keep), raw: raw})
		case lb.ProducerID >= 0 && lastOfProducer[lb.ProducerID] == i:
			h := lb.RecordBatch
			h.Attributes &^= 7
			h.FirstTimestamp = -1
			h.NumRecords, h.Records = 0, nil
			out = append(out, servedBatch{info: lb.info(nil), raw: seal(h)})
		}
	}
	return out, nil
}

func (lb *logBatch) info(recs []logRecord) BatchInfo {
	bi := BatchInfo{FirstOffset: lb.FirstOffset, LastOffset: lb.lastOffset(), Records: len(recs), LastRecord: -1, Control: lb.control()}
	if len(recs) > 0 {
		bi.LastRecord = recs[len(recs)-1].offset
	}
	return bi
}

// checkTransactions refuses a log holding an aborted or open transaction:
// a read_committed client needs the aborted transactions index to skip
// their records, and the fixture serves none.
func checkTransactions(batches []logBatch) error {
	open := map[int64]int64{} // producer id -> first offset of its open transaction
	for _, lb := range batches {
		switch {
		case lb.control():
			if len(lb.recs) != 1 || len(lb.recs[0].key) < 4 {
				return fmt.Errorf("control batch at %d: not one marker", lb.FirstOffset)
			}
			if binary.BigEndian.Uint16(lb.recs[0].key[2:]) == 0 {
				return fmt.Errorf("offset %d: aborted transaction of producer %d: not modelled", lb.FirstOffset, lb.ProducerID)
			}
			delete(open, lb.ProducerID)
		case lb.Attributes&0x10 != 0:
			if _, ok := open[lb.ProducerID]; !ok {
				open[lb.ProducerID] = lb.FirstOffset
			}
		}
	}
	for pid, off := range open {
		return fmt.Errorf("offset %d: open transaction of producer %d: not modelled", off, pid)
	}
	return nil
}

// codecs are the compressions of a batch's attributes, for kgo's
// compressor.
var codecs = map[int16]kgo.CompressionCodec{
	1: kgo.GzipCompression(), 2: kgo.SnappyCompression(), 3: kgo.Lz4Compression(), 4: kgo.ZstdCompression(),
}

// encode re-encodes the batch with only recs, compressed with its codec.
func (lb *logBatch) encode(recs []logRecord) ([]byte, error) {
	var body []byte
	for _, r := range recs {
		body = append(body, r.raw...)
	}
	h := lb.RecordBatch
	if codec := h.Attributes & 7; codec != 0 {
		cc, ok := codecs[codec]
		if !ok {
			return nil, fmt.Errorf("batch at %d: unknown codec %d", lb.FirstOffset, codec)
		}
		comp, err := kgo.DefaultCompressor(cc)
		if err != nil {
			return nil, fmt.Errorf("batch at %d: codec %d: %w", lb.FirstOffset, codec, err)
		}
		var buf bytes.Buffer
		out, used := comp.Compress(&buf, body)
		if int16(used) != codec {
			return nil, fmt.Errorf("batch at %d: compressing with codec %d gave codec %d", lb.FirstOffset, codec, used)
		}
		body = bytes.Clone(out)
	}
	h.NumRecords, h.Records = int32(len(recs)), body
	return seal(h), nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// seal encodes h with its length and CRC-32C computed.
func seal(h kmsg.RecordBatch) []byte {
	const afterLength = 49 // leader epoch, magic, CRC, attributes ... record count
	h.Length = int32(afterLength + len(h.Records))
	raw := h.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}

// kafkaLog answers the fetches of the compacted partition on its broker.
type kafkaLog struct {
	c                  *kfake.Cluster
	node, home         int32 // the fixture's broker, the one the partition was on
	topic              string
	id                 [16]byte
	partition          int32
	logStart, hwm      int64
	oneBatch           bool
	batches            []servedBatch
	mu                 sync.Mutex
	servedFirstOffsets []int64 // first offset of the first batch of each answer, for tests
}

// maxFetchWait bounds how long a fetch at the high-water mark waits, so
// that a slept request is never the reason a test waits.
const maxFetchWait = 200 * time.Millisecond

func (l *kafkaLog) fetch(kreq kmsg.Request) (kmsg.Response, error, bool) {
	if l.c.CurrentNode() != l.node {
		return nil, nil, false
	}
	req := kreq.(*kmsg.FetchRequest)
	var mine *kmsg.FetchRequestTopicPartition
	for i := range req.Topics {
		rt := &req.Topics[i]
		if !l.ours(req.Version, rt) {
			continue
		}
		for j := range rt.Partitions {
			if rt.Partitions[j].Partition == l.partition {
				mine = &rt.Partitions[j]
			}
		}
	}
	if mine == nil {
		return nil, nil, false // not the fixture's partition: kfake answers
	}
	l.c.KeepControl()
	// SessionID stays 0: no session, so the client's next request names
	// the partition again instead of leaving it out as unchanged.
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			if l.ours(req.Version, &rt) && rp.Partition == l.partition {
				st.Partitions = append(st.Partitions, l.answer(req, rp))
				continue
			}
			// A partition kfake placed here after the fixture was
			// installed: send the client to another broker.
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition, sp.ErrorCode, sp.RecordBatches = rp.Partition, kerr.NotLeaderForPartition.Code, []byte{}
			st.Partitions = append(st.Partitions, sp)
			go l.moveAway(rt.Topic, rt.TopicID, rp.Partition)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil, true
}

// moveAway moves a partition that kfake placed on the fixture's broker to
// the broker the fixture's partition came from. It runs outside the control
// function: kfake's admin calls wait for its run loop.
func (l *kafkaLog) moveAway(topic string, id [16]byte, partition int32) {
	if topic == "" {
		ti := l.c.TopicIDInfo(id)
		if ti == nil {
			return
		}
		topic = ti.Topic
	}
	if l.c.LeaderFor(topic, partition) == l.node {
		l.c.MoveTopicPartition(topic, partition, l.home) //nolint:errcheck // the client retries its fetch either way
	}
}

func (l *kafkaLog) ours(version int16, rt *kmsg.FetchRequestTopic) bool {
	if version >= 13 {
		return rt.TopicID == l.id
	}
	return rt.Topic == l.topic
}

func (l *kafkaLog) answer(req *kmsg.FetchRequest, rp kmsg.FetchRequestTopicPartition) kmsg.FetchResponseTopicPartition {
	sp := kmsg.NewFetchResponseTopicPartition()
	sp.Partition = l.partition
	// No open transaction (refused): the last stable offset is the
	// high-water mark.
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = l.hwm, l.hwm, l.logStart
	sp.RecordBatches = []byte{} // empty but present, as kfake answers
	off := rp.FetchOffset
	switch {
	case off < l.logStart || off > l.hwm:
		sp.ErrorCode = kerr.OffsetOutOfRange.Code
		return sp
	case off == l.hwm:
		if wait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, maxFetchWait); wait > 0 {
			l.c.SleepControl(func() { time.Sleep(wait) })
		}
		return sp
	}
	limit := int(min(req.MaxBytes, rp.PartitionMaxBytes))
	first := sort.Search(len(l.batches), func(i int) bool { return l.batches[i].info.LastOffset >= off })
	for i := first; i < len(l.batches); i++ {
		raw := l.batches[i].raw
		if i > first && (l.oneBatch || len(sp.RecordBatches)+len(raw) > limit) {
			break
		}
		sp.RecordBatches = append(sp.RecordBatches, raw...)
	}
	if first < len(l.batches) {
		l.mu.Lock()
		l.servedFirstOffsets = append(l.servedFirstOffsets, l.batches[first].info.FirstOffset)
		l.mu.Unlock()
	}
	return sp
}
