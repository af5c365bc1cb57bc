// Package models holds kernelstream's online kernel learners, the kernels
// and losses they share, the registry that builds a learner from a model
// spec, and the versioned binary encoding of learner state.
//
// # Learners
//
// Every learner implements [Learner]: Predict comes first, Update when the
// label is known, and its whole state marshals to a checksummed blob. The
// bandits also implement [Bandit] (Choose among candidate arms, Observe a
// reward); the processor finds that capability by type assertion. [New]
// builds the learner of one routing key from a [Spec]; the key seeds its
// [Rand], so the same spec, key and records give the same predictions and
// the same state bytes on every run.
//
//	family (paper)                                        algorithms                          docs
//	sublinear kernel regression                           kogd aogd-ald kons nons-ald         docs/regression.md
//	  Li & Liao, ICML 2023
//	FORKS, second-order learning on an incremental sketch  forks fogd nogd                     docs/forks.md
//	  Wen et al., arXiv 2410.11188
//	Kernel-AWV and PKAWV (Taylor or Nystrom features)     kawv pkawv-taylor pkawv-nystrom     docs/pkawv.md
//	  Jezequel, Gaillard & Rudi, NeurIPS 2019
//	budgeted kernelized bandits                           bkb gp-ucb                          docs/bandits.md
//	  Calandriello et al., COLT 2019
//	online kernel selection under bandit feedback         oks oks++ ioks rf-oks++ rf-ioks     docs/kernel-selection.md
//	  Li & Liao, ECML-PKDD 2022
//
// Each algorithm's file opens with the paper's sections and equations it
// implements and every reconstruction choice made where the paper is silent.
//
// # Costs
//
// Per-record costs are stated in each file (J, B, D or m is the learner's
// budget: dictionary size, support vectors, random features or inducing
// points; d the input dimension). Hot paths write into buffers the learner
// owns and allocate nothing per record; the README lists the measured
// figures.
//
// # Errors
//
// A spec that names an unknown algorithm, parameter or out-of-range value is
// an [ErrSpec] error naming the field; an update that would leave non-finite
// numbers in the state returns [ErrNumerical] and keeps the previous state; a
// truncated, corrupted or foreign state blob is an [ErrState] error, never a
// panic.
package models
