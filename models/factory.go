package models

import (
	"fmt"
	"math"
	"strings"
)

// Factory builds the learners of one spec. New(spec, key) resolves the spec
// on every call (its algorithm, loss, scaling, kernel and params, each
// checked); a Factory does that once, so a stream that meets many new keys
// pays for the learner alone (BenchmarkFactory). A Factory is safe for
// concurrent use.
type Factory struct {
	alg    Algorithm
	setup  Setup // Seed is set per key; Params frozen by NewFactory
	sx, sy bool
}

// NewFactory resolves spec and builds one learner to check it: the spec
// errors of New come from here, and Factory.New does not repeat them.
func NewFactory(spec Spec) (*Factory, error) {
	f, err := resolve(spec)
	if err != nil {
		return nil, err
	}
	if _, err := f.New(""); err != nil {
		return nil, err
	}
	// Checked: from now on only read (Params.freeze), so that concurrent
	// builds share them, and Err is nil.
	f.setup.Params.freeze()
	return f, nil
}

// New builds the learner of key, seeded by KeySeed(spec.Seed, key): the
// same learner New(spec, key) builds.
func (f *Factory) New(key string) (Learner, error) {
	s := f.setup
	s.Seed = KeySeed(s.Spec.Seed, key)
	l, err := f.alg.New(&s)
	if perr := s.Params.Err(); perr != nil {
		return nil, perr
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.alg.Name, err)
	}
	if f.sx || f.sy {
		l = newScaled(l, f.alg.Name, s.Dim, f.sx, f.sy)
	}
	return l, nil
}

// resolve checks spec's algorithm, dimension, loss, scaling and kernel and
// prepares the Setup its learners are built from.
func resolve(spec Spec) (*Factory, error) {
	a, ok := Lookup(spec.Algorithm)
	if !ok {
		return nil, fmt.Errorf("%w: unknown algorithm %q (known: %s)", ErrSpec, spec.Algorithm, strings.Join(Algorithms(), " "))
	}
	if spec.Dim <= 0 || spec.Dim > maxDim {
		return nil, fmt.Errorf("%w: dim = %d must be in [1, %d]", ErrSpec, spec.Dim, maxDim)
	}
	lossName := spec.Loss
	if lossName == "" {
		lossName = a.Losses[0]
	}
	supported := false
	for _, l := range a.Losses {
		supported = supported || l == lossName
	}
	if !supported {
		return nil, fmt.Errorf("%w: %s does not support loss %q (supported: %s)", ErrSpec, a.Name, lossName, strings.Join(a.Losses, ", "))
	}
	loss, err := LossByName(lossName)
	if err != nil {
		return nil, err
	}
	sx, sy, err := spec.Scale.resolve(a.Name, loss)
	if err != nil {
		return nil, err
	}
	if sx && !spec.Kernel.SigmaGiven() && a.StreamWidth > 0 {
		spec.Kernel.Sigma = a.StreamWidth * math.Sqrt(float64(spec.Dim))
	}
	kern, err := spec.Kernel.Build()
	if err != nil {
		return nil, err
	}
	return &Factory{alg: a, sx: sx, sy: sy, setup: Setup{Spec: spec, Dim: spec.Dim, Kernel: kern, Loss: loss,
		Params: NewParams(a.Name, spec.Params), StreamX: sx, StreamY: sy}}, nil
}
