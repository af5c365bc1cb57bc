package models

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// ScaleSpec is the spec's "scale" object: online standardisation of the
// features and, for the square loss, of the target, kept in the learner's
// state so that restores and replays stay bit-exact (docs/scale.md).
//
//	"scale":{"x":"standard","y":"standard"}   the default for every learner but the bandits
//	"scale":{"x":"none","y":"none"}           the papers' setting (eval -scale turns it off)
//
// Prior art (no code taken): River's preprocessing.StandardScaler and
// preprocessing.TargetStandardScaler, Vowpal Wabbit's --normalized.
type ScaleSpec struct {
	// X is "standard" (running mean and variance per feature, Welford) or
	// "none". Default "standard" (bandits: "none").
	X string `json:"x,omitempty" yaml:"x,omitempty"`
	// Y is "standard" (running mean and variance of the regression target)
	// or "none". Default "standard" for a regression loss (square,
	// absolute), "none" otherwise; classification labels are never scaled.
	Y string `json:"y,omitempty" yaml:"y,omitempty"`
}

const (
	scaleStandard = "standard"
	scaleNone     = "none"
)

// resolve fills the defaults and checks the names.
func (s ScaleSpec) resolve(algorithm string, loss Loss) (x, y bool, err error) {
	sp := s
	bandit := algorithm == "bkb" || algorithm == "gp-ucb"
	if sp.X == "" {
		sp.X = scaleStandard
		if bandit {
			sp.X = scaleNone
		}
	}
	if sp.Y == "" {
		sp.Y = scaleNone
		if !loss.Classification() && !bandit {
			sp.Y = scaleStandard
		}
	}
	for _, f := range []struct{ name, v string }{{"x", sp.X}, {"y", sp.Y}} {
		if f.v != scaleStandard && f.v != scaleNone {
			return false, false, fmt.Errorf("%w: scale.%s = %q: want %q or %q", ErrSpec, f.name, f.v, scaleStandard, scaleNone)
		}
	}
	if sp.Y == scaleStandard {
		if loss.Classification() {
			return false, false, fmt.Errorf("%w: scale.y = %q needs a regression loss (labels of %s are classes)", ErrSpec, sp.Y, loss.Name())
		}
		if bandit {
			return false, false, fmt.Errorf("%w: scale.y = %q: %s rewards are not scaled", ErrSpec, sp.Y, algorithm)
		}
	}
	return sp.X == scaleStandard, sp.Y == scaleStandard, nil
}

// welford is a running mean and sum of squared deviations (Welford 1962,
// "Note on a method for calculating corrected sums of squares and products").
type welford struct {
	n        float64
	mean, m2 []float64

	// sds caches sd(i) for every i while sdsOK: scaling reads the same
	// statistics at Predict and at the Update of the same record (a square
	// root and a division per feature each time); add and the state's
	// restore clear sdsOK. Scratch, never state.
	sds   []float64
	sdsOK bool
}

func (w *welford) add(v []float64) {
	w.n++
	w.sdsOK = false
	for i, x := range v {
		d := x - w.mean[i]
		w.mean[i] += d / w.n
		w.m2[i] += d * (x - w.mean[i])
	}
}

// sd is the population standard deviation of coordinate i, or 1 while it is
// undefined (fewer than two values, or a constant feature) so that scaling
// never divides by zero.
func (w *welford) sd(i int) float64 {
	if w.n < 2 || !(w.m2[i] > 0) {
		return 1
	}
	return math.Sqrt(w.m2[i] / w.n)
}

// sdAll returns sd(i) for every i (cached until the statistics change).
func (w *welford) sdAll() []float64 {
	if !w.sdsOK {
		for i := range w.sds {
			w.sds[i] = w.sd(i)
		}
		w.sdsOK = true
	}
	return w.sds
}

// Scaled wraps a learner with online standardisation. Every input is scaled
// with the statistics gathered BEFORE it (so a prediction never sees its own
// features or label, and a replay gives the same numbers); the statistics
// include x and y at Update (Observe for bandits). A record that is never
// labelled does not move the statistics: Predict changes nothing but the
// inner learner's PRNG, as the Learner contract says.
//
// With a delayed label, Update scales x and the prediction with the
// statistics current at Update time (the same as Predict's when the label is
// inline, the usual case).
type Scaled struct {
	inner     Learner
	alg       string
	sx, sy    bool
	xs        welford
	ys        welford // one coordinate
	xbuf      []float64
	arms      [][]float64
	armsStore []float64
}

