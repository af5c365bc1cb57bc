package processor

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/rs/zerolog"

	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// Failure containment for stored state and learner code (docs/pipeline.md,
// "Corrupt state and learner panics"): one key's bad blob or one record that
// makes a learner panic costs that key or that record, never the partition.

// corruptError is a stored learner that cannot be decoded.
type corruptError struct {
	key  string
	part int
	err  error
}

func (e *corruptError) Error() string {
	return fmt.Sprintf("learner of key %q in partition %d: %v", e.key, e.part, e.err)
}

func (e *corruptError) Unwrap() error { return e.err }

// unmarshalSafely decodes a learner blob; a decoder that panics on bad bytes
// is a corrupt blob like any other.
func unmarshalSafely(l models.Learner, b []byte) error { return decodeSafely(l.UnmarshalBinary, b) }

// decodeSafely runs a learner's decoder (UnmarshalBinary or Reload) on b,
// turning a panic into an error.
func decodeSafely(decode func([]byte) error, b []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder panicked: %v", r)
		}
	}()
	return decode(b)
}

// quarantineLearner records that key's stored learner is corrupt: the key is
// quarantined for as long as the partition is assigned (its records are
// dead-lettered with reason corrupt_state, without reading Badger again),
// and the blob stays in Badger untouched for an operator to inspect.
func (w *worker) quarantineLearner(key []byte, cause error) error {
	if w.quarantine == nil {
		w.quarantine = map[string]error{}
	}
	if _, ok := w.quarantine[string(key)]; !ok {
		w.quarantine[string(key)] = cause
		w.p.c.quarantined[quarantineLearner].Add(1)
		w.log.Error().Err(cause).Bytes("key", key).
			Msg("stored learner is corrupt: key quarantined, its records go to the dead-letter topic (reason corrupt_state); delete the key's state to start it afresh")
	}
	return wire.Bad(wire.ReasonCorruptState, cause.Error())
}

// quarantinePending records an undecodable pending entry at restore: it is
// skipped (its label, if it comes, counts as unknown) and counted.
func (w *worker) quarantinePending(key []byte, cause error) {
	w.p.c.quarantined[quarantinePending].Add(1)
	w.log.Error().Err(cause).Bytes("pending_key", key).Msg("pending entry is corrupt: skipped (its label will count as unknown)")
}

// learnerPanic is a panic raised by learner code on one record.
type learnerPanic struct {
	op    string
	value any
	stack []byte
}

func (p *learnerPanic) Error() string {
	return fmt.Sprintf("learner panicked in %s: %v", p.op, p.value)
}

// contain runs f, turning a panic into a *learnerPanic.
func contain(op string, f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &learnerPanic{op: op, value: r, stack: debug.Stack()}
		}
	}()
	f()
	return nil
}

// onPanic handles a learner panic on one record: the learner may be half
// updated, so it is dropped from memory and the key's next record reads back
// its last encoded version (the one of the last checkpoint or eviction; a
// key never checkpointed starts afresh). The record is dead-lettered with
// reason learner_panic, and the panic counted and logged with its stack.
func (w *worker) onPanic(s *slot, err error) error {
	var lp *learnerPanic
	if !errors.As(err, &lp) {
		return err
	}
	w.p.c.panics.Add(1)
	if w.lastUpdated == s {
		w.lastUpdated = nil
	}
	w.cache.drop(s)
	w.rateLog("learner_panic", func(ev *zerolog.Event) {
		ev.Str("key", s.key).Str("panic", fmt.Sprint(lp.value)).Bytes("stack", lp.stack).
			Msg("learner panicked: record dead-lettered, learner restored from its last encoded state")
	})
	return wire.Bad(wire.ReasonLearnerPanic, lp.Error())
}
