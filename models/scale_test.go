package models

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// scaleStream is a raw stream far from [-1,1]: features with large offsets
// and spreads, a target around 1e4.
func scaleStream(n int) (xs [][]float64, ys []float64) {
	r := NewRand(5)
	for i := 0; i < n; i++ {
		x := []float64{1000 + 300*r.Norm(), 0.01 * r.Norm(), -50 + 5*r.Norm()}
		xs = append(xs, x)
		ys = append(ys, 1e4+2*x[0]+3e4*x[1]+r.Norm())
	}
	return xs, ys
}

func TestScaleSpecResolve(t *testing.T) {
	for _, c := range []struct {
		alg    string
		loss   Loss
		spec   ScaleSpec
		sx, sy bool
		bad    bool
	}{
		{"nons-ald", Square{}, ScaleSpec{}, true, true, false},
		{"forks", Hinge{}, ScaleSpec{}, true, false, false},
		{"bkb", Square{}, ScaleSpec{}, false, false, false},
		{"kogd", Square{}, ScaleSpec{X: "none", Y: "none"}, false, false, false},
		{"kogd", Square{}, ScaleSpec{X: "none"}, false, true, false},
		{"forks", Hinge{}, ScaleSpec{Y: "standard"}, false, false, true},
		{"bkb", Square{}, ScaleSpec{Y: "standard"}, false, false, true},
		{"kogd", Square{}, ScaleSpec{X: "minmax"}, false, false, true},
	} {
		sx, sy, err := c.spec.resolve(c.alg, c.loss)
		if c.bad {
			if !errors.Is(err, ErrSpec) {
				t.Errorf("%s %+v: err = %v, want ErrSpec", c.alg, c.spec, err)
			}
			continue
		}
		if err != nil || sx != c.sx || sy != c.sy {
			t.Errorf("%s %+v: (%v, %v, %v), want (%v, %v, nil)", c.alg, c.spec, sx, sy, err, c.sx, c.sy)
		}
	}
}

