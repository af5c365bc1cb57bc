package processor

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kernelstream/kernelstream/internal/broker"
)

// fill appends n records with values "v<offset>" to partition 0 of topic,
// in produce batches of 50 (so that a small fetch spans several batches).
func fill(t *testing.T, addr, topic string, from, n int) {
	t.Helper()
	conn, err := kafka.DialLeader(context.Background(), "tcp", addr, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := from; i < from+n; i += 50 {
		var msgs []kafka.Message
		for j := i; j < min(i+50, from+n); j++ {
			msgs = append(msgs, kafka.Message{Key: []byte("k"), Value: []byte(fmt.Sprintf("v%d", j))})
		}
		if _, err := conn.WriteMessages(msgs...); err != nil {
			t.Fatal(err)
		}
	}
}

func testFetcher(t *testing.T, addr string, offset int64, maxBytes int) (*fetcher, *logBuffer, context.CancelFunc) {
	rl, lb := testLog()
	// A fetch waits up to 2 s (the service: 1 s): a broker slowed by the
	// parallel tests that answers an empty fetch after the read deadline
	// logs an outage, which these tests assert away.
	f := newFetcher(tIn, 0, offset, []string{addr}, nil, maxBytes, 2*time.Second, 10*time.Millisecond, 100*time.Millisecond, rl)
	return f, lb, runFetcher(t, f)
}

// testLog returns a fetcher's log and the buffer it writes to.
func testLog() (*readerLog, *logBuffer) {
	var lb logBuffer
	return &readerLog{ep: newEpisode(zerolog.New(&lb), "fetch "+tIn)}, &lb
}

// noOutage fails the test if the fetcher logged an outage.
func noOutage(t *testing.T, lb *logBuffer) {
	t.Helper()
	if lb.count("kafka unavailable") != 0 {
		t.Fatalf("logged as an outage:\n%s", lb.b.String())
	}
}

// runFetcher runs f until the test ends or the returned cancel is called.
func runFetcher(t *testing.T, f *fetcher) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	go f.run(ctx)
	t.Cleanup(func() { cancel(); <-f.done })
	return cancel
}

// collect reads records of generation gen (dropping others, as the
// merger does) until n have come.
func collect(t *testing.T, f *fetcher, gen uint64, n int) []kafka.Message {
	t.Helper()
	var got []kafka.Message
	timeout := time.After(20 * time.Second)
	for len(got) < n {
		select {
		case c := <-f.ch:
			if len(c.msgs) == 0 || len(c.msgs) > chunkLen {
				t.Fatalf("chunk of %d records", len(c.msgs))
			}
			if c.gen == gen {
				got = append(got, c.msgs...) // copies the messages
			}
			f.recycle(c.msgs)
		case <-timeout:
			t.Fatalf("%d of %d records after 20 s", len(got), n)
		}
	}
	return got
}

// consecutive fails unless msgs are the records from..from+len-1 as fill
// wrote them.
func consecutive(t *testing.T, msgs []kafka.Message, from int64) {
	t.Helper()
	for i, m := range msgs {
		want := from + int64(i)
		if m.Offset != want || string(m.Value) != fmt.Sprintf("v%d", want) || m.Topic != tIn || m.Partition != 0 || m.HighWaterMark <= m.Offset {
			t.Fatalf("record %d: %s/%d offset %d value %q hwm %d, want offset %d", i, m.Topic, m.Partition, m.Offset, m.Value, m.HighWaterMark, want)
		}
	}
}

// TestFetcherStarts: the start positions the worker uses give the
// partition's records in order, across fetches of several batches and
// chunks, and records appended later follow.
func TestFetcherStarts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start int64
		first int64 // offset of the first record expected
	}{
		{"first offset", kafka.FirstOffset, 200},
		{"an offset", 700, 700},
		{"below the first offset", 10, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := startCluster(t, 0, "").ListenAddrs()[0]
			fill(t, addr, tIn, 0, 1200)
			deleteBelow(t, addr, tIn, 200)
			f, lb, _ := testFetcher(t, addr, tc.start, 8<<10)
			fill(t, addr, tIn, 1200, 300)
			consecutive(t, collect(t, f, 0, int(1500-tc.first)), tc.first)
			noOutage(t, lb)
		})
	}
}

