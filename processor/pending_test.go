package processor

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/kernelstream/kernelstream/models"
)

func entry(key string, offset, ts int64) *pendingEntry {
	return &pendingEntry{key: key, offset: offset, ts: ts, arms: []pendingArm{{x: []float64{float64(offset), 1}, p: models.Prediction{Value: 0.5, Choice: -1, Prob: 1}}}}
}

func TestPendingExpiry(t *testing.T) {
	pm := newPendingMap()
	// event times out of offset order
	for i, ts := range []int64{100, 50, 300, 200, 400} {
		pm.put(entry(fmt.Sprint("k", i), int64(i), ts))
	}
	if n := pm.expireTTL(260, 100); n != 2 { // ts < 160: offsets 0 and 1
		t.Fatalf("ttl expired %d, want 2", n)
	}
	if pm.m["k0"] != nil || pm.m["k1"] != nil || pm.m["k3"] == nil {
		t.Fatal("ttl expired the wrong entries")
	}
	if n := pm.expireCount(2); n != 1 { // k2, k3, k4 remain; the oldest by offset is k2
		t.Fatalf("count expired %d, want 1", n)
	}
	if pm.m["k2"] != nil || pm.len() != 2 {
		t.Fatal("count expiry did not drop the oldest offset")
	}
	if e := pm.take([]byte("k4")); e == nil || e.offset != 4 {
		t.Fatal("take")
	}
	if !pm.put(entry("k3", 9, 10)) {
		t.Fatal("replacing an entry not reported")
	}
	if n := pm.expireCount(0); n != 1 || pm.len() != 0 {
		t.Fatalf("stale fifo items counted: %d, len %d", n, pm.len())
	}
	if len(pm.dirty) != 5 {
		t.Fatalf("dirty keys %d, want 5", len(pm.dirty))
	}
}

func TestPendingEncoding(t *testing.T) {
	e := &pendingEntry{key: "kk", offset: 1 << 40, ts: -5, decision: true, bandit: true,
		arms: []pendingArm{{id: []byte(`"a"`), x: []float64{1, -2}, p: models.Prediction{Value: 1.5, Std: 0.25, Choice: 3, Prob: 0.5, Aux: -1}},
			{id: []byte(`7`), x: []float64{0, 0}, p: models.Prediction{Choice: -1}}}}
	b := encodePending(e)
	got, err := decodePending("kk", b, 2)
	if err != nil {
		t.Fatal(err)
	}
	got.hidx, e.hidx = 0, 0
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("round trip:\n%+v\n%+v", got, e)
	}
	for i := 0; i < len(b); i++ {
		if _, err := decodePending("kk", b[:i], 2); err == nil {
			t.Fatalf("truncated at %d accepted", i)
		}
	}
	if _, err := decodePending("kk", b, 3); err == nil {
		t.Fatal("wrong dimension accepted")
	}
}

// A pending map whose labels all arrive keeps nothing behind: its memory is
// proportional to what is pending, not to how many predictions it has seen.
func TestPendingLabelledLeavesNothing(t *testing.T) {
	pm := newPendingMap()
	for i := 0; i < 10000; i++ {
		pm.put(entry(fmt.Sprint("k", i%7, "/", i), int64(i), int64(i)))
		if i >= 3 { // labels arrive three records late
			if pm.take([]byte(fmt.Sprint("k", (i-3)%7, "/", i-3))) == nil {
				t.Fatalf("entry %d not pending", i-3)
			}
		}
	}
	if pm.len() != 3 || len(pm.byTs) != 3 {
		t.Fatalf("%d entries, %d in the ttl heap; want 3", pm.len(), len(pm.byTs))
	}
	n := 0
	for e := pm.oldest; e != nil; e = e.newer {
		if e.offset != int64(9997+n) {
			t.Fatalf("insertion order holds offset %d at position %d", e.offset, n)
		}
		n++
	}
	if n != 3 || pm.newest.offset != 9999 {
		t.Fatalf("insertion order has %d entries, newest %d", n, pm.newest.offset)
	}
	if pm.expireCount(0) != 3 || pm.oldest != nil || pm.newest != nil {
		t.Fatal("count expiry did not empty the map")
	}
}

func TestMaxPendingShare(t *testing.T) {
	for _, tc := range []struct {
		perPartition, total, inParts, want int
	}{
		{100, 0, 4, 100},    // no process-wide bound
		{100, 90, 4, 23},    // ceil(90/4): four partitions on one member hold at most 92
		{100, 1000, 4, 100}, // the per-partition bound is smaller
		{100, 90, 0, 100},   // partition count not known yet: no share
	} {
		w := &worker{p: &Processor{}, cfg: &Config{MaxPending: tc.perPartition, MaxPendingTotal: tc.total}}
		w.p.inParts.Store(int64(tc.inParts))
		if got := w.maxPending(); got != tc.want {
			t.Errorf("%+v: maxPending %d, want %d", tc, got, tc.want)
		}
	}
}
