package wire

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"sync/atomic"
	"unsafe"
)

// The features' numbers, read in one pass.
//
// A JSON number whose decimal digits make an integer mantissa below 2^53,
// with a decimal exponent within ±22, is exactly float64(mantissa) times or
// over an exactly representable power of ten: one IEEE operation, so the
// correctly rounded value, bit for bit what strconv.ParseFloat returns
// (Clinger, "How to read floating point numbers accurately", PLDI 1990; the
// first path strconv takes too). Typical features ("0.25", "1200",
// "-3.1416") take it while the token is scanned.
//
// Longer ones (the 16 or 17 significant digits of a shortest round-trip
// float64, "0.12345678901234567", "-1.2345678901234567e-05") still have
// every digit in the 64-bit mantissa w; they take the second path,
// eiselLemire: w times a 128-bit truncation of 10^q, of which the leading
// 54 bits give the rounded result unless the truncation leaves them in
// doubt (Lemire, "Number parsing at a gigabyte per second", Software:
// Practice and Experience 51(8), 2021, section 5; Mushtak and Lemire, "Fast
// number parsing without fallback", Software: Practice and Experience,
// 2023, for the bounds on the second multiplication). The cases it cannot
// decide, results that are subnormal or overflow, mantissas that do not
// fit (over 19 digits, or 19 above 2^59 × 10) and exponents outside the
// table go to strconv.ParseFloat with the scanned token.

// exactPow10 holds the powers of ten that float64 represents exactly.
var exactPow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseFloatHook, when a test sets it, is called with the Decoder each time
// number() falls back to strconv.ParseFloat (an atomic load on that path
// only).
var parseFloatHook atomic.Pointer[func(*Decoder)]

// number reads the JSON number at d.pos. ok is false for text that is not
// a JSON number (d.pos is then somewhere inside it); err is strconv's, for
// a number out of float64's range.
func (d *Decoder) number() (f float64, ok bool, err error) {
	start := d.pos
	n, ok := d.scanNumber()
	if !ok {
		return 0, false, nil
	}
	if n.exact {
		if n.mant < 1<<53 && n.exp >= -22 && n.exp <= 22 {
			f = float64(n.mant)
			if n.exp >= 0 {
				f *= exactPow10[n.exp]
			} else {
				f /= exactPow10[-n.exp]
			}
			if n.neg {
				f = -f
			}
			return f, true, nil
		}
		if f, ok := eiselLemire(n.mant, n.exp, n.neg); ok {
			return f, true, nil
		}
	}
	if h := parseFloatHook.Load(); h != nil {
		(*h)(d)
	}
	tok := d.data[start:d.pos]
	f, err = strconv.ParseFloat(unsafe.String(unsafe.SliceData(tok), len(tok)), 64)
	return f, true, err
}

