package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/kernelstream/kernelstream/internal/dataset"
	"github.com/kernelstream/kernelstream/models"
)

type options struct {
	data, model, key, dump string
	scale, shuffled, quiet bool
	shuffle                uint64
	repeat, limit          int
	adversarial, blocks    int
	bandit                 string
	arms, dim, rounds      int
	window                 int
	seed                   uint64
	seeded                 bool
	progress               io.Writer
}

// result is the one JSON object eval prints. Fields that do not apply to the
// task (mistake rate on a regression file) are null.
type result struct {
	Algorithm        string   `json:"algorithm"`
	N                int      `json:"n"`
	Repeats          int      `json:"repeats"`
	MSE              metric   `json:"mse"`
	MSEStd           metric   `json:"mse_std"`
	MistakeRate      *float64 `json:"mistake_rate"`
	MistakeRateStd   *float64 `json:"mistake_rate_std"`
	MeanLoss         metric   `json:"mean_loss"`
	Budget           float64  `json:"budget"`
	Seconds          float64  `json:"seconds"`
	UpdatesPerSecond float64  `json:"updates_per_second"`
	Rejected         int      `json:"rejected"`
	// Refused counts the predictions the learner refused (models.ErrNumerical:
	// an input whose kernel argument or output overflowed); they are left
	// out of mse, mean_loss and mistake_rate, whose n is then n - refused.
	Refused int `json:"refused"`
	// NonFinite names the metrics that came out NaN or Inf (printed as
	// null), so that a diverging learner is reported instead of crashing
	// the JSON encoder ("json: unsupported value: NaN").
	NonFinite []string `json:"non_finite,omitempty"`
}

// metric is a float64 that encodes as null when it is NaN or Inf.
type metric float64

