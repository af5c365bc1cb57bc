package wire

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// Prediction is one output record before encoding.
type Prediction struct {
	ID        []byte // the input's id token
	Key       []byte
	Model     string
	YHat      float64
	Std       float64
	HasStd    bool
	Label     int    // ±1 for classification losses, 0 = absent
	Arm       []byte // the chosen arm's id token (bandit decision), nil when absent
	Mean, UCB float64
	Ranking   [][]byte // arm id tokens (ranking decision), nil when absent
	Updates   uint64
	Partition int
	Offset    int64
}

// AppendPrediction encodes p as the output JSON object (contract in
// docs/pipeline.md). Floats use the shortest representation that parses
// back to the same float64; a non-finite value is written as null.
func AppendPrediction(b []byte, p *Prediction) []byte {
	b = append(b, `{"id":`...)
	b = append(b, p.ID...)
	b = append(b, `,"key":`...)
	b = appendString(b, p.Key)
	if !utf8.Valid(p.Key) {
		// JSON strings are text: the key's invalid bytes became U+FFFD
		// above, so keys "\xff" and "\xfe" would read the same. The
		// bytes themselves, for (key, id) to stay unique downstream.
		b = append(b, `,"key_b64":"`...)
		b = base64.StdEncoding.AppendEncode(b, p.Key)
		b = append(b, '"')
	}
	b = append(b, `,"model":`...)
	b = appendString(b, []byte(p.Model))
	b = append(b, `,"y_hat":`...)
	b = appendFloat(b, p.YHat)
	if p.HasStd {
		b = append(b, `,"std":`...)
		b = appendFloat(b, p.Std)
	}
	if p.Arm != nil {
		b = append(b, `,"arm":`...)
		b = append(b, p.Arm...)
		b = append(b, `,"mean":`...)
		b = appendFloat(b, p.Mean)
		b = append(b, `,"ucb":`...)
		b = appendFloat(b, p.UCB)
	}
	if p.Ranking != nil {
		b = append(b, `,"ranking":[`...)
		for i, id := range p.Ranking {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, id...)
		}
		b = append(b, ']')
	}
	if p.Label != 0 {
		b = append(b, `,"label":`...)
		b = strconv.AppendInt(b, int64(p.Label), 10)
	}
	b = append(b, `,"n_updates":`...)
	b = strconv.AppendUint(b, p.Updates, 10)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(p.Partition), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, p.Offset, 10)
	return append(b, '}')
}

func appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

const hexDigits = "0123456789abcdef"

// plain reports whether every byte of s is one a JSON string holds as it
// is (plainString): its JSON string is s itself between quotes.
func plain(s []byte) bool {
	for _, c := range s {
		if !plainString[c] {
			return false
		}
	}
	return true
}

// appendString writes s as a JSON string; invalid UTF-8 bytes become U+FFFD
// (AppendPrediction adds a key's bytes in key_b64 then).
func appendString(b []byte, s []byte) []byte {
	b = append(b, '"')
	if plain(s) {
		// The usual key, id and model name: one copy, not a byte at a time.
		b = append(b, s...)
		return append(b, '"')
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// Output is an output record as its readers decode it with encoding/json
// (json.Unmarshal(value, &o)): every field AppendPrediction writes, a null
// (non-finite) number as a nil pointer, ids as their tokens.
// TestOutputRoundTrip checks it against AppendPrediction.
type Output struct {
	ID  Token  `json:"id"`
	Key string `json:"key"`
	// KeyB64 holds the key's bytes when they are not valid UTF-8 (Key
	// then has U+FFFD in their place); RoutingKey reads either.
	KeyB64    []byte   `json:"key_b64,omitempty"`
	Model     string   `json:"model"`
	YHat      *float64 `json:"y_hat"`
	Std       *float64 `json:"std,omitempty"`
	Arm       Token    `json:"arm,omitempty"`
	Mean      *float64 `json:"mean,omitempty"`
	UCB       *float64 `json:"ucb,omitempty"`
	Ranking   []Token  `json:"ranking,omitempty"`
	Label     int      `json:"label,omitempty"`
	NUpdates  uint64   `json:"n_updates"`
	Partition int      `json:"partition"`
	Offset    int64    `json:"offset"`
}

// RoutingKey is the output's message key as the input had it: KeyB64
// when present, else Key.
func (o *Output) RoutingKey() []byte {
	if o.KeyB64 != nil {
		return o.KeyB64
	}
	return []byte(o.Key)
}

// Token is an id as the records carry it: the JSON text of a string (with
// its quotes) or of an integer. Ids are compared by their tokens ("7" and 7
// are different ids).
type Token []byte

// UnmarshalJSON keeps the token as written.
func (t *Token) UnmarshalJSON(b []byte) error {
	*t = append((*t)[:0], b...)
	return nil
}

// MarshalJSON writes the token as it was read.
func (t Token) MarshalJSON() ([]byte, error) {
	if t == nil {
		return []byte("null"), nil
	}
	return t, nil
}

// String is the id's text: a string's value, an integer's digits.
func (t Token) String() string {
	var s string
	if json.Unmarshal(t, &s) == nil {
		return s
	}
	return string(t)
}
