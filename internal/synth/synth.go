// Package synth generates deterministic synthetic regression streams with
// several routing keys, each key with its own smooth target function of
// x in [-1,1]^dim plus Gaussian noise. The demo, cmd/produce, the end-to-end
// tests and the benchmarks share it, so they all see the same records for the
// same (name, keys, dim, seed).
package synth

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/kernelstream/kernelstream/internal/rng"
)

// Example is one labelled instance of one key. Seq counts the key's own
// examples from 0, so ID ("<key>-<seq>") is deterministic and unique.
type Example struct {
	Key string
	Seq int
	X   []float64
	Y   float64
}

// ID is the record id of the wire contract.
func (e *Example) ID() string { return fmt.Sprintf("%s-%d", e.Key, e.Seq) }

// target is one key's function f: [-1,1]^d -> roughly [0,1].
type target interface{ eval(x []float64) float64 }

// families maps a stream name to the constructor of a key's target.
var families = map[string]struct {
	summary string
	build   func(r *rng.Rand, dim int) target
}{
	"sines":    {"a sum of 4 random sinusoids of random directions per key", newSines},
	"bumps":    {"a mixture of 4 Gaussian bumps with random centres and widths per key", newBumps},
	"friedman": {"Friedman #1 on the first 5 coordinates (dim >= 5), shifted and scaled per key", newFriedman},
	"mixed":    {"keys cycle through sines, bumps and friedman", nil},
}

// Names lists the stream names with a one-line summary each.
func Names() []string {
	names := make([]string, 0, len(families))
	for n, f := range families {
		names = append(names, n+": "+f.summary)
	}
	sort.Strings(names)
	return names
}

// Stream draws examples: at each step a key chosen uniformly at random, x
// uniform in [-1,1]^dim, y = f_key(x) + noise.
type Stream struct {
	keys    []string
	targets []target
	seq     []int
	dim     int
	noise   float64
	rng     *rng.Rand
}

// Options configure New.
type Options struct {
	Keys  int     // number of routing keys (default 4)
	Dim   int     // input dimension (default 8)
	Noise float64 // standard deviation of the label noise (default 0.05; negative = none)
	Seed  uint64  // the whole stream is a function of the seed
}

// New builds the stream called name (see Names).
func New(name string, o Options) (*Stream, error) {
	if o.Keys <= 0 {
		o.Keys = 4
	}
	if o.Dim <= 0 {
		o.Dim = 8
	}
	if o.Noise == 0 {
		o.Noise = 0.05
	} else if o.Noise < 0 {
		o.Noise = 0
	}
	fam, ok := families[name]
	if !ok {
		return nil, fmt.Errorf("synth: unknown stream %q (known: %s)", name, strings.Join(Names(), "; "))
	}
	if (name == "friedman" || name == "mixed") && o.Dim < 5 {
		return nil, fmt.Errorf("synth: stream %s needs dim >= 5, got %d", name, o.Dim)
	}
	s := &Stream{dim: o.Dim, noise: o.Noise, rng: rng.New(o.Seed), seq: make([]int, o.Keys)}
	width := len(fmt.Sprint(o.Keys - 1))
	cycle := []string{"sines", "bumps", "friedman"}
	for k := 0; k < o.Keys; k++ {
		key := fmt.Sprintf("key-%0*d", width, k)
		build := fam.build
		if name == "mixed" {
			build = families[cycle[k%len(cycle)]].build
		}
		// Each key's function depends only on (seed, key), not on the
		// number of keys, so key-0 is the same function in every stream.
		s.keys = append(s.keys, key)
		s.targets = append(s.targets, build(rng.New(rng.KeySeed(o.Seed, key)), o.Dim))
	}
	return s, nil
}

// Keys lists the stream's routing keys.
func (s *Stream) Keys() []string { return append([]string(nil), s.keys...) }

// Dim is the input dimension.
func (s *Stream) Dim() int { return s.dim }

// Next fills e with the next example; e.X is reallocated only when too short.
// The stream is endless.
func (s *Stream) Next(e *Example) bool {
	k := s.rng.Intn(len(s.keys))
	if cap(e.X) < s.dim {
		e.X = make([]float64, s.dim)
	}
	e.X = e.X[:s.dim]
	for i := range e.X {
		e.X[i] = 2*s.rng.Float64() - 1
	}
	e.Key, e.Seq = s.keys[k], s.seq[k]
	s.seq[k]++
	e.Y = s.targets[k].eval(e.X) + s.noise*s.rng.Norm()
	return true
}

// sines: f(x) = 0.5 + sum_j a_j sin(w_j . x + phi_j) / (2 sum |a_j|).
type sines struct {
	w        [][]float64
	a, phi   []float64
	normaliz float64
}

func newSines(r *rng.Rand, dim int) target {
	s := &sines{}
	for j := 0; j < 4; j++ {
		w := make([]float64, dim)
		for i := range w {
			w[i] = r.Norm() * 1.5 / math.Sqrt(float64(dim))
		}
		s.w = append(s.w, w)
		s.a = append(s.a, 0.5+r.Float64())
		s.phi = append(s.phi, 2*math.Pi*r.Float64())
		s.normaliz += s.a[j]
	}
	return s
}

func (s *sines) eval(x []float64) float64 {
	v := 0.0
	for j, w := range s.w {
		d := 0.0
		for i, xi := range x {
			d += w[i] * xi
		}
		v += s.a[j] * math.Sin(d+s.phi[j])
	}
	return 0.5 + v/(2*s.normaliz)
}

// bumps: f(x) = sum_j h_j exp(-||x - c_j||^2 / (2 s_j^2)).
type bumps struct {
	c    [][]float64
	h, s []float64
}

func newBumps(r *rng.Rand, dim int) target {
	b := &bumps{}
	for j := 0; j < 4; j++ {
		c := make([]float64, dim)
		for i := range c {
			c[i] = 2*r.Float64() - 1
		}
		b.c = append(b.c, c)
		b.h = append(b.h, 0.2+0.3*r.Float64())
		b.s = append(b.s, (0.6+0.6*r.Float64())*math.Sqrt(float64(dim)/3))
	}
	return b
}

func (b *bumps) eval(x []float64) float64 {
	v := 0.0
	for j, c := range b.c {
		d := 0.0
		for i, xi := range x {
			t := xi - c[i]
			d += t * t
		}
		v += b.h[j] * math.Exp(-d/(2*b.s[j]*b.s[j]))
	}
	return v
}

// friedman: Friedman #1, 10 sin(pi u1 u2) + 20 (u3 - 0.5)^2 + 10 u4 + 5 u5
// with u = (x+1)/2 after a per-key permutation of the first five
// coordinates, scaled by 1/30 into about [0,1], plus a per-key offset.
type friedman struct {
	perm   [5]int
	offset float64
}

func newFriedman(r *rng.Rand, dim int) target {
	f := &friedman{offset: 0.2 * (r.Float64() - 0.5)}
	for i := range f.perm {
		f.perm[i] = i
	}
	for i := 4; i > 0; i-- {
		j := r.Intn(i + 1)
		f.perm[i], f.perm[j] = f.perm[j], f.perm[i]
	}
	return f
}

func (f *friedman) eval(x []float64) float64 {
	u := func(i int) float64 { return (x[f.perm[i]] + 1) / 2 }
	v := 10*math.Sin(math.Pi*u(0)*u(1)) + 20*(u(2)-0.5)*(u(2)-0.5) + 10*u(3) + 5*u(4)
	return v/30 + f.offset
}
