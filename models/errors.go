package models

import "errors"

// ErrNumerical reports an update rejected because it would have left
// non-finite numbers in the state. The learner keeps its previous state.
var ErrNumerical = errors.New("numerical guard: update would produce non-finite state")

// ErrState reports a state blob that cannot be decoded: truncated, corrupted,
// written by another algorithm or version, or for another shape.
var ErrState = errors.New("invalid learner state")

// ErrSpec reports an invalid model spec.
var ErrSpec = errors.New("invalid model spec")

// ErrDim reports an instance whose length is not the spec's dim.
var ErrDim = errors.New("input length differs from the model's dim")
