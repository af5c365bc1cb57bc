package processor

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// BenchmarkScore is Processor.Score's cost per request for a key with
// state, through the worker (here idle: it answers at once, as a worker
// waiting for records does between them): the hand-over over the channel,
// the worker's encoding of the key's state, and the caller's decoding into
// a learner of its own and its prediction or decision. The HTTP layer adds
// internal/scoring's BenchmarkHandler; the endpoint's latency beside a
// stream is benche2e -decisions -score-rate (docs/bandits.md).
func BenchmarkScore(b *testing.B) {
	for _, c := range []struct {
		name  string
		spec  models.Spec
		query string
	}{
		{"predict/aogd-ald-dim5-budget64", models.Spec{Algorithm: "aogd-ald", Dim: 5, Kernel: models.KernelSpec{Type: "gaussian", Sigma: 1},
			Params: map[string]any{"max_budget": 64}, Seed: 1}, `"x":[0.1,-0.2,0.3,0.05,0.4]`},
		// The decision benchmark's learner: bkb, dim 16, 100 candidates.
		{"decide/bkb-dim16-100arms", models.Spec{Algorithm: "bkb", Dim: 16, Seed: 1}, `"arms":` + armsRecord(16, 100)},
	} {
		b.Run(c.name, func(b *testing.B) {
			ts := newScoreTester(b, c.spec, nil)
			if c.spec.Algorithm == "bkb" {
				for i := 0; i < 40; i++ {
					ts.consume(testRecord{key: "k0", value: fmt.Sprintf(`{"id":"d%d","arms":%s}`, i, armsRecord(16, 100))})
					out := ts.emitted(tOut)
					ts.consume(testRecord{key: "k0", value: fmt.Sprintf(`{"id":"d%d","reward":%d,"arm":%s}`, i, i%2, []byte(out[len(out)-1].Arm))})
				}
			} else {
				ts.consume(scoreHistory(c.spec, 1, 200)...)
			}
			stop := make(chan struct{})
			defer close(stop)
			go func() { // the worker, waiting for records
				for {
					select {
					case r := <-ts.m.score:
						ts.m.onScore(r)
					case <-stop:
						return
					}
				}
			}()
			q, err := wire.NewDecoder(c.spec.Dim, wire.Limits{}).DecodeQuery([]byte(`{"key":"k0",` + c.query + `}`))
			if err != nil {
				b.Fatal(err)
			}
			var dst []byte
			b.ReportAllocs()
			for b.Loop() {
				if dst, err = ts.w.p.Score(context.Background(), q, dst[:0]); err != nil {
					b.Fatal(err)
				}
			}
			if strings.Contains(string(dst), "fresh") {
				b.Fatalf("answered by a fresh learner: %s", dst)
			}
		})
	}
}
