package banditenv

// The click environment of the consumer's bandit demo (`demo
// bandit`) and of its end-to-end tests: users choosing among recommended
// items, the recommender being kernelstream with one bandit learner per user.
//
// Construction (ours; docs/bandits.md maps BKB onto recommendation
// but P003 has no such experiment):
//   - U users, each with a hidden preference vector theta_u uniform on the
//     unit sphere of R^D;
//   - a catalogue of I items, each with a feature vector x_i uniform in
//     [-1,1]^D (what the decision records carry as the arms' x);
//   - the click probability of user u on item i depends on the audience:
//     "linear", a smooth function of their affinity,
//     p(u,i) = sigmoid(Bias + Scale <theta_u, x_i>), which any linear score
//     with theta_u's direction ranks exactly; or "ideal", each user likes
//     the items near an ideal point of its own, c_u uniform in
//     [-Spread, Spread]^D (inside the catalogue's cube),
//     p(u,i) = sigmoid(Bias - Scale ||x_i - c_u||^2) (with Peaks > 1 ideal
//     points, the nearest counts: a user with two tastes). This is the
//     ideal-point model of preference (Coombs, "Psychological scaling
//     without a unit of measurement", Psychological Review, 1950); its
//     score -||x - c||^2 = 2<c,x> - ||x||^2 - ||c||^2
//     is not linear in x, so no linear score over the features ranks the
//     candidates as the user does once c_u is inside the cube (an item on
//     the far side of c_u scores higher than one at c_u);
//   - decision t of user u offers C distinct items drawn uniformly from the
//     catalogue; the reward of the chosen item is 1 (click) with probability
//     p(u, item), else 0, and it arrives a little later: just before the
//     user's decision t + delay, delay uniform in 1..MaxDelay (after the
//     user's last decision for the last ones).
//
// Everything about decision t of user u (candidates, the uniform number
// that decides the click, the delay) is drawn from a PRNG seeded by (seed,
// u, t) alone, and the user of each decision from a PRNG seeded by seed:
// the records a user receives depend only on the choices made for that
// user. With a deterministic learner per user the whole closed loop
// (decision -> choice -> click -> reward -> next decision) is therefore
// deterministic, however the users' records interleave.

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/kernelstream/kernelstream/internal/wire"
	"github.com/kernelstream/kernelstream/models"
)

// ClickConfig describes a click environment. Zero fields take the defaults.
type ClickConfig struct {
	Users      int     // U (default 20)
	Items      int     // catalogue size I (default 500)
	Dim        int     // item feature dimension D (default 5)
	Candidates int     // items offered per decision C (default 10, at most Items)
	MaxDelay   int     // a reward arrives 1..MaxDelay decisions of its user later (default 3)
	Audience   string  // AudienceLinear (default) or AudienceIdeal
	Bias       float64 // click logit offset (default -2.5 linear, DefaultIdealBias ideal)
	Scale      float64 // click logit per unit of affinity, or per unit of squared distance (default 4 linear, DefaultIdealScale ideal)
	Peaks      int     // ideal: ideal points per user (default 1)
	Spread     float64 // ideal: the ideal points are uniform in [-Spread, Spread]^D (default DefaultIdealSpread, at most 1)
	// Decimals rounds every item feature to this many decimals (default 0:
	// full float64). The records print the features exactly ('g', -1), so
	// a rounded catalogue gives the short records of a real recommender
	// ("0.8994") while choices and replays stay exact.
	Decimals int
}

// Audiences: how a user's click probability depends on an item's features.
const (
	AudienceLinear = "linear" // sigmoid(Bias + Scale <theta_u, x>)
	AudienceIdeal  = "ideal"  // sigmoid(Bias - Scale min_k ||x - c_uk||^2)
)

// Defaults of ClickConfig.
const (
	DefaultClickUsers      = 20
	DefaultClickItems      = 500
	DefaultClickDim        = 5
	DefaultClickCandidates = 10
	DefaultClickMaxDelay   = 3
	DefaultClickBias       = -2.5
	DefaultClickScale      = 4.0
	DefaultIdealBias       = 3.0
	DefaultIdealScale      = 3.0
	DefaultIdealSpread     = 0.5
)

