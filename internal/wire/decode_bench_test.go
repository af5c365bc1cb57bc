package wire

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkDecode measures the record Decoder (dense x of dimension d).
// d=N has features with six decimals ("0.217368"); digits=17/d=N has the
// shortest round-trip forms of random float64s, as a JSON serializer writes
// them at full precision ("-0.41723510295283627", "1.2345678901234567e-05":
// mostly 16 or 17 significant digits).
func BenchmarkDecode(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, full := range []bool{false, true} {
		for _, dim := range []int{8, 64} {
			feature := sixDecimals
			if full {
				feature = func(int) string { return strconv.FormatFloat(r.NormFloat64(), 'g', -1, 64) }
			}
			value := benchRecord(dim, feature)
			name := fmt.Sprintf("d=%d", dim)
			if full {
				name = "digits=17/" + name
			}
			b.Run(name, func(b *testing.B) {
				d := NewDecoder(dim, Limits{})
				b.SetBytes(int64(len(value)))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if _, err := d.Decode(value); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkDecodeEncodingJSON is the reflection-based alternative, for
// comparison with BenchmarkDecode (same records).
func BenchmarkDecodeEncodingJSON(b *testing.B) {
	for _, dim := range []int{8, 64} {
		value := benchRecord(dim, sixDecimals)
		b.Run(fmt.Sprintf("d=%d", dim), func(b *testing.B) {
			var v struct {
				ID json.RawMessage `json:"id"`
				X  []float64       `json:"x"`
				Y  *float64        `json:"y"`
				Ts *int64          `json:"ts"`
			}
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				v.X = v.X[:0]
				if err := json.Unmarshal(value, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchRecord is a feature record of dimension dim whose i-th feature is
// feature(i).
func benchRecord(dim int, feature func(i int) string) []byte {
	var sb strings.Builder
	sb.WriteString(`{"id":"user-123-0042","x":[`)
	for i := 0; i < dim; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(feature(i))
	}
	sb.WriteString(`],"y":0.75,"ts":1700000000123}`)
	return []byte(sb.String())
}

// sixDecimals is a feature as many streams write them ("0.217368").
func sixDecimals(i int) string { return fmt.Sprintf("%.6f", 0.123456*float64(i%7)-0.4) }

// benchDecision is a decision of 100 arms of dimension 16 with
// four-decimal features (make bench-decisions' records).
func benchDecision(r *rand.Rand) []byte {
	arms := make([][]byte, 100)
	for i := range arms {
		id := fmt.Sprintf("item-%04d", r.IntN(10000)*100+i)
		x := make([]float64, 16)
		for j := range x {
			x[j] = math.Round((2*r.Float64()-1)*1e4) / 1e4
		}
		arms[i] = AppendArm(nil, id, x)
	}
	return AppendDecision(nil, "user-0042-17", arms)
}

// BenchmarkDecodeDecision: one decision (benchDecision), whose arm ids the
// decoder checks for repeats, read again and again.
func BenchmarkDecodeDecision(b *testing.B) {
	value := benchDecision(rand.New(rand.NewPCG(5, 6)))
	d := NewDecoder(16, Limits{})
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := d.Decode(value); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeDecisionStream reads 512 different decisions in turn, as a
// consumer reads a stream: about 25 µs a decision against 15.5 for the
// same one again and again (2-core AMD EPYC, 2026-11-27), since the
// processor no longer predicts where each number's digits end, and the
// 7.5 MB of records do not stay in its caches. This, not
// BenchmarkDecodeDecision, is what a member's profile shows (26.7 µs a
// decision in make bench-decisions, docs/scale.md).
func BenchmarkDecodeDecisionStream(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	values := make([][]byte, 512)
	for i := range values {
		values[i] = benchDecision(r)
	}
	d := NewDecoder(16, Limits{})
	b.SetBytes(int64(len(values[0])))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := d.Decode(values[i%len(values)]); err != nil {
			b.Fatal(err)
		}
	}
}
