package broker

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteRecords deletes the records of topic below offset below[p] of each
// partition p, as retention would (kafka-go has no DeleteRecords request).
// Partitions with an offset of 0 or less are left alone.
func DeleteRecords(ctx context.Context, addrs []string, topic string, below map[int]int64) error {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	parts := make([]int, 0, len(below))
	for p, off := range below {
		if off > 0 {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	sort.Ints(parts)
	for _, p := range parts {
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = int32(p), below[p]
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return fmt.Errorf("delete records of %s: %w", topic, err)
	}
	defer cl.Close()
	res, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("delete records of %s: %w", topic, err)
	}
	for _, rt := range res.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fmt.Errorf("delete records of %s/%d below %d: %w", rt.Topic, rp.Partition, below[int(rp.Partition)], err)
			}
		}
	}
	return nil
}
