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
	neg := d.eat('-')
	var mant uint64
	exact := true // mant holds every digit
	exp := 0
	digit := func(c byte) {
		if mant < 1<<59 {
			mant = mant*10 + uint64(c-'0')
		} else {
			exact = false
		}
	}
	switch {
	case d.eat('0'):
	case d.pos < len(d.data) && d.data[d.pos] >= '1' && d.data[d.pos] <= '9':
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			digit(d.data[d.pos])
			d.pos++
		}
	default:
		return 0, false, nil
	}
	if d.eat('.') {
		n := 0
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			digit(d.data[d.pos])
			exp--
			d.pos++
			n++
		}
		if n == 0 {
			return 0, false, nil
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		eneg := false
		if !d.eat('+') {
			eneg = d.eat('-')
		}
		e, n := 0, 0
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			if e < 10000 {
				e = e*10 + int(d.data[d.pos]-'0')
			}
			d.pos++
			n++
		}
		if n == 0 {
			return 0, false, nil
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if exact && mant < 1<<53 && exp >= -22 && exp <= 22 {
		f = float64(mant)
		if exp >= 0 {
			f *= exactPow10[exp]
		} else {
			f /= exactPow10[-exp]
		}
		if neg {
			f = -f
		}
		return f, true, nil
	}
	tok := d.data[start:d.pos]
	f, err = strconv.ParseFloat(unsafe.String(unsafe.SliceData(tok), len(tok)), 64)
	return f, true, err
}
