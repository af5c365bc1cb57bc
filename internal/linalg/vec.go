// Package linalg holds the dense and packed-triangular kernels the learners
// run per record. They write into caller-owned buffers and never allocate.
// Shapes are programmer errors: a mismatch panics with a message naming the
// function and the lengths (as gonum's floats package does), never with a
// bare index error deep in a loop.
package linalg

import "fmt"

// badLength panics for a shape error; kept out of line so that the checks
// cost one compare on the hot path.
//
//go:noinline
func badLength(op, what string, got, want int) {
	panic(fmt.Sprintf("linalg: %s: len(%s) = %d, want %d", op, what, got, want))
}

// Dot is x.y; the slices must have equal length.
func Dot(x, y []float64) float64 {
	if len(y) != len(x) {
		badLength("Dot", "y", len(y), len(x))
	}
	y = y[:len(x)]
	var s0, s1 float64
	i := 0
	for ; i+1 < len(x); i += 2 {
		s0 += x[i] * y[i]
		s1 += x[i+1] * y[i+1]
	}
	if i < len(x) {
		s0 += x[i] * y[i]
	}
	return s0 + s1
}

// SqDist is ||x-y||^2; the slices must have equal length.
func SqDist(x, y []float64) float64 {
	if len(y) != len(x) {
		badLength("SqDist", "y", len(y), len(x))
	}
	y = y[:len(x)]
	var s0, s1 float64
	i := 0
	for ; i+1 < len(x); i += 2 {
		a := x[i] - y[i]
		b := x[i+1] - y[i+1]
		s0 += a * a
		s1 += b * b
	}
	if i < len(x) {
		a := x[i] - y[i]
		s0 += a * a
	}
	return s0 + s1
}

// Axpy sets y += a*x; the slices must have equal length.
func Axpy(a float64, x, y []float64) {
	if len(y) != len(x) {
		badLength("Axpy", "y", len(y), len(x))
	}
	y = y[:len(x)]
	for i, v := range x {
		y[i] += a * v
	}
}

// Scale sets x *= a.
func Scale(a float64, x []float64) {
	for i := range x {
		x[i] *= a
	}
}

// AllFinite reports whether every element is neither NaN nor Inf.
func AllFinite(x []float64) bool {
	for _, v := range x {
		if v-v != 0 { // NaN or Inf
			return false
		}
	}
	return true
}
