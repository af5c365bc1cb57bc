package models

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// forksStream is a synthetic binary stream in [-1,1]^d whose label is a
// smooth non-linear function of x (so a Gaussian-kernel learner can learn it).
func forksStream(n, d int, seed uint64) ([][]float64, []float64) {
	r := NewRand(seed)
	xs := make([][]float64, n)
	ys := make([]float64, n)
	for i := range xs {
		x := make([]float64, d)
		s := 0.0
		for j := range x {
			x[j] = 2*r.Float64() - 1
			s += math.Sin(2 * x[j] * float64(j+1))
		}
		xs[i] = x
		ys[i] = 1
		if s < 0 {
			ys[i] = -1
		}
	}
	return xs, ys
}

func forksMustNew(t testing.TB, spec Spec) Learner {
	t.Helper()
	l, err := New(spec, "key-1")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func forksMarshal(t testing.TB, l Learner) []byte {
	t.Helper()
	b, err := l.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// forksCheckRoundTrip runs the stream through a learner, and at each
// checkpoint restores a fresh learner from its blob; the restored learner must
// predict bit-identically on the rest of the stream and end with the same
// bytes. Predict must not change the state.
func forksCheckRoundTrip(t *testing.T, spec Spec, xs [][]float64, ys []float64, checkpoints []int) {
	t.Helper()
	l := forksMustNew(t, spec)
	next := 0
	for i := range xs {
		if next < len(checkpoints) && i == checkpoints[next] {
			next++
			blob := forksMarshal(t, l)
			c := forksMustNew(t, spec)
			if err := c.UnmarshalBinary(blob); err != nil {
				t.Fatalf("record %d: restore: %v", i, err)
			}
			if got := forksMarshal(t, c); !bytes.Equal(got, blob) {
				t.Fatalf("record %d: re-marshalled blob differs", i)
			}
			for j := i; j < len(xs); j++ {
				p, q := l.Predict(xs[j]), c.Predict(xs[j])
				if math.Float64bits(p.Value) != math.Float64bits(q.Value) {
					t.Fatalf("checkpoint %d, record %d: prediction %v vs restored %v", i, j, p.Value, q.Value)
				}
				if err := l.Update(xs[j], p, ys[j]); err != nil {
					t.Fatal(err)
				}
				if err := c.Update(xs[j], q, ys[j]); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(forksMarshal(t, l), forksMarshal(t, c)) {
				t.Fatalf("checkpoint %d: final states differ", i)
			}
			// Rewind: replay from a fresh learner up to the next checkpoint.
			l = forksMustNew(t, spec)
			for j := 0; j <= i; j++ {
				before := forksMarshal(t, l)
				p := l.Predict(xs[j])
				if !bytes.Equal(before, forksMarshal(t, l)) {
					t.Fatalf("record %d: Predict changed the state", j)
				}
				if err := l.Update(xs[j], p, ys[j]); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		p := l.Predict(xs[i])
		if err := l.Update(xs[i], p, ys[i]); err != nil {
			t.Fatal(err)
		}
	}
}

func forksSpec(loss string, params map[string]any) Spec {
	return Spec{Algorithm: "forks", Dim: 4, Loss: loss, Kernel: KernelSpec{Sigma: 1}, Params: params, Seed: 3}
}

func TestFORKSRoundTripExact(t *testing.T) {
	xs, ys := forksStream(400, 4, 1)
	for _, tc := range []struct {
		name, loss string
		params     map[string]any
	}{
		{"hinge-eager", "hinge", map[string]any{"B": 30, "rho": 7}},
		{"hinge-lazy", "hinge", map[string]any{"B": 30, "rho": 7, "projection": "lazy"}},
		{"logistic", "logistic", map[string]any{"B": 30, "sp": 20, "sm": 8, "k": 5, "rho": 5}},
		{"squared-hinge", "squared-hinge", map[string]any{"B": 30, "rho": 11}},
		{"square", "square", map[string]any{"B": 25, "rho": 9, "C": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// checkpoints in stage 1, right around the sketch build, and after update rounds
			forksCheckRoundTrip(t, forksSpec(tc.loss, tc.params), xs, ys, []int{0, 10, 40, 60, 150, 399})
			l := forksMustNew(t, forksSpec(tc.loss, tc.params)).(*forks)
			for i := range xs[:60] {
				_ = l.Update(xs[i], l.Predict(xs[i]), ys[i])
			}
			if !l.sketched {
				t.Fatal("the sketch is not built by record 60: the checkpoints miss stage 2")
			}
		})
	}
}

func TestFORKSDeterministicPerKey(t *testing.T) {
	xs, ys := forksStream(300, 4, 2)
	spec := forksSpec("", map[string]any{"B": 30, "rho": 10})
	run := func(key string) []byte {
		l, err := New(spec, key)
		if err != nil {
			t.Fatal(err)
		}
		for i := range xs {
			if err := l.Update(xs[i], l.Predict(xs[i]), ys[i]); err != nil {
				t.Fatal(err)
			}
		}
		return forksMarshal(t, l)
	}
	if !bytes.Equal(run("a"), run("a")) {
		t.Fatal("same key, different state")
	}
	if bytes.Equal(run("a"), run("b")) {
		t.Fatal("different keys gave identical sketches: the seed is not used")
	}
}

func TestFORKSBlobErrors(t *testing.T) {
	xs, ys := forksStream(200, 4, 3)
	spec := forksSpec("", map[string]any{"B": 30, "rho": 10})
	l := forksMustNew(t, spec)
	for i := range xs {
		if err := l.Update(xs[i], l.Predict(xs[i]), ys[i]); err != nil {
			t.Fatal(err)
		}
	}
	blob := forksMarshal(t, l)
	victim := forksMustNew(t, spec)
	for i := range xs[:50] { // some state of its own
		_ = victim.Update(xs[i], victim.Predict(xs[i]), ys[i])
	}
	want := forksMarshal(t, victim)
	check := func(name string, b []byte) {
		t.Helper()
		err := victim.UnmarshalBinary(b)
		if err == nil || !errors.Is(err, ErrState) {
			t.Fatalf("%s: want ErrState, got %v", name, err)
		}
		if !bytes.Equal(forksMarshal(t, victim), want) {
			t.Fatalf("%s: a failed restore changed the learner", name)
		}
	}
	for n := 0; n < len(blob); n += 1 + n/7 {
		check("truncated", blob[:n])
	}
	flipped := append([]byte(nil), blob...)
	flipped[len(flipped)/2] ^= 0x10
	check("corrupted", flipped)
	nb := forksMarshal(t, forksMustNew(t, Spec{Algorithm: "nogd", Dim: 4, Params: map[string]any{"B": 30}}))
	check("foreign", nb)
	other := forksMustNew(t, forksSpec("", map[string]any{"B": 30, "sp": 20, "rho": 10}))
	for i := range xs {
		_ = other.Update(xs[i], other.Predict(xs[i]), ys[i])
	}
	check("other shape", forksMarshal(t, other))
}

func TestFORKSParams(t *testing.T) {
	good := forksMustNew(t, forksSpec("", nil)).(*forks)
	if good.B != 100 || good.sp != 100 || good.sm != 20 || good.k != 10 || good.rho != 2000 ||
		good.eta != 0.2 || good.alpha != 0.01 || good.beta != 0.5 || good.bound != 1 || !good.eager {
		t.Fatalf("defaults: %+v", good)
	}
	adv := forksMustNew(t, forksSpec("", map[string]any{"B": 200, "sp": 150})).(*forks)
	if adv.sm != 30 || adv.k != 20 {
		t.Fatalf("derived defaults at B=200, sp=150: sm=%d k=%d, want 30, 20", adv.sm, adv.k)
	}
	for _, bad := range []map[string]any{
		{"B": 1}, {"B": 10, "sm": 11}, {"sp": 5, "k": 6}, {"rho": 0}, {"alpha": 0}, {"beta": -1},
		{"C": 0}, {"eta": "x"}, {"projection": "sometimes"}, {"k": 2.5}, {"bogus": 1},
	} {
		if _, err := New(forksSpec("", bad), ""); !errors.Is(err, ErrSpec) {
			t.Errorf("params %v: want ErrSpec, got %v", bad, err)
		}
	}
	if _, err := New(forksSpec("absolute", nil), ""); !errors.Is(err, ErrSpec) {
		t.Errorf("absolute loss accepted: %v", err)
	}
}

// A record whose update would overflow is rejected with ErrNumerical and
// leaves the state bit-identical, in stage 1, in a regular round and in an
// update round (whose PRNG draw must be undone too).
func TestFORKSNumericalGuard(t *testing.T) {
	xs, ys := forksStream(120, 4, 4)
	huge := 1e308
	for _, tc := range []struct {
		name   string
		params map[string]any
		warm   int
	}{
		{"stage1", map[string]any{"B": 30}, 5},
		{"regular", map[string]any{"B": 30, "rho": 1000}, 100},
		{"update-round", map[string]any{"B": 30, "rho": 1}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := forksSpec("square", tc.params)
			spec.Params["C"] = 1e300
			l := forksMustNew(t, spec)
			for i := 0; i < tc.warm; i++ {
				if err := l.Update(xs[i], l.Predict(xs[i]), ys[i]); err != nil {
					t.Fatal(err)
				}
			}
			if sk := l.(*forks).sketched; sk != (tc.name != "stage1") {
				t.Fatalf("sketched = %v at the guarded record", sk)
			}
			before := forksMarshal(t, l)
			x := xs[tc.warm]
			err := l.Update(x, l.Predict(x), -huge)
			if !errors.Is(err, ErrNumerical) {
				t.Fatalf("want ErrNumerical, got %v", err)
			}
			if !bytes.Equal(before, forksMarshal(t, l)) {
				t.Fatal("rejected update changed the state")
			}
			// And the learner goes on normally.
			if err := l.Update(x, l.Predict(x), ys[tc.warm]); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Eq. 5: after the sketch is built, phi(x)^T phi(x') approximates the kernel.
func TestFORKSFeatureMapApproximatesKernel(t *testing.T) {
	xs, ys := forksStream(2000, 4, 5)
	spec := Spec{Algorithm: "forks", Dim: 4, Kernel: KernelSpec{Sigma: 2}, Params: map[string]any{"B": 100, "sp": 100, "sm": 40, "k": 20}, Seed: 1}
	l := forksMustNew(t, spec).(*forks)
	i := 0
	for ; !l.sketched; i++ {
		if err := l.Update(xs[i], l.Predict(xs[i]), ys[i]); err != nil {
			t.Fatal(err)
		}
	}
	p1, p2 := make([]float64, l.k), make([]float64, l.k)
	var se, s2 float64
	for j := 0; j < 300; j++ {
		a, b := xs[1000+j], xs[1500+j]
		l.features(p1, a)
		l.features(p2, b)
		e := 0.0
		for q := range p1 {
			e += p1[q] * p2[q]
		}
		kv := l.kern.Eval(a, b)
		se += (e - kv) * (e - kv)
		s2 += kv * kv
	}
	rel := math.Sqrt(se / s2)
	t.Logf("relative kernel approximation error: %.4g", rel)
	if rel > 0.02 {
		t.Fatalf("phi^T phi' misses the kernel by %.3g (relative)", rel)
	}
}

// Update rounds are allocation-free, as are regular rounds.
func TestFORKSUpdateAllocs(t *testing.T) {
	xs, ys := forksStream(400, 4, 6)
	for _, rho := range []int{1, 1 << 30} {
		l := forksMustNew(t, forksSpec("", map[string]any{"B": 40, "rho": rho}))
		for i := 0; i < 200; i++ {
			_ = l.Update(xs[i], l.Predict(xs[i]), ys[i])
		}
		i := 200
		allocs := testing.AllocsPerRun(100, func() {
			x := xs[i%len(xs)]
			_ = l.Update(x, l.Predict(x), ys[i%len(xs)])
			i++
		})
		if allocs != 0 {
			t.Errorf("rho=%d: %v allocs per round", rho, allocs)
		}
	}
}
