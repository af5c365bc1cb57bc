package processor

import (
	"encoding/binary"
	"hash/crc32"
	"time"

	"github.com/segmentio/kafka-go"
)

// batchEncoder writes the messages of one Produce request as a Kafka record
// batch (message format v2, KIP-98; the layout of Apache Kafka's
// DefaultRecordBatch), the bytes kafka-go's RecordSet writes for the same
// messages. The producer sends them with kafka.Client.RawProduce: kafka-go's
// own encoder reads every key and value through a reader interface and writes
// it field by field through reflection-built functions into paged buffers,
// 7 to 8 % of a record's CPU in the engine's drain profile
// (docs/scale.md); here a record is a few appends to a reused buffer.
//
// Format v2 needs Kafka 0.11 or later, as every other request the engine
// sends does. An encoder is used by one goroutine; its buffers grow to the
// largest batch and are reused.
type batchEncoder struct {
	batch   []byte // the encoded batch
	records []byte // the records before compression
}

// batchHeaderLen is the size of the record set's size (a Produce request's
// records field is bytes: an int32 length first) and of the batch's fixed
// fields, from the base offset to the record count.
const batchHeaderLen = 4 + 61

// Offsets of the fixed fields written after the records, from the start of
// the record set.
const (
	batchLengthAt     = 4 + 8
	batchEpochAt      = 4 + 12
	batchMagicAt      = 4 + 16
	batchCRCAt        = 4 + 17
	batchAttributesAt = 4 + 21 // the CRC covers from here to the end
	batchLastDeltaAt  = 4 + 23
	batchFirstTimeAt  = 4 + 27
	batchMaxTimeAt    = 4 + 35
	batchProducerAt   = 4 + 43 // producer id, producer epoch, base sequence
	batchCountAt      = 4 + 57
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encode returns the record set (its size, then one batch) holding
// msgs[idx[0]], msgs[idx[1]], ... in that order, compressed with c (0: none). A message without a time gets now,
// as kafka-go's encoder gives it. The returned slice is the encoder's buffer,
// valid until the next call.
func (e *batchEncoder) encode(msgs []kafka.Message, idx []int, c kafka.Compression, now time.Time) ([]byte, error) {
	nowMs := now.UnixMilli()
	b := append(e.batch[:0], make([]byte, batchHeaderLen)...)
	binary.BigEndian.PutUint32(b[batchEpochAt:], 0xffffffff) // partition leader epoch: -1
	b[batchMagicAt] = 2
	binary.BigEndian.PutUint16(b[batchAttributesAt:], uint16(c)&7)
	for i := batchProducerAt; i < batchCountAt; i++ { // none: -1 each
		b[i] = 0xff
	}

	codec := c.Codec()
	r := b
	if codec != nil {
		r = e.records[:0]
	}
	var first, maxTime int64
	for i, j := range idx {
		m := &msgs[j]
		t := nowMs
		if !m.Time.IsZero() {
			t = m.Time.UnixMilli()
		}
		if i == 0 {
			first = t
		}
		maxTime = max(maxTime, t)
		r = appendRecord(r, m, t-first, int64(i))
	}
	if codec == nil {
		b = r
	} else {
		e.records = r
		e.batch = b
		w := codec.NewWriter(e)
		_, err := w.Write(r)
		if cerr := w.Close(); err == nil { // Close returns a pooled codec writer too
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		b = e.batch
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	binary.BigEndian.PutUint32(b[batchLengthAt:], uint32(len(b)-4-12))
	binary.BigEndian.PutUint32(b[batchLastDeltaAt:], uint32(max(len(idx)-1, 0)))
	binary.BigEndian.PutUint64(b[batchFirstTimeAt:], uint64(first))
	binary.BigEndian.PutUint64(b[batchMaxTimeAt:], uint64(maxTime))
	binary.BigEndian.PutUint32(b[batchCountAt:], uint32(len(idx)))
	binary.BigEndian.PutUint32(b[batchCRCAt:], crc32.Checksum(b[batchAttributesAt:], castagnoli))
	e.batch = b
	return b, nil
}

// Write appends p to the batch: the compressor's output.
func (e *batchEncoder) Write(p []byte) (int, error) {
	e.batch = append(e.batch, p...)
	return len(p), nil
}

// appendRecord appends one record of a v2 batch: its length, then attributes
// (unused, 0), timestamp and offset deltas, key, value and headers, the
// integers as zigzag varints (Go's binary.AppendVarint is Kafka's varint).
// A nil key, value or header value is written as null (length -1).
func appendRecord(b []byte, m *kafka.Message, timeDelta, offsetDelta int64) []byte {
	n := 1 + varintLen(timeDelta) + varintLen(offsetDelta) + nullBytesLen(m.Key) + nullBytesLen(m.Value) +
		varintLen(int64(len(m.Headers)))
	for _, h := range m.Headers {
		n += varintLen(int64(len(h.Key))) + len(h.Key) + nullBytesLen(h.Value)
	}
	b = binary.AppendVarint(b, int64(n))
	b = append(b, 0)
	b = binary.AppendVarint(b, timeDelta)
	b = binary.AppendVarint(b, offsetDelta)
	b = appendNullBytes(b, m.Key)
	b = appendNullBytes(b, m.Value)
	b = binary.AppendVarint(b, int64(len(m.Headers)))
	for _, h := range m.Headers {
		b = binary.AppendVarint(b, int64(len(h.Key)))
		b = append(b, h.Key...)
		b = appendNullBytes(b, h.Value)
	}
	return b
}

func appendNullBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	return append(binary.AppendVarint(b, int64(len(v))), v...)
}

func nullBytesLen(v []byte) int {
	if v == nil {
		return 1
	}
	return varintLen(int64(len(v))) + len(v)
}

// varintLen is the length of x as a zigzag varint.
func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	n := 1
	for ux >= 0x80 {
		ux >>= 7
		n++
	}
	return n
}
