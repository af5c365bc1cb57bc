package models

import (
	"fmt"
	"math"

	"github.com/kernelstream/kernelstream/internal/label"
)

// Loss is l(y_hat, y) with its derivative in y_hat (docs/regression.md).
type Loss interface {
	Name() string
	Value(yhat, y float64) float64
	Deriv(yhat, y float64) float64
	// Classification reports whether labels are -1/+1 and the sign of y_hat is
	// the predicted class.
	Classification() bool
}

// LossByName returns the loss named square, squared-hinge, hinge, logistic or absolute.
func LossByName(name string) (Loss, error) {
	switch name {
	case "square":
		return Square{}, nil
	case "squared-hinge", "squared_hinge":
		return SquaredHinge{}, nil
	case "hinge":
		return Hinge{}, nil
	case "logistic":
		return Logistic{}, nil
	case "absolute":
		return Absolute{}, nil
	}
	return nil, fmt.Errorf("%w: unknown loss %q (want square, squared-hinge, hinge, logistic or absolute)", ErrSpec, name)
}

// Square is (y_hat - y)^2.
type Square struct{}

func (Square) Name() string                  { return "square" }
func (Square) Value(yhat, y float64) float64 { d := yhat - y; return d * d }
func (Square) Deriv(yhat, y float64) float64 { return 2 * (yhat - y) }
func (Square) Classification() bool          { return false }

// Absolute is |y_hat - y|, Lipschitz but not smooth.
type Absolute struct{}

func (Absolute) Name() string                  { return "absolute" }
func (Absolute) Value(yhat, y float64) float64 { return math.Abs(yhat - y) }
func (Absolute) Classification() bool          { return false }
func (Absolute) Deriv(yhat, y float64) float64 {
	switch {
	case yhat > y:
		return 1
	case yhat < y:
		return -1
	}
	return 0
}

// Hinge is max(0, 1 - y y_hat).
type Hinge struct{}

func (Hinge) Name() string                  { return "hinge" }
func (Hinge) Value(yhat, y float64) float64 { return math.Max(0, 1-y*yhat) }
func (Hinge) Classification() bool          { return true }
func (Hinge) Deriv(yhat, y float64) float64 {
	if y*yhat < 1 {
		return -y
	}
	return 0
}

// SquaredHinge is max(0, 1 - y y_hat)^2.
type SquaredHinge struct{}

func (SquaredHinge) Name() string { return "squared-hinge" }
func (SquaredHinge) Value(yhat, y float64) float64 {
	m := math.Max(0, 1-y*yhat)
	return m * m
}
func (SquaredHinge) Deriv(yhat, y float64) float64 { return -2 * y * math.Max(0, 1-y*yhat) }
func (SquaredHinge) Classification() bool          { return true }

// Logistic is ln(1 + exp(-y y_hat)), computed as softplus to avoid overflow
// [SUGGEST].
type Logistic struct{}

func (Logistic) Name() string                  { return "logistic" }
func (Logistic) Value(yhat, y float64) float64 { return Softplus(-y * yhat) }
func (Logistic) Deriv(yhat, y float64) float64 { return -y * Sigmoid(-y*yhat) }
func (Logistic) Classification() bool          { return true }

// Softplus is ln(1+e^m) without overflow.
func Softplus(m float64) float64 { return math.Max(m, 0) + math.Log1p(math.Exp(-math.Abs(m))) }

// Sigmoid is 1/(1+e^-m) without overflow.
func Sigmoid(m float64) float64 {
	if m >= 0 {
		return 1 / (1 + math.Exp(-m))
	}
	e := math.Exp(m)
	return e / (1 + e)
}

// Label maps a raw classification label to -1/+1 (0 and negatives read as -1).
func Label(y float64) float64 { return label.Binary(y) }