// Clicks is one drawn click environment.
type Clicks struct {
	cfg   ClickConfig
	seed  uint64
	prefs [][]float64 // theta_u
	ideal [][]float64 // ideal audience: user u's Peaks ideal points, concatenated
	items [][]float64 // x_i
	users []string    // routing keys
	ids   []string    // item ids
	// armJSON is each item's arm object of a decision record, encoded once:
	// formatting 100 candidates of dimension 16 per decision made the
	// decision benchmark's feeder cost as much CPU as the consumer.
	armJSON [][]byte
	// The expected click rates of choosing uniformly among the candidates
	// and of always choosing the best candidate, per offer (estimated once
	// from offers drawn like the stream's).
	randomRate, bestRate float64
}

// NewClicks draws an environment from seed.
func NewClicks(c ClickConfig, seed uint64) (*Clicks, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Users, DefaultClickUsers)
	def(&c.Items, DefaultClickItems)
	def(&c.Dim, DefaultClickDim)
	def(&c.Candidates, DefaultClickCandidates)
	def(&c.MaxDelay, DefaultClickMaxDelay)
	if c.Audience == "" {
		c.Audience = AudienceLinear
	}
	bias, scale := DefaultClickBias, DefaultClickScale
	if c.Audience == AudienceIdeal {
		bias, scale = DefaultIdealBias, DefaultIdealScale
		def(&c.Peaks, 1)
		if c.Spread == 0 {
			c.Spread = DefaultIdealSpread
		}
	}
	if c.Bias == 0 {
		c.Bias = bias
	}
	if c.Scale == 0 {
		c.Scale = scale
	}
	switch {
	case c.Audience != AudienceLinear && c.Audience != AudienceIdeal:
		return nil, fmt.Errorf("click environment: audience %q: want %s or %s", c.Audience, AudienceLinear, AudienceIdeal)
	case c.Audience == AudienceIdeal && (c.Peaks < 1 || !(c.Spread > 0 && c.Spread <= 1)):
		return nil, fmt.Errorf("click environment: ideal audience: peaks %d must be >= 1 and spread %v in (0, 1]", c.Peaks, c.Spread)
	case c.Decimals < 0 || c.Decimals > 15:
		return nil, fmt.Errorf("click environment: decimals %d must be in [0, 15]", c.Decimals)
	case c.Users < 1 || c.Items < 1 || c.Dim < 1 || c.MaxDelay < 1:
		return nil, fmt.Errorf("click environment: users %d, items %d, dim %d and max delay %d must be >= 1", c.Users, c.Items, c.Dim, c.MaxDelay)
	case c.Candidates < 1 || c.Candidates > c.Items:
		return nil, fmt.Errorf("click environment: candidates %d must be in [1, items %d]", c.Candidates, c.Items)
	case math.IsNaN(c.Bias) || math.IsInf(c.Bias, 0) || math.IsNaN(c.Scale) || math.IsInf(c.Scale, 0):
		return nil, fmt.Errorf("click environment: bias %v and scale %v must be finite", c.Bias, c.Scale)
	}
	r := models.NewRand(seed)
	e := &Clicks{cfg: c, seed: seed}
	uw, iw := len(strconv.Itoa(c.Users-1)), len(strconv.Itoa(c.Items-1))
	for u := 0; u < c.Users; u++ {
		theta := make([]float64, c.Dim)
		for { // uniform on the sphere: a normalized Gaussian vector
			n := 0.0
			for j := range theta {
				theta[j] = r.Norm()
				n += theta[j] * theta[j]
			}
			if n > 1e-12 {
				n = math.Sqrt(n)
				for j := range theta {
					theta[j] /= n
				}
				break
			}
		}
		e.prefs = append(e.prefs, theta)
		e.users = append(e.users, fmt.Sprintf("user-%0*d", uw, u))
	}
	for i := 0; i < c.Items; i++ {
		x := make([]float64, c.Dim)
		for j := range x {
			x[j] = 2*r.Float64() - 1
			if c.Decimals > 0 {
				p := math.Pow(10, float64(c.Decimals))
				x[j] = math.Round(x[j]*p) / p
			}
		}
		e.items = append(e.items, x)
		e.ids = append(e.ids, fmt.Sprintf("item-%0*d", iw, i))
		e.armJSON = append(e.armJSON, wire.AppendArm(nil, e.ids[i], x))
	}
	if c.Audience == AudienceIdeal {
		// From a PRNG of their own, after the catalogue: both audiences
		// share the users' keys, the items and the offers.
		ri := models.NewRand(seed ^ 0x1dea_9017)
		for u := 0; u < c.Users; u++ {
			pts := make([]float64, c.Peaks*c.Dim)
			for j := range pts {
				pts[j] = c.Spread * (2*ri.Float64() - 1)
			}
			e.ideal = append(e.ideal, pts)
		}
	}
	// Baselines, from 4000 offers per user drawn like the stream's (their
	// own seeds, so the estimate does not depend on the stream's length),
	// and at most 80,000 in all: the decision benchmark's 10,000 users would
	// otherwise cost 40 million offers before the first record.
	probe := min(4000, max(1, 80000/c.Users))
	var sumRand, sumBest float64
	var o offer
	for u := 0; u < c.Users; u++ {
		for t := 0; t < probe; t++ {
			e.draw(&o, u, -1-t)
			rnd, best := e.offerRates(u, o.cands)
			sumRand += rnd
			sumBest += best
		}
	}
	e.randomRate = sumRand / float64(c.Users*probe)
	e.bestRate = sumBest / float64(c.Users*probe)
	return e, nil
}

