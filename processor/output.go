package processor

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/kernelstream/kernelstream/models"
)

// Dead-letter headers.
const (
	headerReason    = "kernelstream-error-reason" // one of the reason names
	headerError     = "kernelstream-error"        // human-readable message
	headerTopic     = "kernelstream-source-topic"
	headerPartition = "kernelstream-source-partition"
	headerOffset    = "kernelstream-source-offset"
	headerOmitted   = "kernelstream-value-omitted" // original size, when the DLQ refused the value
)

// prediction is one output record before encoding.
type prediction struct {
	id        []byte
	key       []byte
	model     string
	yhat      float64
	std       float64
	hasStd    bool
	label     int // ±1 for classification losses, 0 = absent
	arm       []byte
	mean, ucb float64
	ranking   [][]byte
	updates   uint64
	partition int
	offset    int64
}

// appendPrediction encodes p as the output JSON object (contract in
// docs/pipeline.md). Floats use the shortest representation that parses
// back to the same float64; a non-finite value is written as null.
func appendPrediction(b []byte, p *prediction) []byte {
	b = append(b, `{"id":`...)
	b = append(b, p.id...)
	b = append(b, `,"key":`...)
	b = appendString(b, p.key)
	b = append(b, `,"model":`...)
	b = appendString(b, []byte(p.model))
	b = append(b, `,"y_hat":`...)
	b = appendFloat(b, p.yhat)
	if p.hasStd {
		b = append(b, `,"std":`...)
		b = appendFloat(b, p.std)
	}
	if p.arm != nil {
		b = append(b, `,"arm":`...)
		b = append(b, p.arm...)
		b = append(b, `,"mean":`...)
		b = appendFloat(b, p.mean)
		b = append(b, `,"ucb":`...)
		b = appendFloat(b, p.ucb)
	}
	if p.ranking != nil {
		b = append(b, `,"ranking":[`...)
		for i, id := range p.ranking {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, id...)
		}
		b = append(b, ']')
	}
	if p.label != 0 {
		b = append(b, `,"label":`...)
		b = strconv.AppendInt(b, int64(p.label), 10)
	}
	b = append(b, `,"n_updates":`...)
	b = strconv.AppendUint(b, p.updates, 10)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(p.partition), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, p.offset, 10)
	return append(b, '}')
}

func appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string; invalid UTF-8 bytes become U+FFFD.
func appendString(b []byte, s []byte) []byte {
	b = append(b, '"')
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

// classLabel is the predicted class of a classification score.
func classLabel(loss models.Loss, v float64) int {
	if !loss.Classification() {
		return 0
	}
	if v > 0 {
		return 1
	}
	return -1
}
