package models

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/kernelstream/kernelstream/internal/linalg"
)

// KernelSelector is the optional capability of the kernel-selection learners
// (oks, oks++, ioks, rf-oks++, rf-ioks). The consumer finds it by type
// assertion and may export it as a per-model gauge.
type KernelSelector interface {
	// KernelWidths returns the candidate Gaussian widths sigma_1..sigma_K
	// (a fresh copy).
	KernelWidths() []float64
	// KernelWeights returns the current sampling distribution p_t over the
	// widths (a fresh copy; it sums to 1). The largest entry is the kernel
	// that is winning.
	KernelWeights() []float64
}

// oksStateVersion is the learner-state version of every algorithm of the family.
const oksStateVersion = 1

// oksDefaultSigmas is the paper's grid 2^{-2:1:3} (docs/kernel-selection.md).
var oksDefaultSigmas = []float64{0.25, 0.5, 1, 2, 4, 8}

// Stream defaults of the family, used when the features are standardised
// online (Setup.StreamX; README "defaults per algorithm", measured on raw
// cpusmall, elevators, cod-rna and phishing):
//   - widths sqrt(d) * {1, 2, 4, 8} (oksStreamSigmas): standardised records
//     lie about sqrt(2d) apart, so the paper's grid 2^{-2..3} (made for
//     [-1, 1] features) makes most kernel values vanish (OKS++ on raw
//     cod-rna, square loss: 28.9 % mistakes, 7.9 % with this grid and U 10);
//   - U = 10 (oks++, ioks, rf-*, losses other than logistic): U is the radius of the
//     RKHS ball every arm is projected onto; with U = 1 the arms cannot fit a
//     standardised target or +-1 labels (cod-rna 28.9 % -> 7.9 %; cpusmall
//     OKS++ MSE 219 at U 3, 124 at U 10);
//   - max_budget = 256 per width (oksStreamMaxBudget): time per record bounded
//     near 50 us on d <= 68;
//   - lambda_scale = 5 for OKS: its unprojected step lambda/p_t diverges
//     with the code's 25 on standardised targets (cpusmall MSE 8.7e127).
var oksStreamSigmaFactors = []float64{1, 2, 4, 8}

const (
	oksStreamU           = 10
	oksStreamMaxBudget   = 256
	oksStreamLambdaScale = 5
)

// oksStreamSigmas is oksStreamSigmaFactors times sqrt(d).
func oksStreamSigmas(d int) []float64 {
	out := make([]float64, len(oksStreamSigmaFactors))
	for i, f := range oksStreamSigmaFactors {
		out[i] = f * math.Sqrt(float64(d))
	}
	return out
}

// oksMaxArms bounds K so that a mistaken spec cannot allocate without bound.
const oksMaxArms = 64

// oksObservation is what the rule needs from one labelled round.
type oksObservation struct {
	arm   int     // I_t
	p, q  float64 // p_{t,I_t} and q_{t,I_t} at prediction time
	yhat  float64 // f_{t,I_t}(x_t), the served prediction
	y     float64 // label (mapped to -1/+1 for classification)
	loss  float64 // l(yhat, y)
	deriv float64 // l'(yhat, y)
	kxx   float64 // k(x, x) = ||k(x,.)||^2 (1 for Gaussian and cos/sin features)
}

// oksSelectionRule is the outer (bandit) level: OKS's exponential weights,
// OKS++'s adaptive exponential weights, IOKS's Tsallis OMD. stage computes
// the round's results without touching the rule's state (so that a rejected
// update leaves everything as it was); commit applies what stage computed.
type oksSelectionRule interface {
	// stage returns the played arm's step size lambda and writes q_{t+1}
	// and p_{t+1} into qNext and pNext; ok is false when a number is not finite.
	stage(o *oksObservation, q []float64, qNext, pNext []float64) (lambda float64, ok bool)
	commit(o *oksObservation)
	// radius is U for projected updates, +Inf for OKS (no projection).
	radius() float64
	// usesQ reports whether the rule reads Prediction.Aux (q_{t,I_t}).
	usesQ() bool
	marshal(w *StateWriter)
	// unmarshal decodes the rule's state and returns the function that
	// installs it (called only when the whole blob decoded).
	unmarshal(r *StateReader) (install func())
}

