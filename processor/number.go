package processor

import (
	"strconv"
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
// "-3.1416") take it while the token is scanned; longer ones (the 17
// significant digits of a shortest round-trip float64) go to
// strconv.ParseFloat with the scanned token.

// exactPow10 holds the powers of ten that float64 represents exactly.
var exactPow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// number reads the JSON number at d.pos. ok is false for text that is not
// a JSON number (d.pos is then somewhere inside it); err is strconv's, for
// a number out of float64's range.
func (d *decoder) number() (f float64, ok bool, err error) {
	start := d.pos
	n, ok := d.scanNumber()
	if !ok {
		return 0, false, nil
	}
	if n.exact && n.mant < 1<<53 && n.exp >= -22 && n.exp <= 22 {
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
	tok := d.data[start:d.pos]
	f, err = strconv.ParseFloat(unsafe.String(unsafe.SliceData(tok), len(tok)), 64)
	return f, true, err
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
func (d *decoder) scanNumber() (n decimal, ok bool) {
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

// mantissaDigits adds the digits at d.pos to n.mant (n.exact turns false
// once it cannot take more) and returns how many there were.
func (d *decoder) mantissaDigits(n *decimal) int {
	k := 0
	for ; d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9'; d.pos, k = d.pos+1, k+1 {
		if n.mant < 1<<59 {
			n.mant = n.mant*10 + uint64(d.data[d.pos]-'0')
		} else {
			n.exact = false
		}
	}
	return k
}
