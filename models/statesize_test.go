package models

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

// TestStateSizeTable prints each learner's state bytes at its defaults
// (dim 5, Gaussian width 1, the README's minimal config) after 1k and 10k
// updates on a smooth random stream: the table of docs/operations.md
// ("State size at the defaults"). It is a measurement, run on demand:
//
//	KS_STATE_TABLE=1 go test ./models -run TestStateSizeTable -v
//
// (KS_STATE_TABLE=100000 adds a 100k column; slow for the O(B^2) learners.)
func TestStateSizeTable(t *testing.T) {
	env := os.Getenv("KS_STATE_TABLE")
	if env == "" {
		t.Skip("a measurement; set KS_STATE_TABLE=1 to print the table")
	}
	marks := []int{1000, 10000}
	if env == "100000" {
		marks = append(marks, 100000)
	}
	specs := []Spec{
		{Algorithm: "kogd"}, {Algorithm: "aogd-ald"}, {Algorithm: "kons"}, {Algorithm: "nons-ald"},
		{Algorithm: "fogd"}, {Algorithm: "nogd"}, {Algorithm: "forks", Loss: "hinge"}, {Algorithm: "kawv"},
		{Algorithm: "pkawv-taylor"}, {Algorithm: "pkawv-nystrom"},
		{Algorithm: "oks++", Params: map[string]any{"sigmas": []any{0.5, 1.0, 2.0}}},
		{Algorithm: "rf-oks++", Params: map[string]any{"sigmas": []any{0.5, 1.0, 2.0}}},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| algorithm |")
	for _, m := range marks {
		fmt.Fprintf(&b, " size after %d | state bytes after %d |", m, m)
	}
	b.WriteString("\n")
	for _, sp := range specs {
		sp.Dim = 5
		l, err := New(sp, "size")
		if err != nil {
			t.Fatalf("%s: %v", sp.Algorithm, err)
		}
		r := NewRand(7)
		fmt.Fprintf(&b, "| %s |", sp.Algorithm)
		x := make([]float64, 5)
		for i, mi := 0, 0; mi < len(marks); i++ {
			s := 0.0
			for j := range x {
				x[j] = r.Float64()*2 - 1
				s += x[j]
			}
			y := math.Sin(2 * s)
			if sp.Loss == "hinge" {
				y = math.Copysign(1, y)
			}
			p := l.Predict(x)
			if err := l.Update(x, p, y); err != nil && err != ErrNumerical {
				t.Fatalf("%s: %v", sp.Algorithm, err)
			}
			if i+1 == marks[mi] {
				blob, err := l.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&b, " %d | %d |", l.Size(), len(blob))
				mi++
			}
		}
		b.WriteString("\n")
	}
	t.Log("\n" + b.String())
}
