package wire

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// canonical appends to dst the form under which two tokens are the same
// name or id for the readers of the JSON (encoding/json, Python's json):
// a string without escapes as it is, a string with escapes unescaped
// between its quotes, the integer -0 as 0. A string's form keeps its
// quotes, so it never equals a number's. tok is a token the decoder has
// checked (a valid string or integer).
func canonical(dst, tok []byte) []byte {
	if len(tok) == 2 && tok[0] == '-' && tok[1] == '0' {
		return append(dst, '0')
	}
	if tok[0] != '"' {
		return append(dst, tok...)
	}
	dst = append(dst, '"')
	for i := 1; i < len(tok)-1; i++ {
		c := tok[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		switch c = tok[i]; c {
		case 'u':
			r := hex4(tok[i+1:])
			i += 4
			if utf16.IsSurrogate(r) {
				// A high surrogate followed by an escaped low one is one
				// character; any other surrogate is U+FFFD (as encoding/json).
				r2 := utf8.RuneError
				if i+6 < len(tok) && tok[i+1] == '\\' && tok[i+2] == 'u' {
					r2 = hex4(tok[i+3:])
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		default: // " \ /
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// needsCanonical reports whether tok's canonical form differs from it.
func needsCanonical(tok []byte) bool {
	return bytes.IndexByte(tok, '\\') >= 0 || len(tok) == 2 && tok[0] == '-' && tok[1] == '0'
}

// hex4 is the value of the four hex digits that b starts with.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
