package models

import "fmt"

// The numerical contract every learner keeps: an instance of the wrong
// length, or one with a NaN/Inf feature, or one whose squared norm overflows
// (so that every kernel argument ||x-v||^2, x.v stays finite), is an error,
// never a panic and never a NaN output. Predict cannot return an
// error through the Learner interface, so it flags the prediction (Err) and
// returns Value 0; PredictChecked is the entry point that turns the flag into
// an error for library callers. Both paths use sentinel errors so that the
// hot path allocates nothing.

// checkInput returns nil when x may be fed to a learner of dimension d:
// len(x) == d, every feature finite and ||x||^2 finite. O(d), no allocation.
func checkInput(x []float64, d int) error {
	if len(x) != d {
		return ErrDim
	}
	s := 0.0
	for _, v := range x {
		s += v * v // NaN and Inf features, and overflowing norms, all end in a non-finite s
	}
	if isBad(s) {
		return ErrNumerical
	}
	return nil
}

// updateInputErr is checkInput for Update, with the label, wrapped with the
// algorithm's name and what was wrong (only on the error path).
func updateInputErr(alg string, x []float64, d int, y float64) error {
	if err := checkInput(x, d); err != nil {
		if err == ErrDim {
			return fmt.Errorf("%s: len(x) = %d, want dim = %d: %w", alg, len(x), d, ErrDim)
		}
		return fmt.Errorf("%s: features non-finite or ||x||^2 overflows: %w", alg, ErrNumerical)
	}
	if isBad(y) {
		return fmt.Errorf("%s: label %v: %w", alg, y, ErrNumerical)
	}
	return nil
}

// invalidPrediction is what Predict returns for an input it refuses.
func invalidPrediction(err error) Prediction {
	return Prediction{Choice: -1, Prob: 1, Err: err}
}

// finitePrediction flags p as ErrNumerical when its value came out non-finite
// (a kernel argument overflowed), so that no NaN is ever emitted.
func finitePrediction(p Prediction) Prediction {
	if isBad(p.Value) || isBad(p.Std) {
		return invalidPrediction(ErrNumerical)
	}
	return p
}

// PredictChecked is Predict for library callers (processor, eval): it returns
// the prediction's Err as an error (ErrDim or ErrNumerical) instead of a
// flagged prediction.
func PredictChecked(l Learner, x []float64) (Prediction, error) {
	p := l.Predict(x)
	if p.Err != nil {
		return p, p.Err
	}
	if isBad(p.Value) || isBad(p.Std) { // a learner outside this package
		return p, ErrNumerical
	}
	return p, nil
}

// Bounds of a kernel width: sigma^2 and 1/(2 sigma^2) must both be finite
// and non-zero, or the Gaussian turns into 0/0 or a constant.
const (
	minSigma = 1e-150
	maxSigma = 1e150
)