// ScaledBandit is Scaled for a Bandit inner learner.
type ScaledBandit struct{ *Scaled }

const scaleStateVersion = 1

// scaleWarmup is the number of labels that only feed the target's
// statistics before the inner learner trains on standardised targets
// (docs/online-scaling.md, "Semantics").
const scaleWarmup = 5

func newScaled(inner Learner, alg string, dim int, sx, sy bool) Learner {
	s := &Scaled{inner: inner, alg: alg, sx: sx, sy: sy,
		xs:   welford{mean: make([]float64, dim), m2: make([]float64, dim), sds: make([]float64, dim)},
		ys:   welford{mean: make([]float64, 1), m2: make([]float64, 1)},
		xbuf: make([]float64, dim)}
	if _, ok := inner.(Bandit); ok {
		return ScaledBandit{s}
	}
	return s
}

// Inner is the wrapped learner.
func (s *Scaled) Inner() Learner { return s.inner }

func (s *Scaled) scaleX(dst, x []float64) []float64 {
	if !s.sx || len(x) != len(s.xbuf) {
		// A wrong length goes through unchanged so that the inner
		// learner's own input check reports it.
		return x
	}
	sds := s.xs.sdAll()
	for i, v := range x {
		dst[i] = (v - s.xs.mean[i]) / sds[i]
	}
	return dst
}

func (s *Scaled) yScale() (mean, sd float64) {
	if !s.sy || s.ys.n == 0 {
		return 0, 1
	}
	return s.ys.mean[0], s.ys.sd(0)
}

// Predict scales x, predicts, and maps y_hat (and its std) back to the
// user's units.
func (s *Scaled) Predict(x []float64) Prediction {
	p := s.inner.Predict(s.scaleX(s.xbuf, x))
	m, sd := s.yScale()
	p.Value = p.Value*sd + m
	p.Std *= sd
	return p
}

// Update scales x, the prediction and y with the statistics before this
// record, updates the inner learner, then includes x and y in the statistics.
// A rejected update (an error from the inner learner) leaves the statistics
// as they were.
func (s *Scaled) Update(x []float64, p Prediction, y float64) error {
	if s.sy {
		if d := y - s.ys.mean[0]; isBad(d) || isBad(s.ys.m2[0]+d*d) {
			// The label itself, or its squared deviation, is beyond float64:
			// the statistics would turn non-finite for good.
			return fmt.Errorf("%w: scale/%s: label %v", ErrNumerical, s.alg, y)
		}
		if s.ys.n < scaleWarmup {
			// The target's scale is not known yet: the inner learner would
			// see the label nearly in the user's units (a first label of 5e4
			// for a learner whose bound U is 5 standard deviations, whose
			// first steps it never recovers from). Only the statistics
			// learn; meanwhile y_hat is the running mean.
			if err := checkInput(x, len(s.xbuf)); err != nil {
				return fmt.Errorf("scale/%s: %w", s.alg, err)
			}
			s.include(x, y)
			return nil
		}
	}
	m, sd := s.yScale()
	p.Value = (p.Value - m) / sd
	p.Std /= sd
	if err := s.inner.Update(s.scaleX(s.xbuf, x), p, (y-m)/sd); err != nil {
		return err
	}
	s.include(x, y)
	return nil
}

func (s *Scaled) include(x []float64, y float64) {
	if s.sx && len(x) == len(s.xbuf) {
		s.xs.add(x)
	}
	if s.sy {
		s.xbuf[0] = y // reuse as a one-element scratch; xbuf is rewritten before each use
		s.ys.add(s.xbuf[:1])
	}
}

// Size is the inner learner's size.
func (s *Scaled) Size() int { return s.inner.Size() }

// Choose scales every arm with the feature statistics and lets the inner
// bandit choose; Mean, Std and UCB stay in the inner learner's units.
func (s ScaledBandit) Choose(arms [][]float64) Decision {
	b := s.inner.(Bandit)
	if !s.sx {
		return b.Choose(arms)
	}
	d := len(s.xbuf)
	if cap(s.arms) < len(arms) {
		s.arms = make([][]float64, len(arms))
		s.armsStore = make([]float64, len(arms)*d)
	}
	s.arms = s.arms[:len(arms)]
	for i, a := range arms {
		if len(a) != d {
			s.arms[i] = a
			continue
		}
		s.arms[i] = s.scaleX(s.armsStore[i*d:(i+1)*d], a)
	}
	return b.Choose(s.arms)
}

