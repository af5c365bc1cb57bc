package processor

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// batchCases are message sets that cover every field of a record: null and
// empty keys and values, headers with null and empty values, times given and
// not (then the batch's now), out of order, and batches of many records.
func batchCases() map[string][]kafka.Message {
	t0 := time.UnixMilli(1_700_000_000_123)
	many := make([]kafka.Message, 700)
	for i := range many {
		many[i] = kafka.Message{Key: []byte(fmt.Sprintf("user-%d", i%64)),
			Value: []byte(fmt.Sprintf(`{"prediction":%d.25,"model":"aogd-ald","offset":%d}`, i, i*7))}
	}
	return map[string][]kafka.Message{
		"one":        {{Key: []byte("k"), Value: []byte(`{"x":[1,2]}`)}},
		"null key":   {{Value: []byte("v")}},
		"null value": {{Key: []byte("k")}},
		"empty":      {{Key: []byte{}, Value: []byte{}}},
		"headers": {{Key: []byte("k"), Value: []byte("v"), Headers: []kafka.Header{
			{Key: "trace", Value: []byte("abc")}, {Key: "null", Value: nil}, {Key: "", Value: []byte{}}}}},
		"times": {{Value: []byte("a"), Time: t0}, {Value: []byte("b"), Time: t0.Add(-time.Hour)},
			{Value: []byte("c")}, {Value: []byte("d"), Time: t0.Add(90 * time.Second)}},
		"large value": {{Key: []byte("k"), Value: bytes.Repeat([]byte("0123456789"), 30_000)}},
		"many":        many,
	}
}

