package models

import "github.com/kernelstream/kernelstream/internal/rng"

// Rand is the per-key PRNG (xoshiro256** seeded through splitmix64; see
// internal/rng). Its four-word state is part of every learner state that
// draws random numbers, so a restored learner continues the same sequence.
type Rand = rng.Rand

// NewRand returns a generator seeded with seed.
func NewRand(seed uint64) *Rand { return rng.New(seed) }

// KeySeed derives the seed of one key's learner from the spec seed and the
// routing key. The consumer and `eval -key` both call it, which is what
// makes their predictions equal.
func KeySeed(seed uint64, key string) uint64 { return rng.KeySeed(seed, key) }
