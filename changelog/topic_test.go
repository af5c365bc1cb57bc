package changelog

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/kafkaio"
)

// testBroker starts an in-process broker for one test (closed with it) and
// returns a client of it and a 30 s deadline.
func testBroker(t *testing.T) (context.Context, *broker.Broker, *kafka.Client) {
	t.Helper()
	b, err := broker.Start(broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx, b, &kafka.Client{Addr: kafka.TCP(b.Addrs()...), Timeout: 10 * time.Second}
}

// source reads topic of b through the record path's client.
func source(t *testing.T, b *broker.Broker, topic string) Source {
	t.Helper()
	kc, err := kafkaio.New(kafkaio.Options{Brokers: b.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	return Source{Cluster: kc, Topic: topic}
}

func TestEnsureTopic(t *testing.T) {
	ctx, _, cl := testBroker(t)
	create := func(topic string, parts int, policy string) {
		t.Helper()
		res, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: parts, ReplicationFactor: 1,
			ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: policy}}}}})
		if err != nil || res.Errors[topic] != nil {
			t.Fatalf("create %s: %v %v", topic, err, res.Errors)
		}
	}
	create("four-compact", 4, "compact")
	create("three-compact", 3, "compact")
	create("five-compact", 5, "compact")
	create("four-delete", 4, "delete")
	create("four-both", 4, "compact,delete")
	for _, tc := range []struct {
		topic string
		want  string // "" = accepted
	}{
		{"four-compact", ""},
		{"created-here", ""},
		{"three-compact", "has 3 partitions, the input 4"}, // partitions were added to the input: the caller grows it
		{"five-compact", "has 5 partitions, the input has 4"},
		{"four-delete", `cleanup.policy="delete", want compact alone`},
		{"four-both", `cleanup.policy="compact,delete", want compact alone`},
	} {
		err := EnsureTopic(ctx, cl, tc.topic, 4, TopicConfig{MaxMessageBytes: 8 << 20, MaxCompactionLag: 6 * time.Hour})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.topic, err)
		case tc.want != "" && ((!errors.Is(err, ErrTopic) && !errors.As(err, new(*FewerPartitions))) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.topic)):
			t.Errorf("%s: error %v, want ErrTopic naming the topic and %q", tc.topic, err, tc.want)
		}
	}
	// The created topic bounds how long compaction may leave an erased
	// key's records.
	res, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: "created-here", ConfigNames: []string{"max.compaction.lag.ms", "segment.ms"}}}})
	if err != nil || len(res.Resources) != 1 {
		t.Fatalf("describe created-here: %v", err)
	}
	for _, e := range res.Resources[0].ConfigEntries {
		if e.ConfigValue != "21600000" {
			t.Errorf("created topic: %s=%s, want 21600000", e.ConfigName, e.ConfigValue)
		}
	}
	// The topic created by EnsureTopic passes its own check, with the
	// input's partition count.
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{"created-here"}})
	if err != nil || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 4 {
		t.Fatalf("created topic: %+v, %v", md, err)
	}
	if err := EnsureTopic(ctx, cl, "created-here", 4, TopicConfig{}); err != nil {
		t.Fatalf("created topic fails its own check: %v", err)
	}
}

// TestReadLargeRecords reads records far larger than one fetch, between
// small ones (a broker returns a first record larger than the fetch size,
// KIP-74; for one that does not, the fetch doubles).
func TestReadLargeRecords(t *testing.T) {
	ctx, b, cl := testBroker(t)
	if err := EnsureTopic(ctx, cl, "big", 1, TopicConfig{MaxMessageBytes: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), Topic: "big", BatchTimeout: time.Millisecond, BatchBytes: 16 << 20, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	sizes := []int{10, 3 << 20, 100, 5 << 20, 7}
	for i, n := range sizes {
		v := EncodeBundle(nil, &Bundle{Seq: 1, Learner: make([]byte, n)})
		if err := w.WriteMessages(ctx, kafka.Message{Key: BundleKey([]byte{byte('a' + i)}), Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := source(t, b, "big").Read(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != len(sizes) {
		t.Fatalf("read %d records, want %d", st.Records, len(sizes))
	}
	for i, n := range sizes {
		if got := len(st.Bundles[string(rune('a'+i))].Learner); got != n {
			t.Errorf("record %d: learner of %d bytes, want %d", i, got, n)
		}
	}
}
