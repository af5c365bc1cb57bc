package models

// What the two kernelized bandits, GPUCB and BKB, share: the parameters of
// the confidence radius and their defaults.

// Defaults of the radius parameters (docs/bandits.md, "Parameters").
const (
	banditDefaultXi    = 0.5 // rewards in [0,1] (clicks) are 1/2-sub-Gaussian (docs/bandits.md)
	banditDefaultDelta = 0.1
	banditDefaultF     = 1
	// banditDefaultLambda is the ridge: 1 (measured, docs/bandits.md) rather
	// than the GP reading lambda = xi^2, which a spec can still set.
	banditDefaultLambda = 1
	banditDefaultBeta   = 0.5 // constant radius: UCB = mean + beta Std (docs/bandits.md: measured)
)

// banditParams are the confidence-radius hyper-parameters both bandits read.
type banditParams struct {
	lambda, xi, delta, F float64
	beta                 float64 // constant multiplier of Std unless theory
	theory               bool    // radius "theory": the paper's beta_t
}

// readBanditParams reads the radius parameters. The default radius is the
// constant one (UCB = mean + beta Std): the theoretical radii are
// conservative by design and keep exploring for thousands of rounds
// (docs/bandits.md measures both); `"radius": "theory"` selects them.
func readBanditParams(p *Params) banditParams {
	var b banditParams
	b.xi = p.Float("xi", banditDefaultXi, 1e-6, 1e6)
	b.lambda = p.Float("lambda", banditDefaultLambda, 1e-12, 1e12)
	b.delta = p.Float("delta", banditDefaultDelta, 1e-12, 1)
	if b.delta <= 0 || b.delta >= 1 {
		p.Fail("delta = %v must be in (0, 1)", b.delta)
	}
	b.F = p.Float("F", banditDefaultF, 0, 1e12)
	b.theory = p.String("radius", "constant", "constant", "theory") == "theory"
	if b.theory && p.Has("beta") {
		p.Fail("beta is the constant radius: it cannot be combined with radius \"theory\"")
	}
	b.beta = p.Float("beta", banditDefaultBeta, 0, 1e12)
	return b
}
