package processor

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/broker"
)

// TestGroupCatchesUpWithoutNewRecords: a kill between a checkpoint's Badger
// commit and its group commit leaves the group's offsets behind the
// checkpoint. Restarted on the same disk with no new record, the processor
// commits the checkpoint's offsets anyway: lag monitors and tools reading
// the group see the partition done (the states are not touched: nothing is
// replayed, nothing is emitted).
func TestGroupCatchesUpWithoutNewRecords(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	recs, addr := stream(6, 60, 3, 5), c.ListenAddrs()[0]
	produce(t, addr, recs)
	cfg, out := testConfig(t, addr, t.TempDir(), lmsSpec, nil), newConsumer(t, addr, tOut)
	r := start(t, cfg)
	waitDone(t, r, out, replay(t, lmsSpec, recs, DefaultTopK))
	r.stop(t)
	ends := committedInput(t, addr)
	emitted := len(out.got)

	// As if the last group commit had been lost: the group back at 0.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rewind := map[string][]kafka.OffsetCommit{}
	for p, end := range ends {
		if end > 0 {
			rewind[tIn] = append(rewind[tIn], kafka.OffsetCommit{Partition: p, Offset: 0})
		}
	}
	if len(rewind[tIn]) == 0 {
		t.Fatalf("no partition committed: %v", ends)
	}
	cl := &kafka.Client{Addr: kafka.TCP(addr)}
	if _, err := cl.OffsetCommit(ctx, &kafka.OffsetCommitRequest{GroupID: cfg.Group, GenerationID: -1, Topics: rewind}); err != nil {
		t.Fatal(err)
	}
	if got := committedInput(t, addr); got[rewind[tIn][0].Partition] != 0 {
		t.Fatalf("rewind not committed: %v", got)
	}

	r = start(t, cfg)
	defer r.stop(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := committedInput(t, addr)
		done := true
		for p, end := range ends {
			done = done && got[p] == end
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group's offsets stayed at %v, the checkpoint's are %v", got, ends)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := r.p.Stats(); st.Predictions != 0 || st.Replayed != 0 {
		t.Errorf("restart with nothing new: %d predictions, %d replayed", st.Predictions, st.Replayed)
	}
	if len(out.got) != emitted {
		t.Errorf("%d outputs after the restart, %d before", len(out.got), emitted)
	}
}

// committedInput is the test group's committed offset of each input
// partition (-1 when none).
func committedInput(t *testing.T, addr string) map[int]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := broker.Committed(ctx, []string{addr}, "g", tIn, nParts)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
