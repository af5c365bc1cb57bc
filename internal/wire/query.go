package wire

import (
	"encoding/base64"
	"strconv"
)

// Query is a scoring request (POST /v1/score, docs/bandits.md "Scoring on
// request"): the routing key, and either x (a prediction) or arms (a
// decision: the arm a bandit would choose, or the ranking of a regression
// learner), with the same syntax and checks as an input record's. ID, when
// given, is echoed as the answer's id. Slices point into the Decoder's
// buffers or the request body: valid until the next decode.
type Query struct {
	Key    []byte
	ID     []byte // the raw token of "id", nil when absent
	X      []float64
	Arms   [][]float64
	ArmIDs [][]byte
}

// DecodeQuery parses a scoring request: one JSON object with key (a
// string) or key_b64 (the key's bytes in base64, for keys that are not
// UTF-8), optional id, and x or arms. Unlike records, unknown fields are
// refused (a request is answered, so a typo is better named than ignored),
// and so are the fields that would change state (y, reward, arm, delete, ts).
// Errors are *BadRecord naming the field.
func (d *Decoder) DecodeQuery(value []byte) (*Query, error) {
	if len(value) > d.lim.Value {
		return nil, tooLong("body", len(value), "max_value_bytes", d.lim.Value)
	}
	var key []byte
	hasKey := false
	got, err := d.object(value, func(name []byte) error {
		switch string(name) {
		case `"key"`, `"key_b64"`:
			if hasKey {
				return Bad(ReasonBadJSON, "key and key_b64: give one, once")
			}
			hasKey = true
			tok, err := d.str()
			if err != nil {
				return Bad(ReasonWrongType, "key: want a string")
			}
			d.keyBuf = canonical(d.keyBuf[:0], tok)
			key = d.keyBuf[1 : len(d.keyBuf)-1]
			if string(name) == `"key_b64"` {
				raw := make([]byte, base64.StdEncoding.DecodedLen(len(key)))
				n, err := base64.StdEncoding.Decode(raw, key)
				if err != nil {
					return Bad(ReasonWrongType, "key_b64: not standard base64: "+err.Error())
				}
				key = raw[:n]
			}
			return nil
		}
		return Bad(ReasonBadFields, "unknown field "+string(name)+": a query has key (or key_b64), x or arms, and optional id")
	})
	if err != nil {
		return nil, err
	}
	r := &d.rec
	switch {
	case !hasKey || len(key) == 0:
		return nil, Bad(ReasonNoKey, "key is required: the routing key whose learner answers")
	case len(key) > d.lim.Key:
		return nil, tooLong("key", len(key), "max_key_bytes", d.lim.Key)
	case got&^(fID|fX|fArms) != 0:
		return nil, Bad(ReasonBadFields, "y, reward, arm, ts and delete are not query fields: scoring never changes state")
	case got&fX != 0 && got&fArms != 0:
		return nil, Bad(ReasonBadFields, "x and arms together: give one")
	case got&(fX|fArms) == 0:
		return nil, Bad(ReasonMissingField, "want x (a prediction) or arms (a decision)")
	}
	d.query = Query{Key: key, ID: r.ID, X: r.X}
	if got&fArms != 0 {
		d.query.Arms, d.query.ArmIDs = d.armRows, d.armIDs
	}
	return &d.query, nil
}

// QueryError is the message of a query's error for its client: the field
// and the problem, without the dead-letter reason's name.
func QueryError(err error) string {
	if b, ok := err.(*BadRecord); ok {
		return b.Msg
	}
	return err.Error()
}

// AppendScore encodes the answer to a query: the output record's fields
// (AppendPrediction; Offset is then the state's offset, the next input
// offset its partition processes, so the state holds every record before
// it), fresh when the key had no state yet (the answer of a new learner),
// and labelsOffset (>= 0) when labels come on a topic of their own.
func AppendScore(b []byte, p *Prediction, fresh bool, labelsOffset int64) []byte {
	b = AppendPrediction(b, p)
	b = b[:len(b)-1]
	if labelsOffset >= 0 {
		b = append(b, `,"labels_offset":`...)
		b = strconv.AppendInt(b, labelsOffset, 10)
	}
	if fresh {
		b = append(b, `,"fresh":true`...)
	}
	return append(b, '}')
}
