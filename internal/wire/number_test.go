package wire

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// numberMatches checks that the Decoder reads s as strconv.ParseFloat does,
// bit for bit, and consumes all of it.
func numberMatches(t *testing.T, s string) {
	t.Helper()
	d := NewDecoder(1, Limits{})
	d.data, d.pos = []byte(s), 0
	got, ok, err := d.number()
	want, werr := strconv.ParseFloat(s, 64)
	if !ok || d.pos != len(s) {
		t.Fatalf("%q: not read as a number (ok %v, stopped at %d)", s, ok, d.pos)
	}
	if (err != nil) != (werr != nil) || math.Float64bits(got) != math.Float64bits(want) {
		t.Fatalf("%q: got %v (%016x, %v), strconv %v (%016x, %v)", s, got, math.Float64bits(got), err, want, math.Float64bits(want), werr)
	}
	quickMatches(t, s)
}

// quickMatches checks that vectors holding s read as number() reads s,
// bit for bit, whether denseQuick takes them or leaves them to the general
// path, whole or from any of their numbers: alone, three times with
// whitespace, and before and after another number.
func quickMatches(t *testing.T, s string) {
	t.Helper()
	if strings.ContainsAny(s, ",[]{}\" \t\n\r") {
		return // not one token
	}
	d := NewDecoder(1, Limits{})
	d.data, d.pos = []byte(s), 0
	want, ok, err := d.number()
	valid := ok && err == nil && d.pos == len(s) && !math.IsInf(want, 0)
	for _, c := range []struct {
		vec  string
		want []float64
	}{
		{"[" + s + "]", []float64{want}},
		{"[ " + s + " ,\n" + s + "," + s + "\t]", []float64{want, want, want}},
		{"[" + s + ",0.5]", []float64{want, 0.5}},
		{"[0.5," + s + "]", []float64{0.5, want}},
	} {
		d := NewDecoder(len(c.want), Limits{})
		d.data, d.pos = []byte(c.vec), 0
		got, err := d.vector(make([]float64, len(c.want)), "x")
		if !valid {
			if err == nil {
				t.Fatalf("%q: read as %v, number() refuses %q", c.vec, got, s)
			}
			continue
		}
		if err != nil || d.pos != len(c.vec) {
			t.Fatalf("%q: %v, stopped at %d", c.vec, err, d.pos)
		}
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(c.want[i]) {
				t.Fatalf("%q: element %d is %v (%016x), number() %v (%016x)", c.vec, i, got[i], math.Float64bits(got[i]),
					c.want[i], math.Float64bits(c.want[i]))
			}
		}
	}
}

