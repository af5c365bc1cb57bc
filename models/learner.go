package models

import "encoding"

// Prediction is what a learner says about one instance before it sees the label.
// It travels with the instance into the pending-label map, so that a delayed
// label updates exactly what predicted (for kernel selection, the sampled kernel).
type Prediction struct {
	// Value is y_hat: the regression output or the classification score.
	Value float64
	// Std is the predictive standard deviation when the learner has one
	// (bandit learners), 0 otherwise.
	Std float64
	// Choice is the index of the sampled kernel (OKS family) or the chosen arm
	// (bandits); -1 when the learner makes no choice.
	Choice int
	// Prob is the probability with which Choice was sampled (importance
	// weighting of the delayed update); 1 when there is no sampling.
	Prob float64
	// Aux carries one more learner-specific number the update needs
	// (OKS++'s q_{t,I_t}); 0 when unused.
	Aux float64
	// Err is non-nil when the learner refused x (ErrDim: wrong length,
	// ErrNumerical: non-finite or overflowing features or output); Value is
	// then 0 and must not be emitted. See PredictChecked.
	Err error
}

// Learner is one key's online model. Predict comes first, Update when the label
// is known. Implementations are single-goroutine: a key lives in one partition.
//
// Determinism: given the spec, the key and the sequence of calls, every
// prediction and every state byte is the same on every run. Predict may advance
// the learner's own PRNG and nothing else; no learner reads the clock.
type Learner interface {
	// Predict returns the prediction for x (len(x) == spec.Dim). A wrong
	// length or a non-finite x gives a prediction flagged with Err, never a
	// panic or a NaN.
	Predict(x []float64) Prediction
	// Update learns from the label y of the instance x that was predicted as p.
	// An update that would leave non-finite numbers in the state returns
	// ErrNumerical and leaves the state as it was; a wrong length is ErrDim.
	Update(x []float64, p Prediction, y float64) error
	// Size is the number of stored instances or features (the paper's J, B or D),
	// reported by eval and metrics.
	Size() int
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}

// Reloader is the optional capability of learners that take any key's
// state of their spec in place: everything New(key) derives from the key
// (the PRNG's seed) is in the state, so a learner built for one key and
// reloaded with another key's blob is that key's learner, bit for bit.
// Reload is UnmarshalBinary into the buffers the learner already holds,
// without UnmarshalBinary's promise that a refused blob leaves the learner
// as it was: a learner whose Reload failed must be dropped. A caller that
// decodes many keys' states only to read them (scoring on request,
// docs/bandits.md) keeps a few Reloaders instead of building and
// discarding a learner per state. Implemented by bkb; not by learners whose
// key-derived parts are rebuilt at New rather than stored (fogd's
// frequencies, for one).
type Reloader interface {
	Learner
	Reload(blob []byte) error
}

// Decision is a bandit learner's choice among candidate arms.
type Decision struct {
	Arm  int     // index into the arms slice
	Mean float64 // posterior mean of the chosen arm
	Std  float64 // posterior standard deviation of the chosen arm
	UCB  float64 // Mean + beta * Std, the score that chose it
}

// Bandit is the optional capability of learners that choose among arms
// (BKB, GP-UCB). The consumer finds it by type assertion.
type Bandit interface {
	Learner
	// Choose picks one of arms (each of length spec.Dim). It may advance the
	// learner's PRNG and update its memo of the arm set, both part of the
	// state (the caller marks the learner changed); the posterior is not
	// changed.
	Choose(arms [][]float64) Decision
	// Observe learns the reward of having pulled the arm with features x.
	Observe(x []float64, reward float64) error
}