// TestScaledMatchesHandScaling checks the wrapper against the inner learner
// fed by hand with the statistics of the records before each one.
func TestScaledMatchesHandScaling(t *testing.T) {
	xs, ys := scaleStream(200)
	// Explicit params: the stream defaults (Setup.StreamX) differ from the
	// papers' ones the unscaled inner learner would take.
	params := map[string]any{"U": 2, "max_budget": 1000}
	spec := gaussianSpec("kogd", 3, 1.5, params)
	spec.Scale = ScaleSpec{X: "standard", Y: "standard"}
	l := mustNew(t, spec, "k")
	if _, ok := l.(*Scaled); !ok {
		t.Fatalf("New gave %T, want *Scaled", l)
	}
	inner := mustNew(t, gaussianSpec("kogd", 3, 1.5, params), "k")
	var n float64
	mean, m2 := make([]float64, 3), make([]float64, 3)
	var ym, ym2 float64
	sd := func(m2, n float64) float64 {
		if n < 2 || m2 <= 0 {
			return 1
		}
		return math.Sqrt(m2 / n)
	}
	for i, x := range xs {
		z := make([]float64, 3)
		for j := range x {
			z[j] = (x[j] - mean[j]) / sd(m2[j], n)
		}
		mY, sY := ym, sd(ym2, n)
		if n == 0 {
			mY, sY = 0, 1
		}
		pi := inner.Predict(z)
		p := l.Predict(x)
		if want := pi.Value*sY + mY; math.Abs(p.Value-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Fatalf("record %d: y_hat %v, want %v", i, p.Value, want)
		}
		if n >= scaleWarmup { // the first labels only feed the statistics
			if err := inner.Update(z, pi, (ys[i]-mY)/sY); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Update(x, p, ys[i]); err != nil {
			t.Fatal(err)
		}
		n++
		for j := range x {
			d := x[j] - mean[j]
			mean[j] += d / n
			m2[j] += d * (x[j] - mean[j])
		}
		d := ys[i] - ym
		ym += d / n
		ym2 += d * (ys[i] - ym)
	}
}

// TestScaledLearnsRawTarget: on a raw stream the scaled learner's
// progressive error is far below the unscaled one's.
func TestScaledLearnsRawTarget(t *testing.T) {
	t.Parallel() // CPU-bound: beside the package's other long tests
	xs, ys := scaleStream(1000)
	mse := func(sc ScaleSpec) float64 {
		spec := Spec{Algorithm: "nons-ald", Dim: 3, Scale: sc, Seed: 1}
		l := mustNew(t, spec, "k")
		var se float64
		for i, x := range xs {
			p := l.Predict(x)
			se += (p.Value - ys[i]) * (p.Value - ys[i])
			if err := l.Update(x, p, ys[i]); err != nil {
				t.Fatal(err)
			}
		}
		return se / float64(len(xs))
	}
	scaled, raw := mse(ScaleSpec{X: "standard", Y: "standard"}), mse(ScaleSpec{X: "none", Y: "none"})
	if !(scaled < raw/10) {
		t.Fatalf("scaled mse %v, raw %v: want scaled < raw/10", scaled, raw)
	}
}

// TestScaledStateRoundTrip: a restored learner continues bit-exactly, and
// foreign or corrupt blobs are errors that leave the learner unchanged.
func TestScaledStateRoundTrip(t *testing.T) {
	xs, ys := scaleStream(120)
	for _, alg := range []string{"nons-ald", "forks", "oks++", "fogd"} {
		spec := Spec{Algorithm: alg, Dim: 3, Seed: 2, Scale: ScaleSpec{X: "standard"}}
		a := mustNew(t, spec, "k")
		cls := alg == "forks"
		label := func(y float64) float64 {
			if cls {
				return Label(y - 1e4)
			}
			return y
		}
		for i := 0; i < 60; i++ {
			p := a.Predict(xs[i])
			_ = a.Update(xs[i], p, label(ys[i]))
		}
		blob := mustMarshal(t, a)
		b := mustNew(t, spec, "k")
		if err := b.UnmarshalBinary(blob); err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		for i := 60; i < 120; i++ {
			pa, pb := a.Predict(xs[i]), b.Predict(xs[i])
			if pa != pb {
				t.Fatalf("%s record %d: %+v vs %+v", alg, i, pa, pb)
			}
			_ = a.Update(xs[i], pa, label(ys[i]))
			_ = b.Update(xs[i], pb, label(ys[i]))
		}
		if !bytes.Equal(mustMarshal(t, a), mustMarshal(t, b)) {
			t.Fatalf("%s: states differ after the same records", alg)
		}
		before := mustMarshal(t, b)
		bad := append([]byte(nil), blob...)
		bad[len(bad)/2] ^= 1
		other := mustNew(t, Spec{Algorithm: alg, Dim: 3, Seed: 2, Scale: ScaleSpec{X: "none", Y: "none"}}, "k")
		for _, blob := range [][]byte{bad, blob[:len(blob)-3], mustMarshal(t, other)} {
			if err := b.UnmarshalBinary(blob); !errors.Is(err, ErrState) {
				t.Errorf("%s: bad blob: err = %v, want ErrState", alg, err)
			}
		}
		if !bytes.Equal(before, mustMarshal(t, b)) {
			t.Fatalf("%s: a rejected blob changed the state", alg)
		}
	}
}

// TestScaledPredictDoesNotMoveStatistics: a record that is never labelled
// leaves the scaler's state as it was (Predict may only advance the PRNG).
func TestScaledPredictDoesNotMoveStatistics(t *testing.T) {
	xs, _ := scaleStream(10)
	l := mustNew(t, Spec{Algorithm: "kogd", Dim: 3, Scale: ScaleSpec{X: "standard", Y: "standard"}}, "k")
	before := mustMarshal(t, l)
	for _, x := range xs {
		l.Predict(x)
	}
	if !bytes.Equal(before, mustMarshal(t, l)) {
		t.Fatal("Predict changed the state")
	}
}

func BenchmarkScaledNONSALD(b *testing.B) {
	xs, ys := scaleStream(1024)
	l := mustNew(b, Spec{Algorithm: "nons-ald", Dim: 3, Scale: ScaleSpec{X: "standard", Y: "standard"}}, "k")
	for i := 0; i < 2048; i++ {
		p := l.Predict(xs[i%1024])
		_ = l.Update(xs[i%1024], p, ys[i%1024])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x := xs[i%1024]
		p := l.Predict(x)
		_ = l.Update(x, p, ys[i%1024])
	}
}

// TestScaledWarmupAndHugeLabels: the first scaleWarmup labels only feed the
// target statistics (the inner learner's state does not move), and a label
// whose squared deviation overflows is refused with ErrNumerical before or
// after the warm-up, leaving the state bytes as they were.
func TestScaledWarmupAndHugeLabels(t *testing.T) {
	t.Parallel()
	xs, ys := scaleStream(20)
	spec := Spec{Algorithm: "kogd", Dim: 3, Scale: ScaleSpec{X: "standard", Y: "standard"}}
	l := mustNew(t, spec, "k").(*Scaled)
	fresh := mustMarshal(t, l.Inner())
	for i := 0; i < len(xs); i++ {
		if i == scaleWarmup-1 || i == len(xs)-1 {
			before := mustMarshal(t, l)
			if err := l.Update(xs[i], l.Predict(xs[i]), 1e300); !errors.Is(err, ErrNumerical) {
				t.Fatalf("record %d: label 1e300: err = %v, want ErrNumerical", i, err)
			}
			if !bytes.Equal(before, mustMarshal(t, l)) {
				t.Fatalf("record %d: a refused label changed the state", i)
			}
		}
		if err := l.Update(xs[i], l.Predict(xs[i]), ys[i]); err != nil {
			t.Fatal(err)
		}
		if moved := !bytes.Equal(fresh, mustMarshal(t, l.Inner())); moved != (i >= scaleWarmup) {
			t.Fatalf("after %d labels the inner learner moved = %v", i+1, moved)
		}
	}
}
