package wire

import (
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// Record is one decoded value. Slices point into the Decoder's reusable
// buffers or into the message value: valid until the next Decode.
type Record struct {
	Kind   Kind
	ID     []byte // the raw JSON token of "id" (a string with quotes, or a number)
	X      []float64
	HasY   bool
	Y      float64 // y or reward
	Reward bool    // the label came as "reward"
	HasTs  bool
	Ts     int64
	Arm    []byte      // raw token of "arm" in a reward, nil when absent
	Arms   [][]float64 // decision candidates
	ArmIDs [][]byte    // raw tokens of the arms' ids
}

// Decoder parses record values without reflection, reusing its buffers, so
// that a steady stream of records allocates nothing (BenchmarkDecode).
//
// Grammar: one JSON object (RFC 8259) with the known fields id, x, y,
// reward, arm, arms, ts, delete; unknown fields are skipped (forward
// compatibility); a known field repeated, as written or with escapes, is
// bad_json; ids are within the limits and a decision's arm ids distinct.
// The literals NaN, Infinity and -Infinity (which Python's json module
// writes) are recognised only to dead-letter the record as non_finite
// rather than bad_json.
type Decoder struct {
	dim  int
	lim  Limits
	data []byte
	pos  int

	xbuf    []float64
	armFlat []float64
	armRows [][]float64
	armIDs  [][]byte
	seen    []bool
	slots   []int32  // repeatedArm's hash table of arm indices
	armKeys [][]byte // the arms' ids in canonical form
	canon   []byte   // canonical forms of escaped arm ids
	name    []byte   // an escaped field name, unescaped (fieldName)
	escaped bool     // the last string scanned held an escape
	rec     Record
	keyBuf  []byte // a query's key, unescaped (DecodeQuery)
	query   Query
}

// NewDecoder returns a decoder of records whose x has dim features and
// whose ids are within lim (zero fields: the defaults).
func NewDecoder(dim int, lim Limits) *Decoder {
	return &Decoder{dim: dim, lim: lim.WithDefaults(), xbuf: make([]float64, dim), seen: make([]bool, dim)}
}

// Limits are the decoder's limits, defaults applied.
func (d *Decoder) Limits() Limits { return d.lim }

// The known fields, as bits of the set a record has.
const (
	fID = 1 << iota
	fX
	fY
	fReward
	fArm
	fArms
	fTs
	fDelete
)

// fieldNames names the known fields, in the order of their bits.
var fieldNames = [...]string{"id", "x", "y", "reward", "arm", "arms", "ts", "delete"}

// Decode parses value. The returned record is valid until the next call.
func (d *Decoder) Decode(value []byte) (*Record, error) {
	got, err := d.object(value, nil)
	if err != nil {
		return nil, err
	}
	return &d.rec, d.classify(got)
}

// object parses value, one JSON object, into d.rec and returns the set of
// known fields it has. A field name that is not a record field goes to
// other when set (a scoring query's fields), else it is skipped.
func (d *Decoder) object(value []byte, other func(name []byte) error) (int, error) {
	d.data, d.pos = value, 0
	r := &d.rec
	*r = Record{}
	d.armFlat, d.armRows, d.armIDs = d.armFlat[:0], d.armRows[:0], d.armIDs[:0]
	d.skipWS()
	if !d.eat('{') {
		return 0, Bad(ReasonBadJSON, "value is not a JSON object")
	}
	var got int
	d.skipWS()
	if !d.eat('}') {
		for {
			d.skipWS()
			name, err := d.fieldName()
			if err != nil {
				return 0, err
			}
			d.skipWS()
			if !d.eat(':') {
				return 0, Bad(ReasonBadJSON, "missing ':' after field name")
			}
			d.skipWS()
			bit := 0
			switch string(name) { // no allocation: the compiler compares in place
			case `"id"`:
				bit = fID
				r.ID, err = d.boundedID("id")
			case `"x"`:
				bit = fX
				r.X, err = d.vector(d.xbuf, "x")
			case `"y"`:
				bit = fY
				r.Y, err = d.finite("y")
			case `"reward"`:
				bit = fReward
				r.Y, err = d.finite("reward")
				r.Reward = true
			case `"arm"`:
				bit = fArm
				r.Arm, err = d.boundedID("arm")
			case `"arms"`:
				bit = fArms
				err = d.armsList()
			case `"delete"`:
				bit = fDelete
				if !d.literal("true") {
					err = Bad(ReasonWrongType, "delete: want true")
				}
			case `"ts"`:
				bit = fTs
				var t float64
				t, err = d.finite("ts")
				if err == nil && (t != math.Trunc(t) || math.Abs(t) > 1<<62) {
					err = Bad(ReasonWrongType, "ts: want an integer number of milliseconds")
				}
				r.Ts, r.HasTs = int64(t), true
			default:
				if other != nil {
					err = other(name)
				} else {
					err = d.skipValue(0)
				}
			}
			if got&bit != 0 {
				// Named from the table: name may be the decoder's buffer,
				// which an escaped name inside the value has reused.
				return 0, Bad(ReasonBadJSON, "repeated field "+fieldNames[bits.TrailingZeros(uint(bit))])
			}
			got |= bit
			if err != nil {
				return 0, err
			}
			d.skipWS()
			if d.eat(',') {
				continue
			}
			if d.eat('}') {
				break
			}
			return 0, Bad(ReasonBadJSON, "expected ',' or '}' in object")
		}
	}
	d.skipWS()
	if d.pos != len(d.data) {
		return 0, Bad(ReasonBadJSON, "trailing data after the object")
	}
	return got, nil
}

// classify sets r.Kind from the set of fields present.
func (d *Decoder) classify(got int) error {
	r := &d.rec
	if got&fID == 0 {
		return Bad(ReasonMissingField, "id is required")
	}
	labelled := got&(fY|fReward) != 0
	r.HasY = labelled
	switch {
	case got&fDelete != 0 && got&^(fID|fDelete|fTs) != 0:
		return Bad(ReasonBadFields, "delete goes with id (and ts) only")
	case got&fDelete != 0:
		r.Kind = KindDelete
	case got&fY != 0 && got&fReward != 0:
		return Bad(ReasonBadFields, "y and reward together")
	case got&fX != 0 && got&fArms != 0:
		return Bad(ReasonBadFields, "x and arms together")
	case got&fArm != 0 && (got&(fX|fArms) != 0 || !labelled):
		return Bad(ReasonBadFields, "arm belongs to a reward record only")
	case got&fX != 0 && got&fReward != 0:
		return Bad(ReasonBadFields, "x with reward: a reward answers an arms record")
	case got&fArms != 0 && labelled:
		return Bad(ReasonBadFields, "arms with a label")
	case got&fX != 0 && labelled:
		r.Kind = KindLabeled
	case got&fX != 0:
		r.Kind = KindFeatures
	case got&fArms != 0:
		r.Kind = KindDecision
		r.Arms, r.ArmIDs = d.armRows, d.armIDs
	case labelled:
		r.Kind = KindLabel
	default:
		return Bad(ReasonMissingField, "want x, arms, y or reward")
	}
	return nil
}

// literal consumes the JSON literal lit (true, false, null) if it is next.
func (d *Decoder) literal(lit string) bool {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		return false
	}
	d.pos += len(lit)
	return true
}