// Config is the configuration with its defaults filled in.
func (e *Clicks) Config() ClickConfig { return e.cfg }

// User is the routing key of user u.
func (e *Clicks) User(u int) string { return e.users[u] }

// ItemID is the arm id of item i.
func (e *Clicks) ItemID(i int) string { return e.ids[i] }

// Item is the feature vector of item i (shared; do not modify).
func (e *Clicks) Item(i int) []float64 { return e.items[i] }

// Prob is the click probability of user u on item i.
func (e *Clicks) Prob(u, i int) float64 {
	return 1 / (1 + math.Exp(-e.Logit(u, i)))
}

// Logit is the click logit of user u on item i: Bias + Scale <theta_u, x_i>
// (linear audience) or Bias - Scale min_k ||x_i - c_uk||^2 (ideal).
func (e *Clicks) Logit(u, i int) float64 {
	x := e.items[i]
	if e.cfg.Audience == AudienceIdeal {
		d2 := math.Inf(1)
		for pts := e.ideal[u]; len(pts) > 0; pts = pts[e.cfg.Dim:] {
			s := 0.0
			for j, c := range pts[:e.cfg.Dim] {
				s += (x[j] - c) * (x[j] - c)
			}
			d2 = math.Min(d2, s)
		}
		return e.cfg.Bias - e.cfg.Scale*d2
	}
	a := 0.0
	for j, v := range e.prefs[u] {
		a += v * x[j]
	}
	return e.cfg.Bias + e.cfg.Scale*a
}

// Model describes the click probability, for people: the formula with the
// configuration's numbers.
func (e *Clicks) Model() string {
	c := e.cfg
	if c.Audience == AudienceIdeal {
		near := "the user's ideal point"
		if c.Peaks > 1 {
			near = fmt.Sprintf("the nearest of the user's %d ideal points, each", c.Peaks)
		}
		return fmt.Sprintf("sigmoid(%g - %g ||item - c_u||^2), c_u %s uniform in [-%g,%g]^%d", c.Bias, c.Scale, near, c.Spread, c.Spread, c.Dim)
	}
	return fmt.Sprintf("sigmoid(%g + %g <user preference, item>), preferences uniform on the unit sphere", c.Bias, c.Scale)
}

// Ideal is ideal point k of user u (ideal audience; shared, do not modify).
func (e *Clicks) Ideal(u, k int) []float64 {
	return e.ideal[u][k*e.cfg.Dim : (k+1)*e.cfg.Dim]
}

// RandomRate is the expected click rate of choosing uniformly at random
// among the offered candidates (users equally likely).
func (e *Clicks) RandomRate() float64 { return e.randomRate }

// BestRate is the expected click rate of always choosing the candidate with
// the highest click probability (the oracle that knows theta_u or c_u).
func (e *Clicks) BestRate() float64 { return e.bestRate }

// offerRates are the mean and the max click probability over cands.
func (e *Clicks) offerRates(u int, cands []int) (mean, best float64) {
	for _, i := range cands {
		p := e.Prob(u, i)
		mean += p
		best = math.Max(best, p)
	}
	return mean / float64(len(cands)), best
}

// offer is everything drawn for decision t of user u.
type offer struct {
	cands []int   // candidate items, in offer order
	click float64 // uniform in [0,1): click iff click < p(u, chosen)
	delay int     // 1..MaxDelay
}

