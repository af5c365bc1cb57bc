// Package kafkaio is the stream engine's Kafka I/O: reading partitions from
// an offset, producing records, and listing a partition's offsets, behind
// the small Cluster interface that the engine (package processor) is
// written against and that its broker-free tester implements in memory.
//
// The implementation, Client, is franz-go's kgo, which gets right what a
// production cluster does and a hand-written client does not: read_committed
// with aborted transactions filtered and control batches skipped, stepping
// over a batch whose tail the log cleaner removed (to FirstOffset +
// LastOffsetDelta + 1), immediate metadata refresh and leader hints after
// NOT_LEADER_OR_FOLLOWER, the idempotent producer, record batches bounded by
// their encoded size, CRC checks, KIP-320 truncation detection and fetch
// sessions. The consumer group itself (membership, assignment, commits) is
// kafka-go's and is not here.
//
// Records are the package's own Record type, so that the engine depends on
// neither client.
package kafkaio
