package banditenv

import (
	"fmt"
	"math"
	"os"
	"reflect"
	"testing"

	"github.com/kernelstream/kernelstream/models"
)

// invert is Gauss-Jordan elimination with partial pivoting of the n x n
// row-major a (a direct inverse, to check Sherman-Morrison against).
func invert(t *testing.T, a []float64, n int) []float64 {
	t.Helper()
	m := append([]float64(nil), a...)
	inv := make([]float64, n*n)
	for i := 0; i < n; i++ {
		inv[i*n+i] = 1
	}
	for c := 0; c < n; c++ {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(m[r*n+c]) > math.Abs(m[p*n+c]) {
				p = r
			}
		}
		if m[p*n+c] == 0 {
			t.Fatal("singular matrix")
		}
		for j := 0; j < n; j++ {
			m[c*n+j], m[p*n+j] = m[p*n+j], m[c*n+j]
			inv[c*n+j], inv[p*n+j] = inv[p*n+j], inv[c*n+j]
		}
		f := m[c*n+c]
		for j := 0; j < n; j++ {
			m[c*n+j] /= f
			inv[c*n+j] /= f
		}
		for r := 0; r < n; r++ {
			if r == c {
				continue
			}
			g := m[r*n+c]
			for j := 0; j < n; j++ {
				m[r*n+j] -= g * m[c*n+j]
				inv[r*n+j] -= g * inv[c*n+j]
			}
		}
	}
	return inv
}

// TestLinUCBUpdate: after n observations, A^-1 kept by Sherman-Morrison
// equals the direct inverse of lambda I + sum x x', theta equals
// (lambda I + sum x x')^-1 sum r x, and Score's width is sqrt(x' A^-1 x).
func TestLinUCBUpdate(t *testing.T) {
	for _, c := range []struct {
		d      int
		lambda float64
		n      int
		scale  float64 // of the features
	}{
		{1, 1, 5, 1},
		{3, 0.25, 40, 1},
		{5, 1, 1000, 1},
		{8, 0.01, 200, 3},
	} {
		t.Run(fmt.Sprintf("d%d_lambda%g_n%d", c.d, c.lambda, c.n), func(t *testing.T) {
			m, err := NewLinUCB(c.d, c.lambda, 1)
			if err != nil {
				t.Fatal(err)
			}
			r := models.NewRand(uint64(c.d*1000 + c.n))
			a := make([]float64, c.d*c.d)
			b := make([]float64, c.d)
			for i := 0; i < c.d; i++ {
				a[i*c.d+i] = c.lambda
			}
			for k := 0; k < c.n; k++ {
				x := make([]float64, c.d)
				for j := range x {
					x[j] = c.scale * (2*r.Float64() - 1)
				}
				rw := float64(r.Intn(2))
				m.Observe(x, rw)
				for i := 0; i < c.d; i++ {
					for j := 0; j < c.d; j++ {
						a[i*c.d+j] += x[i] * x[j]
					}
					b[i] += rw * x[i]
				}
			}
			want := invert(t, a, c.d)
			got := m.AInv()
			for k := range want {
				if math.Abs(got[k]-want[k]) > 1e-9*(1+math.Abs(want[k])) {
					t.Fatalf("A^-1[%d][%d] = %v, direct inverse %v", k/c.d, k%c.d, got[k], want[k])
				}
			}
			theta := m.Theta()
			x := make([]float64, c.d)
			for i := range x {
				x[i] = float64(i+1) / float64(c.d)
			}
			wantMean, q := 0.0, 0.0
			for i := 0; i < c.d; i++ {
				s, w := 0.0, 0.0
				for j := 0; j < c.d; j++ {
					s += want[i*c.d+j] * b[j]
					w += want[i*c.d+j] * x[j]
				}
				if math.Abs(theta[i]-s) > 1e-9*(1+math.Abs(s)) {
					t.Fatalf("theta[%d] = %v, direct %v", i, theta[i], s)
				}
				wantMean += s * x[i]
				q += x[i] * w
			}
			mean, width := m.Score(x)
			if math.Abs(mean-wantMean) > 1e-9 || math.Abs(width-math.Sqrt(q)) > 1e-9 {
				t.Errorf("Score = %v, %v; direct %v, %v", mean, width, wantMean, math.Sqrt(q))
			}
		})
	}
	if _, err := NewLinUCB(0, 1, 1); err == nil {
		t.Error("dim 0 accepted")
	}
	if _, err := NewLinUCB(2, 0, 1); err == nil {
		t.Error("lambda 0 accepted")
	}
	if _, err := NewLinUCB(2, 1, math.NaN()); err == nil {
		t.Error("alpha NaN accepted")
	}
}

// TestLinUCBChoose: the chosen arm maximizes theta'x + alpha width.
func TestLinUCBChoose(t *testing.T) {
	// One observation of arm (1,0) with reward 1 (lambda 1): theta = (1/2, 0),
	// A^-1 = diag(1/2, 1); widths sqrt(1/2) for (1,0), 1 for (0,1).
	arms := [][]float64{{0, 0}, {1, 0}, {0, 1}}
	for _, c := range []struct {
		alpha float64
		want  int
	}{
		{0, 1},   // 0.5 against 0
		{0.5, 1}, // 0.5 + 0.354 against 0.5
		{2, 2},   // 0.5 + 1.414 against 2
	} {
		m, _ := NewLinUCB(2, 1, c.alpha)
		if got := m.Choose(arms); got != 1 && c.alpha > 0 || got != 0 && c.alpha == 0 {
			t.Errorf("alpha %g, no observation: chose %d (want the widest, 1, or the first on ties, 0)", c.alpha, got)
		}
		m.Observe([]float64{1, 0}, 1)
		if got := m.Choose(arms); got != c.want {
			t.Errorf("alpha %g: chose %d, want %d", c.alpha, got, c.want)
		}
	}
}