// oksArmBank is the set of K base learners. The x they get has passed
// Update's input check (updateInputErr: the spec's length, finite).
type oksArmBank interface {
	// predict returns f_i(x); it may fill a scratch cache, nothing else.
	predict(i int, x []float64) float64
	// stage prepares f_i <- Proj(f_i + coef * feature(x)) onto the ball of
	// radius radius; ok is false when the result would not be finite.
	stage(i int, x []float64, coef, radius float64) (ok bool)
	commit()
	size() int
	marshal(w *StateWriter)
	unmarshal(r *StateReader) (install func())
}

// oksLearner is one key's kernel selector, the learner behind OKS, OKSPlus,
// IOKS, RFOKSPlus and RFIOKS [Li & Liao 2022]: K base learners ("arms"), one
// per Gaussian width sigma_i, and a selection rule over them. Each round it
// samples one arm I_t ~ p_t from the key's PRNG, predicts f_{t,I_t}(x_t), and
// on the label computes only that arm's loss (bandit feedback). The rule turns
// the importance-weighted loss into the next distribution p_{t+1} and the
// played arm's step size lambda_{t,I_t}; the arm then takes the projected,
// importance-weighted gradient step ([Li & Liao 2022, eq. 2] in kernel form,
// eq. 8 in random-feature form).
//
// Rules: oksRule (oks.go, [Li & Liao 2022, Alg. 1], after [Yang et al. 2012]),
// oksPlusRule (oks_plus.go, Sec. 3, App. F Alg. 3), ioksRule (ioks.go, Sec. 4,
// Alg. 2). Arms: kernelArms (oks_arms.go, kernel expansion, bounded by
// max_budget) and rfArms (rf_oks.go, random features).
//
// Delayed labels. Predict returns the sampled arm in Prediction.Choice, its
// probability p_{t,I_t} in Prediction.Prob and q_{t,I_t} in Prediction.Aux, so
// a label that arrives after other updates still updates the arm that
// predicted, with the importance weight it was sampled with. The loss and its
// derivative are taken at the served prediction Prediction.Value; the RKHS
// norm recurrence needs the arm's current value at x, which Update recomputes
// unless the arm is unchanged since Predict (the common, synchronous case; a
// scratch cache, not state, makes that free).
//
// Memory [SUGGEST]: the paper's kernel-form arms store every played example.
// Here each arm holds at most max_budget support vectors; at the cap a step
// is projected onto the nearest support vector or replaces the smallest
// coefficient, whichever perturbs f less in RKHS norm (kernelArms). The
// random-feature forms are bounded by construction.
//
// Other [SUGGEST] choices: the exponential weights are normalised by a softmax
// shifted by the smallest cumulative loss; the squared RKHS norm is clamped at
// 0 before sqrt; every update computes all new scalars, the next
// distributions and the arm step into scratch first, and commits only when
// all are finite (numerical guard).
//
// Every learner of the family implements KernelSelector, so the consumer's
// metrics and eval can show which width is winning.
type oksLearner struct {
	name     string
	dim      int // spec dim: the input contract (input.go)
	loss     Loss
	classify bool
	sigmas   []float64
	rule     oksSelectionRule
	arms     oksArmBank
	rng      Rand
	t        int            // labelled rounds
	p, q     []float64      // p_t (sampling) and q_t (exponential weights / OMD iterate)
	qNext    []float64      // scratch
	pNext    []float64      // scratch
	obs      oksObservation // scratch (a field, so that passing it to the rule does not allocate)
}

// init makes l the kernel selector name of s with the candidate widths
// sigmas, the rule and the arms; rng is the key's PRNG (copied).
func (l *oksLearner) init(name string, s *Setup, sigmas []float64, rule oksSelectionRule, arms oksArmBank, rng *Rand) {
	k := len(sigmas)
	*l = oksLearner{
		name: name, dim: s.Dim, loss: s.Loss, classify: s.Loss.Classification(),
		sigmas: sigmas, rule: rule, arms: arms, rng: *rng,
		p: make([]float64, k), q: make([]float64, k),
		qNext: make([]float64, k), pNext: make([]float64, k),
	}
	for i := range l.p {
		l.p[i] = 1 / float64(k)
		l.q[i] = 1 / float64(k)
	}
}

// Predict samples I_t ~ p_t (advancing the PRNG, the only state it touches)
// and returns f_{t,I_t}(x) with I_t, p_{t,I_t} and q_{t,I_t}.
// Predict keeps the numerical contract (input.go): a refused x gives a
// flagged prediction, a non-finite output is flagged ErrNumerical.
func (l *oksLearner) Predict(x []float64) Prediction {
	if err := checkInput(x, l.dim); err != nil {
		return invalidPrediction(err)
	}
	return finitePrediction(l.predict(x))
}

