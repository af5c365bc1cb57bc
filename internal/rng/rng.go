// Package rng is kernelstream's deterministic pseudo-random generator and
// the derivation of one routing key's seed. Learners keep a Rand in their
// state; the dataset, synthetic-stream and bandit-environment helpers use the
// same generator so that every stream a test or a benchmark draws is the
// same on every platform and Go release.
package rng

import (
	"math"
	"math/bits"
)

// Rand is the per-key PRNG: xoshiro256** (Blackman & Vigna) seeded through
// splitmix64. Its whole state is four words, written into the learner state,
// so a restored learner continues the same random sequence. It is written
// here rather than taken from math/rand/v2 so that the streams of Float64 and
// Norm can never change with the Go release.
type Rand struct{ s [4]uint64 }

// New returns a generator seeded with seed.
func New(seed uint64) *Rand {
	r := &Rand{}
	r.Seed(seed)
	return r
}

// Seed resets the generator.
func (r *Rand) Seed(seed uint64) {
	for i := range r.s {
		seed, r.s[i] = splitmix64(seed)
	}
	if r.s == [4]uint64{} {
		r.s[0] = 1
	}
}

func splitmix64(x uint64) (next, out uint64) {
	x += 0x9e3779b97f4a7c15
	z := x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return x, z ^ (z >> 31)
}

// Uint64 returns 64 random bits.
func (r *Rand) Uint64() uint64 {
	s := &r.s
	out := bits.RotateLeft64(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = bits.RotateLeft64(s[3], 45)
	return out
}

// Float64 returns a uniform number in [0, 1).
func (r *Rand) Float64() float64 { return float64(r.Uint64()>>11) * 0x1p-53 }

// Intn returns a uniform integer in [0, n); n must be > 0.
func (r *Rand) Intn(n int) int {
	if n <= 0 {
		panic("rng: Rand.Intn with n <= 0")
	}
	hi, _ := bits.Mul64(r.Uint64(), uint64(n))
	return int(hi)
}

// Norm returns a standard normal number (Marsaglia's polar method; the second
// value is discarded so that the state stays four words).
func (r *Rand) Norm() float64 {
	for {
		u := 2*r.Float64() - 1
		v := 2*r.Float64() - 1
		s := u*u + v*v
		if s > 0 && s < 1 {
			return u * math.Sqrt(-2*math.Log(s)/s)
		}
	}
}

// State returns the generator state for encoding.
func (r *Rand) State() [4]uint64 { return r.s }

// SetState restores a state from State.
func (r *Rand) SetState(s [4]uint64) { r.s = s }

// KeySeed derives the seed of one key's learner from the spec seed and the
// routing key (FNV-1a of the key, mixed with the seed). The consumer and
// `eval -key` both call it, which is what makes their predictions equal.
func KeySeed(seed uint64, key string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	_, out := splitmix64(seed ^ h)
	return out
}
