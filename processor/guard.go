package processor

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
	"github.com/kernelstream/kernelstream/internal/wire"
)

// murmur2 is the partitioner kernelstream's writers use and the one a key's
// partition is checked against: kafka-go's Murmur2Balancer (the positive
// murmur2 hash of the key modulo the partition count), which is the Java
// client's default and librdkafka's "murmur2_random".
var murmur2 kafka.Murmur2Balancer

// partitionOf is msg's partition under murmur2 among ids.
func partitionOf(msg *kafkaio.Record, ids []int) int {
	return murmur2.Balance(kafka.Message{Key: msg.Key}, ids...)
}

// checkPartition counts (and with WrongPartition "dead_letter" rejects) a
// record whose key belongs to another partition: the key would otherwise
// have a second, independent learner there. One hash per record, no
// allocation. partIDs is empty (no check) until the start-up checks have
// learnt the partition count.
func (w *worker) checkPartition(msg *kafkaio.Record) error {
	if len(w.partIDs) == 0 {
		return nil
	}
	want := partitionOf(msg, w.partIDs)
	if want == w.part {
		return nil
	}
	w.p.c.wrongPart.Add(1)
	w.rateLog("wrong_partition", func(ev *zerolog.Event) {
		ev.Bytes("key", msg.Key).Str("topic", msg.Topic).Int64("offset", msg.Offset).Int("murmur2_partition", want).
			Msg("record key belongs to another partition under murmur2: configure the producer's partitioner as murmur2 (librdkafka: partitioner=murmur2_random)")
	})
	if w.cfg.WrongPartition == "dead_letter" {
		return wire.Bad(wire.ReasonWrongPartition, fmt.Sprintf("key belongs to partition %d under murmur2, arrived on %d", want, w.part))
	}
	return nil
}

// checkTs rejects an event time farther than MaxTsSkew from the record's
// Kafka timestamp (e.g. microseconds or seconds instead of milliseconds),
// which would otherwise move the partition's watermark for good. Records
// without a Kafka timestamp are not checked.
func (w *worker) checkTs(msg *kafkaio.Record, ts int64) error {
	if w.cfg.MaxTsSkew <= 0 || msg.Time.IsZero() {
		return nil
	}
	kts := msg.Time.UnixMilli()
	if kts <= 0 {
		return nil
	}
	d := ts - kts
	if d < 0 {
		d = -d
	}
	if d <= w.cfg.MaxTsSkew.Milliseconds() {
		return nil
	}
	return wire.Bad(wire.ReasonBadTimestamp, fmt.Sprintf("ts %d is %v from the Kafka timestamp %d (bound %v; ts is in milliseconds)",
		ts, time.Duration(min(d, int64(1<<62)/int64(time.Millisecond)))*time.Millisecond, kts, w.cfg.MaxTsSkew))
}

// watermarkTime is how far a record moves the partition's event-time
// watermark: its event time, but no later than its Kafka timestamp, so
// that an outlier ts ahead of the log's time (within MaxTsSkew) cannot
// expire the pending entries and idle keys of the whole partition. The
// watermark then follows the log's own time (the producers' clocks, or the
// brokers' under LogAppendTime) wherever ts runs ahead of it, and ts
// wherever it lags (late events, replays of history). The record keeps its
// own ts for its pending entry. Records without a Kafka timestamp move it
// to their ts.
func watermarkTime(msg *kafkaio.Record, ts int64) int64 {
	if msg.Time.IsZero() {
		return ts
	}
	if kts := msg.Time.UnixMilli(); kts > 0 {
		return min(ts, kts)
	}
	return ts
}