func (d *Decoder) skipWS() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *Decoder) eat(c byte) bool {
	if d.pos < len(d.data) && d.data[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

// plainString marks the bytes a JSON string holds as they are: printable
// ASCII but the quote and the backslash.
var plainString = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str scans a JSON string and returns its raw token (with quotes);
// d.escaped says whether it holds an escape.
func (d *Decoder) str() ([]byte, error) {
	start := d.pos
	if !d.eat('"') {
		return nil, Bad(ReasonBadJSON, "expected a string")
	}
	ascii := true
	d.escaped = false
	for d.pos < len(d.data) {
		// Most of a string's bytes need no look: skip them on locals.
		data, p := d.data, d.pos
		for p < len(data) && plainString[data[p]] {
			p++
		}
		if d.pos = p; p == len(data) {
			break
		}
		c := data[p]
		switch {
		case c == '"':
			d.pos++
			tok := d.data[start:d.pos]
			if !ascii && !utf8.Valid(tok) {
				return nil, Bad(ReasonBadJSON, "string is not valid UTF-8")
			}
			return tok, nil
		case c == '\\':
			d.escaped = true
			if d.pos+1 >= len(d.data) {
				return nil, Bad(ReasonBadJSON, "truncated escape")
			}
			switch d.data[d.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.pos += 2
			case 'u':
				if d.pos+6 > len(d.data) {
					return nil, Bad(ReasonBadJSON, "truncated \\u escape")
				}
				for _, h := range d.data[d.pos+2 : d.pos+6] {
					if !isHex(h) {
						return nil, Bad(ReasonBadJSON, "bad \\u escape")
					}
				}
				d.pos += 6
			default:
				return nil, Bad(ReasonBadJSON, "bad escape")
			}
		case c < 0x20:
			return nil, Bad(ReasonBadJSON, "control character in string")
		default:
			if c >= 0x80 {
				ascii = false
			}
			d.pos++
		}
	}
	return nil, Bad(ReasonBadJSON, "unterminated string")
}

// fieldName scans a field name and returns it as the known names compare
// with it: its raw token, or, when it holds escapes, the token unescaped
// and quoted again (canonical), so that "\u0078" is x, as for
// encoding/json and Python's json (a name repeated that way is then caught
// as repeated, where it used to be skipped as unknown and the first value
// kept while they take the last).
func (d *Decoder) fieldName() ([]byte, error) {
	tok, err := d.str()
	if err != nil || !d.escaped {
		return tok, err
	}
	d.name = canonical(d.name[:0], tok)
	return d.name, nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// numToken scans a JSON number and returns its text.
func (d *Decoder) numToken() ([]byte, bool) {
	start := d.pos
	if _, ok := d.scanNumber(); !ok {
		return nil, false
	}
	return d.data[start:d.pos], true
}

// hasLiteral consumes lit if it comes next.
func (d *Decoder) hasLiteral(lit string) bool {
	if len(d.data)-d.pos >= len(lit) && string(d.data[d.pos:d.pos+len(lit)]) == lit {
		d.pos += len(lit)
		return true
	}
	return false
}

// finite reads a JSON number that must be a finite float64.
func (d *Decoder) finite(field string) (float64, error) {
	if d.pos >= len(d.data) {
		return 0, Bad(ReasonBadJSON, field+": truncated")
	}
	c := d.data[d.pos]
	if c == '-' || c >= '0' && c <= '9' {
		start := d.pos
		f, ok, err := d.number()
		if !ok {
			if d.pos = start; d.eat('-') && d.hasLiteral("Infinity") {
				return 0, Bad(ReasonNonFinite, field+": -Infinity")
			}
			return 0, Bad(ReasonBadJSON, field+": malformed number")
		}
		if err != nil || math.IsInf(f, 0) {
			return 0, Bad(ReasonNonFinite, field+": number out of float64 range")
		}
		return f, nil
	}
	if d.hasLiteral("NaN") || d.hasLiteral("Infinity") {
		return 0, Bad(ReasonNonFinite, field+": NaN or Infinity")
	}
	if err := d.skipValue(0); err != nil {
		return 0, err
	}
	return 0, Bad(ReasonWrongType, field+": want a number")
}

// idToken reads an id: a JSON string or an integer number, kept as its raw token.
func (d *Decoder) idToken(field string) ([]byte, error) {
	if d.pos < len(d.data) && d.data[d.pos] == '"' {
		return d.str()
	}
	if d.pos < len(d.data) && (d.data[d.pos] == '-' || d.data[d.pos] >= '0' && d.data[d.pos] <= '9') {
		tok, ok := d.numToken()
		if !ok {
			return nil, Bad(ReasonBadJSON, field+": malformed number")
		}
		for _, c := range tok {
			if c == '.' || c == 'e' || c == 'E' {
				return nil, Bad(ReasonWrongType, field+": want a string or an integer")
			}
		}
		return tok, nil
	}
	if err := d.skipValue(0); err != nil {
		return nil, err
	}
	return nil, Bad(ReasonWrongType, field+": want a string or an integer")
}

// boundedID is idToken within the limit on ids; field names the id in the
// dead letter.
func (d *Decoder) boundedID(field string) ([]byte, error) {
	tok, err := d.idToken(field)
	if err == nil && len(tok) > d.lim.ID {
		return nil, tooLong(field, len(tok), "max_id_bytes", d.lim.ID)
	}
	return tok, err
}

// vector reads x, dense [..] or sparse {"i": v}, into dst (len dim).
func (d *Decoder) vector(dst []float64, field string) ([]float64, error) {
	dst = dst[:d.dim]
	if d.eat('[') {
		n, done := d.denseQuick(dst)
		if done {
			return dst, nil
		}
		d.skipWS()
		if n > 0 || !d.eat(']') {
			for {
				d.skipWS()
				v, err := d.finite(field)
				if err != nil {
					return nil, err
				}
				if n < len(dst) {
					dst[n] = v
				}
				n++
				d.skipWS()
				if d.eat(',') {
					continue
				}
				if d.eat(']') {
					break
				}
				return nil, Bad(ReasonBadJSON, field+": expected ',' or ']'")
			}
		}
		if n != d.dim {
			return nil, Bad(ReasonDimension, field+": length "+strconv.Itoa(n)+", model.dim is "+strconv.Itoa(d.dim))
		}
		return dst, nil
	}
	if d.eat('{') {
		clear(dst)
		seen := d.seen[:d.dim]
		clear(seen)
		d.skipWS()
		if d.eat('}') {
			return dst, nil
		}
		for {
			d.skipWS()
			name, err := d.str()
			if err != nil {
				return nil, err
			}
			idx, ok := parseIndex(name)
			if !ok {
				return nil, Bad(ReasonWrongType, field+": sparse keys are 0-based decimal indices")
			}
			d.skipWS()
			if !d.eat(':') {
				return nil, Bad(ReasonBadJSON, field+": missing ':'")
			}
			d.skipWS()
			v, err := d.finite(field)
			if err != nil {
				return nil, err
			}
			if idx >= d.dim {
				return nil, Bad(ReasonDimension, field+": sparse index "+strconv.Itoa(idx)+" >= model.dim "+strconv.Itoa(d.dim))
			}
			if seen[idx] {
				return nil, Bad(ReasonDimension, field+": sparse index "+strconv.Itoa(idx)+" repeated")
			}
			seen[idx] = true
			dst[idx] = v
			d.skipWS()
			if d.eat(',') {
				continue
			}
			if d.eat('}') {
				return dst, nil
			}
			return nil, Bad(ReasonBadJSON, field+": expected ',' or '}'")
		}
	}
	if err := d.skipValue(0); err != nil {
		return nil, err
	}
	return nil, Bad(ReasonWrongType, field+": want an array or an object of numbers")
}

// parseIndex reads a quoted decimal index without escapes ("0", "17").
func parseIndex(tok []byte) (int, bool) {
	s := tok[1 : len(tok)-1]
	if len(s) == 0 || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// maxDepth bounds the nesting of skipped values.
const maxDepth = 64

// skipValue scans any JSON value (unknown fields, wrong-typed values).
func (d *Decoder) skipValue(depth int) error {
	if depth > maxDepth {
		return Bad(ReasonBadJSON, "nesting too deep")
	}
	if d.pos >= len(d.data) {
		return Bad(ReasonBadJSON, "truncated value")
	}
	switch c := d.data[d.pos]; {
	case c == '"':
		_, err := d.str()
		return err
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		d.pos++
		d.skipWS()
		if d.eat(closer) {
			return nil
		}
		for {
			d.skipWS()
			if c == '{' {
				if _, err := d.str(); err != nil {
					return err
				}
				d.skipWS()
				if !d.eat(':') {
					return Bad(ReasonBadJSON, "missing ':'")
				}
				d.skipWS()
			}
			if err := d.skipValue(depth + 1); err != nil {
				return err
			}
			d.skipWS()
			if d.eat(',') {
				continue
			}
			if d.eat(closer) {
				return nil
			}
			return Bad(ReasonBadJSON, "expected ',' or closing bracket")
		}
	case c == '-' || c >= '0' && c <= '9':
		if _, ok := d.numToken(); !ok {
			if d.hasLiteral("Infinity") {
				return Bad(ReasonNonFinite, "-Infinity")
			}
			return Bad(ReasonBadJSON, "malformed number")
		}
		return nil
	case d.hasLiteral("true"), d.hasLiteral("false"), d.hasLiteral("null"):
		return nil
	case d.hasLiteral("NaN"), d.hasLiteral("Infinity"):
		return Bad(ReasonNonFinite, "NaN or Infinity")
	}
	return Bad(ReasonBadJSON, "unexpected character")
}
