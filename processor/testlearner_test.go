package processor

import (
	"math"

	"github.com/kernelstream/kernelstream/internal/linalg"
	"github.com/kernelstream/kernelstream/models"
)

// Test-only learners: cheap, deterministic, with a PRNG that Predict and
// Choose advance (so a replay that skipped or repeated a call would show in
// the state bytes). They let the pipeline tests run independently of the
// paper learners being written elsewhere.

// ptestLMS is a linear least-mean-squares regressor.
type ptestLMS struct {
	dim  int
	eta  float64
	w    []float64
	rng  models.Rand
	seen int
}

func init() {
	models.Register(models.Algorithm{Name: "ptest-lms", Losses: []string{"square", "hinge"}, Summary: "processor test learner",
		New: func(s *models.Setup) (models.Learner, error) {
			l := &ptestLMS{dim: s.Dim, eta: s.Params.Float("eta", 0.1, 0, 10), w: make([]float64, s.Dim)}
			l.rng.Seed(s.Seed)
			return l, nil
		}})
	models.Register(models.Algorithm{Name: "ptest-ucb", Losses: []string{"square"}, Summary: "processor test bandit",
		New: func(s *models.Setup) (models.Learner, error) {
			l := &ptestUCB{ptestLMS{dim: s.Dim, eta: 0.2, w: make([]float64, s.Dim)}}
			l.rng.Seed(s.Seed)
			return l, nil
		}})
}

func (l *ptestLMS) Predict(x []float64) models.Prediction {
	return models.Prediction{Value: linalg.Dot(l.w, x), Choice: -1, Prob: 1, Aux: l.rng.Float64()}
}

func (l *ptestLMS) Update(x []float64, p models.Prediction, y float64) error {
	g := l.eta * (y - linalg.Dot(l.w, x)) * (1 + p.Aux)
	for _, v := range x {
		if math.IsNaN(g*v) || math.IsInf(g*v, 0) {
			return models.ErrNumerical
		}
	}
	linalg.Axpy(g, x, l.w)
	l.seen++
	return nil
}

func (l *ptestLMS) Size() int { return l.seen }

func (l *ptestLMS) MarshalBinary() ([]byte, error) {
	w := models.NewStateWriter(nil, "ptest", 1)
	w.Floats(l.w)
	w.Rand(&l.rng)
	w.Int(l.seen)
	return w.Finish(), nil
}

func (l *ptestLMS) UnmarshalBinary(b []byte) error {
	r, _, err := models.NewStateReader(b, "ptest", 1)
	if err != nil {
		return err
	}
	w := r.Floats(nil)
	var rng models.Rand
	r.Rand(&rng)
	seen := r.Int()
	r.Check(len(w) == l.dim, "w length")
	if err := r.Err(); err != nil {
		return err
	}
	l.w, l.rng, l.seen = w, rng, seen
	return nil
}

// ptestUCB is a linear bandit with a random exploration bonus.
type ptestUCB struct{ ptestLMS }

func (b *ptestUCB) Choose(arms [][]float64) models.Decision {
	best := models.Decision{Arm: -1}
	for i, x := range arms {
		mean := linalg.Dot(b.w, x)
		std := b.rng.Float64()
		if ucb := mean + std; best.Arm < 0 || ucb > best.UCB {
			best = models.Decision{Arm: i, Mean: mean, Std: std, UCB: ucb}
		}
	}
	return best
}

func (b *ptestUCB) Observe(x []float64, reward float64) error {
	return b.Update(x, models.Prediction{}, reward)
}

// KernelWeights exposes w as if they were kernel weights (the optional
// capability exported as kernelstream_kernel_weight).
func (l *ptestLMS) KernelWeights() []float64 { return append([]float64(nil), l.w...) }
