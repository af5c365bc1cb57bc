package feed

import (
	"slices"
	"testing"
	"time"

	"github.com/kernelstream/kernelstream/internal/synth"
	"github.com/kernelstream/kernelstream/internal/wire"
)

// decoded is a record as the service reads it.
type decoded struct {
	ID string
	X  []float64 // nil without x
	Y  *float64  // nil without y
}

func decode(t *testing.T, value []byte) decoded {
	t.Helper()
	r, err := wire.NewDecoder(4, wire.Limits{}).Decode(value)
	if err != nil {
		t.Fatalf("%s: %v", value, err)
	}
	d := decoded{ID: wire.Token(r.ID).String(), X: slices.Clone(r.X)}
	if r.HasY {
		d.Y = &r.Y
	}
	return d
}

func records(t *testing.T, labels string, n int) ([]Record, []synth.Example) {
	t.Helper()
	src, _ := synth.New("sines", synth.Options{Keys: 3, Dim: 4, Seed: 2})
	ref, _ := synth.New("sines", synth.Options{Keys: 3, Dim: 4, Seed: 2})
	f, err := New(src, Options{Labels: labels, MaxDelay: 5, Seed: 9, N: n})
	if err != nil {
		t.Fatal(err)
	}
	var out []Record
	var r Record
	for f.Next(&r) {
		out = append(out, Record{Key: append([]byte(nil), r.Key...), Value: append([]byte(nil), r.Value...), Label: r.Label, ID: r.ID, Y: r.Y})
	}
	var exs []synth.Example
	for i := 0; i < n; i++ {
		var e synth.Example
		ref.Next(&e)
		exs = append(exs, e)
	}
	return out, exs
}

func TestInlineRecordsRoundTrip(t *testing.T) {
	recs, exs := records(t, "inline", 50)
	if len(recs) != 50 {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range recs {
		w := decode(t, r.Value)
		e := exs[i]
		if w.ID != e.ID() || string(r.Key) != e.Key || w.Y == nil || *w.Y != e.Y || len(w.X) != 4 {
			t.Fatalf("record %d = %s, want %+v", i, r.Value, e)
		}
		for j := range w.X {
			if w.X[j] != e.X[j] {
				t.Fatalf("x not exact: %v vs %v", w.X[j], e.X[j])
			}
		}
	}
}

func TestDelayedLabelsFollowTheirFeatures(t *testing.T) {
	recs, exs := records(t, "delayed", 200)
	again, _ := records(t, "delayed", 200)
	if len(recs) != 400 {
		t.Fatalf("%d records, want 400", len(recs))
	}
	pos := map[string]int{}
	features := 0
	for i, r := range recs {
		if string(again[i].Value) != string(r.Value) {
			t.Fatal("delayed feed is not deterministic")
		}
		w := decode(t, r.Value)
		if !r.Label {
			if w.Y != nil || w.X == nil {
				t.Fatalf("feature record with y: %s", r.Value)
			}
			pos[w.ID] = features
			features++
			continue
		}
		at, ok := pos[w.ID]
		if !ok || w.X != nil || w.Y == nil {
			t.Fatalf("label %s before its features", r.Value)
		}
		if d := features - at; d < 1 || (d > 5 && features < 200) {
			t.Fatalf("label of %s delayed by %d features", w.ID, d)
		}
		delete(pos, w.ID)
	}
	if len(pos) != 0 {
		t.Errorf("%d labels never emitted", len(pos))
	}
	_ = exs
}

func TestBatchSize(t *testing.T) {
	for _, c := range []struct {
		o    ProduceOptions
		want int
	}{
		{ProduceOptions{}, 500},
		{ProduceOptions{Batch: 2000}, 2000},
		{ProduceOptions{Rate: 50}, 1},
		{ProduceOptions{Rate: 2000}, 20},
		{ProduceOptions{Rate: 5000}, 50}, // 100 batches a second, not 10 bursts of 500
		{ProduceOptions{Rate: 1e6}, 500},
		{ProduceOptions{Rate: 5000, Batch: 7}, 7},
	} {
		if got := c.o.batchSize(); got != c.want {
			t.Errorf("%+v: batch %d, want %d", c.o, got, c.want)
		}
	}
}

// A paced feed behind its schedule writes what is due in larger batches.
func TestCatchUp(t *testing.T) {
	o := ProduceOptions{Rate: 20000}
	batch, most := o.batchSize(), o.catchUpSize()
	if batch != 200 || most != 500 {
		t.Fatalf("batch %d, most %d, want 200 and 500", batch, most)
	}
	for _, c := range []struct {
		written int
		elapsed time.Duration
		want    int
	}{
		{0, 0, 200},                         // on schedule
		{2000, 50 * time.Millisecond, 200},  // ahead of schedule
		{2000, 110 * time.Millisecond, 200}, // 200 due
		{2000, 130 * time.Millisecond, 500}, // 600 due: capped
		{2000, 120 * time.Millisecond, 400}, // 400 due
	} {
		if got := o.nextBatch(batch, most, c.written, c.elapsed); got != c.want {
			t.Errorf("written %d after %v: batch %d, want %d", c.written, c.elapsed, got, c.want)
		}
	}
	if got := (ProduceOptions{Batch: 7, Rate: 20000}).catchUpSize(); got != 7 {
		t.Errorf("an explicit batch grows to %d", got)
	}
	if got := (ProduceOptions{Rate: 1e6}).catchUpSize(); got != 500 {
		t.Errorf("catch-up size %d at 1e6/s, want 500", got)
	}
}
