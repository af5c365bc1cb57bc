package main

// -stages PREFIX (with -decisions): where each decision's time goes. The
// engine's stage timestamps (processor.TestHookStages), its checkpoints'
// steps (processor.TestHookCheckpoint), the feeder's writes and the
// process's scheduling stalls are written as CSV files PREFIX.*.csv for
// offline analysis (docs/scale.md, "Decision latency").

import (
	"bufio"
	"fmt"
	"os"
	"runtime/trace"
	"sync"
	"time"

	"github.com/kernelstream/kernelstream/processor"
)

// processStart maps GODEBUG=gctrace=1's times (since the runtime started)
// onto the stage timestamps, to within its initialization.
var processStart = time.Now()

type stageLog struct {
	mu     sync.Mutex
	stages map[int64]processor.StageTimes // partition<<40 | offset
	ckpts  []processor.CheckpointEvent
	writes [][3]int64 // feeder: write start, end (Unix ns), records
	stalls [][2]int64 // a 1 ms sleeper woke late: when (Unix ns), by how much (ns)
	outs   []stageOut
}

type stageOut struct {
	id        string
	part      int
	offset    int64
	in        int64 // the feeder's timestamp (Unix ns, before the write)
	outTs     int64 // the output's Kafka timestamp (ms resolution, ns)
	read      int64 // when the reader got it
	userIndex int
}

func newStageLog() *stageLog {
	l := &stageLog{stages: make(map[int64]processor.StageTimes, 1<<16)}
	processor.TestHookStages = func(t processor.StageTimes) {
		l.mu.Lock()
		l.stages[int64(t.Partition)<<40|t.Offset] = t
		l.mu.Unlock()
	}
	processor.TestHookCheckpoint = func(e processor.CheckpointEvent) {
		l.mu.Lock()
		l.ckpts = append(l.ckpts, e)
		l.mu.Unlock()
	}
	return l
}

// sleeper records how late a goroutine asking for 1 ms sleeps wakes: a
// process-wide stall (every P busy, a long GC step, the OS) shows there.
func (l *stageLog) sleeper(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		default:
		}
		t0 := time.Now()
		time.Sleep(time.Millisecond)
		if late := time.Since(t0) - time.Millisecond; late > 2*time.Millisecond {
			l.mu.Lock()
			l.stalls = append(l.stalls, [2]int64{t0.UnixNano(), int64(late)})
			l.mu.Unlock()
		}
	}
}

func (l *stageLog) write(prefix string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.Create(prefix + ".dec.csv")
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "id,partition,offset,fed,kafka,polled,started,decoded,decided,produced,acked,out_ts,read")
	for _, o := range l.outs {
		t := l.stages[int64(o.part)<<40|o.offset]
		fmt.Fprintf(w, "%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d\n", o.id, o.part, o.offset, o.in, t.Kafka, t.Polled, t.Started, t.Decoded, t.Decided, t.Produced, t.Acked, o.outTs, o.read)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	f.Close()
	if f, err = os.Create(prefix + ".ckpt.csv"); err != nil {
		return err
	}
	w = bufio.NewWriter(f)
	fmt.Fprintln(w, "partition,step,start,end,learners,bytes")
	for _, e := range l.ckpts {
		fmt.Fprintf(w, "%d,%s,%d,%d,%d,%d\n", e.Partition, e.Step, e.Start, e.End, e.Learners, e.Bytes)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	f.Close()
	if f, err = os.Create(prefix + ".feed.csv"); err != nil {
		return err
	}
	w = bufio.NewWriter(f)
	fmt.Fprintln(w, "start,end,records")
	for _, x := range l.writes {
		fmt.Fprintf(w, "%d,%d,%d\n", x[0], x[1], x[2])
	}
	if err := w.Flush(); err != nil {
		return err
	}
	f.Close()
	if f, err = os.Create(prefix + ".stall.csv"); err != nil {
		return err
	}
	w = bufio.NewWriter(f)
	fmt.Fprintf(w, "# process start %d\n", processStart.UnixNano())
	fmt.Fprintln(w, "at,late")
	for _, x := range l.stalls {
		fmt.Fprintf(w, "%d,%d\n", x[0], x[1])
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// startTrace starts a runtime/trace into path (none if path is empty); the
// returned func stops it and closes the file. The scheduler's view of a
// stall (which goroutines held the Ps, which waited runnable) is in it.
func startTrace(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error { trace.Stop(); return f.Close() }, nil
}
