package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// ReadAll returns every message of topic, partition by partition in offset
// order, reading each partition up to the high watermark it had when ReadAll
// looked (so it returns instead of waiting for more).
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
	out := make([][]kafka.Message, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = readPartition(ctx, addrs, topic, p.ID)
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

func readPartition(ctx context.Context, addrs []string, topic string, partition int) ([]kafka.Message, error) {
	leader, err := kafka.DialLeader(ctx, "tcp", addrs[0], topic, partition)
	if err != nil {
		return nil, fmt.Errorf("broker: dial leader of %s/%d: %w", topic, partition, err)
	}
	first, last, err := leader.ReadOffsets()
	leader.Close()
	if err != nil {
		return nil, fmt.Errorf("broker: offsets of %s/%d: %w", topic, partition, err)
	}
	if last <= first {
		return nil, nil
	}
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: addrs, Topic: topic, Partition: partition,
		MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 100 * time.Millisecond,
	})
	defer r.Close()
	if err := r.SetOffset(first); err != nil {
		return nil, err
	}
	msgs := make([]kafka.Message, 0, last-first)
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return nil, fmt.Errorf("broker: read %s/%d: %w", topic, partition, err)
		}
		msgs = append(msgs, m)
		if m.Offset >= last-1 {
			return msgs, nil
		}
	}
}

// Follow reads partitions 0..partitions-1 of topic from their first
// offset until ctx ends, one reader per partition, and hands every message
// to fn (from the partition's goroutine: fn is called concurrently across
// partitions, in offset order within one). maxWait bounds a fetch's wait
// for new messages. It returns when every reader has stopped: nil when ctx
// ended, else the read errors. The bandit demo and the decision benchmark
// follow their consumer's output with it.
func Follow(ctx context.Context, addrs []string, topic string, partitions int, maxWait time.Duration, fn func(kafka.Message)) error {
	var wg sync.WaitGroup
	errs := make([]error, partitions)
	for p := 0; p < partitions; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: addrs, Topic: topic, Partition: p,
				MinBytes: 1, MaxBytes: 16 << 20, MaxWait: maxWait})
			defer r.Close()
			if err := r.SetOffset(kafka.FirstOffset); err != nil {
				errs[p] = err
				return
			}
			for {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					if ctx.Err() == nil {
						errs[p] = fmt.Errorf("broker: read %s/%d: %w", topic, p, err)
					}
					return
				}
				fn(m)
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