// denseQuick reads a dense vector's numbers, after its '[', for as long as
// they have the shapes features have: an optional minus, at most 19 digits
// in all with an optional fraction, no exponent ("0.25", "-3.1416", "1200",
// and the 16 or 17 digits of a shortest round-trip float64). The mantissa
// then fits in 64 bits and the exponent is within -19, so the value is
// what number() computes from the same mantissa and exponent: below 2^53
// the single IEEE division (Clinger, above), above it the same eiselLemire
// call. Here it is one loop with the separators, without the general
// path's per-token calls or its finiteness checks, which these numbers
// cannot fail: a decision with 100 arms of 16 four-decimal features
// decodes in 15.6 µs, against 22.4 with a call per number and 33.0 with the
// general scanner (BenchmarkDecodeDecision, 2-core AMD EPYC, 2026-11-27).
//
// It stores the numbers in dst and returns how many, d.pos past the last
// one's comma; done when that was the last of exactly len(dst) and its ']'
// is read too. Anything else (an exponent, a mantissa number() leaves to
// strconv, a vector of another length, bad JSON) stops it before the
// number concerned, where the general path goes on and reads it or says
// what is wrong.
func (d *Decoder) denseQuick(dst []float64) (n int, done bool) {
	data, pos := d.data, d.pos
	var ok bool
	for n < len(dst) {
		p := pos
		neg := p < len(data) && data[p] == '-'
		if neg {
			p++
		}
		start := p
		var mant uint64
		for ; p < len(data); p++ {
			c := data[p] - '0'
			if c > 9 {
				break
			}
			mant = mant*10 + uint64(c)
		}
		digits := p - start
		if digits == 0 || digits > 1 && data[start] == '0' {
			if !neg && p < len(data) && isSpace(data[p]) {
				pos = skipSpace(data, p) // whitespace before the number
				continue
			}
			break // no digit, or a leading zero
		}
		frac := 0
		if p < len(data) && data[p] == '.' {
			p++
			fs := p
			for ; p < len(data); p++ {
				c := data[p] - '0'
				if c > 9 {
					break
				}
				mant = mant*10 + uint64(c)
			}
			if frac = p - fs; frac == 0 {
				break
			}
		}
		if digits+frac > 19 {
			break // the mantissa may have wrapped
		}
		var f float64
		if mant < 1<<53 { // number()'s first path (frac <= 19)
			if f = float64(mant) / exactPow10[frac]; neg {
				f = -f
			}
		} else if mant >= 10<<59 {
			break // number()'s scanner leaves such a mantissa to strconv
		} else if f, ok = eiselLemire(mant, -frac, neg); !ok {
			break
		}
	separator:
		if p >= len(data) {
			break
		}
		switch data[p] {
		case ',':
			dst[n] = f
			n++
			pos = p + 1
			continue
		case ']':
			if n == len(dst)-1 {
				dst[n] = f
				d.pos = p + 1
				return n + 1, true
			}
		case ' ', '\n', '\t', '\r':
			p = skipSpace(data, p)
			goto separator
		}
		break // an exponent, bad JSON, or fewer numbers than len(dst)
	}
	d.pos = pos
	return n, false
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

// skipSpace returns the position of the first byte of data from p that is
// not JSON whitespace.
func skipSpace(data []byte, p int) int {
	for p < len(data) && isSpace(data[p]) {
		p++
	}
	return p
}

// The range of decimal exponents of pow10Tab, the paper's: any w < 2^64
// times 10^q is below half the least subnormal for q < -342 and above
// math.MaxFloat64 for q > 308 (results below 2^-1022, from q ≈ -327 down,
// go to strconv anyway).
const (
	pow10Min = -342
	pow10Max = 308
)

// pow10Tab[q-pow10Min] is 10^q's leading 128 bits, truncated, high word
// first: floor(10^q × 2^(127-log2Pow10(q))), which lies in [2^127, 2^128).
// Computed with math/big when the package initialises, so no literal table:
// it costs about 0.3 ms at start-up (0.17 to 0.4 ms measured with
// BenchmarkMakePow10Tab and GODEBUG=inittrace=1 on a 2-core AMD EPYC), and
// 46 kB of garbage in 350 allocations; the table itself is 10.4 kB.
var pow10Tab = makePow10Tab()

// log2Pow10 is floor(log2(10^q)) for |q| < 643, 217706 being
// round(2^16 × log2(10)) (makePow10Tab's check of the top bit would panic
// for a wrong one).
func log2Pow10(q int) int { return q * 217706 >> 16 }

func makePow10Tab() (tab [pow10Max - pow10Min + 1][2]uint64) {
	var p, t, ten big.Int // p = 10^|q|
	p.SetInt64(1)
	ten.SetInt64(10)
	var buf [16]byte
	set := func(q int) {
		if t.BitLen() != 128 {
			panic("wire: pow10Tab: 10^" + strconv.Itoa(q) + " not normalized")
		}
		t.FillBytes(buf[:])
		tab[q-pow10Min] = [2]uint64{binary.BigEndian.Uint64(buf[:8]), binary.BigEndian.Uint64(buf[8:])}
	}
	for q := 0; q <= max(pow10Max, -pow10Min); q++ {
		if q <= pow10Max { // 10^q × 2^(127-e), a shift of the integer 10^q
			if s := 127 - log2Pow10(q); s >= 0 {
				t.Lsh(&p, uint(s))
			} else {
				t.Rsh(&p, uint(-s))
			}
			set(q)
		}
		if q > 0 && -q >= pow10Min { // 2^(127-e) / 10^q, e = log2Pow10(-q) < 0
			t.SetInt64(1)
			t.Lsh(&t, uint(127-log2Pow10(-q)))
			t.Quo(&t, &p)
			set(-q)
		}
		p.Mul(&p, &ten)
	}
	return tab
}

// eiselLemire returns w × 10^q, negated if neg, correctly rounded to
// float64 (as strconv.ParseFloat rounds: to nearest, ties to even); ok is
// false when the truncated table leaves the rounding in doubt, the result
// is subnormal or overflows, or q is out of the table.
//
// With w shifted left until its top bit is set, e = log2Pow10(q) and T =
// pow10Tab[q], T ≤ 10^q × 2^(127-e) < T+1: the exact product P = w × 10^q
// × 2^(127-e), in [2^190, 2^192), exceeds the 192-bit w×T by less than w,
// less than one unit of w×T's top 128 bits. The top word hi holds P's 54
// leading bits (53 and the rounding bit) at bits 63 to 10, or 62 to 9.
// First only w × T's high word is multiplied: P/2^64 lies in [(hi, lo),
// (hi, lo) + w), so the leading bits can differ from hi's only if hi's 9
// low bits are all ones and lo+w carries. Then the low word is multiplied
// too, making (hi, lo, l2) = w×T, which P exceeds by less than w: the
// carry into the leading bits is in doubt only if hi's 9 low bits and lo
// are all ones and l2+w carries. (That is the case of every P with q < 0
// that is exactly a float64 or a tie, as 4503599627370496.5 is: w×T lies
// just under it.) Past that, the rounding bit decides, except for
// a tie, P exactly halfway between two float64s; for q in [0, 27], T is
// 5^q shifted, so w×T is P and zero bits under the rounding bit are a tie,
// rounded to even. (Ties exist only for q in [-4, 23]; those with q < 0
// are the doubtful cases above; for other q, P > w×T, and zero bits under
// a set rounding bit mean P is above the tie: rounded up.)
func eiselLemire(w uint64, q int, neg bool) (float64, bool) {
	var sign uint64
	if neg {
		sign = 1 << 63
	}
	if w == 0 {
		return math.Float64frombits(sign), true
	}
	if q < pow10Min || q > pow10Max {
		return 0, false
	}
	l := bits.LeadingZeros64(w)
	w <<= uint(l)
	t := &pow10Tab[q-pow10Min]
	hi, lo := bits.Mul64(w, t[0])
	if hi&0x1ff == 0x1ff && lo+w < lo {
		h2, l2 := bits.Mul64(w, t[1])
		var c uint64
		lo, c = bits.Add64(lo, h2, 0)
		hi += c
		if hi&0x1ff == 0x1ff && lo == math.MaxUint64 && l2+w < l2 {
			return 0, false
		}
	}
	top := int(hi >> 63)
	shift := uint(9 + top)
	m := hi >> shift // 2^53 ≤ m < 2^54
	if m&3 == 1 && lo == 0 && m<<shift == hi && q >= 0 && q <= 27 {
		m &^= 1 // a tie, and m's even neighbour is below
	}
	// w × 10^q ≈ hi × 2^(e+1-l) ≈ m × 2^(e+10+top-l); the float's
	// biased exponent is that of m/2 × 2^(e+11+top-l), m/2 in [2^52, 2^53).
	exp := log2Pow10(q) + 11 + top - l + 52 + 1023
	if exp < 1 {
		return 0, false // subnormal: another rounding
	}
	m = (m + m&1) >> 1
	if m == 1<<53 {
		m >>= 1
		exp++
	}
	if exp > 2046 {
		return 0, false // overflow: strconv's ±Inf and error
	}
	return math.Float64frombits(sign | uint64(exp)<<52 | m&(1<<52-1)), true
}

// decimal is a scanned number: ±mant × 10^exp, exact when mant holds every
// digit.
type decimal struct {
	mant  uint64
	exp   int
	exact bool
	neg   bool
}

// scanNumber reads a JSON number's grammar at d.pos, accumulating its
// digits; ok is false for text that is not one.
func (d *Decoder) scanNumber() (n decimal, ok bool) {
	n.exact = true
	n.neg = d.eat('-')
	switch {
	case d.eat('0'):
	case d.pos < len(d.data) && d.data[d.pos] >= '1' && d.data[d.pos] <= '9':
		d.mantissaDigits(&n)
	default:
		return n, false
	}
	if d.eat('.') {
		k := d.mantissaDigits(&n)
		if k == 0 {
			return n, false
		}
		n.exp -= k
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		eneg := false
		if !d.eat('+') {
			eneg = d.eat('-')
		}
		e, k := 0, 0
		for ; d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9'; d.pos, k = d.pos+1, k+1 {
			if e < 10000 {
				e = e*10 + int(d.data[d.pos]-'0')
			}
		}
		if k == 0 {
			return n, false
		}
		if eneg {
			e = -e
		}
		n.exp += e
	}
	return n, true
}

