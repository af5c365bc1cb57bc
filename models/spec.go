package models

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
)

// Spec is the model spec, the same object in the consumer config and in
// cmd/eval:
//
//	{"algorithm":"nons-ald","dim":18,"loss":"square","kernel":{"type":"gaussian","sigma":8},"params":{"mu":1},"seed":1}
type Spec struct {
	// Algorithm is one of Algorithms().
	Algorithm string `json:"algorithm" yaml:"algorithm"`
	// Dim is the input dimension d (> 0).
	Dim int `json:"dim" yaml:"dim"`
	// Loss defaults to the algorithm's first supported loss.
	Loss string `json:"loss,omitempty" yaml:"loss,omitempty"`
	// Kernel defaults to a Gaussian of width 1.
	Kernel KernelSpec `json:"kernel" yaml:"kernel"`
	// Params are the algorithm's hyper-parameters, named after the papers'
	// symbols; unknown names are an error.
	Params map[string]any `json:"params,omitempty" yaml:"params,omitempty"`
	// Seed is mixed with the routing key (KeySeed) to seed each key's PRNG.
	Seed uint64 `json:"seed" yaml:"seed"`
	// Scale is online standardisation of x and y (ScaleSpec); empty fields mean
	// {"x":"standard","y":"standard"} for the square loss, x only for
	// classification, none for the bandits.
	Scale ScaleSpec `json:"scale" yaml:"scale"`
}

// ParseSpec decodes a spec from JSON, or from the file named after '@'.
// Unknown fields are an error.
func ParseSpec(s string) (Spec, error) {
	data := []byte(s)
	if strings.HasPrefix(s, "@") {
		b, err := os.ReadFile(s[1:])
		if err != nil {
			return Spec{}, fmt.Errorf("%w: %v", ErrSpec, err)
		}
		data = b
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var sp Spec
	if err := dec.Decode(&sp); err != nil {
		return Spec{}, fmt.Errorf("%w: %v", ErrSpec, err)
	}
	return sp, nil
}

// Params reads an algorithm's hyper-parameters, remembering which were read
// so that Done can reject the ones nobody asked for. The first error sticks.
type Params struct {
	alg  string
	m    map[string]any
	used map[string]bool
	err  error
}

// NewParams wraps a spec's params for algorithm.
func NewParams(algorithm string, m map[string]any) *Params {
	return &Params{alg: algorithm, m: m, used: map[string]bool{}}
}

// use records that the algorithm read param name (Err names the others).
func (p *Params) use(name string) {
	if p.used != nil {
		p.used[name] = true
	}
}

// freeze ends the recording once Err has been checked (NewFactory): the
// params are then only read, by any number of goroutines, and give the same
// values as when they were checked, so no failure can be recorded either.
func (p *Params) freeze() { p.used = nil }

func (p *Params) fail(format string, a ...any) {
	if p.err == nil && p.used != nil {
		p.err = fmt.Errorf("%w: %s: params.%s", ErrSpec, p.alg, fmt.Sprintf(format, a...))
	}
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// Has reports whether the param was given.
func (p *Params) Has(name string) bool { _, ok := p.m[name]; return ok }

// Float returns the param or def; the value must lie in [lo, hi].
func (p *Params) Float(name string, def, lo, hi float64) float64 {
	p.use(name)
	v, ok := p.m[name]
	if !ok {
		return def
	}
	f, ok := toFloat(v)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		p.fail("%s: want a finite number, got %v", name, v)
		return def
	}
	if f < lo || f > hi {
		p.fail("%s = %v out of range [%v, %v]", name, f, lo, hi)
		return def
	}
	return f
}

// Positive returns a param that must be > 0 (and finite).
func (p *Params) Positive(name string, def float64) float64 {
	f := p.Float(name, def, 0, math.MaxFloat64)
	if f <= 0 && p.Has(name) {
		p.fail("%s = %v must be > 0", name, f)
	}
	return f
}

// Int returns an integer param or def; the value must lie in [lo, hi].
func (p *Params) Int(name string, def, lo, hi int) int {
	p.use(name)
	v, ok := p.m[name]
	if !ok {
		return def
	}
	f, ok := toFloat(v)
	if !ok || f != math.Trunc(f) {
		p.fail("%s: want an integer, got %v", name, v)
		return def
	}
	if f < float64(lo) || f > float64(hi) {
		p.fail("%s = %v out of range [%d, %d]", name, f, lo, hi)
		return def
	}
	return int(f)
}

// Floats returns a list param or def; each element must lie in [lo, hi].
func (p *Params) Floats(name string, def []float64, lo, hi float64) []float64 {
	p.use(name)
	v, ok := p.m[name]
	if !ok {
		return def
	}
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		p.fail("%s: want a non-empty list of numbers, got %v", name, v)
		return def
	}
	out := make([]float64, len(list))
	for i, e := range list {
		f, ok := toFloat(e)
		if !ok || f < lo || f > hi || math.IsNaN(f) {
			p.fail("%s[%d] = %v: want a number in [%v, %v]", name, i, e, lo, hi)
			return def
		}
		out[i] = f
	}
	return out
}

// String returns a string param or def; it must be one of allowed.
func (p *Params) String(name, def string, allowed ...string) string {
	p.use(name)
	v, ok := p.m[name]
	if !ok {
		return def
	}
	s, ok := v.(string)
	if !ok {
		p.fail("%s: want a string, got %v", name, v)
		return def
	}
	for _, a := range allowed {
		if s == a {
			return s
		}
	}
	p.fail("%s = %q: want one of %s", name, s, strings.Join(allowed, ", "))
	return def
}

// Fail records a cross-parameter constraint violation.
func (p *Params) Fail(format string, a ...any) { p.fail(format, a...) }

// Err returns the first error, or one naming every unknown param; nil for
// frozen params (checked before they were frozen).
func (p *Params) Err() error {
	if p.err != nil || p.used == nil {
		return p.err
	}
	var unknown []string
	for k := range p.m {
		if !p.used[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		known := make([]string, 0, len(p.used))
		for k := range p.used {
			known = append(known, k)
		}
		sort.Strings(known)
		return fmt.Errorf("%w: %s: unknown params %s (known: %s)", ErrSpec, p.alg, strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	return nil
}