func (l *oksLearner) predict(x []float64) Prediction {
	i := oksSampleIndex(l.p, l.rng.Float64())
	return Prediction{Value: l.arms.predict(i, x), Choice: i, Prob: l.p[i], Aux: l.q[i]}
}

// oksSampleIndex inverts the CDF of p at u in [0,1); rounding can leave u above
// the last partial sum, in which case the last arm with p > 0 is chosen.
func oksSampleIndex(p []float64, u float64) int {
	c := 0.0
	last := 0
	for i, v := range p {
		if v > 0 {
			last = i
		}
		c += v
		if u < c {
			return i
		}
	}
	return last
}

// errOKSPrediction reports a Prediction that this learner cannot have made.
var errOKSPrediction = errors.New("prediction was not made by this kernel selector")

// Update applies the label y of x, which was predicted as pr.
func (l *oksLearner) Update(x []float64, pr Prediction, y float64) error {
	if err := updateInputErr(l.name, x, l.dim, y); err != nil {
		return err
	}
	k := len(l.p)
	if pr.Choice < 0 || pr.Choice >= k || !(pr.Prob > 0 && pr.Prob <= 1) || isBad(pr.Value) {
		return fmt.Errorf("%s: %w (choice %d of %d, prob %v, value %v)", l.name, errOKSPrediction, pr.Choice, k, pr.Prob, pr.Value)
	}
	if l.rule.usesQ() && !(pr.Aux >= 0 && pr.Aux <= 1) {
		return fmt.Errorf("%s: %w (q = %v not in [0,1])", l.name, errOKSPrediction, pr.Aux)
	}
	if l.classify {
		y = Label(y)
	}
	o := &l.obs
	*o = oksObservation{arm: pr.Choice, p: pr.Prob, q: pr.Aux, yhat: pr.Value, y: y, kxx: 1}
	o.loss = l.loss.Value(pr.Value, y)
	o.deriv = l.loss.Deriv(pr.Value, y)
	if isBad(o.loss) || isBad(o.deriv) {
		return fmt.Errorf("%s: %w (loss %v, derivative %v)", l.name, ErrNumerical, o.loss, o.deriv)
	}
	lambda, ok := l.rule.stage(o, l.q, l.qNext, l.pNext)
	if !ok || !linalg.AllFinite(l.qNext) || !linalg.AllFinite(l.pNext) {
		return fmt.Errorf("%s: %w (selection rule)", l.name, ErrNumerical)
	}
	// Importance-weighted functional gradient step: f <- f - lambda l'/p k(x,.).
	coef := -lambda * o.deriv / o.p
	if isBad(coef) || !l.arms.stage(o.arm, x, coef, l.rule.radius()) {
		return fmt.Errorf("%s: %w (arm %d step, coefficient %v)", l.name, ErrNumerical, o.arm, coef)
	}
	l.rule.commit(o)
	l.arms.commit()
	copy(l.q, l.qNext)
	copy(l.p, l.pNext)
	l.t++
	return nil
}

// Size is the number of stored instances (kernel form) or random frequencies (RF form).
func (l *oksLearner) Size() int { return l.arms.size() }

// KernelWidths implements KernelSelector.
func (l *oksLearner) KernelWidths() []float64 { return append([]float64(nil), l.sigmas...) }

// KernelWeights implements KernelSelector.
func (l *oksLearner) KernelWeights() []float64 { return append([]float64(nil), l.p...) }

// MarshalBinary writes the dynamic state: round count, PRNG, p, q, the rule's
// accumulators and the arms. Hyper-parameters come from the spec.
func (l *oksLearner) MarshalBinary() ([]byte, error) { return l.AppendBinary(nil) }

func (l *oksLearner) AppendBinary(dst []byte) ([]byte, error) {
	w := NewStateWriter(slices.Grow(dst, 256), l.name, oksStateVersion)
	w.Int(len(l.p))
	w.Int(l.t)
	w.Rand(&l.rng)
	w.Floats(l.p)
	w.Floats(l.q)
	l.rule.marshal(&w)
	l.arms.marshal(&w)
	return w.Finish(), nil
}

