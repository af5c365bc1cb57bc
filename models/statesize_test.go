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

// TestBKBStateSizeTable prints what a bkb learner of the decision benchmark
// (`make bench-decisions`: dimension 16, the defaults, 100 candidates a
// decision drawn from a catalogue of 500 items) holds after n decisions,
// and so what every checkpoint rewrites for a user who decided since the
// last one: the stored arms (U of them, 8 (d + 4) bytes each) and the two
// m x m triangular factors L_S and L_V (8 m (m + 1) bytes), which a single
// reward changes entirely (L_V's rank-one update). The table of
// docs/bandits.md ("State size and checkpoints"). A measurement, run on
// demand:
//
//	KS_STATE_TABLE=1 go test ./models -run TestBKBStateSizeTable -v
func TestBKBStateSizeTable(t *testing.T) {
	if os.Getenv("KS_STATE_TABLE") == "" {
		t.Skip("a measurement; set KS_STATE_TABLE=1 to print the table")
	}
	const dim, catalogue, candidates = 16, 500, 100
	l, err := New(Spec{Algorithm: "bkb", Dim: dim}, "size")
	if err != nil {
		t.Fatal(err)
	}
	b := l.(*BKB)
	r := NewRand(7)
	items := testArms(r, catalogue, dim)
	arms := make([][]float64, candidates)
	var out strings.Builder
	out.WriteString("| decisions | U (stored arms) | m (dictionary) | state bytes | of which L_S and L_V | of which stored arms |\n")
	marks := []int{4, 12, 40, 100, 300, 1000, 3000}
	for n, mi := 1, 0; mi < len(marks); n++ {
		for i := range arms {
			arms[i] = items[r.Uint64()%catalogue]
		}
		d := b.Choose(arms)
		if err := b.Observe(arms[d.Arm], testReward(arms[d.Arm], r)); err != nil && err != ErrNumerical {
			t.Fatal(err)
		}
		if n == marks[mi] {
			blob, err := b.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			u, m := len(b.cnt), b.ls.N
			fmt.Fprintf(&out, "| %d | %d | %d | %d | %d | %d |\n", n, u, m, len(blob), 8*(len(b.ls.Data)+len(b.lv.Data)), 8*u*(dim+4))
			mi++
		}
	}
	t.Log("\n" + out.String())
}
