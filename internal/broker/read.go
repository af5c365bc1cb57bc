package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/kafkaio"
)

// ReadAll returns every message of topic, partition by partition in offset
// order, reading each partition up to the end it had when ReadAll looked
// (so it returns instead of waiting for more). It reads as the engine does
// (read_committed: records of aborted transactions and transaction markers
// are not messages).
func ReadAll(ctx context.Context, addrs []string, topic string) ([]kafka.Message, error) {
	conn, err := kafka.DialContext(ctx, "tcp", addrs[0])
	if err != nil {
		return nil, fmt.Errorf("broker: dial: %w", err)
	}
	parts, err := conn.ReadPartitions(topic)
	conn.Close()
	if err != nil {
		return nil, fmt.Errorf("broker: partitions of %s: %w", topic, err)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].ID < parts[j].ID })
	kc, err := kafkaio.New(kafkaio.Options{Brokers: addrs, FetchMaxPartitionBytes: 16 << 20})
	if err != nil {
		return nil, err
	}
	defer kc.Close()
	out := make([][]kafka.Message, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = readPartition(ctx, kc, topic, int32(p.ID))
		}()
	}
	wg.Wait()
	var all []kafka.Message
	for i := range parts {
		if errs[i] != nil {
			return nil, errs[i]
		}
		all = append(all, out[i]...)
	}
	return all, nil
}

func readPartition(ctx context.Context, kc *kafkaio.Client, topic string, partition int32) ([]kafka.Message, error) {
	rg, err := kc.Offsets(ctx, topic, partition)
	if err != nil {
		return nil, fmt.Errorf("broker: offsets of %s/%d: %w", topic, partition, err)
	}
	if rg.End <= rg.Start {
		return nil, nil
	}
	r := kc.Read(topic, partition, rg.Start)
	defer r.Close()
	var msgs []kafka.Message
	for pos := rg.Start; pos < rg.End; {
		ch, err := nextChunk(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("broker: read %s/%d: %w", topic, partition, err)
		}
		for _, rec := range ch.Records {
			if rec.Offset < rg.End {
				msgs = append(msgs, message(rec))
			}
		}
		pos = max(pos, ch.Next)
		r.Recycle(ch)
	}
	return msgs, nil
}

// nextChunk waits for r's next chunk; a reader's error is returned.
func nextChunk(ctx context.Context, r kafkaio.Reader) (kafkaio.Chunk, error) {
	for {
		if ch, ok := r.Next(); ok {
			return ch, ch.Err
		}
		select {
		case <-r.Ready():
		case <-ctx.Done():
			return kafkaio.Chunk{}, ctx.Err()
		}
	}
}

// message copies a record as a kafka-go message (the tests' type).
func message(r kafkaio.Record) kafka.Message {
	m := kafka.Message{Topic: r.Topic, Partition: int(r.Partition), Offset: r.Offset, Time: r.Time,
		Key: append([]byte(nil), r.Key...), Value: append([]byte(nil), r.Value...)}
	if r.Value == nil {
		m.Value = nil
	}
	if r.Key == nil {
		m.Key = nil
	}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: append([]byte(nil), h.Value...)})
	}
	return m
}

// Follow reads partitions 0..partitions-1 of topic from their first
// offset until ctx ends (read_committed, as ReadAll) and hands every
// message to fn (from the partition's goroutine: fn is called concurrently
// across partitions, in offset order within one). maxWait bounds a fetch's
// wait for new messages. It returns when every reader has stopped: nil
// when ctx ended, else the read errors. The bandit demo and the decision
// benchmark follow their consumer's output with it.
func Follow(ctx context.Context, addrs []string, topic string, partitions int, maxWait time.Duration, fn func(kafka.Message)) error {
	kc, err := kafkaio.New(kafkaio.Options{Brokers: addrs, FetchMaxWait: maxWait, FetchMaxPartitionBytes: 16 << 20})
	if err != nil {
		return err
	}
	defer kc.Close()
	var wg sync.WaitGroup
	errs := make([]error, partitions)
	for p := 0; p < partitions; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := kc.Read(topic, int32(p), kafkaio.Start)
			defer r.Close()
			for {
				ch, err := nextChunk(ctx, r)
				if err != nil {
					if ctx.Err() == nil {
						errs[p] = fmt.Errorf("broker: read %s/%d: %w", topic, p, err)
					}
					return
				}
				for _, rec := range ch.Records {
					fn(message(rec))
				}
				r.Recycle(ch)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Committed returns group's committed offset of every partition 0..n-1 of
// topic, -1 where it has none (or the broker reports an error for it).
func Committed(ctx context.Context, addrs []string, group, topic string, partitions int) (map[int]int64, error) {
	ids := make([]int, partitions)
	out := make(map[int]int64, partitions)
	for i := range ids {
		ids[i], out[i] = i, -1
	}
	cl := &kafka.Client{Addr: kafka.TCP(addrs...), Timeout: 5 * time.Second}
	resp, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ids}})
	if err != nil {
		return nil, fmt.Errorf("committed offsets of group %s on %s: %w", group, topic, err)
	}
	for _, p := range resp.Topics[topic] {
		if p.Error == nil {
			out[p.Partition] = p.CommittedOffset
		}
	}
	return out, nil
}