// draw fills o for decision t of user u from a PRNG seeded by (seed, u, t).
func (e *Clicks) draw(o *offer, u, t int) {
	r := models.NewRand(models.KeySeed(e.seed, e.users[u]+"/"+strconv.Itoa(t)))
	o.cands = o.cands[:0]
	for len(o.cands) < e.cfg.Candidates { // rejection: C is much smaller than I
		i := r.Intn(e.cfg.Items)
		dup := false
		for _, c := range o.cands {
			dup = dup || c == i
		}
		if !dup {
			o.cands = append(o.cands, i)
		}
	}
	o.click = r.Float64()
	o.delay = 1 + r.Intn(e.cfg.MaxDelay)
}

// ClickRecord is one input record of the click stream.
type ClickRecord struct {
	Key, Value []byte
	ID         string        // the decision id (a reward carries its decision's id)
	Reward     bool          // a reward record {"id","reward","arm"}; else a decision {"id","arms"}
	dec        *openDecision // the decision (LinUCBPlayer.Play reads its offer)
}

// Outcome is what the environment makes of a choice.
type Outcome struct {
	User, T int // user and the user's decision index
	Seq     int // the decision's position in the stream's plan (0-based)
	Item    int
	Click   bool
	Prob    float64 // click probability of the chosen item
	Random  float64 // expected click rate of a uniform choice among the candidates
	Best    float64 // click probability of the best candidate
}

// ClickStream is the closed loop of n decisions: it yields the records to
// produce (Next) and learns the choices made from the output topic
// (Choose). A user's reward waits for the choice of its decision, and the
// user's later decisions wait for the rewards due before them, so each
// user's record sequence is fixed; Next returns false while every
// remaining record waits for a choice.
type ClickStream struct {
	e        *Clicks
	plan     []int // user of each planned decision
	done     []bool
	first    int // first plan position not yet emitted
	users    []userState
	open     map[string]*openDecision // emitted decisions, until their reward is emitted
	blocked  []int                    // scan generation in which a user was found blocked
	scan     int
	decided  int // decisions emitted
	rewarded int // rewards emitted
	buf      offer
	arms     [][]byte // the arms of the decision being encoded
}

type userState struct {
	total   int             // decisions planned for the user
	next    int             // the user's next decision index
	pending []*openDecision // emitted decisions waiting to emit their reward, by (due, t)
}

type openDecision struct {
	id        string
	u, t, seq int
	due       int // the reward goes just before the user's decision `due`
	off       offer
	chosen    int // candidate index, -1 until known
}

// Stream plans n decisions (users drawn uniformly at random from the seed).
func (e *Clicks) Stream(n int) *ClickStream {
	s := &ClickStream{e: e, plan: make([]int, n), done: make([]bool, n), users: make([]userState, e.cfg.Users),
		open: map[string]*openDecision{}, blocked: make([]int, e.cfg.Users)}
	r := models.NewRand(e.seed ^ 0x5eed_c11c)
	for g := range s.plan {
		u := r.Intn(e.cfg.Users)
		s.plan[g] = u
		s.users[u].total++
	}
	return s
}

// Len is the number of planned decisions.
func (s *ClickStream) Len() int { return len(s.plan) }

// Emitted counts the decision and reward records returned by Next so far.
func (s *ClickStream) Emitted() (decisions, rewards int) { return s.decided, s.rewarded }

// Done reports whether every decision and every reward has been emitted.
func (s *ClickStream) Done() bool { return s.decided == len(s.plan) && s.rewarded == len(s.plan) }

// scanWindow bounds how far past the first unemitted decision Next looks
// for a user that is not blocked.
const scanWindow = 4096

// Next fills r with the next record that can be produced now.
func (s *ClickStream) Next(r *ClickRecord) bool {
	s.scan++
	for g := s.first; g < len(s.plan) && g < s.first+scanWindow; g++ {
		if s.done[g] {
			continue
		}
		u := s.plan[g]
		if s.blocked[u] == s.scan {
			continue
		}
		us := &s.users[u]
		if d := s.dueReward(us, us.next); d != nil {
			if d.chosen < 0 {
				s.blocked[u] = s.scan
				continue
			}
			s.emitReward(r, us, d)
			return true
		}
		s.emitDecision(r, us, u, g)
		return true
	}
	// Users past their last decision: their remaining rewards, in order.
	for u := range s.users {
		us := &s.users[u]
		if us.next < us.total || len(us.pending) == 0 {
			continue
		}
		if d := us.pending[0]; d.chosen >= 0 {
			s.emitReward(r, us, d)
			return true
		}
	}
	return false
}

