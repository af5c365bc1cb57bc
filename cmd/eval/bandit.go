package main

import (
	"errors"

	"github.com/kernelstream/kernelstream/models"
)

// banditResult is the JSON line of `eval -bandit`.
type banditResult struct {
	Algorithm  string  `json:"algorithm"`
	Rounds     int     `json:"rounds"`
	Regret     float64 `json:"regret"`
	Seconds    float64 `json:"seconds"`
	Dictionary int     `json:"dictionary"`
}

// runBandit plays a synthetic kernel bandit (DESIGN.md: eval -bandit gp).
// Owned by the bandit work (issue 7), which replaces this body.
func runBandit(env string, spec models.Spec, arms, dim, rounds int, seed uint64) (banditResult, error) {
	return banditResult{}, errors.New("eval -bandit: the synthetic bandit is not built yet")
}
