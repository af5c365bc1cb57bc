package models

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// TestFactoryMatchesNew: for every algorithm, a Factory's learner of a key,
// built with the params frozen after NewFactory checked them, is New's
// learner of that key (params read and checked anew), byte for byte, before
// and after updates. Key seeding is pinned by TestStateBytesPinned.
func TestFactoryMatchesNew(t *testing.T) {
	t.Parallel()
	for _, alg := range Algorithms() {
		t.Run(alg, func(t *testing.T) {
			spec := contractSpec(alg, 0)
			if spec.Params == nil {
				// A param given explicitly (its default value, so that
				// every algorithm accepts it): the frozen params must still
				// pass the checks some algorithms run inside their builds.
				spec.Params = map[string]any{}
				if p := givenParam[alg]; p != "" {
					spec.Params[p] = givenValue[alg]
				}
			}
			f, err := NewFactory(spec)
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{"", "user-1", "user-2"} {
				a, err := f.New(key)
				if err != nil {
					t.Fatal(err)
				}
				b, err := New(spec, key)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < 20; i++ {
					x := []float64{float64(i % 3), float64(i%5) - 2, 0.5 * float64(i%7)}
					pa, pb := a.Predict(x), b.Predict(x)
					if pa.Value != pb.Value {
						t.Fatalf("key %q record %d: prediction %v from the factory, %v from New", key, i, pa.Value, pb.Value)
					}
					y := float64(i % 2)
					if err := errors.Join(a.Update(x, pa, y), b.Update(x, pb, y)); err != nil {
						t.Fatal(err)
					}
				}
				sa, _ := a.MarshalBinary()
				sb, _ := b.MarshalBinary()
				if !bytes.Equal(sa, sb) {
					t.Fatalf("key %q: states differ after 20 records", key)
				}
			}
		})
	}
}

// TestFactorySpecErrors: NewFactory refuses what New refuses, with the same
// message (unknown params included, which only a build detects).
func TestFactorySpecErrors(t *testing.T) {
	t.Parallel()
	for _, spec := range []Spec{
		{Algorithm: "nope", Dim: 3},
		{Algorithm: "aogd-ald", Dim: 0},
		{Algorithm: "aogd-ald", Dim: 3, Loss: "nope"},
		{Algorithm: "aogd-ald", Dim: 3, Params: map[string]any{"max_budgt": 16.0}},
		{Algorithm: "aogd-ald", Dim: 3, Params: map[string]any{"max_budget": -1.0}},
	} {
		_, errNew := New(spec, "k")
		_, errF := NewFactory(spec)
		if errNew == nil || errF == nil || errNew.Error() != errF.Error() || !errors.Is(errF, ErrSpec) {
			t.Errorf("%+v: New: %v; NewFactory: %v", spec, errNew, errF)
		}
	}
}

// TestFactoryConcurrent builds learners of one factory from several
// goroutines (run with -race: the frozen params are only read).
func TestFactoryConcurrent(t *testing.T) {
	t.Parallel()
	f, err := NewFactory(Spec{Algorithm: "aogd-ald", Dim: 4, Params: map[string]any{"max_budget": 8.0}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	states := make([][]byte, 8)
	for g := range states {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				l, err := f.New(fmt.Sprintf("user-%d", i))
				if err != nil {
					t.Error(err)
					return
				}
				if i == 199 {
					states[g], _ = l.MarshalBinary()
				}
			}
		}()
	}
	wg.Wait()
	for g := 1; g < len(states); g++ {
		if !bytes.Equal(states[g], states[0]) {
			t.Fatalf("goroutine %d built a different learner for the same key", g)
		}
	}
}

// BenchmarkFactory: building a learner (aogd-ald, dim 5, online scaling)
// with New, which resolves the spec each time, and with a Factory.
func BenchmarkFactory(b *testing.B) {
	spec := Spec{Algorithm: "aogd-ald", Dim: 5, Kernel: KernelSpec{Type: "gaussian", Sigma: 1}, Params: map[string]any{"max_budget": 16.0}, Seed: 1}
	b.Run("New", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := New(spec, "user-12345"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Factory", func(b *testing.B) {
		f, err := NewFactory(spec)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := f.New("user-12345"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// givenParam names a param to give explicitly (with givenValue) in
// TestFactoryMatchesNew: those of the algorithms whose builds check their
// params themselves, and one other.
var (
	givenParam = map[string]string{"fogd": "D", "forks": "B", "nogd": "B", "pkawv-taylor": "M", "aogd-ald": "max_budget"}
	givenValue = map[string]any{"fogd": 50.0, "forks": 20.0, "nogd": 20.0, "pkawv-taylor": 2.0, "aogd-ald": 8.0}
)
