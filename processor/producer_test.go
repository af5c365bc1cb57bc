package processor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kernelstream/kernelstream/internal/broker"
)

func testProducer(addr string) *producer {
	return newProducer(&kafka.Client{Addr: kafka.TCP(addr), Transport: &kafka.Transport{}, Timeout: 10 * time.Second}, kafka.Lz4)
}

// readTopics reads n records from the topics, in each partition's order.
func readTopics(t *testing.T, addr string, n int, topics ...string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(got), n)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	return got
}

// The producer places every message where kafka.Writer with the
// Murmur2Balancer did (the Java client's partitioner), keeps each
// partition's order across topics, requests and request splits, and
// carries keys, values and headers unchanged.
func TestProducerPlacementAndOrder(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	var msgs []kafka.Message
	for i := 0; i < 300; i++ {
		topic := tOut
		if i%7 == 0 {
			topic = tDLQ
		}
		m := kafka.Message{Topic: topic, Key: []byte(fmt.Sprintf("user-%d", i%23)), Value: []byte(strconv.Itoa(i))}
		if i%5 == 0 {
			m.Headers = []kafka.Header{{Key: "traceparent", Value: []byte("tp-" + strconv.Itoa(i))}}
		}
		if i >= 290 { // 10 values of 300 KB: the partition's requests split at maxRequestBytes
			m.Key = []byte("big")
			m.Value = append([]byte(strconv.Itoa(i)+" "), make([]byte, 300<<10)...)
		}
		msgs = append(msgs, m)
	}
	pr := testProducer(addr)
	if err := pr.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	// A second batch reuses the producer's buffers.
	if err := pr.WriteMessages(context.Background(), kafka.Message{Topic: tOut, Key: []byte("user-1"), Value: []byte("300")}); err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, kafka.Message{Topic: tOut, Key: []byte("user-1"), Value: []byte("300")})

	got := readTopics(t, addr, len(msgs), tOut, tDLQ)
	last := map[string]int{}
	for _, r := range got {
		i, err := strconv.Atoi(strings.Fields(string(r.Value))[0])
		if err != nil || i < 0 || i >= len(msgs) {
			t.Fatalf("unexpected value %.20q", r.Value)
		}
		want := msgs[i]
		if r.Topic != want.Topic || string(r.Key) != string(want.Key) || len(r.Value) != len(want.Value) {
			t.Errorf("record %d: got %s key %q (%d bytes), want %s key %q (%d bytes)", i, r.Topic, r.Key, len(r.Value), want.Topic, want.Key, len(want.Value))
		}
		if p := (kafka.Murmur2Balancer{}).Balance(want, 0, 1, 2); int(r.Partition) != p {
			t.Errorf("record %d with key %q in partition %d, the Murmur2Balancer gives %d", i, want.Key, r.Partition, p)
		}
		if len(want.Headers) != len(r.Headers) || len(r.Headers) == 1 && string(r.Headers[0].Value) != string(want.Headers[0].Value) {
			t.Errorf("record %d: headers %v, want %v", i, r.Headers, want.Headers)
		}
		tp := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
		if prev, ok := last[tp]; ok && i <= prev {
			t.Errorf("%s: record %d after %d", tp, i, prev)
		}
		last[tp] = i
	}
}

// A refused request fails its partition's messages from that request on,
// and only those: the rest of the batch is acknowledged, and the emitter's
// retry takes the failed ones in order.
func TestProducerPartialFailure(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	if err := c.CreateTopic("small", 1, map[string]string{"max.message.bytes": "4096"}); err != nil {
		t.Fatal(err)
	}
	addr := c.ListenAddrs()[0]
	msgs := []kafka.Message{
		{Topic: tOut, Key: []byte("a"), Value: []byte("0")},
		{Topic: "small", Key: []byte("a"), Value: incompressible(8192)}, // refused
		{Topic: tOut, Key: []byte("b"), Value: []byte("2")},
		{Topic: "small", Key: []byte("a"), Value: []byte("3")}, // after the refused one: not sent
	}
	pr := testProducer(addr)
	err := pr.WriteMessages(context.Background(), msgs...)
	var we kafka.WriteErrors
	if !errors.As(err, &we) || len(we) != len(msgs) {
		t.Fatalf("got %v, want a kafka.WriteErrors of %d", err, len(msgs))
	}
	for i, e := range we {
		if failed := msgs[i].Topic == "small"; failed != (e != nil) {
			t.Errorf("message %d (%s): error %v", i, msgs[i].Topic, e)
		}
	}
	if !errors.Is(we[1], kafka.MessageSizeTooLarge) || !isTooLarge(err) || !strings.Contains(we[1].Error(), "small/0") {
		t.Errorf("refusal %v: want MessageSizeTooLarge naming small/0", we[1])
	}
	left := unacknowledged(msgs, err)
	if len(left) != 2 || string(left[1].Value) != "3" {
		t.Fatalf("unacknowledged: %d messages", len(left))
	}
	left[0].Value = []byte("1")
	if err := pr.WriteMessages(context.Background(), left...); err != nil {
		t.Fatal(err)
	}
	got := readTopics(t, addr, 4, tOut, "small")
	var small []string
	for _, r := range got {
		if r.Topic == "small" {
			small = append(small, string(r.Value))
		}
	}
	if strings.Join(small, ",") != "1,3" {
		t.Errorf("topic small holds %v, want [1 3]", small)
	}
}