// TestDenseQuick: which numbers the one-loop path takes, and that every
// number reads the same either way.
func TestDenseQuick(t *testing.T) {
	for _, c := range []struct {
		in    string
		taken bool
	}{
		{"0", true}, {"-0", true}, {"0.25", true}, {"-3.1416", true}, {"1200", true}, {"0.0012", true},
		{"123456789012345", true}, {"0.12345678", true}, {"-1.123456789", true}, {"0.123456789012345", true},
		{"1.000000000000000", true}, {"-0.1234567", true}, {"12345678901234.5", true}, {"-0.00000000000001", true}, {"-0.000000000000001", true},
		{"1234567890123456", true}, {"0.1234567890123456", true}, {"0.12345678901234567", true}, {"-0.8765432109876543", true},
		{"9007199254740993", true}, {"1234567890123456789", true}, {"9999999999999999999", false}, {"0.00000000000000000001", false},
		{"99999999999999999999", false},
		{"1e5", false}, {"1.5E-3", false}, {"01", false}, {"-", false}, {"1.", false}, {".5", false},
		{"-x", false}, {"", false}, {"NaN", false}, {"00.5", false}, {"-01.5", false},
	} {
		d := NewDecoder(1, Limits{})
		d.data = []byte(c.in + "]")
		n, done := d.denseQuick(make([]float64, 1))
		if done != c.taken || n != 0 && !done {
			t.Errorf("%q: denseQuick read %d, done %v, want done %v", c.in, n, done, c.taken)
		}
		if !done && d.pos != 0 {
			t.Errorf("%q: denseQuick stopped at %d, want 0", c.in, d.pos)
		}
		quickMatches(t, c.in)
	}
	// Where it stops: before the number it does not take, past the comma
	// of the one before.
	d := NewDecoder(4, Limits{})
	d.data = []byte("0.5, 0.25,1e3,2]")
	if n, done := d.denseQuick(make([]float64, 4)); n != 2 || done || string(d.data[d.pos:]) != "1e3,2]" {
		t.Errorf("stopped after %d numbers (done %v) at %q, want 2 at \"1e3,2]\"", n, done, d.data[d.pos:])
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
	for i := 0; i < 100000; i++ {
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

	// The Eisel-Lemire path and its edges: ties, subnormals, overflow.
	for _, s := range []string{"-0", "0.0", "-0.0", "0e99999", "-0e-99999", "1e-400", "-1e-400", "1e310", "-1e310",
		"4.9406564584124654e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "2.2250738585072011e-308",
		"2.2250738585072014e-308", "2.2250738585072009e-308", "1.7976931348623157e308", "1.7976931348623158e308",
		"1.7976931348623159e308", "-1.7976931348623159e308", "179769313486231570000e288", "0.12345678901234567",
		"-1.2345678901234567e-05", "9007199254740993", "9007199254740993e0", "90071992547409930e-1",
		"9007199254740995", "9007199254740994.5", "4503599627370496.5", "4503599627370497.5", "1e23", "-1e23",
		"8.98846567431158e307", "1e-342", "1e-343", "5e-324", "1e308", "1e-307", "1e-308", "1e-309", "1e-326",
		"5764607523034234879e-342", "5764607523034234879e308", "1e-5", "123456789012345678e-360",
		"2.225073858507201136057409796709131975934819546351645648e-308", "7.4109846876186982e-323",
		"0.3", "0.30000000000000004", "3.0000000000000004e-1", "1.0000000000000002", "0.9999999999999999",
		"18446744073709551615", "5764607523034234879", "5764607523034234880", "9223372036854775807"} {
		numberMatches(t, s)
	}
	pow5 := uint64(1)
	for q := 0; q <= 23; q, pow5 = q+1, pow5*5 {
		// k × 10^q with odd k×5^q in [2^53, 2^54) is halfway between two
		// float64s: ties with short mantissas, for every exponent where
		// they exist, and their neighbours.
		lo, hi := (1<<53+pow5-1)/pow5, (1<<54-1)/pow5
		for i := 0; i < 200; i++ {
			k := lo + r.Uint64N(hi-lo+1)
			if k%2 == 0 {
				continue
			}
			w := k << uint(r.IntN(4))
			for _, v := range []uint64{w - 1, w, w + 1} {
				numberMatches(t, strconv.FormatUint(v, 10)+"e"+strconv.Itoa(q))
				if v > 0 {
					numberMatches(t, "-"+strconv.FormatUint(v, 10)+"0e"+strconv.Itoa(q-1))
				}
			}
		}
	}
	for d := 1; d <= 4; d++ {
		// o in [2^53, 2^54) times 2^-j as o × 5^d × 2^(d-j) × 10^-d, with
		// every digit in the scanned mantissa (at most 2^59×10): ties (odd
		// o) and float64s (even o) with q < 0, which the truncated table
		// leaves in doubt, and their neighbours.
		const maxMant = 1<<59*10 - 1
		p5 := powU64(5, d)
		top := min(1<<54, maxMant/p5)
		for i := 0; i < 500; i++ {
			o := 1<<53 + r.Uint64N(top-1<<53)
			if i%4 != 0 {
				o |= 1
			}
			w := o * p5
			for w <= maxMant/2 && r.IntN(2) == 0 {
				w <<= 1
			}
			for _, v := range []uint64{w - 1, w, w + 1} {
				numberMatches(t, strconv.FormatUint(v, 10)+"e-"+strconv.Itoa(d))
			}
		}
	}
	for i := 0; i < 1000; i++ {
		// exact midpoints of two neighbouring float64s, with all their
		// digits (over 19: strconv's path), then nudged off the tie.
		f := math.Abs(math.Float64frombits(r.Uint64()))
		if i%2 == 0 {
			f = math.Ldexp(1+r.Float64(), r.IntN(200)-100)
		}
		if math.IsInf(f, 0) || math.IsNaN(f) || f == math.MaxFloat64 {
			continue
		}
		mid := new(big.Rat).Add(new(big.Rat).SetFloat64(f), new(big.Rat).SetFloat64(math.Nextafter(f, math.Inf(1))))
		mid.Quo(mid, big.NewRat(2, 1))
		num, den := mid.Num(), mid.Denom() // den = 2^j
		j := den.BitLen() - 1
		digits := new(big.Int).Mul(num, new(big.Int).Exp(big.NewInt(5), big.NewInt(int64(j)), nil)).String()
		s := digits + "e-" + strconv.Itoa(j)
		numberMatches(t, s)
		numberMatches(t, digits+"1e-"+strconv.Itoa(j+1))
		numberMatches(t, digits[:len(digits)-1]+"4999e-"+strconv.Itoa(j+3))
		if len(digits) > 19 {
			// the tie's leading 17 digits, rounded both ways
			d17, _ := strconv.ParseUint(digits[:17], 10, 64)
			e := strconv.Itoa(len(digits) - 17 - j)
			numberMatches(t, strconv.FormatUint(d17, 10)+"e"+e)
			numberMatches(t, strconv.FormatUint(d17+1, 10)+"e"+e)
		}
	}
	for i := 0; i < 60000; i++ {
		var s string
		switch i % 6 {
		case 0: // random float64 bit patterns, shortest and with 17 significant digits
			f := math.Float64frombits(r.Uint64())
			if math.IsInf(f, 0) || math.IsNaN(f) {
				continue
			}
			numberMatches(t, strconv.FormatFloat(f, 'g', -1, 64))
			s = strconv.FormatFloat(f, 'e', 16, 64)
		case 1: // 17 significant digits, the point anywhere
			b := []byte(strconv.FormatUint(1e16+r.Uint64N(9e16), 10))
			p := r.IntN(len(b) + 1)
			s = string(b[:p]) + "." + string(b[p:])
			if p == 0 {
				s = "0" + strings.Repeat("0", r.IntN(3)) + s
				s = s[:1] + "." + strings.Repeat("0", r.IntN(8)) + s[2+len(s)-len(b)-2:]
			} else if p == len(b) {
				s += "0"
			}
			if r.IntN(2) == 0 {
				s = "-" + s
			}
		case 2: // mantissas of 1 to 19 digits, exponents from -350 to 310
			s = strconv.FormatUint(r.Uint64N(powU64(10, 1+r.IntN(19))), 10) + "e" + strconv.Itoa(r.IntN(661)-350)
		case 3: // near 2^53, scaled by powers of ten
			s = strconv.FormatUint(1<<53+uint64(r.IntN(64)-32), 10) + "e" + strconv.Itoa(r.IntN(80)-40)
		case 4: // 'e' forms with 16 digits after the point, all magnitudes
			s = strconv.FormatFloat(math.Ldexp(r.Float64()+0.5, r.IntN(2099)-1075), 'e', 16, 64)
		default: // random mantissas up to 2^64 at exponents near the path's edges
			s = strconv.FormatUint(r.Uint64()>>uint(r.IntN(64)), 10) + "e" + strconv.Itoa([]int{-342, -343, -330, -326, -324, -308, -307, 290, 292, 308, 309}[r.IntN(11)]+r.IntN(5)-2)
		}
		numberMatches(t, s)
	}
}

// powU64 is base^n (n >= 0; the caller keeps it within uint64).
func powU64(base uint64, n int) uint64 {
	p := uint64(1)
	for ; n > 0; n-- {
		p *= base
	}
	return p
}

// TestNumberEiselLemireTaken checks that numbers with 17 significant digits
// are read by eiselLemire, not by strconv.ParseFloat: all of them but those
// whose value is an exact binary fraction with a negative decimal exponent
// ("4503599627370496.5", 45035996273704965 × 10^-1), which the truncated
// table leaves just under a float64 or a tie, in doubt.
func TestNumberEiselLemireTaken(t *testing.T) {
	var fallbacks int
	d := NewDecoder(1, Limits{})
	hook := func(dd *Decoder) {
		if dd == d { // not another test's Decoder
			fallbacks++
		}
	}
	parseFloatHook.Store(&hook)
	defer parseFloatHook.Store(nil)
	read := func(s string) {
		d.data, d.pos = []byte(s), 0
		if _, ok, _ := d.number(); !ok {
			t.Fatalf("%q not read", s)
		}
	}
	read("12345678901234567890123") // more than 19 digits: strconv's
	if fallbacks != 1 {
		t.Fatalf("the hook counted %d fallbacks to strconv for one long number", fallbacks)
	}
	fallbacks = 0
	r := rand.New(rand.NewPCG(5, 6))
	const n = 20000
	taken := 0
	for i := 0; i < n; i++ {
		f := math.Ldexp(r.Float64()+0.5, r.IntN(2000)-1000)
		if i%2 == 0 {
			f = -f
		}
		s := strconv.FormatFloat(f, 'e', 16, 64) // -1.2345678901234567e-05
		if i%3 == 0 {
			s = strconv.FormatFloat(f, 'g', 17, 64)
		}
		before := fallbacks
		read(s)
		d.data, d.pos = []byte(s), 0
		nd, _ := d.scanNumber()
		g, ok := eiselLemire(nd.mant, nd.exp, nd.neg)
		if ok && math.Float64bits(g) != math.Float64bits(f) {
			t.Fatalf("eiselLemire(%d, %d) = %v for %q", nd.mant, nd.exp, g, s)
		}
		if fallbacks == before {
			taken++
		} else if ok || nd.exp >= 0 || nd.exp < -27 || nd.mant%powU64(5, -nd.exp) != 0 {
			t.Fatalf("%q (%d × 10^%d) went to strconv, eiselLemire ok %v", s, nd.mant, nd.exp, ok)
		}
	}
	if taken < n*99/100 {
		t.Fatalf("of %d numbers with 17 significant digits, eiselLemire read only %d", n, taken)
	}
	// What eiselLemire leaves to strconv: a tie and an exact float64 with
	// q < 0, overflow, subnormals, exponents out of the table.
	for _, c := range []struct {
		w uint64
		q int
	}{{45035996273704965, -1}, {94831467183405840, -1}, {1, 309}, {17976931348623159, 292},
		{5, -324}, {22250738585072011, -324}, {1, -343}} {
		if f, ok := eiselLemire(c.w, c.q, false); ok {
			t.Errorf("eiselLemire(%d, %d) = %v, want a fallback", c.w, c.q, f)
		}
	}
}

// TestNumberPow10Tab checks the table against its definition: T ≤ 10^q ×
// 2^(127-e) < T+1 with 2^127 ≤ T < 2^128.
func TestNumberPow10Tab(t *testing.T) {
	for q := pow10Min; q <= pow10Max; q++ {
		e := pow10Tab[q-pow10Min]
		T := new(big.Int).Lsh(new(big.Int).SetUint64(e[0]), 64)
		T.Or(T, new(big.Int).SetUint64(e[1]))
		T1 := new(big.Int).Add(T, big.NewInt(1))
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(q, -q))), nil)
		s := 127 - log2Pow10(q)
		// compare a = T × 2^-s × 10^-q with 1 as integers: T × den ≤ num < (T+1) × den
		num, den := big.NewInt(1), big.NewInt(1)
		if q >= 0 {
			num.Mul(num, p)
		} else {
			den.Mul(den, p)
		}
		if s >= 0 {
			num.Lsh(num, uint(s))
		} else {
			den.Lsh(den, uint(-s))
		}
		if T.BitLen() != 128 || new(big.Int).Mul(T, den).Cmp(num) > 0 || new(big.Int).Mul(T1, den).Cmp(num) <= 0 {
			t.Fatalf("pow10Tab[10^%d] = %x %x is not floor(10^%d × 2^%d) normalized", q, e[0], e[1], q, s)
		}
	}
}

