package models

import (
	"fmt"
	"sort"
	"sync"
)

// Setup is what a factory gets: the validated spec with its kernel, loss,
// params reader and the key's seed.
type Setup struct {
	Spec   Spec
	Dim    int
	Kernel Kernel
	Loss   Loss
	Params *Params
	// Seed is KeySeed(spec.Seed, key): seed the learner's Rand with it.
	Seed uint64
	// StreamX is true when online scaling standardises the features
	// (scale.x "standard", the default). Factories then take their stream
	// defaults (budgets, step sizes, candidate widths) chosen by measurement
	// on raw streams (README, "defaults per algorithm"); with scale.x "none"
	// they keep the papers' defaults for offline-scaled data, so the papers'
	// tables reproduce with their commands.
	StreamX bool
	// StreamY is true when the regression target is standardised online
	// (scale.y "standard"): bounds on |y| and |f| such as U are then in
	// standard deviations of the target, not in the papers' [0, 1].
	StreamY bool
}

// streamDefault returns stream when on, else paper: the one place that picks
// between an algorithm's two defaults.
func streamDefault[T int | float64](on bool, paper, stream T) T {
	if on {
		return stream
	}
	return paper
}

// def picks a default by Setup.StreamX (features standardised online).
func (s *Setup) def(paper, stream float64) float64 { return streamDefault(s.StreamX, paper, stream) }

// defInt is def for integer parameters.
func (s *Setup) defInt(paper, stream int) int { return streamDefault(s.StreamX, paper, stream) }

// defU picks the default of a bound U on the target or the prediction by
// Setup.StreamY (target standardised online).
func (s *Setup) defU(paper, stream float64) float64 { return streamDefault(s.StreamY, paper, stream) }

// Algorithm describes one registered learner.
type Algorithm struct {
	Name string
	// Losses lists the supported losses; the first is the default.
	Losses []string
	// Summary is one line for help output.
	Summary string
	// StreamWidth, when > 0, makes the default Gaussian/Laplacian kernel
	// width StreamWidth * sqrt(d) when features are standardised online
	// (scale.x "standard") and the spec gives no kernel.sigma: two
	// standardised records are about sqrt(2d) apart, so a width of 1 would
	// make almost every kernel value vanish. Chosen by measurement (README,
	// "defaults per algorithm"). 0 keeps the kernel's own default (1).
	StreamWidth float64
	// New builds a fresh learner. It reads its params from s.Params; the
	// registry rejects any param it did not read.
	New func(s *Setup) (Learner, error)
}

var (
	regMu    sync.RWMutex
	registry = map[string]Algorithm{}
)

// Register adds an algorithm; each algorithm's file calls it from init.
// Registering a name twice is a programmer error and panics.
func Register(a Algorithm) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[a.Name]; dup {
		panic("models: algorithm registered twice: " + a.Name)
	}
	if len(a.Losses) == 0 || a.New == nil {
		panic("models: incomplete registration of " + a.Name)
	}
	registry[a.Name] = a
}

// Algorithms lists the registered algorithm names, sorted.
func Algorithms() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the registration of name.
func Lookup(name string) (Algorithm, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	a, ok := registry[name]
	return a, ok
}

// maxDim bounds the input dimension a spec may ask for.
const maxDim = 1 << 20

// New builds the learner of key from spec. Every spec error names the field.
// It resolves and checks the spec on every call; a caller that builds many
// learners of one spec uses a Factory.
func New(spec Spec, key string) (Learner, error) {
	f, err := resolve(spec)
	if err != nil {
		return nil, err
	}
	return f.New(key)
}

// Validate checks spec by building a learner for an empty key.
func (spec Spec) Validate() error {
	_, err := New(spec, "")
	return err
}

// ResolvedLoss is the loss the spec's learner uses (its own or the algorithm's default).
func (spec Spec) ResolvedLoss() (Loss, error) {
	name := spec.Loss
	if name == "" {
		a, ok := Lookup(spec.Algorithm)
		if !ok {
			return nil, fmt.Errorf("%w: unknown algorithm %q", ErrSpec, spec.Algorithm)
		}
		name = a.Losses[0]
	}
	return LossByName(name)
}