// incompressible returns n bytes that lz4 cannot shrink much.
func incompressible(n int) []byte {
	b := make([]byte, n)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

func TestProducerUnknownTopic(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	pr := testProducer(c.ListenAddrs()[0])
	err := pr.WriteMessages(context.Background(), kafka.Message{Topic: "nope", Value: []byte("x")})
	if !errors.Is(err, kafka.UnknownTopicOrPartition) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("got %v, want UnknownTopicOrPartition naming the topic", err)
	}
	persistent := 0
	if classifyProduce(err, []kafka.Message{{Topic: "nope"}}, &persistent) != nil || persistent != 1 {
		t.Errorf("an unknown topic is retried %d times before the emitter gives up", unknownTopicAttempts)
	}
}

func TestUnacknowledged(t *testing.T) {
	msgs := func(vs ...string) []kafka.Message {
		var ms []kafka.Message
		for _, v := range vs {
			ms = append(ms, kafka.Message{Value: []byte(v)})
		}
		return ms
	}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"network error: all", boom, "a,b,c"},
		{"write errors: the failed ones in order", kafka.WriteErrors{boom, nil, boom}, "a,c"},
		{"wrapped write errors", fmt.Errorf("x: %w", kafka.WriteErrors{nil, boom, nil}), "b"},
		{"wrong length: all", kafka.WriteErrors{boom}, "a,b,c"},
		{"no failure listed: all", kafka.WriteErrors{nil, nil, nil}, "a,b,c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, m := range unacknowledged(msgs("a", "b", "c"), tc.err) {
				got = append(got, string(m.Value))
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("got %v, want %s", got, tc.want)
			}
		})
	}
}

// The emitter sends what is queued at once without a linger; with one it
// waits up to the linger for its batch to fill.
func TestEmitterLinger(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		linger time.Duration
		late   int // messages sent 100 ms after the batch started
		want   int
	}{
		{"no linger: what is queued", 0, 3, 2},
		{"linger longer than the gap: the late ones join", 2 * time.Second, 3, 5},
		{"linger shorter than the gap: they do not", time.Millisecond, 3, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEmitter(nil, zerolog.Nop(), nil, time.Second, tc.linger)
			e.ch <- outMsg{seq: 1}
			e.ch <- outMsg{seq: 2}
			go func() {
				time.Sleep(100 * time.Millisecond)
				for i := 0; i < tc.late; i++ {
					e.ch <- outMsg{seq: uint64(3 + i)}
				}
			}()
			timer := time.NewTimer(time.Hour)
			timer.Stop()
			done := make(chan struct{})
			defer close(done)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.linger > time.Second { // all arrived: fill returns when the batch is full or the linger ends
				go func() {
					select {
					case <-time.After(600 * time.Millisecond):
						cancel()
					case <-done:
					}
				}()
			}
			batch := e.fill(ctx, nil, timer)
			if len(batch) != tc.want {
				t.Errorf("batch of %d, want %d", len(batch), tc.want)
			}
			for i, m := range batch {
				if m.seq != uint64(i+1) {
					t.Errorf("batch[%d] has seq %d", i, m.seq)
				}
			}
		})
	}
}

// Values taken from the slab keep their bytes while later ones are taken,
// cannot grow into their neighbours, and a value larger than what is left
// (or than a whole array) is one of its own.
func TestSlab(t *testing.T) {
	var s slab
	var vals [][]byte
	for i, n := range []int{100, 3000, slabBytes, 200, 7, slabBytes - 600, 900, 40} {
		v := s.take(append(s.tail(), strings.Repeat(string(rune('a'+i)), n)...))
		if len(v) != n || cap(v) != n {
			t.Fatalf("value %d: len %d cap %d, want %d", i, len(v), cap(v), n)
		}
		vals = append(vals, v)
	}
	_ = append(vals[0], 'z') // must not write into value 1
	for i, v := range vals {
		if strings.Count(string(v), string(rune('a'+i))) != len(v) {
			t.Errorf("value %d was overwritten", i)
		}
	}
}

// A request whose context ends may still be read by kafka-go's connection
// goroutine after RawProduce has returned: the next attempt must not be
// encoded into the same bytes. Each round sends an "A" message with a
// cancelled context, then encodes a "B" message into the group's encoder at
// once, as the next attempt does; the broker must never store a "B".
func TestProducerAbandonsBuffersOfFailedRequests(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 0, "")
	addr := c.ListenAddrs()[0]
	pr := testProducer(addr)
	a := []kafka.Message{{Topic: tOut, Key: []byte("k"), Value: []byte(strings.Repeat("A", 64))}}
	b := []kafka.Message{{Topic: tOut, Key: []byte("k"), Value: []byte(strings.Repeat("B", 64))}}
	if err := pr.WriteMessages(context.Background(), a...); err != nil { // connected, groups sized
		t.Fatal(err)
	}
	if err := pr.group(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	g := &pr.groups[0]
	failed := 0
	for i := 0; i < 200; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := pr.produce(ctx, g, a, 0, 1); err == nil {
			continue
		}
		failed++
		if _, err := g.enc.encode(b, []int{0}, pr.compression, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := broker.ReadAll(ctx, []string{addr}, tOut)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range got {
		if string(m.Value) != string(a[0].Value) {
			t.Fatalf("the broker stored %.10q... at offset %d: a failed request's bytes were rewritten under it (%d of %d records, %d failed requests)",
				m.Value, m.Offset, len(got), 201, failed)
		}
	}
	t.Logf("%d failed requests, %d records stored", failed, len(got))
}
