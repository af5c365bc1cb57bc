package models

import (
	"bytes"
	"encoding/json"
	"fmt"

	"gopkg.in/yaml.v3"
)

// A zero in a spec is not the same as an absent field: absent means "the
// documented default", an explicit 0 where 0 is invalid (a kernel width, a
// polynomial degree) is an error naming the field. Go's zero
// value cannot tell the two apart, so the decoders below remember which
// kernel fields the document gave.

// kernelGiven flags which KernelSpec fields a decoded document contained.
type kernelGiven uint8

const (
	givenSigma kernelGiven = 1 << iota
	givenDegree
	givenC
)

// kernelSpecFields is KernelSpec without its methods (no recursion when decoding).
type kernelSpecFields struct {
	Type   string  `json:"type" yaml:"type"`
	Sigma  float64 `json:"sigma,omitempty" yaml:"sigma,omitempty"`
	Degree int     `json:"degree,omitempty" yaml:"degree,omitempty"`
	C      float64 `json:"c,omitempty" yaml:"c,omitempty"`
}

// kernelPresence sees which fields were present, whatever their value.
type kernelPresence struct {
	Sigma  *float64 `json:"sigma" yaml:"sigma"`
	Degree *int     `json:"degree" yaml:"degree"`
	C      *float64 `json:"c" yaml:"c"`
}

func (p kernelPresence) given() kernelGiven {
	var g kernelGiven
	if p.Sigma != nil {
		g |= givenSigma
	}
	if p.Degree != nil {
		g |= givenDegree
	}
	if p.C != nil {
		g |= givenC
	}
	return g
}

func (s *KernelSpec) set(f kernelSpecFields, g kernelGiven) {
	s.Type, s.Sigma, s.Degree, s.C = f.Type, f.Sigma, f.Degree, f.C
	s.given |= g
}

// UnmarshalJSON decodes the kernel object, rejecting unknown fields and
// remembering which fields were given.
func (s *KernelSpec) UnmarshalJSON(b []byte) error {
	f := kernelSpecFields{Type: s.Type, Sigma: s.Sigma, Degree: s.Degree, C: s.C}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("kernel: %w", err)
	}
	var p kernelPresence
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("kernel: %w", err)
	}
	s.set(f, p.given())
	return nil
}

// UnmarshalYAML is UnmarshalJSON for the consumer's YAML config.
func (s *KernelSpec) UnmarshalYAML(n *yaml.Node) error {
	f := kernelSpecFields{Type: s.Type, Sigma: s.Sigma, Degree: s.Degree, C: s.C}
	if err := n.Decode(&f); err != nil {
		return err
	}
	var p kernelPresence
	if err := n.Decode(&p); err != nil {
		return err
	}
	s.set(f, p.given())
	return nil
}

// SigmaGiven reports whether the spec set kernel.sigma (to any value), either
// in a decoded document or as a non-zero field in Go.
func (s KernelSpec) SigmaGiven() bool { return s.given&givenSigma != 0 || s.Sigma != 0 }

// kernelWidth returns kernel.sigma or def when absent; a given width must lie
// in [minSigma, maxSigma], so that sigma^2 and 1/(2 sigma^2) are finite and
// non-zero.
func (s KernelSpec) kernelWidth(def float64) (float64, error) {
	if !s.SigmaGiven() {
		return def, nil
	}
	v := s.Sigma
	if !(v >= minSigma && v <= maxSigma) {
		return 0, fmt.Errorf("%w: kernel.sigma = %v must be in [%g, %g] (0 is not \"default\": omit the field for the default)", ErrSpec, v, minSigma, maxSigma)
	}
	return v, nil
}
