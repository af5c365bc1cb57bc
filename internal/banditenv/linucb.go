package banditenv

// The non-kernel baseline of the bandit demo: LinUCB (Li, Chu, Langford,
// Schapire, "A contextual-bandit approach to personalized news article
// recommendation", WWW 2010, Sec. 3.1, Algorithm 1), with one linear model
// per user shared by all items, the items' feature vectors being the
// contexts: A_u = lambda I + sum x x', b_u = sum r x, theta_u = A_u^-1 b_u,
// and the chosen item maximizes theta_u'x + alpha sqrt(x' A_u^-1 x).
//
// LinUCBPlayer plays it on the offers of a ClickStream next to the
// recommender: the same users, candidate sets and click model, its own
// clicks.

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/kernelstream/kernelstream/models"
)

// LinUCB is one user's linear UCB model over d features.
type LinUCB struct {
	d     int
	alpha float64
	ainv  []float64 // A^-1, d x d row-major (kept symmetric)
	b     []float64 // sum r x
	theta []float64 // A^-1 b
	u     []float64 // scratch: A^-1 x
	n     int       // observations
}

// NewLinUCB is the model with no observation: A = lambda I, b = 0.
func NewLinUCB(d int, lambda, alpha float64) (*LinUCB, error) {
	if d < 1 || !(lambda > 0) || math.IsInf(lambda, 0) || !(alpha >= 0) || math.IsInf(alpha, 0) {
		return nil, fmt.Errorf("linucb: dim %d must be >= 1, lambda %v > 0 and alpha %v >= 0 finite", d, lambda, alpha)
	}
	m := &LinUCB{d: d, alpha: alpha, ainv: make([]float64, d*d), b: make([]float64, d), theta: make([]float64, d), u: make([]float64, d)}
	for i := 0; i < d; i++ {
		m.ainv[i*d+i] = 1 / lambda
	}
	return m, nil
}

// Score is theta'x and the width sqrt(x' A^-1 x) of x.
func (m *LinUCB) Score(x []float64) (mean, width float64) {
	q := 0.0
	for i := 0; i < m.d; i++ {
		row := m.ainv[i*m.d : (i+1)*m.d]
		s := 0.0
		for j, v := range row {
			s += v * x[j]
		}
		q += x[i] * s
		mean += m.theta[i] * x[i]
	}
	return mean, math.Sqrt(math.Max(q, 0))
}

// Choose is the index of the arm with the largest upper confidence bound
// theta'x + alpha sqrt(x' A^-1 x) (the first one on ties).
func (m *LinUCB) Choose(arms [][]float64) int {
	best, bestUCB := 0, math.Inf(-1)
	for k, x := range arms {
		mean, w := m.Score(x)
		if ucb := mean + m.alpha*w; ucb > bestUCB {
			best, bestUCB = k, ucb
		}
	}
	return best
}

// Observe adds reward r of arm x: A += x x' (A^-1 by the Sherman-Morrison
// formula, O(d^2)), b += r x, theta = A^-1 b.
func (m *LinUCB) Observe(x []float64, r float64) {
	d := m.d
	m.n++
	den := 1.0
	for i := 0; i < d; i++ {
		s := 0.0
		for j, v := range m.ainv[i*d : (i+1)*d] {
			s += v * x[j]
		}
		m.u[i] = s
		den += x[i] * s
	}
	for i := 0; i < d; i++ {
		for j := 0; j < d; j++ {
			m.ainv[i*d+j] -= m.u[i] * m.u[j] / den
		}
		m.b[i] += r * x[i]
	}
	for i := 0; i < d; i++ {
		s := 0.0
		for j, v := range m.ainv[i*d : (i+1)*d] {
			s += v * m.b[j]
		}
		m.theta[i] = s
	}
}

// N is the number of observations.
func (m *LinUCB) N() int { return m.n }

// AInv is a copy of A^-1 (row-major).
func (m *LinUCB) AInv() []float64 { return append([]float64(nil), m.ainv...) }

// Theta is a copy of theta = A^-1 b.
func (m *LinUCB) Theta() []float64 { return append([]float64(nil), m.theta...) }

// LinUCB settings of the demo's baseline: lambda 1 as in Algorithm 1
// (A_a initialized to I_d), and alpha 1, the constant radius the demo gives
// its kernel bandit (beta = 1; docs/bandits.md has the click rates of other
// alphas).
const (
	DefaultLinUCBLambda = 1.0
	DefaultLinUCBAlpha  = 1.0
)

// LinUCBPlayer plays LinUCB, one model per user, on the decisions of a
// ClickStream as Next emits them. Its click on its own choice is drawn from
// the environment's click model with a PRNG seeded by (seed, user,
// decision) alone, so the stream's records are unchanged and the player's
// figures do not depend on timing; its reward reaches the user's model when
// the audience's reward of the same decision reaches the recommender (just
// before the user's decision t + delay).
type LinUCBPlayer struct {
	e     *Clicks
	seed  uint64
	users []linucbUser
	arms  [][]float64 // scratch
}

type linucbUser struct {
	m       *LinUCB
	pending []linucbReward // by (due, t)
}

type linucbReward struct {
	due, item int
	r         float64
}

// NewLinUCBPlayer is a player of LinUCB(lambda, alpha) per user on e.
func (e *Clicks) NewLinUCBPlayer(seed uint64, lambda, alpha float64) (*LinUCBPlayer, error) {
	p := &LinUCBPlayer{e: e, seed: seed, users: make([]linucbUser, e.cfg.Users)}
	for u := range p.users {
		m, err := NewLinUCB(e.cfg.Dim, lambda, alpha)
		if err != nil {
			return nil, err
		}
		p.users[u].m = m
	}
	return p, nil
}

// Play chooses for the decision record r that s.Next just returned and
// draws the click; ok is false for a reward record (nothing to play).
func (p *LinUCBPlayer) Play(r *ClickRecord) (o Outcome, ok bool) {
	d := r.dec
	if r.Reward || d == nil {
		return Outcome{}, false
	}
	us := &p.users[d.u]
	// The rewards due before this decision, in the stream's order.
	k := 0
	for ; k < len(us.pending) && us.pending[k].due <= d.t; k++ {
		w := us.pending[k]
		us.m.Observe(p.e.items[w.item], w.r)
	}
	us.pending = us.pending[k:]

	p.arms = p.arms[:0]
	for _, i := range d.off.cands {
		p.arms = append(p.arms, p.e.items[i])
	}
	i := d.off.cands[us.m.Choose(p.arms)]
	prob := p.e.Prob(d.u, i)
	click := models.NewRand(models.KeySeed(p.seed, "linucb/"+p.e.users[d.u]+"/"+strconv.Itoa(d.t))).Float64() < prob
	rw := linucbReward{due: d.due, item: i}
	if click {
		rw.r = 1
	}
	at := sort.Search(len(us.pending), func(k int) bool { return us.pending[k].due > rw.due })
	us.pending = append(us.pending, linucbReward{})
	copy(us.pending[at+1:], us.pending[at:])
	us.pending[at] = rw
	rnd, best := p.e.offerRates(d.u, d.off.cands)
	return Outcome{User: d.u, T: d.t, Seq: d.seq, Item: i, Click: click, Prob: prob, Random: rnd, Best: best}, true
}
