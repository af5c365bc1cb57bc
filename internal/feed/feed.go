// Package feed turns labelled examples (a dataset file or a synthetic
// stream) into input records of the wire contract (encoded by package wire)
// and writes them to Kafka. cmd/produce, the consumer's demo, the end-to-end
// tests and the benchmarks all feed through it.
//
// Labels are inline ({"id","x","y"}) or delayed: the features ({"id","x"})
// first and the label ({"id","y"}) a deterministic number of records later,
// on the input topic or on a separate labels topic.
package feed

import (
	"container/heap"
	"fmt"

	"github.com/kernelstream/kernelstream/internal/dataset"
	"github.com/kernelstream/kernelstream/internal/rng"
	"github.com/kernelstream/kernelstream/internal/synth"
	"github.com/kernelstream/kernelstream/internal/wire"
)

// Source yields labelled examples; false ends the stream.
type Source interface {
	Next(e *synth.Example) bool
}

// Record is one message to produce.
type Record struct {
	Key   []byte
	Value []byte
	// Label is true for a delayed-label record ({"id","y"}); it goes to the
	// labels topic when there is one.
	Label bool
	// ID and Y are the record's id and label (the label of a feature record
	// that is delayed is still known here: the demo scores predictions with it).
	ID string
	Y  float64
}

// Options shape the records.
type Options struct {
	// Labels is "inline" (default) or "delayed".
	Labels string
	// MaxDelay bounds the delay of a delayed label, in records: each label is
	// emitted 1 + u records after its features, u uniform in [0, MaxDelay)
	// drawn from a PRNG seeded with Seed (default 64).
	MaxDelay int
	// Seed seeds the delays.
	Seed uint64
	// N stops after N feature records (0 = when the source ends).
	N int
}

// Feed interleaves feature records and delayed labels.
type Feed struct {
	src     Source
	o       Options
	rng     *rng.Rand
	ex      synth.Example
	emitted int // feature records emitted
	pending labelHeap
	done    bool
}

// New validates opts and wraps src.
func New(src Source, o Options) (*Feed, error) {
	switch o.Labels {
	case "":
		o.Labels = "inline"
	case "inline", "delayed":
	default:
		return nil, fmt.Errorf("feed: labels %q: want inline or delayed", o.Labels)
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = 64
	}
	return &Feed{src: src, o: o, rng: rng.New(o.Seed)}, nil
}

// Next fills r with the next record (reusing its buffers); false at the end,
// after every delayed label has been emitted.
func (f *Feed) Next(r *Record) bool {
	if len(f.pending) > 0 && (f.pending[0].due <= f.emitted || f.done) {
		p := heap.Pop(&f.pending).(pendingLabel)
		r.Key = append(r.Key[:0], p.key...)
		r.Value = wire.AppendLabel(r.Value[:0], p.id, p.y)
		r.Label, r.ID, r.Y = true, p.id, p.y
		return true
	}
	if f.done {
		return false
	}
	if (f.o.N > 0 && f.emitted >= f.o.N) || !f.src.Next(&f.ex) {
		f.done = true
		return f.Next(r)
	}
	id := f.ex.ID()
	r.Key = append(r.Key[:0], f.ex.Key...)
	r.Label, r.ID, r.Y = false, id, f.ex.Y
	if f.o.Labels == "inline" {
		r.Value = wire.AppendLabeled(r.Value[:0], id, f.ex.X, f.ex.Y)
	} else {
		r.Value = wire.AppendFeatures(r.Value[:0], id, f.ex.X)
		due := f.emitted + 1 + f.rng.Intn(f.o.MaxDelay)
		heap.Push(&f.pending, pendingLabel{due: due, order: f.emitted, key: f.ex.Key, id: id, y: f.ex.Y})
	}
	f.emitted++
	return true
}

// Emitted is the number of feature records emitted so far.
func (f *Feed) Emitted() int { return f.emitted }

type pendingLabel struct {
	due, order int
	key, id    string
	y          float64
}

// labelHeap orders labels by due position, then by feature order, so the
// output is fully deterministic.
type labelHeap []pendingLabel

func (h labelHeap) Len() int { return len(h) }
func (h labelHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].order < h[j].order
}
func (h labelHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *labelHeap) Push(x any)   { *h = append(*h, x.(pendingLabel)) }
func (h *labelHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// DatasetSource replays a dataset's rows in order, row i going to key
// "key-<i mod keys>" so each key sees a subsequence of the file.
type DatasetSource struct {
	set  *dataset.Set
	keys []string
	seq  []int
	i    int
}

// NewDatasetSource spreads set over keys routing keys.
func NewDatasetSource(set *dataset.Set, keys int) *DatasetSource {
	if keys <= 0 {
		keys = 1
	}
	s := &DatasetSource{set: set, seq: make([]int, keys)}
	width := len(fmt.Sprint(keys - 1))
	for k := 0; k < keys; k++ {
		s.keys = append(s.keys, fmt.Sprintf("key-%0*d", width, k))
	}
	return s
}

// Next yields the next row.
func (s *DatasetSource) Next(e *synth.Example) bool {
	if s.i >= s.set.Len() {
		return false
	}
	k := s.i % len(s.keys)
	e.Key, e.Seq = s.keys[k], s.seq[k]
	s.seq[k]++
	e.X = append(e.X[:0], s.set.Row(s.i)...)
	e.Y = s.set.Y[s.i]
	s.i++
	return true
}
