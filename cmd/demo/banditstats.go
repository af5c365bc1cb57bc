package main

import (
	"fmt"

	"github.com/kernelstream/kernelstream/internal/banditenv"
)

// clickTally counts the outcomes of one player of the bandit demo (the
// consumer's model, or the in-process baseline) on a click stream.
type clickTally struct {
	n        int       // decisions played
	clicks   int       // clicks among them
	probSum  float64   // expected clicks of the choices made
	randSum  float64   // expected clicks of random choices on the same offers
	bestSum  float64   // expected clicks of the best candidates
	recent   []bool    // the last banditDemoWindow clicks, in play order (ring)
	bySeq    []int8    // click per plan position: -1 unknown, 0, 1
	probSeq  []float64 // click probability of the choice, per plan position
	prevN    int
	prevClks int
}

func newClickTally(n int) clickTally {
	t := clickTally{bySeq: make([]int8, n), probSeq: make([]float64, n)}
	for k := range t.bySeq {
		t.bySeq[k] = -1
	}
	return t
}

func (t *clickTally) add(o banditenv.Outcome) {
	t.n++
	c := int8(0)
	if o.Click {
		t.clicks++
		c = 1
	}
	t.probSum += o.Prob
	t.randSum += o.Random
	t.bestSum += o.Best
	if len(t.recent) < banditDemoWindow {
		t.recent = append(t.recent, o.Click)
	} else {
		t.recent[t.n%banditDemoWindow] = o.Click
	}
	t.bySeq[o.Seq], t.probSeq[o.Seq] = c, o.Prob
}

// rate is the click rate over all decisions played (0 before any).
func (t *clickTally) rate() float64 {
	if t.n == 0 {
		return 0
	}
	return float64(t.clicks) / float64(t.n)
}

// recentRate is the click rate over the last window.
func (t *clickTally) recentRate() float64 {
	if len(t.recent) == 0 {
		return 0
	}
	rc := 0
	for _, c := range t.recent {
		if c {
			rc++
		}
	}
	return float64(rc) / float64(len(t.recent))
}

// answered are the plan positions played, in plan order.
func (t *clickTally) answered() []int {
	var seqs []int
	for k, c := range t.bySeq {
		if c >= 0 {
			seqs = append(seqs, k)
		}
	}
	return seqs
}

// summary is the final line's figures over the plan positions seqs (all
// played by t): the click rate, and over the first and the last window the
// click rate and the expected click rate of the items chosen.
func (t *clickTally) summary(seqs []int) string {
	w := min(banditDemoWindow, max(len(seqs)/3, 1))
	rateOf := func(ks []int) (clicks, expected float64) {
		for _, k := range ks {
			clicks += float64(t.bySeq[k])
			expected += t.probSeq[k]
		}
		return clicks / float64(len(ks)), expected / float64(len(ks))
	}
	all, _ := rateOf(seqs)
	fc, fe := rateOf(seqs[:w])
	lc, le := rateOf(seqs[len(seqs)-w:])
	return fmt.Sprintf("%d decisions  click rate %.3f  first %d decisions: %.3f (expected %.3f)  last %d decisions: %.3f (expected %.3f)",
		len(seqs), all, w, fc, fe, w, lc, le)
}