// UnmarshalBinary restores a state written by MarshalBinary for the same
// spec. It decodes everything into locals and installs them only when the
// whole blob is valid.
func (l *oksLearner) UnmarshalBinary(blob []byte) error {
	r, _, err := NewStateReader(blob, l.name, oksStateVersion)
	if err != nil {
		return err
	}
	k := len(l.p)
	r.Check(r.Int() == k, "number of kernels differs from the spec")
	t := r.Int()
	r.Check(t >= 0, "negative round count")
	var rng Rand
	r.Rand(&rng)
	p := r.Floats(nil)
	q := r.Floats(nil)
	r.Check(len(p) == k && len(q) == k, "distribution length")
	r.Check(oksIsDistribution(p) && oksIsDistribution(q), "p or q is not a probability distribution")
	installRule := l.rule.unmarshal(r)
	installArms := l.arms.unmarshal(r)
	if err := r.Err(); err != nil {
		return err
	}
	l.t, l.rng = t, rng
	copy(l.p, p)
	copy(l.q, q)
	installRule()
	installArms()
	return nil
}

// oksIsDistribution reports whether v is finite, non-negative and sums to 1 (up to rounding).
func oksIsDistribution(v []float64) bool {
	s := 0.0
	for _, x := range v {
		if !(x >= 0 && x <= 1) {
			return false
		}
		s += x
	}
	return math.Abs(s-1) < 1e-6
}

// oksSoftmaxNeg writes q_i = exp(-eta L_i) / sum_j exp(-eta L_j), shifted by
// min L so that it neither overflows nor underflows to 0/0 (docs/kernel-selection.md).
func oksSoftmaxNeg(q, cum []float64, eta float64) {
	m := cum[0]
	for _, v := range cum[1:] {
		m = math.Min(m, v)
	}
	s := 0.0
	for i, v := range cum {
		q[i] = math.Exp(-eta * (v - m))
		s += q[i]
	}
	for i := range q {
		q[i] /= s
	}
}

// oksMixUniform writes p = (1-delta) q + delta/K.
func oksMixUniform(p, q []float64, delta float64) {
	u := delta / float64(len(q))
	for i, v := range q {
		p[i] = (1-delta)*v + u
	}
}

// oksFiniteNonNeg reports whether every entry of v is finite and >= 0 (the
// rules' accumulators in a decoded state).
func oksFiniteNonNeg(v []float64) bool {
	for _, x := range v {
		if !(x >= 0) || isBad(x) {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// Common parameter reading.

// oksReadSigmas reads params.sigmas and rejects a spec that also sets a single
// kernel, which this family would otherwise silently ignore.
func oksReadSigmas(s *Setup) []float64 {
	def := oksDefaultSigmas
	if s.StreamX {
		def = oksStreamSigmas(s.Dim)
	}
	sig := s.Params.Floats("sigmas", def, minSigma, maxSigma) // 1/(2 sigma^2) finite (input.go)
	if len(sig) > oksMaxArms {
		s.Params.Fail("sigmas: %d widths, at most %d", len(sig), oksMaxArms)
	}
	for _, v := range sig {
		if !(v > 0) {
			s.Params.Fail("sigmas: widths must be > 0, got %v", v)
		}
	}
	if t := s.Spec.Kernel.Type; t != "" && t != "gaussian" && t != "rbf" {
		s.Params.Fail("sigmas: the kernel-selection learners use Gaussian kernels; kernel.type %q is not supported", t)
	}
	if s.Spec.Kernel.SigmaGiven() {
		s.Params.Fail("sigmas: kernel.sigma is not used by kernel selection; give the candidate widths in params.sigmas")
	}
	return append([]float64(nil), sig...)
}

// oksDefaultU is the paper's U: 15 for the logistic loss, 1 otherwise
// (docs/kernel-selection.md); oksStreamU instead of 1 on standardised streams.
func oksDefaultU(s *Setup) float64 {
	if s.Loss.Name() == "logistic" {
		return 15
	}
	return s.def(1, oksStreamU)
}

// oksDefaultHorizon is params.T when a stream does not give it: the horizon
// on which OKS's and IOKS's constants are tuned (docs/kernel-selection.md,
// "Parameters").
const oksDefaultHorizon = 10000

// oksReadHorizon reads params.T (integer >= 2; the paper's runs use T = dataset length).
func oksReadHorizon(s *Setup) float64 {
	return float64(s.Params.Int("T", oksDefaultHorizon, 2, 1<<40))
}