// playLinUCB runs n decisions of e, the recommender always taking the first
// candidate, with a LinUCB player alongside; it returns the player's clicks
// and expected click rates by plan position, the random-choice rates, and
// each user's records.
func playLinUCB(t *testing.T, e *Clicks, n int, lambda, alpha float64, withPlayer bool) (clicks []bool, prob, random []float64, byKey map[string][]string) {
	t.Helper()
	p, err := e.NewLinUCBPlayer(7, lambda, alpha)
	if err != nil {
		t.Fatal(err)
	}
	clicks, prob, random, byKey = make([]bool, n), make([]float64, n), make([]float64, n), map[string][]string{}
	s := e.Stream(n)
	var r ClickRecord
	played := 0
	dues := map[int][]int{} // user -> due of each of its decisions so far
	for s.Next(&r) {
		byKey[string(r.Key)] = append(byKey[string(r.Key)], string(r.Value))
		if r.Reward {
			continue
		}
		if withPlayer {
			o, ok := p.Play(&r)
			if !ok {
				t.Fatalf("decision %s not played", r.ID)
			}
			clicks[o.Seq], prob[o.Seq], random[o.Seq] = o.Click, o.Prob, o.Random
			played++
			// The user's model has learned exactly the rewards due by now.
			due := 0
			for _, d := range dues[o.User] {
				if d <= o.T {
					due++
				}
			}
			if got := p.users[o.User].m.N(); got != due {
				t.Fatalf("decision %s: the model learned %d rewards, %d were due", r.ID, got, due)
			}
			dues[o.User] = append(dues[o.User], r.dec.due)
		}
		if _, known, err := s.Choose(r.ID, e.ItemID(r.dec.off.cands[0])); !known || err != nil {
			t.Fatalf("Choose(%s): %v %v", r.ID, known, err)
		}
	}
	if !s.Done() || withPlayer && played != n {
		t.Fatalf("stream done %v, %d decisions played of %d", s.Done(), played, n)
	}
	return clicks, prob, random, byKey
}

// TestLinUCBPlayerLearns: LinUCB per user, played on the click streams,
// clicks over the last 1000 of 3000 decisions clearly above the random
// choice of the same offers (the click probability is increasing in the
// linear affinity <theta_u, x>, so a linear model ranks the items right);
// a second run gives the same clicks (seeded), and the player does not
// change the stream's records.
func TestLinUCBPlayerLearns(t *testing.T) {
	for _, c := range []struct {
		name   string
		cfg    ClickConfig
		margin float64 // last 1000 minus random, at least
	}{
		{"linear", ClickConfig{}, 0.4},
		{"dim3", ClickConfig{Dim: 3, Candidates: 5, MaxDelay: 6}, 0.25},
		{"flat", ClickConfig{Users: 10, Scale: 1.5, Bias: -1}, 0.2},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := NewClicks(c.cfg, 2)
			if err != nil {
				t.Fatal(err)
			}
			const n, w = 3000, 1000
			clicks, prob, random, byKey := playLinUCB(t, e, n, DefaultLinUCBLambda, DefaultLinUCBAlpha, true)
			first, last := rate(clicks[:w]), rate(clicks[n-w:])
			rnd := mean(random[n-w:])
			t.Logf("random %.3f best %.3f; linucb clicks: first %d %.3f, last %d %.3f (expected %.3f)", e.RandomRate(), e.BestRate(), w, first, w, last, mean(prob[n-w:]))
			if last < rnd+c.margin || mean(prob[n-w:]) < mean(prob[:w]) {
				t.Errorf("linucb click rate over the last %d decisions %.3f, random %.3f (want + %.2f); expected first %.3f last %.3f", w, last, rnd, c.margin, mean(prob[:w]), mean(prob[n-w:]))
			}
			again, _, _, _ := playLinUCB(t, e, n, DefaultLinUCBLambda, DefaultLinUCBAlpha, true)
			if !reflect.DeepEqual(clicks, again) {
				t.Error("two runs of the player differ")
			}
			if _, _, _, alone := playLinUCB(t, e, n, DefaultLinUCBLambda, DefaultLinUCBAlpha, false); !reflect.DeepEqual(byKey, alone) {
				t.Error("the stream's records differ with and without the player")
			}
		})
	}
}

// TestLinUCBTuning prints the player's click rates on the demo's audience
// for several alphas and lambdas (KS_LINUCB_TUNE=1, KS_CLICK_N decisions,
// KS_CLICK_AUDIENCE=linear or ideal).
func TestLinUCBTuning(t *testing.T) {
	if os.Getenv("KS_LINUCB_TUNE") == "" {
		t.Skip("set KS_LINUCB_TUNE=1")
	}
	e, err := NewClicks(ClickConfig{Audience: os.Getenv("KS_CLICK_AUDIENCE")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	n := 20000
	fmt.Sscan(os.Getenv("KS_CLICK_N"), &n)
	t.Logf("random %.3f best %.3f", e.RandomRate(), e.BestRate())
	for _, lambda := range []float64{0.25, 1} {
		for _, alpha := range []float64{0, 0.25, 1, 2.22} {
			clicks, prob, _, _ := playLinUCB(t, e, n, lambda, alpha, true)
			t.Logf("lambda %g alpha %g: all %.3f first 1000 %.3f last 1000 %.3f (expected %.3f)", lambda, alpha, rate(clicks), rate(clicks[:1000]), rate(clicks[n-1000:]), mean(prob[n-1000:]))
		}
	}
}
