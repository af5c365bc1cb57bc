package processor

import "time"

// Stage timestamps of the output path, for benchmarks (benche2e -stages):
// when one input record passed each step on its way to its acknowledged
// prediction or decision. Off unless TestHookStages is set before Run; then
// the worker takes a clock reading per step, nothing else.

// StageTimes are the Unix nanoseconds at which one input record passed each
// step (0: not reached). Kafka is its Kafka timestamp (milliseconds, as
// Kafka keeps it).
type StageTimes struct {
	Partition int
	Offset    int64
	Kafka     int64 // the input record's Kafka timestamp
	Polled    int64 // the reader's poller took it from kgo
	Started   int64 // the worker took it
	Decoded   int64 // its JSON decoded
	Decided   int64 // the learner answered (Choose or Predict)
	Produced  int64 // the output handed to the producer (kgo stamps it then)
	Acked     int64 // the output acknowledged by the broker
}

// TestHookStages, when set before Run, receives the stage timestamps of
// every prediction and decision once its output is acknowledged (on the
// producer's goroutine: it must be quick).
var TestHookStages func(StageTimes)

// CheckpointEvent is one step of a partition's checkpoint (TestHookCheckpoint).
type CheckpointEvent struct {
	Partition int
	Step      string // "snapshot" (taken on the worker), "acked", "changelog", "badger", "done"
	Start     int64  // Unix nanoseconds
	End       int64
	Learners  int // learners written
	Bytes     int // their bytes
}

// TestHookCheckpoint, when set before Run, is told of each checkpoint's
// steps (benchmarks: correlating latency with checkpoints).
var TestHookCheckpoint func(CheckpointEvent)

func nowNano() int64 { return time.Now().UnixNano() }

// stageMark records step t of the record in hand when tracing is on.
func (w *worker) stageMark(t *int64) {
	if w.stages != nil {
		*t = nowNano()
	}
}
