package processor

import (
	"testing"

	"github.com/kernelstream/kernelstream/models"
)

// FuzzMetaSpecHash: the start-up check's reader of a partition meta never
// panics and agrees with the worker's decodeMeta on what is valid and on
// the spec hash.
func FuzzMetaSpecHash(f *testing.F) {
	p, err := New(Config{Brokers: []string{"x:1"}, Group: "g", InputTopic: "in", OutputTopic: "out", DLQTopic: "dlq",
		CheckpointDir: "unused", Model: models.Spec{Algorithm: "ptest-lms", Dim: 2, Seed: 1}})
	if err != nil {
		f.Fatal(err)
	}
	w := newWorker(p, nil, nil, 0)
	w.nextIn, w.nextLab, w.watermark = 12345, -2, 1700000000000
	f.Add(w.encodeMeta())
	f.Add([]byte{1})
	f.Add([]byte{2, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := metaSpecHash(b)
		p.specHash = h
		derr := newWorker(p, nil, nil, 0).decodeMeta(b)
		if (err == nil) != (derr == nil) {
			t.Fatalf("metaSpecHash error %v, decodeMeta error %v", err, derr)
		}
	})
}
