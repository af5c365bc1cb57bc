package dataset

import (
	"math"
	"strings"
	"testing"
)

func TestReadLIBSVM(t *testing.T) {
	cases := []struct {
		name, in string
		dim      int
		wantErr  string
		wantDim  int
		wantRows int
	}{
		{"crlf blank comments", "1 1:0.5 3:2\r\n\r\n# c\n-1 2:1\n", 0, "", 3, 2},
		{"fixed dim", "1 1:0.5\n", 4, "", 4, 1},
		{"index beyond dim", "1 5:0.5\n", 4, "t.libsvm:1: feature index 5 exceeds dimension 4", 0, 0},
		{"zero index", "1 0:0.5\n", 0, "t.libsvm:1: feature index \"0\"", 0, 0},
		{"not pair", "1 1:0.5\n1 2\n", 0, "t.libsvm:2: feature \"2\" is not index:value", 0, 0},
		{"bad value", "1 1:x\n", 0, "t.libsvm:1: feature 1 value \"x\"", 0, 0},
		{"nan", "1 1:NaN\n", 0, "not a finite number", 0, 0},
		{"bad label", "abc 1:1\n", 0, "t.libsvm:1: label \"abc\"", 0, 0},
		{"decreasing", "1 2:1 1:1\n", 0, "not increasing", 0, 0},
		{"empty", "\n# nothing\n", 0, "no records", 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := ReadLIBSVM(strings.NewReader(c.in), "t.libsvm", c.dim)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Dim != c.wantDim || s.Len() != c.wantRows {
				t.Fatalf("dim %d rows %d", s.Dim, s.Len())
			}
		})
	}
	s, _ := ReadLIBSVM(strings.NewReader("1 1:0.5 3:2\n-1 2:1\n"), "t", 0)
	if got := s.Row(0); got[0] != 0.5 || got[1] != 0 || got[2] != 2 {
		t.Errorf("row 0 = %v", got)
	}
}

func TestReadCSV(t *testing.T) {
	s, err := ReadCSV(strings.NewReader("y,a,b\r\n1,2,3\n\n0,4,5\n"), "t.csv", 0)
	if err != nil || s.Dim != 2 || s.Len() != 2 || s.Y[1] != 0 || s.Row(1)[1] != 5 {
		t.Fatalf("%+v %v", s, err)
	}
	if _, err := ReadCSV(strings.NewReader("1,2,3\n1,2\n"), "t.csv", 0); err == nil || !strings.Contains(err.Error(), "t.csv:2") {
		t.Fatalf("err = %v", err)
	}
	if _, err := ReadCSV(strings.NewReader("1,2,x\n"), "t.csv", 0); err == nil || !strings.Contains(err.Error(), "t.csv:1: column 3") {
		t.Fatalf("err = %v", err)
	}
}

func TestScaleAndPermute(t *testing.T) {
	s := &Set{Dim: 2, X: []float64{0, 5, 10, 5, 5, 5}, Y: []float64{2, 4, 6}}
	s.ScaleFeatures()
	s.ScaleTargets()
	want := []float64{-1, 0, 1, 0, 0, 0}
	for i := range want {
		if math.Abs(s.X[i]-want[i]) > 1e-15 {
			t.Fatalf("X = %v", s.X)
		}
	}
	if s.Y[0] != 0 || s.Y[1] != 0.5 || s.Y[2] != 1 {
		t.Fatalf("Y = %v", s.Y)
	}
	p := Permutation(100, 3)
	seen := make([]bool, 100)
	for _, i := range p {
		seen[i] = true
	}
	for i, ok := range seen {
		if !ok {
			t.Fatalf("%d missing from permutation", i)
		}
	}
	q := Permutation(100, 3)
	for i := range p {
		if p[i] != q[i] {
			t.Fatal("permutation not deterministic")
		}
	}
}

func TestAdversarial(t *testing.T) {
	s := &Set{Dim: 1, X: []float64{1, 2, 3, 4}, Y: []float64{1, 0, 1, -1}}
	a := s.Adversarial(4, 3, 1)
	if a.Len() != 12 {
		t.Fatalf("len %d", a.Len())
	}
	for b := 0; b < 4; b++ {
		x0 := a.Row(3 * b)[0]
		orig := s.Y[int(x0)-1]
		want := 1.0
		if orig <= 0 {
			want = -1
		}
		if b%2 == 1 {
			want = -want
		}
		for k := 0; k < 3; k++ {
			if a.Row(3*b + k)[0] != x0 || a.Y[3*b+k] != want {
				t.Fatalf("block %d record %d: x %v y %v want %v", b, k, a.Row(3*b + k)[0], a.Y[3*b+k], want)
			}
		}
	}
}

func FuzzReadLIBSVM(f *testing.F) {
	f.Add("1 1:0.5 3:2\r\n-1 2:1\n")
	f.Add("# c\n\n0.3 7:1e-3\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ReadLIBSVM(strings.NewReader(in), "f", 0)
		if err != nil {
			return
		}
		if len(s.X) != s.Len()*s.Dim {
			t.Fatalf("shape %d != %d*%d", len(s.X), s.Len(), s.Dim)
		}
	})
}

func FuzzReadCSV(f *testing.F) {
	f.Add("y,a\n1,2\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ReadCSV(strings.NewReader(in), "f", 0)
		if err != nil {
			return
		}
		if len(s.X) != s.Len()*s.Dim {
			t.Fatalf("shape %d != %d*%d", len(s.X), s.Len(), s.Dim)
		}
	})
}