// TestFetcherLastOffset: from kafka.LastOffset only what is appended after
// the fetcher took its position comes.
func TestFetcherLastOffset(t *testing.T) {
	t.Parallel()
	addr := startCluster(t, 0, "").ListenAddrs()[0]
	fill(t, addr, tIn, 0, 500)
	f, _, _ := testFetcher(t, addr, kafka.LastOffset, 8<<10)
	next := 500
	var got []kafka.Message
	for len(got) == 0 { // append one record at a time until the first comes
		if next > 5000 {
			t.Fatal("no record after 4,500 appended")
		}
		fill(t, addr, tIn, next, 1)
		next++
		select {
		case c := <-f.ch:
			got = append(got, c.msgs...)
			f.recycle(c.msgs)
		case <-time.After(20 * time.Millisecond):
		}
	}
	first := got[0].Offset
	if first < 500 {
		t.Fatalf("record %d, from before the start", first)
	}
	got = append(got, collect(t, f, 0, next-int(first)-len(got))...)
	consecutive(t, got, first)
}

// TestFetcherSetOffset: after SetOffset the records of the new generation
// start at the new offset, whatever was fetched before.
func TestFetcherSetOffset(t *testing.T) {
	t.Parallel()
	addr := startCluster(t, 0, "").ListenAddrs()[0]
	fill(t, addr, tIn, 0, 1000)
	f, _, _ := testFetcher(t, addr, 0, 8<<10)
	consecutive(t, collect(t, f, 0, 300), 0)
	gen := f.SetOffset(100)
	if gen != 1 {
		t.Fatalf("generation %d after one SetOffset", gen)
	}
	consecutive(t, collect(t, f, gen, 900), 100)
}

// TestFetcherBelowFirst: records deleted by retention, before the start or
// while the fetcher is behind, are skipped: it goes on from the log's
// first record, without logging an outage.
func TestFetcherBelowFirst(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	fill(t, addr, tIn, 0, 3000)
	deleteBelow(t, addr, tIn, 200)
	f, lb, _ := testFetcher(t, addr, 10, 4<<10)
	got := collect(t, f, 0, 300)
	consecutive(t, got, 200)
	// The fetcher is now ahead by what its queue holds (a few chunks) or
	// not at all; trim past that.
	deleteBelow(t, addr, tIn, 2500)
	for got[len(got)-1].Offset < 2999 {
		got = append(got, collect(t, f, 0, 1)...)
	}
	gap := -1
	for i := 1; i < len(got); i++ {
		if got[i].Offset != got[i-1].Offset+1 {
			if gap >= 0 {
				t.Fatalf("two gaps: at %d and at %d", got[gap].Offset, got[i].Offset)
			}
			gap = i
		}
	}
	if gap < 0 || got[gap].Offset != 2500 {
		t.Fatalf("after the trim: no skip to offset 2500 (gap at %d)", gap)
	}
	consecutive(t, got[gap:], 2500)
	noOutage(t, lb)
}

func deleteBelow(t *testing.T, addr, topic string, offset int64) {
	t.Helper()
	if err := broker.DeleteRecords(context.Background(), []string{addr}, topic, map[int]int64{0: offset}); err != nil {
		t.Fatal(err)
	}
}

// TestFetcherStops: cancelling the context ends the fetcher at once
// (its connection is closed) while a fetch waits on the broker and while
// the broker does not answer the offsets asked on connecting, not after
// the fetch's wait or the offsets' 10 s deadline.
func TestFetcherStops(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		key  kmsg.Key
	}{
		{"in a fetch", kmsg.Fetch},
		{"in the offsets", kmsg.ListOffsets},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := startCluster(t, 0, "")
			addr := c.ListenAddrs()[0]
			release := make(chan struct{})
			t.Cleanup(func() { close(release) }) // before the cluster closes
			var held atomic.Int64
			c.ControlKey(int16(tc.key), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				held.Add(1)
				c.SleepControl(func() { <-release })
				return nil, nil, false
			})
			rl, lb := testLog()
			f := newFetcher(tIn, 0, kafka.FirstOffset, []string{addr}, nil, 1<<20, time.Minute, 10*time.Millisecond, 100*time.Millisecond, rl)
			cancel := runFetcher(t, f)
			waitUntil(t, 20*time.Second, "the fetcher's request", func() bool { return held.Load() > 0 })
			start := time.Now()
			cancel()
			select {
			case <-f.done:
			case <-time.After(8 * time.Second):
				t.Fatal("the fetcher still runs 8 s after its context ended, blocked on the broker")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("stopped %v after the cancel", d)
			}
			noOutage(t, lb)
		})
	}
}

