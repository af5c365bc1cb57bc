package models

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"testing"
)

// pinnedStateHashes are the SHA-256 of every algorithm's state bytes after
// pinnedStateStream, at the defaults (online scaling on) and, for the
// regression learners, with scaling off. A change of any of them is a change
// of the state codec (a learner's or the scaler's): stored states of the
// previous release would no longer restore to the same bytes, so it needs
// a state version and this table's update in the same change.
var pinnedStateHashes = map[string]string{
	"aogd-ald/default":      "f4fce07231d31680",
	"aogd-ald/off":          "4fb40493a3083595",
	"bkb/default":           "e22e1d87afe3d660",
	"bkb/off":               "e22e1d87afe3d660",
	"fogd/default":          "ca1f97413052fbc6",
	"fogd/off":              "1ca936f944feaf6a",
	"forks/default":         "95e8256b10511aa6",
	"forks/off":             "8a9fb01262e28123",
	"gp-ucb/default":        "d22484118310e1bd",
	"gp-ucb/off":            "d22484118310e1bd",
	"ioks/default":          "306a8848ffef9a9f",
	"ioks/off":              "a14ffb412cf30e83",
	"kawv/default":          "0e7f28905bf56acc",
	"kawv/off":              "a20d3ff63985ba8b",
	"kogd/default":          "7cb9a4f3a231f7f2",
	"kogd/off":              "506df618d6262fce",
	"kons/default":          "7d94d19b68b6b5d6",
	"kons/off":              "adfe7db03e55a376",
	"nogd/default":          "fe81461806fa8f05",
	"nogd/off":              "4ac86105dcb2f901",
	"nons-ald/default":      "75b7e1040479edae",
	"nons-ald/off":          "f8f786e7e3cf140d",
	"oks++/default":         "36a997793436b5ca",
	"oks++/off":             "7c0c4f1d1eb63b87",
	"oks/default":           "86552b59a4e4b43e",
	"oks/off":               "2d2763b9760eb62e",
	"pkawv-nystrom/default": "667adfcad7d6ce62",
	"pkawv-nystrom/off":     "b325cfe1e616cd40",
	"pkawv-taylor/default":  "02b20d06c5ef4b39",
	"pkawv-taylor/off":      "9f82fb15bcb860a4",
	"rf-ioks/default":       "b42be20b47c1d06b",
	"rf-ioks/off":           "050036ea7892c542",
	"rf-oks++/default":      "d7b6b3ffad4c376a",
	"rf-oks++/off":          "8a6a23a77f73fe20",
}

// pinnedStateStream drives l through 150 rounds of a smooth target on
// [-1,1]^5 (bandits: 8 arms a round, reward of the chosen arm) and returns
// its state bytes.
func pinnedStateStream(t *testing.T, l Learner) []byte {
	t.Helper()
	r := NewRand(3)
	x := make([]float64, 5)
	arms := make([][]float64, 8)
	for i := range arms {
		arms[i] = make([]float64, 5)
	}
	target := func(x []float64) float64 {
		s := 0.0
		for j, v := range x {
			s += v * float64(j+1)
		}
		return math.Sin(s)
	}
	for i := 0; i < 150; i++ {
		if b, ok := l.(Bandit); ok {
			for _, a := range arms {
				for j := range a {
					a[j] = r.Float64()*2 - 1
				}
			}
			d := b.Choose(arms)
			if err := b.Observe(arms[d.Arm], target(arms[d.Arm])); err != nil && err != ErrNumerical {
				t.Fatal(err)
			}
			continue
		}
		for j := range x {
			x[j] = r.Float64()*2 - 1
		}
		y := target(x)
		p := l.Predict(x)
		if err := l.Update(x, p, y); err != nil && err != ErrNumerical {
			t.Fatal(err)
		}
	}
	blob, err := l.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return blob
}

func TestStateBytesPinned(t *testing.T) {
	for _, alg := range Algorithms() {
		for _, scale := range []string{"default", "off"} {
			sp := Spec{Algorithm: alg, Dim: 5, Params: contractParams(alg), Seed: 9}
			if scale == "off" {
				sp.Scale = ScaleSpec{X: "none", Y: "none"}
			}
			l, err := New(sp, "pinned")
			if err != nil {
				t.Fatalf("%s: %v", alg, err)
			}
			name := alg + "/" + scale
			sum := sha256.Sum256(pinnedStateStream(t, l))
			got := hex.EncodeToString(sum[:8])
			if want, ok := pinnedStateHashes[name]; !ok || got != want {
				t.Errorf("%q: %q, // pinned %q", name, got, want)
			}
		}
	}
}

// TestAppendState: appending a learner's state behind a prefix gives the
// prefix and exactly the bytes of MarshalBinary (the checksum covers the
// blob only), for every algorithm in place and for a learner that only
// marshals (the copying fallback).
func TestAppendState(t *testing.T) {
	type marshalOnly struct{ Learner } // hides AppendBinary
	for _, alg := range Algorithms() {
		l, err := New(Spec{Algorithm: alg, Dim: 5, Params: contractParams(alg), Seed: 9}, "append")
		if err != nil {
			t.Fatal(err)
		}
		want := pinnedStateStream(t, l)
		prefix := []byte{0xfe, 0x01, 0x02}
		for _, c := range []struct {
			name string
			l    Learner
		}{{"in place", l}, {"fallback", marshalOnly{l}}} {
			got, err := AppendState(append([]byte(nil), prefix...), c.l)
			if err != nil {
				t.Fatalf("%s %s: %v", alg, c.name, err)
			}
			if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
				t.Errorf("%s %s: AppendState differs from prefix + MarshalBinary", alg, c.name)
			}
			fresh, err := New(Spec{Algorithm: alg, Dim: 5, Params: contractParams(alg), Seed: 9}, "append")
			if err != nil {
				t.Fatal(err)
			}
			if err := fresh.UnmarshalBinary(got[len(prefix):]); err != nil {
				t.Errorf("%s %s: the appended state does not restore: %v", alg, c.name, err)
			}
		}
	}
}
