package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/internal/broker"
	"github.com/kernelstream/kernelstream/internal/wire"
)

func TestProduceSyntheticAndDataset(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := broker.Start(broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.CreateTopics(ctx, 3, "syn", "labels", "file"); err != nil {
		t.Fatal(err)
	}
	brokers := strings.Join(b.Addrs(), ",")
	if err := run([]string{"-brokers", brokers, "-topic", "syn", "-labels-topic", "labels", "-synthetic", "bumps",
		"-keys", "5", "-dim", "3", "-n", "300", "-labels", "delayed"}); err != nil {
		t.Fatal(err)
	}
	feats, err := broker.ReadAll(ctx, b.Addrs(), "syn")
	if err != nil {
		t.Fatal(err)
	}
	labels, err := broker.ReadAll(ctx, b.Addrs(), "labels")
	if err != nil {
		t.Fatal(err)
	}
	if len(feats) != 300 || len(labels) != 300 {
		t.Fatalf("%d feature and %d label records, want 300 each", len(feats), len(labels))
	}
	// Same key, same partition on both topics (co-partitioned).
	part := map[string]int{}
	dec := wire.NewDecoder(3, wire.Limits{})
	for _, m := range feats {
		r, err := dec.Decode(m.Value)
		if err != nil || r.Kind != wire.KindFeatures || !strings.HasPrefix(wire.Token(r.ID).String(), string(m.Key)+"-") {
			t.Fatalf("feature record %s (key %s): %v", m.Value, m.Key, err)
		}
		part[string(m.Key)] = m.Partition
	}
	for _, m := range labels {
		if p, ok := part[string(m.Key)]; !ok || p != m.Partition {
			t.Fatalf("label of key %s on partition %d, features on %d", m.Key, m.Partition, p)
		}
	}

	data := filepath.Join(t.TempDir(), "d.libsvm")
	os.WriteFile(data, []byte("1 1:0.5 2:-1\n0 2:3\n2 1:1\n"), 0o600)
	if err := run([]string{"-brokers", brokers, "-topic", "file", "-data", data, "-keys", "2"}); err != nil {
		t.Fatal(err)
	}
	recs, err := broker.ReadAll(ctx, b.Addrs(), "file")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	dec = wire.NewDecoder(2, wire.Limits{})
	for _, m := range recs {
		r, err := dec.Decode(m.Value)
		if err != nil {
			t.Fatalf("%s: %v", m.Value, err)
		}
		got[wire.Token(r.ID).String()] = string(m.Value)
	}
	want := map[string]string{
		"key-0-0": `{"id":"key-0-0","x":[0.5,-1],"y":1}`,
		"key-1-0": `{"id":"key-1-0","x":[0,3],"y":0}`,
		"key-0-1": `{"id":"key-0-1","x":[1,0],"y":2}`,
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s = %s, want %s", id, got[id], w)
		}
	}
}

func TestProduceFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{},                                    // neither -data nor -synthetic
		{"-data", "x", "-synthetic", "sines"}, // both
		{"-synthetic", "sines"},               // endless without -n
		{"-synthetic", "nope", "-n", "1"},
		{"-synthetic", "sines", "-n", "1", "-labels", "later"},
	} {
		if err := run(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