// TestFetcherSlowWorker: a large fetch read while the worker takes its
// records slowly is not cut by the read deadline (the time spent waiting
// for the worker is not the broker's): every record comes, no outage is
// logged.
func TestFetcherSlowWorker(t *testing.T) {
	t.Parallel()
	addr := startCluster(t, 0, "").ListenAddrs()[0]
	fill(t, addr, tIn, 0, 3000)
	rl, lb := testLog()
	f := newFetcher(tIn, 0, 0, []string{addr}, nil, 1<<20, 2*time.Second, 10*time.Millisecond, 100*time.Millisecond, rl)
	f.readChunk = 200 * time.Millisecond // the whole fetch is one batch; the worker takes 12 chunks at 100 ms each
	runFetcher(t, f)
	var got []kafka.Message
	for len(got) < 3000 {
		time.Sleep(100 * time.Millisecond)
		got = append(got, collect(t, f, 0, 1)...)
	}
	consecutive(t, got, 0)
	noOutage(t, lb)
}

// TestFetcherBacksOffFailingFetches: when every Fetch fails (the leader is
// reachable, the fetch is refused), the fetcher reconnects with a growing
// backoff, logs the episode once, and recovers when fetches succeed again.
func TestFetcherBacksOffFailingFetches(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	fill(t, addr, tIn, 0, 10)
	var fetches atomic.Int64
	var refuse atomic.Bool
	refuse.Store(true)
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !refuse.Load() {
			return nil, nil, false
		}
		fetches.Add(1)
		r := req.(*kmsg.FetchRequest)
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.NotLeaderForPartition.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	rl, lb := testLog()
	f := newFetcher(tIn, 0, kafka.FirstOffset, []string{addr}, nil, 1<<20, 2*time.Second, 10*time.Millisecond, 5*time.Second, rl)
	runFetcher(t, f)
	time.Sleep(time.Second)
	// Backoff n^2 x 10 ms: the sleeps before attempts 2..7 add up to 910 ms,
	// so about 7 fetches in a second; at a constant 10 ms it would be ~100.
	if n := fetches.Load(); n < 2 || n > 15 {
		t.Fatalf("%d refused fetches in 1 s, want a growing backoff (about 7)", n)
	}
	refuse.Store(false)
	consecutive(t, collect(t, f, 0, 10), 0)
	if n := lb.count("kafka unavailable"); n != 1 {
		t.Fatalf("%d outage warnings, want 1:\n%s", n, lb.b.String())
	}
	if !strings.Contains(lb.b.String(), "kafka reachable again") {
		t.Fatalf("no recovery logged:\n%s", lb.b.String())
	}
}

// TestFetcherSetOffsetCutsBackoff: a fetcher backing off (its position is
// past the log's end) tries the position SetOffset gives at once, not after
// its backoff.
func TestFetcherSetOffsetCutsBackoff(t *testing.T) {
	t.Parallel()
	addr := startCluster(t, 0, "").ListenAddrs()[0]
	fill(t, addr, tIn, 0, 10)
	rl, lb := testLog()
	f := newFetcher(tIn, 0, 5000, []string{addr}, nil, 1<<20, 2*time.Second, 10*time.Second, time.Minute, rl)
	runFetcher(t, f)
	waitUntil(t, 20*time.Second, "the out-of-range failure logged", func() bool { return lb.count("past the last offset") > 0 })
	start := time.Now()
	gen := f.SetOffset(0)
	consecutive(t, collect(t, f, gen, 10), 0)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("records came %v after SetOffset: it waited out the 10 s backoff", d)
	}
}
