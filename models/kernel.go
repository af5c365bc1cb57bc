package models

import (
	"fmt"
	"github.com/kernelstream/kernelstream/internal/linalg"
	"math"
)

// Kernel is a positive-definite kernel k(x, v) on R^d.
type Kernel interface {
	Eval(x, v []float64) float64
	// Diag is k(x, x): 1 for the Gaussian and Laplacian kernels, which the
	// ALD tests rely on only through Diag so that other kernels remain usable
	// [SUGGEST].
	Diag(x []float64) float64
}

// KernelSpec is the "kernel" object of a model spec.
type KernelSpec struct {
	// Type is gaussian (default), laplacian, polynomial or linear.
	Type string `json:"type"`
	// Sigma is the width of the gaussian exp(-||x-v||^2/(2 sigma^2)) and the
	// laplacian exp(-||x-v||/sigma) kernels. Default 1 when absent; a given
	// value must lie in [1e-150, 1e150] (so 1/(2 sigma^2) is finite and
	// non-zero): an explicit 0 is an error, not the default.
	Sigma float64 `json:"sigma,omitempty"`
	// Degree of the polynomial kernel (x.v + C)^Degree. Default 2 when
	// absent; an explicit 0 is an error.
	Degree int `json:"degree,omitempty"`
	// C is the polynomial kernel's offset. Default 1 when absent; an explicit
	// 0 is the homogeneous kernel.
	C float64 `json:"c,omitempty"`

	given kernelGiven // fields present in the decoded document (kernel_spec.go)
}

// Gaussian is k(x,v) = exp(-||x-v||^2 / (2 sigma^2)).
type Gaussian struct {
	Sigma float64
	gamma float64 // 1/(2 sigma^2)
}

// NewGaussian returns the Gaussian kernel of width sigma (> 0).
func NewGaussian(sigma float64) *Gaussian {
	return &Gaussian{Sigma: sigma, gamma: 1 / (2 * sigma * sigma)}
}

func (g *Gaussian) Eval(x, v []float64) float64 { return math.Exp(-g.gamma * linalg.SqDist(x, v)) }
func (g *Gaussian) Diag([]float64) float64      { return 1 }

// Laplacian is k(x,v) = exp(-||x-v|| / sigma).
type Laplacian struct{ Sigma float64 }

func (l Laplacian) Eval(x, v []float64) float64 {
	return math.Exp(-math.Sqrt(linalg.SqDist(x, v)) / l.Sigma)
}
func (l Laplacian) Diag([]float64) float64 { return 1 }

// Polynomial is k(x,v) = (x.v + C)^Degree.
type Polynomial struct {
	Degree int
	C      float64
}

func (p Polynomial) Eval(x, v []float64) float64 { return ipow(linalg.Dot(x, v)+p.C, p.Degree) }
func (p Polynomial) Diag(x []float64) float64    { return ipow(linalg.Dot(x, x)+p.C, p.Degree) }

// Linear is k(x,v) = x.v.
type Linear struct{}

func (Linear) Eval(x, v []float64) float64 { return linalg.Dot(x, v) }
func (Linear) Diag(x []float64) float64    { return linalg.Dot(x, x) }

func ipow(b float64, n int) float64 {
	r := 1.0
	for ; n > 0; n-- {
		r *= b
	}
	return r
}

// Build validates the spec and returns its kernel, filling defaults.
func (s KernelSpec) Build() (Kernel, error) {
	switch s.Type {
	case "", "gaussian", "rbf":
		sigma, err := s.kernelWidth(1)
		if err != nil {
			return nil, err
		}
		return NewGaussian(sigma), nil
	case "laplacian":
		sigma, err := s.kernelWidth(1)
		if err != nil {
			return nil, err
		}
		return Laplacian{Sigma: sigma}, nil
	case "polynomial":
		deg := s.Degree
		if deg == 0 && s.given&givenDegree == 0 {
			deg = 2
		}
		if deg < 1 || deg > 16 {
			return nil, fmt.Errorf("%w: kernel.degree %d out of range [1,16]", ErrSpec, s.Degree)
		}
		c := s.C // an explicit 0 is valid: the homogeneous polynomial kernel
		if c == 0 && s.given&givenC == 0 {
			c = 1
		}
		if c < 0 || isBad(c) {
			return nil, fmt.Errorf("%w: kernel.c %v must be >= 0", ErrSpec, s.C)
		}
		return Polynomial{Degree: deg, C: c}, nil
	case "linear":
		return Linear{}, nil
	}
	return nil, fmt.Errorf("%w: unknown kernel.type %q (want gaussian, laplacian, polynomial or linear)", ErrSpec, s.Type)
}

func isBad(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }

// KernelVector writes k(s_i, x) for the j = len(dst) rows s_i of the row-major
// dictionary dict (j x len(x)) into dst. O(j d); the Gaussian case is inlined
// because it is every learner's hottest loop.
func KernelVector(k Kernel, dst, dict, x []float64) {
	d := len(x)
	if g, ok := k.(*Gaussian); ok {
		for i := range dst {
			dst[i] = math.Exp(-g.gamma * linalg.SqDist(dict[i*d:(i+1)*d:(i+1)*d], x))
		}
		return
	}
	for i := range dst {
		dst[i] = k.Eval(dict[i*d:(i+1)*d:(i+1)*d], x)
	}
}