// TestEightDigits: the word-at-a-time digit test and value against a byte
// loop and strconv, on digit runs with every non-digit byte value at every
// position.
func TestEightDigits(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(8, 8))
	for i := 0; i < 20000; i++ {
		var b [8]byte
		for k := range b {
			b[k] = '0' + byte(rng.IntN(10))
		}
		if i%2 == 1 { // one byte anything, at any place
			b[rng.IntN(8)] = byte(rng.IntN(256))
		}
		v := binary.LittleEndian.Uint64(b[:])
		want := true
		for _, c := range b {
			want = want && c >= '0' && c <= '9'
		}
		if got := eightDigits(v); got != want {
			t.Fatalf("%q: eightDigits %v, want %v", b[:], got, want)
		}
		if want {
			n, _ := strconv.ParseUint(string(b[:]), 10, 64)
			if got := parseEightDigits(v); got != n {
				t.Fatalf("%q: parseEightDigits %d, want %d", b[:], got, n)
			}
		}
	}
}

func FuzzNumber(f *testing.F) {
	for _, s := range []string{"0", "-1.5", "1e22", "9007199254740993", "0.1234", "1e-400", "12e", "0.12345678901234567",
		"-1.2345678901234567e-05", "4503599627370496.5", "1e23", "2.2250738585072011e-308", "1.7976931348623159e308",
		"123456789012345678901234567890", "0.000000000000000000001234567890123456789", "57646075230342348.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := NewDecoder(1, Limits{})
		d.data, d.pos = []byte(s), 0
		got, ok, err := d.number()
		if !ok {
			return
		}
		tok := s[:d.pos]
		want, werr := strconv.ParseFloat(tok, 64)
		if (err != nil) != (werr != nil) || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("%q: got %v (%v), strconv %v (%v)", tok, got, err, want, werr)
		}
		quickMatches(t, s)
	})
}

// BenchmarkMakePow10Tab is the table's cost at start-up.
func BenchmarkMakePow10Tab(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		pow10Tab = makePow10Tab()
	}
}
