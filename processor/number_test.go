package processor

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// numberMatches checks that the decoder reads s as strconv.ParseFloat does,
// bit for bit, and consumes all of it.
func numberMatches(t *testing.T, s string) {
	t.Helper()
	d := newDecoder(1)
	d.data, d.pos = []byte(s), 0
	got, ok, err := d.number()
	want, werr := strconv.ParseFloat(s, 64)
	if !ok || d.pos != len(s) {
		t.Fatalf("%q: not read as a number (ok %v, stopped at %d)", s, ok, d.pos)
	}
	if (err != nil) != (werr != nil) || math.Float64bits(got) != math.Float64bits(want) && !(werr != nil && math.IsInf(got, 0) == math.IsInf(want, 0)) {
		t.Fatalf("%q: got %v (%016x, %v), strconv %v (%016x, %v)", s, got, math.Float64bits(got), err, want, math.Float64bits(want), werr)
	}
}

func TestNumberMatchesParseFloat(t *testing.T) {
	for _, s := range []string{"0", "-0", "0.0", "-0.0", "1", "-1", "0.1", "0.25", "1200", "-3.1416", "1e22", "1e23",
		"1e-22", "1e-23", "9007199254740991", "9007199254740992", "9007199254740993", "123456789012345678901234567890",
		"0.1234567890123456789", "4.9e-324", "2e-324", "1.7976931348623157e308", "1e309", "-1e309", "1E+2", "1e-0",
		"0.000001", "100000000000000000000000", "1.5e-7", "0e500", "5e-1000", "12345678901234567e-5"} {
		numberMatches(t, s)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		var s string
		switch i % 4 {
		case 0: // shortest round-trip forms of random float64s
			s = strconv.FormatFloat(math.Float64frombits(r.Uint64()), 'g', -1, 64)
			if s == "NaN" || s == "+Inf" || s == "-Inf" {
				continue
			}
		case 1: // fixed decimals, as features often are
			s = strconv.FormatFloat((r.Float64()-0.5)*math.Pow(10, float64(r.IntN(12))), 'f', r.IntN(9), 64)
		case 2: // integers and short mantissas with exponents near the fast path's edges
			s = strconv.FormatUint(r.Uint64N(1<<uint(1+r.IntN(62))), 10) + "e" + strconv.Itoa(r.IntN(60)-30)
		default: // 'e' forms of random magnitudes
			s = strconv.FormatFloat(r.NormFloat64()*math.Pow(10, float64(r.IntN(40)-20)), 'e', r.IntN(18), 64)
		}
		numberMatches(t, s)
	}
}

func FuzzNumber(f *testing.F) {
	for _, s := range []string{"0", "-1.5", "1e22", "9007199254740993", "0.1234", "1e-400", "12e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := newDecoder(1)
		d.data, d.pos = []byte(s), 0
		got, ok, err := d.number()
		if !ok {
			return
		}
		tok := s[:d.pos]
		want, werr := strconv.ParseFloat(tok, 64)
		if werr != nil && err == nil || werr == nil && math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("%q: got %v (%v), strconv %v (%v)", tok, got, err, want, werr)
		}
	})
}