// dueReward is the user's first pending reward if it is due before decision t.
func (s *ClickStream) dueReward(us *userState, t int) *openDecision {
	if len(us.pending) > 0 && us.pending[0].due <= t {
		return us.pending[0]
	}
	return nil
}

func (s *ClickStream) emitDecision(r *ClickRecord, us *userState, u, g int) {
	t := us.next
	d := &openDecision{u: u, t: t, seq: g, chosen: -1}
	// Its own candidates, sized once: the decision keeps them until its
	// reward (a benchmark's feeder shares the consumer's heap).
	d.off.cands = make([]int, 0, s.e.cfg.Candidates)
	s.e.draw(&d.off, u, t)
	d.due = min(t+d.off.delay, us.total)
	d.id = s.e.users[u] + "-" + strconv.Itoa(t)
	s.open[d.id] = d
	// Keep pending sorted by (due, t): t grows, so insert after equal dues.
	i := sort.Search(len(us.pending), func(i int) bool { return us.pending[i].due > d.due })
	us.pending = append(us.pending, nil)
	copy(us.pending[i+1:], us.pending[i:])
	us.pending[i] = d
	us.next++
	s.done[g] = true
	for s.first < len(s.plan) && s.done[s.first] {
		s.first++
	}
	s.decided++

	r.Key = append(r.Key[:0], s.e.users[u]...)
	r.ID, r.Reward, r.dec = d.id, false, d
	s.arms = s.arms[:0]
	for _, i := range d.off.cands {
		s.arms = append(s.arms, s.e.armJSON[i])
	}
	r.Value = wire.AppendDecision(r.Value[:0], d.id, s.arms)
}

func (s *ClickStream) emitReward(r *ClickRecord, us *userState, d *openDecision) {
	us.pending = us.pending[1:]
	delete(s.open, d.id)
	s.rewarded++
	item := d.off.cands[d.chosen]
	reward := 0.0
	if d.off.click < s.e.Prob(d.u, item) {
		reward = 1
	}
	r.Key = append(r.Key[:0], s.e.users[d.u]...)
	r.ID, r.Reward, r.dec = d.id, true, d
	r.Value = wire.AppendReward(r.Value[:0], d.id, reward, s.e.ids[item])
}

// Choose records the item the recommender chose for decision id (the
// output's "arm", without JSON quotes) and returns the outcome. known is
// false for a repeated answer (an output re-emitted after a restart) or an
// answer to a decision whose reward is already emitted; an item that was
// not offered, or an id never emitted, is an error.
func (s *ClickStream) Choose(id, item string) (o Outcome, known bool, err error) {
	d, ok := s.open[id]
	if !ok {
		if u, t, ok := s.parseID(id); ok && t < s.users[u].next {
			return Outcome{}, false, nil // answered and rewarded already
		}
		return Outcome{}, false, fmt.Errorf("click stream: answer to unknown decision %q", id)
	}
	idx := -1
	for k, i := range d.off.cands {
		if s.e.ids[i] == item {
			idx = k
		}
	}
	if idx < 0 {
		return Outcome{}, false, fmt.Errorf("click stream: decision %s: item %q was not offered", id, item)
	}
	if d.chosen >= 0 {
		if d.chosen != idx {
			return Outcome{}, false, fmt.Errorf("click stream: decision %s answered %s, then %s", id, s.e.ids[d.off.cands[d.chosen]], item)
		}
		return Outcome{}, false, nil
	}
	d.chosen = idx
	i := d.off.cands[idx]
	p := s.e.Prob(d.u, i)
	rnd, best := s.e.offerRates(d.u, d.off.cands)
	return Outcome{User: d.u, T: d.t, Seq: d.seq, Item: i, Click: d.off.click < p, Prob: p, Random: rnd, Best: best}, true, nil
}

func (s *ClickStream) parseID(id string) (u, t int, ok bool) {
	k := strings.LastIndexByte(id, '-')
	if k < 0 {
		return 0, 0, false
	}
	t, err := strconv.Atoi(id[k+1:])
	if err != nil {
		return 0, 0, false
	}
	for u, name := range s.e.users {
		if name == id[:k] {
			return u, t, true
		}
	}
	return 0, 0, false
}
