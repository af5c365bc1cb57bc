package dataset

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Load reads a LIBSVM file (1-based "index:value" pairs) or a CSV file (label
// in the first column), chosen by the extension .csv. dim 0 means "the
// largest index seen" (LIBSVM) or the column count (CSV). CRLF line endings,
// blank lines and lines starting with '#' are tolerated; a malformed line is
// an error naming the file and the line.
func Load(path string, dim int) (*Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if strings.EqualFold(filepath.Ext(path), ".csv") {
		return ReadCSV(f, path, dim)
	}
	return ReadLIBSVM(f, path, dim)
}

type lineReader struct {
	sc   *bufio.Scanner
	name string
	n    int
}

func newLineReader(r io.Reader, name string) *lineReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	return &lineReader{sc: sc, name: name}
}

// next returns the next non-blank, non-comment line, trimmed.
func (l *lineReader) next() (string, bool) {
	for l.sc.Scan() {
		l.n++
		s := strings.TrimSpace(l.sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		return s, true
	}
	return "", false
}

func (l *lineReader) errorf(format string, a ...any) error {
	return fmt.Errorf("%s:%d: %s", l.name, l.n, fmt.Sprintf(format, a...))
}

func (l *lineReader) err() error {
	if err := l.sc.Err(); err != nil {
		return fmt.Errorf("%s:%d: %w", l.name, l.n, err)
	}
	return nil
}

func parseFinite(s string) (float64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil && !math.IsNaN(v) && !math.IsInf(v, 0)
}

// ReadLIBSVM reads "label idx:val idx:val ..." lines with 1-based indices.
func ReadLIBSVM(r io.Reader, name string, dim int) (*Set, error) {
	lr := newLineReader(r, name)
	type entry struct {
		idx int
		val float64
	}
	var rows [][]entry
	var ys []float64
	maxIdx := 0
	for {
		line, ok := lr.next()
		if !ok {
			break
		}
		fields := strings.Fields(line)
		y, ok := parseFinite(fields[0])
		if !ok {
			return nil, lr.errorf("label %q is not a finite number", fields[0])
		}
		row := make([]entry, 0, len(fields)-1)
		prev := 0
		for _, f := range fields[1:] {
			is, vs, found := strings.Cut(f, ":")
			if !found {
				return nil, lr.errorf("feature %q is not index:value", f)
			}
			idx, err := strconv.Atoi(is)
			if err != nil || idx < 1 {
				return nil, lr.errorf("feature index %q is not an integer >= 1", is)
			}
			if idx <= prev {
				return nil, lr.errorf("feature index %d not increasing", idx)
			}
			prev = idx
			if dim > 0 && idx > dim {
				return nil, lr.errorf("feature index %d exceeds dimension %d", idx, dim)
			}
			v, ok := parseFinite(vs)
			if !ok {
				return nil, lr.errorf("feature %d value %q is not a finite number", idx, vs)
			}
			row = append(row, entry{idx, v})
			maxIdx = max(maxIdx, idx)
		}
		rows = append(rows, row)
		ys = append(ys, y)
	}
	if err := lr.err(); err != nil {
		return nil, err
	}
	if len(ys) == 0 {
		return nil, fmt.Errorf("%s: no records", name)
	}
	if dim == 0 {
		dim = maxIdx
	}
	if dim == 0 {
		return nil, fmt.Errorf("%s: no features", name)
	}
	s := &Set{Dim: dim, X: make([]float64, len(ys)*dim), Y: ys}
	for i, row := range rows {
		x := s.Row(i)
		for _, e := range row {
			x[e.idx-1] = e.val
		}
	}
	return s, nil
}

// ReadCSV reads "label,x1,x2,..." lines. A first line whose label column is
// not a number is taken as a header and skipped.
func ReadCSV(r io.Reader, name string, dim int) (*Set, error) {
	lr := newLineReader(r, name)
	s := &Set{Dim: dim}
	first := true
	for {
		line, ok := lr.next()
		if !ok {
			break
		}
		fields := strings.Split(line, ",")
		if first {
			first = false
			if _, err := strconv.ParseFloat(strings.TrimSpace(fields[0]), 64); err != nil {
				continue // header
			}
		}
		if s.Dim == 0 {
			s.Dim = len(fields) - 1
			if s.Dim == 0 {
				return nil, lr.errorf("no feature columns")
			}
		}
		if len(fields)-1 != s.Dim {
			return nil, lr.errorf("%d feature columns, want %d", len(fields)-1, s.Dim)
		}
		for i, f := range fields {
			v, ok := parseFinite(strings.TrimSpace(f))
			if !ok {
				return nil, lr.errorf("column %d: %q is not a finite number", i+1, f)
			}
			if i == 0 {
				s.Y = append(s.Y, v)
			} else {
				s.X = append(s.X, v)
			}
		}
	}
	if err := lr.err(); err != nil {
		return nil, err
	}
	if s.Len() == 0 {
		return nil, fmt.Errorf("%s: no records", name)
	}
	return s, nil
}
