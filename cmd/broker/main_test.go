package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kernelstream/kernelstream/config"
)

func TestServeCreatesTheConfiguredTopics(t *testing.T) {
	k := config.Default().Kafka
	k.LabelsTopic = "labels"
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- serve(ctx, k, 0, 3, "", &out) }()
	// serve prints its banner once the topics exist.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "listening on") {
		if time.Now().After(deadline) {
			t.Fatalf("no banner: %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	addr := strings.Fields(strings.SplitN(out.String(), "listening on ", 2)[1])[0]
	addr = strings.TrimSuffix(addr, ";")
	conn, err := kafka.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, topic := range []string{"features", "predictions", "dead-letters", "labels"} {
		parts, err := conn.ReadPartitions(topic)
		if err != nil || len(parts) != 3 {
			t.Errorf("topic %s: %d partitions, %v; want 3", topic, len(parts), err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"-h"}, 0},
		{[]string{"-version"}, 0},
		{[]string{"-partitions", "0"}, 2},
		{[]string{"-config", "/nonexistent.yaml"}, 2},
		{[]string{"extra"}, 2},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != tc.code {
			t.Errorf("%v: exit %d, want %d (%s)", tc.args, code, tc.code, errb.String())
		}
	}
}