func (m metric) MarshalJSON() ([]byte, error) {
	f := float64(m)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

func evaluate(o *options) (any, error) {
	if o.model == "" {
		return nil, errors.New("-model is required (JSON spec or @file)")
	}
	spec, err := models.ParseSpec(o.model)
	if err != nil {
		return nil, err
	}
	if o.bandit != "" {
		seed := o.seed
		if !o.seeded {
			seed = 1
		}
		if o.arms < 1 || o.dim < 1 || o.rounds < 1 || o.window < 0 {
			return nil, errors.New("-arms, -dim and -rounds must be >= 1, -window >= 0")
		}
		if spec.Dim == 0 {
			spec.Dim = o.dim
		}
		if spec.Dim != o.dim {
			return nil, fmt.Errorf("model dim %d differs from -dim %d", spec.Dim, o.dim)
		}
		if err := spec.Validate(); err != nil {
			return nil, err
		}
		return runBandit(o.bandit, spec, o.arms, o.dim, o.rounds, seed, o.window)
	}
	if o.data == "" {
		return nil, errors.New("-data is required (or -bandit)")
	}
	if o.repeat < 1 {
		return nil, fmt.Errorf("-repeat %d must be >= 1", o.repeat)
	}
	if o.scale && spec.Scale == (models.ScaleSpec{}) {
		// The papers' offline min/max scaling replaces the online
		// standardisation; a spec that names "scale" keeps its own.
		spec.Scale = models.ScaleSpec{X: "none", Y: "none"}
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	loss, err := spec.ResolvedLoss()
	if err != nil {
		return nil, err
	}
	set, err := dataset.Load(o.data, spec.Dim)
	if err != nil {
		return nil, err
	}
	if set.Dim != spec.Dim {
		return nil, fmt.Errorf("%s has %d features, model dim is %d", o.data, set.Dim, spec.Dim)
	}
	binary := set.IsBinary()
	if o.scale {
		set.ScaleFeatures()
		if !binary {
			set.ScaleTargets()
		}
	}
	if binary || loss.Classification() {
		// Labels 0 read as -1; regression learners then classify by the sign
		// of their output, as the papers do on cod-rna and phishing.
		for i, y := range set.Y {
			set.Y[i] = models.Label(y)
		}
	}
	if o.limit > 0 && o.limit < set.Len() {
		set = &dataset.Set{Dim: set.Dim, X: set.X[:o.limit*set.Dim], Y: set.Y[:o.limit]}
	}
	if o.adversarial > 0 && !(binary || loss.Classification()) {
		return nil, errors.New("-adversarial needs a binary classification file")
	}

	n := set.Len()
	if o.adversarial > 0 {
		n = min(o.blocks, set.Len()) * o.adversarial
	}
	res := result{Algorithm: spec.Algorithm, N: n, Repeats: o.repeat}
	var mses, mistakes, losses, budgets, secs []float64
	for rep := 0; rep < o.repeat; rep++ {
		run := set
		switch {
		case o.adversarial > 0:
			run = set.Adversarial(o.blocks, o.adversarial, o.shuffle+uint64(rep))
		case o.shuffled:
			run = set.Permute(dataset.Permutation(set.Len(), o.shuffle+uint64(rep)))
		}
		rs := spec
		rs.Seed = spec.Seed + uint64(rep)
		var dump io.Writer
		var dumpFile *os.File
		if rep == 0 && o.dump != "" {
			dumpFile, err = os.Create(o.dump)
			if err != nil {
				return nil, err
			}
			bw := bufio.NewWriter(dumpFile)
			defer dumpFile.Close()
			defer bw.Flush()
			dump = bw
		}
		p, err := pass(rs, o.key, loss, run, dump, o.progress, binary || loss.Classification())
		if err != nil {
			return nil, err
		}
		mses = append(mses, p.mse)
		mistakes = append(mistakes, p.mistakeRate)
		losses = append(losses, p.meanLoss)
		budgets = append(budgets, float64(p.size))
		secs = append(secs, p.seconds)
		res.Rejected += p.rejected
		res.Refused += p.refused
	}
	mse, mseStd := meanStd(mses)
	res.MSE, res.MSEStd = metric(mse), metric(mseStd)
	if binary || loss.Classification() {
		m, s := meanStd(mistakes)
		if math.IsNaN(m) { // every prediction refused
			res.NonFinite = append(res.NonFinite, "mistake_rate")
		} else {
			res.MistakeRate, res.MistakeRateStd = &m, &s
		}
	}
	meanLoss, _ := meanStd(losses)
	res.MeanLoss = metric(meanLoss)
	for _, m := range []struct {
		name string
		v    float64
	}{{"mse", mse}, {"mse_std", mseStd}, {"mean_loss", meanLoss}} {
		if math.IsNaN(m.v) || math.IsInf(m.v, 0) {
			res.NonFinite = append(res.NonFinite, m.name)
		}
	}
	res.Budget, _ = meanStd(budgets)
	res.Seconds, _ = meanStd(secs)
	if res.Seconds > 0 {
		res.UpdatesPerSecond = float64(res.N) / res.Seconds
	}
	return res, nil
}

type passResult struct {
	mse, mistakeRate, meanLoss, seconds float64
	size, rejected, refused             int
}

// pass runs one prequential pass: for every record, predict, record the
// loss of the prediction, then update. Only the loop is timed.
func pass(spec models.Spec, key string, loss models.Loss, set *dataset.Set, dump, progress io.Writer, classify bool) (passResult, error) {
	l, err := models.New(spec, key)
	if err != nil {
		return passResult{}, err
	}
	var r passResult
	var se, lsum float64
	mistakes := 0
	n := set.Len()
	start := time.Now()
	lastReport := start
	var line []byte
	for i := 0; i < n; i++ {
		x, y := set.Row(i), set.Y[i]
		p, err := models.PredictChecked(l, x)
		if err != nil {
			if !errors.Is(err, models.ErrNumerical) {
				return r, fmt.Errorf("record %d: %w", i, err)
			}
			r.refused++ // no prediction to score nor to learn from
			continue
		}
		d := p.Value - y
		se += d * d
		lsum += loss.Value(p.Value, y)
		if classify && models.Label(p.Value) != y {
			mistakes++
		}
		if err := l.Update(x, p, y); err != nil {
			if !errors.Is(err, models.ErrNumerical) {
				return r, fmt.Errorf("record %d: %w", i, err)
			}
			r.rejected++
		}
		if dump != nil {
			line = strconv.AppendInt(line[:0], int64(i), 10)
			line = append(line, ' ')
			line = strconv.AppendFloat(line, y, 'g', -1, 64)
			line = append(line, ' ')
			line = strconv.AppendFloat(line, p.Value, 'g', -1, 64)
			line = append(line, '\n')
			if _, err := dump.Write(line); err != nil {
				return r, err
			}
		}
		if progress != nil && i&4095 == 4095 {
			if now := time.Now(); now.Sub(lastReport) > 3*time.Second {
				lastReport = now
				fmt.Fprintf(progress, "eval: %d/%d records, %.0f records/s, running mse %.6g\n",
					i+1, n, float64(i+1)/now.Sub(start).Seconds(), se/float64(i+1))
			}
		}
	}
	r.seconds = time.Since(start).Seconds()
	scored := float64(n - r.refused)
	r.mse = se / scored
	r.meanLoss = lsum / scored
	r.mistakeRate = float64(mistakes) / scored
	r.size = l.Size()
	return r, nil
}

// meanStd returns the mean and the population standard deviation (the
// papers' code divides by n).
func meanStd(v []float64) (float64, float64) {
	if len(v) == 0 {
		return 0, 0
	}
	var m float64
	for _, x := range v {
		m += x
	}
	m /= float64(len(v))
	var s float64
	for _, x := range v {
		s += (x - m) * (x - m)
	}
	return m, math.Sqrt(s / float64(len(v)))
}