// eightDigits reports whether the 8 bytes of v (little-endian) are all
// ASCII digits: a byte is 0x30-0x39 exactly when its high nibble is 3 and
// adding 6 leaves it at 3. Bytes handled in one word (SWAR: L. Lamport,
// "Multiple byte processing with full-word instructions", CACM 18(8) 1975).
func eightDigits(v uint64) bool {
	return (v&0xF0F0F0F0F0F0F0F0)|(((v+0x0606060606060606)&0xF0F0F0F0F0F0F0F0)>>4) == 0x3333333333333333
}

// parseEightDigits returns the number the 8 ASCII digits of v spell, the
// first byte (lowest) most significant: adjacent digits combined into
// pairs, then the four pairs into the result with two multiplications
// (D. Lemire, "Quickly parsing eight digits", 2018).
func parseEightDigits(v uint64) uint64 {
	const mask = 0x000000FF000000FF
	const mul1 = 0x000F424000000064 // 100 + (1000000 << 32)
	const mul2 = 0x0000271000000001 // 1 + (10000 << 32)
	v -= 0x3030303030303030
	v = v*10 + v>>8
	return ((v&mask)*mul1 + (v>>16&mask)*mul2) >> 32
}

// mantissaDigits adds the digits at d.pos to n.mant (n.exact turns false
// once it cannot take more) and returns how many there were.
//
// The loop works on locals, written back once: through d and n the
// compiler stores the position and the mantissa at every digit.
func (d *Decoder) mantissaDigits(n *decimal) int {
	data, start := d.data, d.pos
	pos, mant := start, n.mant
	// Eight digits at a time while the mantissa is so small that the
	// digit loop below would take all eight (it takes a digit while mant <
	// 2^59; below 2^59/10^8 seven more digits keep it there): the same
	// mantissa, with a quarter of the loop's work on long numbers.
	for pos+8 <= len(data) && mant < (1<<59)/100000000 {
		v := binary.LittleEndian.Uint64(data[pos:])
		if !eightDigits(v) {
			break
		}
		mant = mant*100000000 + parseEightDigits(v)
		pos += 8
	}
	for ; pos < len(data); pos++ {
		c := data[pos] - '0'
		if c > 9 {
			break
		}
		if mant < 1<<59 {
			mant = mant*10 + uint64(c)
		} else {
			n.exact = false
		}
	}
	d.pos, n.mant = pos, mant
	return pos - start
}
