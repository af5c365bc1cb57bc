package rng

import (
	"math"
	"testing"
)

func TestDeterministicAndKeyed(t *testing.T) {
	a, b := New(9), New(9)
	for i := 0; i < 100; i++ {
		if a.Uint64() != b.Uint64() {
			t.Fatal("same seed, different streams")
		}
	}
	// Known first output pins the algorithm: a change here changes every
	// learner's random choices and must be deliberate.
	if got := New(1).Uint64(); got != firstOutputSeed1 {
		t.Fatalf("xoshiro256** stream changed: first output %#x", got)
	}
	if KeySeed(1, "user-1") == KeySeed(1, "user-2") || KeySeed(1, "k") == KeySeed(2, "k") {
		t.Fatal("KeySeed collisions")
	}
	r := New(3)
	var sum, sq float64
	const n = 200000
	for i := 0; i < n; i++ {
		z := r.Norm()
		sum += z
		sq += z * z
	}
	if m, v := sum/n, sq/n; math.Abs(m) > 0.01 || math.Abs(v-1) > 0.02 {
		t.Errorf("Norm moments: mean %v var %v", m, v)
	}
	for i := 0; i < 1000; i++ {
		if k := r.Intn(7); k < 0 || k >= 7 {
			t.Fatalf("Intn out of range: %d", k)
		}
		if u := r.Float64(); u < 0 || u >= 1 {
			t.Fatalf("Float64 out of range: %v", u)
		}
	}
}

// firstOutputSeed1 is New(1)'s first output (splitmix64-seeded xoshiro256**).
const firstOutputSeed1 = 0xb3f2af6d0fc710c5
