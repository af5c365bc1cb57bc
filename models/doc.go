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
// Each algorithm is one exported type, named after it, whose documentation
// says what it is, its cost per record, its parameters and their defaults,
// and the paper it implements (go doc models.NONSALD). The types are built
// by [New] from a spec naming the algorithm, never directly; with online
// scaling (the default for most specs) New returns them wrapped.
//
//	algorithm     type          paper                      docs
//	kogd          KOGD          [Li & Liao 2023]           docs/regression.md
//	aogd-ald      AOGDALD       [Li & Liao 2023]           docs/regression.md
//	kons          KONS          [Li & Liao 2023]           docs/regression.md
//	nons-ald      NONSALD       [Li & Liao 2023]           docs/regression.md
//	forks         FORKS         [Wen et al. 2024]          docs/forks.md
//	fogd          FOGD          [Lu et al. 2016]           docs/forks.md
//	nogd          NOGD          [Lu et al. 2016]           docs/forks.md
//	kawv          KAWV          [Jézéquel et al. 2019]     docs/pkawv.md
//	pkawv-taylor  PKAWVTaylor   [Jézéquel et al. 2019]     docs/pkawv.md
//	pkawv-nystrom PKAWVNystrom  [Jézéquel et al. 2019]     docs/pkawv.md
//	gp-ucb        GPUCB         [Calandriello et al. 2019] docs/bandits.md
//	bkb           BKB           [Calandriello et al. 2019] docs/bandits.md
//	oks           OKS           [Li & Liao 2022]           docs/kernel-selection.md
//	oks++         OKSPlus       [Li & Liao 2022]           docs/kernel-selection.md
//	ioks          IOKS          [Li & Liao 2022]           docs/kernel-selection.md
//	rf-oks++      RFOKSPlus     [Li & Liao 2022]           docs/kernel-selection.md
//	rf-ioks       RFIOKS        [Li & Liao 2022]           docs/kernel-selection.md
//
// Pieces that several algorithms share live in files named for what they
// are: ald.go (the ALD dictionary of AOGD-ALD and NONS-ALD), budget.go (the
// budgeted KOGD stage of FORKS and NOGD), tisvd.go (FORKS' incremental
// eigen-decomposition), taylor.go (PKAWV-Taylor's features), bandit.go (the
// bandits' radius), oks_learner.go and oks_arms.go (the kernel selectors),
// memo.go and scratch.go (the hot paths' reuse of work and buffers).
//
// # Parameters
//
// Each algorithm's type lists the spec params it reads and their defaults.
// Where two are given, as "U (2; stream 8)", the first is the paper's
// default, for data scaled offline as the papers scale it (scale "none"),
// and the second applies when online scaling standardises the stream:
// [Setup].StreamX for kernel widths, budgets and step sizes, [Setup].StreamY
// for bounds on the target such as U. The stream defaults were chosen by
// measurement on raw streams (README, "defaults per algorithm").
//
// # Costs
//
// Per-record costs are stated on each algorithm's type (J, B, D or m is the
// learner's budget: dictionary size, support vectors, random features or
// inducing points; d the input dimension; t the records seen). Hot paths
// write into buffers the learner owns and allocate nothing per record; the
// README lists the measured figures.
//
// # Errors
//
// A spec that names an unknown algorithm, parameter or out-of-range value is
// an [ErrSpec] error naming the field; an update that would leave non-finite
// numbers in the state returns [ErrNumerical] and keeps the previous state; a
// truncated, corrupted or foreign state blob is an [ErrState] error, never a
// panic.
//
// # References
//
// The documentation cites these works by the key in brackets, followed by
// the section, algorithm or equation: [Li & Liao 2023, Alg. 2, eq. 7] is
// equation (7) of Algorithm 2 of the first paper below.
//
// The five papers the package implements:
//
//   - [Li & Liao 2023] J. Li and S. Liao. Nearly Optimal Algorithms with
//     Sublinear Computational Complexity for Online Kernel Regression.
//     International Conference on Machine Learning (ICML), 2023. KOGD,
//     AOGD-ALD, KONS, NONS-ALD.
//   - [Wen et al. 2024] D. Wen, X. Zhang, Z. Wei, C. Hou, S. Li and W. Zhang.
//     Fast Second-Order Online Kernel Learning Through Incremental Matrix
//     Sketching and Decomposition. arXiv:2410.11188 (version 2), 2024. FORKS,
//     TISVD; FOGD and NOGD are its baselines.
//   - [Jézéquel et al. 2019] R. Jézéquel, P. Gaillard and A. Rudi. Efficient
//     online learning with kernels for adversarial large scale problems.
//     Advances in Neural Information Processing Systems (NeurIPS), 2019.
//     Kernel-AWV, PKAWV with Taylor or Nyström features.
//   - [Calandriello et al. 2019] D. Calandriello, L. Carratino, A. Lazaric,
//     M. Valko and L. Rosasco. Gaussian process optimization with adaptive
//     sketching: scalable and no regret. Conference on Learning Theory
//     (COLT), 2019. BKB, GP-UCB.
//   - [Li & Liao 2022] J. Li and S. Liao. Improved Regret Bounds for Online
//     Kernel Selection under Bandit Feedback. European Conference on Machine
//     Learning and Principles and Practice of Knowledge Discovery in
//     Databases (ECML-PKDD), 2022. OKS, OKS++, IOKS, RF-OKS++, RF-IOKS.
//
// Works they build on, cited where an algorithm takes a piece from them:
//
//   - [Lu et al. 2016] J. Lu, S. C. H. Hoi, J. Wang, P. Zhao and Z. Liu.
//     Large Scale Online Kernel Learning. Journal of Machine Learning
//     Research 17(47):1-43, 2016. FOGD (Alg. 1), NOGD (Alg. 3).
//   - [Kivinen et al. 2004] J. Kivinen, A. J. Smola and R. C. Williamson.
//     Online learning with kernels. IEEE Transactions on Signal Processing
//     52(8):2165-2176, 2004. Kernel online gradient descent.
//   - [Rahimi & Recht 2007] A. Rahimi and B. Recht. Random features for
//     large-scale kernel machines. Advances in Neural Information Processing
//     Systems (NIPS), 2007. Random Fourier features.
//   - [Yang et al. 2012] T. Yang, M. Mahdavi, R. Jin, J. Yi and S. C. H. Hoi.
//     Online kernel selection: algorithms and evaluations. AAAI Conference
//     on Artificial Intelligence, 2012. OKS.
//   - [Calandriello et al. 2017a] D. Calandriello, A. Lazaric and M. Valko.
//     Distributed adaptive sampling for kernel matrix approximation.
//     International Conference on Artificial Intelligence and Statistics
//     (AISTATS), 2017. BKB's coupled resampling.
//   - [Calandriello et al. 2017b] D. Calandriello, A. Lazaric and M. Valko.
//     Second-order kernel online convex optimization with adaptive
//     sketching. International Conference on Machine Learning (ICML), 2017.
//     KORS, PKAWV-Nystrom's dictionary.
//   - [Chowdhury & Gopalan 2017] S. R. Chowdhury and A. Gopalan. On
//     kernelized multi-armed bandits. International Conference on Machine
//     Learning (ICML), 2017. GP-UCB's confidence radius.
//
// Where a paper is silent, garbled or inconsistent, or where a stream needs
// what a paper does not give (a bound on memory, a horizon it cannot know),
// the algorithm's documentation says which choice was made and tags it:
//
//   - [PAPER] stated in the paper at the place cited.
//   - [RECON] a reconstruction: the paper's text is garbled, ambiguous or
//     inconsistent there; the reading chosen is given with its reason.
//   - [DERIVED] follows algebraically from the paper, which does not print it.
//   - [CODE] taken from the authors' public code (for FOGD and NOGD the LSOKL
//     toolbox of Lu et al.), used only to settle what the paper leaves open.
//   - [SUGGEST] this package's own engineering choice, in no paper: numerical
//     stability, bounded memory, streams without a horizon.
//
// The docs/ pages of each family measure these choices against the papers'
// tables.
package models
