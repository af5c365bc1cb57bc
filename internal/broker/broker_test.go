package broker

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func TestBrokerRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A fixed port, as the demo uses: take a free one first.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	b, err := Start(Options{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, want := b.Addrs(), []string{fmt.Sprintf("127.0.0.1:%d", port)}; len(got) != 1 || got[0] != want[0] {
		t.Fatalf("Addrs = %v, want %v", got, want)
	}
	if err := b.CreateTopics(ctx, 3, "t"); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopics(ctx, 3, "t"); err != nil {
		t.Fatalf("re-creating a topic: %v", err)
	}
	// RequireAll: with kafka-go's default (no acknowledgement) WriteMessages
	// returns before the broker has appended, and ReadAll may look first.
	w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), Topic: "t", Balancer: &kafka.Hash{}, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	var msgs []kafka.Message
	for i := 0; i < 100; i++ {
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	got, err := ReadAll(ctx, b.Addrs(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 100 {
		t.Fatalf("read %d messages, want 100", len(got))
	}
	parts := map[int]bool{}
	for i, m := range got {
		parts[m.Partition] = true
		if i > 0 && got[i-1].Partition == m.Partition && got[i-1].Offset+1 != m.Offset {
			t.Fatalf("offsets out of order: %d then %d", got[i-1].Offset, m.Offset)
		}
	}
	if len(parts) < 2 {
		t.Errorf("messages on %d partitions", len(parts))
	}
	empty, err := ReadAll(ctx, b.Addrs(), "empty-topic-auto")
	if err == nil && len(empty) != 0 {
		t.Errorf("unknown topic returned %d messages", len(empty))
	}
}
