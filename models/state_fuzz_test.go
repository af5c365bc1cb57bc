package models

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// fuzzSpecs are small learners of every registered family whose state
// decoders FuzzLearnerState attacks.
var fuzzSpecs = []Spec{
	{Algorithm: "kogd", Dim: 3},
	{Algorithm: "aogd-ald", Dim: 3, Params: map[string]any{"max_budget": 8.0}},
	{Algorithm: "kons", Dim: 3},
	{Algorithm: "nons-ald", Dim: 3, Params: map[string]any{"max_budget": 8.0}},
	{Algorithm: "fogd", Dim: 3, Params: map[string]any{"D": 8.0}},
	{Algorithm: "nogd", Dim: 3, Params: map[string]any{"B": 6.0, "k": 2.0}},
	{Algorithm: "forks", Dim: 3, Loss: "hinge", Params: map[string]any{"B": 6.0, "k": 2.0, "sp": 6.0, "sm": 3.0, "rho": 4.0}},
	{Algorithm: "kawv", Dim: 3},
	{Algorithm: "pkawv-taylor", Dim: 3, Params: map[string]any{"M": 2.0}},
	{Algorithm: "pkawv-nystrom", Dim: 3, Params: map[string]any{"max_budget": 8.0}},
	{Algorithm: "oks++", Dim: 3, Params: map[string]any{"sigmas": []any{0.5, 1.0}}},
	{Algorithm: "ioks", Dim: 3, Loss: "absolute", Params: map[string]any{"sigmas": []any{0.5, 1.0}}},
	{Algorithm: "rf-oks++", Dim: 3, Params: map[string]any{"sigmas": []any{0.5, 1.0}, "D": 8.0}},
	{Algorithm: "bkb", Dim: 3},
	{Algorithm: "gp-ucb", Dim: 3},
}

func fuzzStream(i int) ([]float64, float64) {
	x := []float64{float64(i%5) * 0.3, float64(i%3) - 1, 0.1 * float64(i%7)}
	return x, 0.2*x[0] - 0.5*x[1] + 0.1
}

// FuzzLearnerState feeds mutated state payloads, re-framed with a valid
// checksum so that they reach each learner's own decoder, into a fresh
// learner: decoding must fail cleanly or yield a learner that can predict
// and update without panicking.
func FuzzLearnerState(f *testing.F) {
	for i, sp := range fuzzSpecs {
		l, err := New(sp, "fuzz")
		if err != nil {
			f.Fatalf("%s: %v", sp.Algorithm, err)
		}
		for t := 0; t < 12; t++ {
			x, y := fuzzStream(t)
			if err := l.Update(x, l.Predict(x), y); err != nil {
				f.Fatalf("%s: %v", sp.Algorithm, err)
			}
		}
		blob, err := l.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), blob[:len(blob)-4])
		if b, ok := l.(Bandit); ok {
			// A repeated arm set: the state then carries the arm memo too.
			arms := [][]float64{{0.1, 0.2, 0.3}, {-0.5, 0, 0.5}}
			for t := 0; t < 3; t++ {
				d := b.Choose(arms)
				if err := b.Observe(arms[d.Arm], 0.5); err != nil {
					f.Fatal(err)
				}
			}
			blob, _ := l.MarshalBinary()
			f.Add(uint8(i), blob[:len(blob)-4])
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		sp := fuzzSpecs[int(which)%len(fuzzSpecs)]
		l, err := New(sp, "fuzz")
		if err != nil {
			t.Fatal(err)
		}
		blob := binary.LittleEndian.AppendUint32(append([]byte(nil), body...), crc32.Checksum(body, castagnoli))
		if l.UnmarshalBinary(blob) != nil {
			return
		}
		for i := 0; i < 3; i++ {
			x, y := fuzzStream(i)
			_ = l.Update(x, l.Predict(x), y)
		}
		if b, ok := l.(Bandit); ok {
			b.Choose([][]float64{{0.1, 0.2, 0.3}, {-0.5, 0, 0.5}})
		}
	})
}