// kafkaGoRecordSet is the record set kafka-go's own encoder writes for msgs
// (what kafka.Client.Produce sent before), with the same now.
func kafkaGoRecordSet(t *testing.T, msgs []kafka.Message, c kafka.Compression, now time.Time) []byte {
	t.Helper()
	recs := make([]protocol.Record, len(msgs))
	for i, m := range msgs {
		tm := m.Time
		if tm.IsZero() {
			tm = now
		}
		recs[i] = protocol.Record{Time: tm, Headers: m.Headers}
		if m.Key != nil {
			recs[i].Key = protocol.NewBytes(m.Key)
		}
		if m.Value != nil {
			recs[i].Value = protocol.NewBytes(m.Value)
		}
	}
	rs := protocol.RecordSet{Version: 2, Attributes: protocol.Attributes(c), Records: protocol.NewRecordReader(recs...)}
	var buf bytes.Buffer
	if _, err := rs.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The encoder writes, for every codec, a record set that kafka-go decodes to
// the same records, and uncompressed the very bytes kafka-go's encoder writes.
func TestBatchEncoderMatchesKafkaGo(t *testing.T) {
	now := time.UnixMilli(1_700_000_555_000)
	for name, msgs := range batchCases() {
		for cname, c := range compressionCodecs {
			t.Run(name+"/"+cname, func(t *testing.T) {
				idx := make([]int, len(msgs))
				for i := range idx {
					idx[i] = i
				}
				var e batchEncoder
				got, err := e.encode(msgs, idx, c, now)
				if err != nil {
					t.Fatal(err)
				}
				if want := kafkaGoRecordSet(t, msgs, c, now); c == 0 && !bytes.Equal(got, want) {
					t.Fatalf("bytes differ from kafka-go's encoding:\n got %x\nwant %x", head(got), head(want))
				}
				checkDecodes(t, got, msgs, now)
			})
		}
	}
}

func head(b []byte) []byte { return b[:min(len(b), 96)] }

// checkDecodes decodes set with kafka-go (CRC and lengths checked) and
// compares every record with its message.
func checkDecodes(t *testing.T, set []byte, msgs []kafka.Message, now time.Time) {
	t.Helper()
	var rs protocol.RecordSet
	if _, err := rs.ReadFrom(bytes.NewReader(set)); err != nil {
		t.Fatalf("kafka-go cannot read the record set: %v", err)
	}
	for i := 0; ; i++ {
		r, err := rs.Records.ReadRecord()
		if err == io.EOF {
			if i != len(msgs) {
				t.Fatalf("%d records decoded, want %d", i, len(msgs))
			}
			return
		}
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		m := msgs[i]
		wantTime := m.Time
		if wantTime.IsZero() {
			wantTime = now
		}
		if r.Offset != int64(i) || !r.Time.Equal(wantTime.Truncate(time.Millisecond)) {
			t.Errorf("record %d: offset %d time %v, want %d %v", i, r.Offset, r.Time, i, wantTime)
		}
		for _, f := range []struct {
			what string
			got  protocol.Bytes
			want []byte
		}{{"key", r.Key, m.Key}, {"value", r.Value, m.Value}} {
			if (f.got == nil) != (f.want == nil) {
				t.Errorf("record %d: %s null %v, want null %v", i, f.what, f.got == nil, f.want == nil)
			} else if f.got != nil {
				if b, _ := protocol.ReadAll(f.got); !bytes.Equal(b, f.want) {
					t.Errorf("record %d: %s %q, want %q", i, f.what, head(b), head(f.want))
				}
			}
		}
		if len(r.Headers) != len(m.Headers) {
			t.Fatalf("record %d: %d headers, want %d", i, len(r.Headers), len(m.Headers))
		}
		for k, h := range r.Headers {
			if w := m.Headers[k]; h.Key != w.Key || !bytes.Equal(h.Value, w.Value) || (h.Value == nil) != (w.Value == nil) {
				t.Errorf("record %d header %d: %q=%q, want %q=%q", i, k, h.Key, h.Value, w.Key, w.Value)
			}
		}
	}
}

// A batch reuses the encoder's buffers: nothing is allocated per batch once
// they have grown, uncompressed (a codec's writer is pooled by kafka-go and
// costs one small allocation per batch).
func TestBatchEncoderAllocations(t *testing.T) {
	msgs := batchCases()["many"]
	idx := make([]int, len(msgs))
	for i := range idx {
		idx[i] = i
	}
	var e batchEncoder
	now := time.Now()
	if allocs := testing.AllocsPerRun(20, func() {
		if _, err := e.encode(msgs, idx, 0, now); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("%.1f allocations per batch, want 0", allocs)
	}
}

// BenchmarkBatchEncode compares the engine's encoder with kafka-go's, per
// batch of 512 predictions (the emitter's batch), for each codec.
func BenchmarkBatchEncode(b *testing.B) {
	msgs := make([]kafka.Message, emitBatch)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte(fmt.Sprintf("user-%d", i%64)),
			Value: []byte(`{"prediction":` + strings.Repeat("1", 17) + `,"model":"aogd-ald","topic":"features","partition":3,"offset":1234567}`)}
	}
	idx := make([]int, len(msgs))
	for i := range idx {
		idx[i] = i
	}
	for _, cname := range []string{"none", "lz4"} {
		c := compressionCodecs[cname]
		b.Run("engine/"+cname, func(b *testing.B) {
			b.ReportAllocs()
			var e batchEncoder
			for b.Loop() {
				if _, err := e.encode(msgs, idx, c, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("kafka-go/"+cname, func(b *testing.B) {
			b.ReportAllocs()
			var buf bytes.Buffer
			rr := &reusedRecords{msgs: msgs}
			for b.Loop() {
				buf.Reset()
				rr.next = 0
				rs := protocol.RecordSet{Version: 2, Attributes: protocol.Attributes(c), Records: rr}
				if _, err := rs.WriteTo(&buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// reusedRecords hands kafka-go's encoder the messages through one record and
// two readers reused for all (how the producer fed kafka.Client.Produce).
type reusedRecords struct {
	msgs       []kafka.Message
	next       int
	record     protocol.Record
	key, value nopCloser
}

type nopCloser struct{ bytes.Reader }

func (*nopCloser) Close() error { return nil }

func (r *reusedRecords) ReadRecord() (*protocol.Record, error) {
	if r.next >= len(r.msgs) {
		return nil, io.EOF
	}
	m := &r.msgs[r.next]
	r.next++
	r.key.Reset(m.Key)
	r.value.Reset(m.Value)
	r.record = protocol.Record{Time: m.Time, Key: &r.key, Value: &r.value}
	return &r.record, nil
}