// Observe scales x, lets the inner bandit learn, then includes x in the
// feature statistics.
func (s ScaledBandit) Observe(x []float64, reward float64) error {
	if err := s.inner.(Bandit).Observe(s.scaleX(s.xbuf, x), reward); err != nil {
		return err
	}
	if s.sx && len(x) == len(s.xbuf) {
		s.xs.add(x)
	}
	return nil
}

// MarshalBinary writes the scaler's statistics followed by the inner
// learner's own blob.
func (s *Scaled) MarshalBinary() ([]byte, error) { return s.AppendBinary(nil) }

// AppendBinary appends the bytes of MarshalBinary to dst. The inner blob
// follows its uvarint length, unknown until the inner learner has written
// it: it is appended behind room for the longest length and moved down over
// the room the length does not use (a move within dst, no second buffer).
func (s *Scaled) AppendBinary(dst []byte) ([]byte, error) {
	w := NewStateWriter(slices.Grow(dst, 64+16*len(s.xbuf)+binary.MaxVarintLen64), "scale/"+s.alg, scaleStateVersion)
	w.Bool(s.sx)
	w.Bool(s.sy)
	w.Float(s.xs.n)
	w.Floats(s.xs.mean)
	w.Floats(s.xs.m2)
	w.Float(s.ys.n)
	w.Float(s.ys.mean[0])
	w.Float(s.ys.m2[0])
	at := len(w.b)
	b, err := AppendState(append(w.b, make([]byte, binary.MaxVarintLen64)...), s.inner)
	if err != nil {
		return dst, err
	}
	inner := b[at+binary.MaxVarintLen64:]
	n := binary.PutUvarint(b[at:], uint64(len(inner)))
	copy(b[at+n:], inner)
	w.b = b[:at+n+len(inner)]
	return w.Finish(), nil
}

// UnmarshalBinary restores a blob written by MarshalBinary with the same
// spec; on error the learner is unchanged.
func (s *Scaled) UnmarshalBinary(blob []byte) error {
	r, _, err := NewStateReader(blob, "scale/"+s.alg, scaleStateVersion)
	if err != nil {
		return err
	}
	sx, sy := r.Bool(), r.Bool()
	xn := r.Float()
	mean := r.Floats(nil)
	m2 := r.Floats(nil)
	yn, ym, ym2 := r.Float(), r.Float(), r.Float()
	n := r.uvarint()
	if r.err == nil && n != uint64(len(r.b)) {
		r.fail("inner blob length")
	}
	if r.err != nil {
		return r.err
	}
	d := len(s.xbuf)
	if sx != s.sx || sy != s.sy || len(mean) != d || len(m2) != d {
		return fmt.Errorf("%w: scale/%s: blob was written with another scale spec or dim", ErrState, s.alg)
	}
	ok := finite(xn) && xn >= 0 && finite(yn) && yn >= 0 && finite(ym) && finite(ym2) && ym2 >= 0
	for i := range mean {
		ok = ok && finite(mean[i]) && finite(m2[i]) && m2[i] >= 0
	}
	if !ok {
		return fmt.Errorf("%w: scale/%s: non-finite or negative statistics", ErrState, s.alg)
	}
	if err := s.inner.UnmarshalBinary(r.b); err != nil {
		return err
	}
	s.xs.n, s.ys.n, s.ys.mean[0], s.ys.m2[0] = xn, yn, ym, ym2
	copy(s.xs.mean, mean)
	copy(s.xs.m2, m2)
	s.xs.sdsOK = false
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// KernelWeights forwards the OKS family's kernel weights (exported as a
// metric); nil when the inner learner has none.
func (s *Scaled) KernelWeights() []float64 {
	if kw, ok := s.inner.(interface{ KernelWeights() []float64 }); ok {
		return kw.KernelWeights()
	}
	return nil
}

// KernelWidths forwards the OKS family's candidate widths; nil when the
// inner learner has none. The widths act on standardised features.
func (s *Scaled) KernelWidths() []float64 {
	if kw, ok := s.inner.(interface{ KernelWidths() []float64 }); ok {
		return kw.KernelWidths()
	}
	return nil
}
