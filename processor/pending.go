package processor

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"math"
	"sort"

	"github.com/kernelstream/kernelstream/models"
)

// pendingArm is one predicted instance waiting for its label: the features
// and the prediction that Update needs (for kernel selection, the sampled
// kernel travels in the prediction).
type pendingArm struct {
	id []byte // arm id token (decisions), nil for a plain prediction
	x  []float64
	p  models.Prediction
}

// pendingEntry is a prediction (or decision) waiting for its label (reward).
type pendingEntry struct {
	key      string // composite map key: uvarint len(routing key) | routing key | id token
	offset   int64  // input offset of the record that created it (count-expiry order)
	ts       int64  // event time, ms (ttl-expiry order)
	decision bool   // from an `arms` record
	bandit   bool   // chosen by a Bandit: the reward is Observed
	arms     []pendingArm
	hidx     int // index in the ttl heap

	older, newer *pendingEntry // neighbours in insertion (= offset) order
}

func pendingKey(buf []byte, routing, id []byte) []byte {
	buf = binary.AppendUvarint(buf[:0], uint64(len(routing)))
	buf = append(buf, routing...)
	return append(buf, id...)
}

// pendingMap is one partition's pending-label map. Expiry is deterministic:
// it depends only on the record sequence (event-time watermark = largest ts
// seen, and insertion offsets), never on the clock. Its memory is
// proportional to what is pending: the insertion order is a list threaded
// through the entries themselves, so a labelled entry leaves no trace.
type pendingMap struct {
	m              map[string]*pendingEntry
	byTs           tsHeap
	oldest, newest *pendingEntry       // insertion (= offset) order, for count expiry
	dirty          map[string]struct{} // keys changed since the last checkpoint
}

func newPendingMap() *pendingMap {
	return &pendingMap{m: map[string]*pendingEntry{}, dirty: map[string]struct{}{}}
}

func (pm *pendingMap) len() int { return len(pm.m) }

// put inserts e; an entry already pending under the same key is replaced
// (returned so the caller can count it).
func (pm *pendingMap) put(e *pendingEntry) (replaced bool) {
	if old, ok := pm.m[e.key]; ok {
		heap.Remove(&pm.byTs, old.hidx)
		replaced = true
	}
	if replaced {
		pm.unlink(pm.m[e.key])
	}
	pm.m[e.key] = e
	heap.Push(&pm.byTs, e)
	pm.link(e)
	pm.dirty[e.key] = struct{}{}
	return replaced
}

// link appends e at the newest end of the insertion order.
func (pm *pendingMap) link(e *pendingEntry) {
	e.older, e.newer = pm.newest, nil
	if pm.newest != nil {
		pm.newest.newer = e
	} else {
		pm.oldest = e
	}
	pm.newest = e
}

// unlink takes e out of the insertion order.
func (pm *pendingMap) unlink(e *pendingEntry) {
	if e.older != nil {
		e.older.newer = e.newer
	} else {
		pm.oldest = e.newer
	}
	if e.newer != nil {
		e.newer.older = e.older
	} else {
		pm.newest = e.older
	}
	e.older, e.newer = nil, nil
}

// take removes and returns the entry of key, or nil.
func (pm *pendingMap) take(key []byte) *pendingEntry {
	e, ok := pm.m[string(key)]
	if !ok {
		return nil
	}
	pm.remove(e)
	return e
}

func (pm *pendingMap) remove(e *pendingEntry) {
	delete(pm.m, e.key)
	heap.Remove(&pm.byTs, e.hidx)
	pm.unlink(e)
	pm.dirty[e.key] = struct{}{}
}

// expireTTL removes entries with ts < watermark - ttl; returns how many.
func (pm *pendingMap) expireTTL(watermark, ttlMs int64) int {
	n := 0
	limit := watermark - ttlMs
	if watermark < math.MinInt64+ttlMs {
		return 0
	}
	for len(pm.byTs) > 0 && pm.byTs[0].ts < limit {
		pm.remove(pm.byTs[0])
		n++
	}
	return n
}

// expireCount removes the oldest entries (by offset) while more than max remain.
func (pm *pendingMap) expireCount(max int) int {
	n := 0
	for len(pm.m) > max && pm.oldest != nil {
		pm.remove(pm.oldest)
		n++
	}
	return n
}

// load rebuilds the map from stored entries (after a restart).
func (pm *pendingMap) load(entries []*pendingEntry) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].offset < entries[j].offset })
	for _, e := range entries {
		pm.m[e.key] = e
		heap.Push(&pm.byTs, e)
		pm.link(e)
	}
}

// tsHeap orders entries by (ts, offset).
type tsHeap []*pendingEntry

func (h tsHeap) Len() int { return len(h) }
func (h tsHeap) Less(i, j int) bool {
	if h[i].ts != h[j].ts {
		return h[i].ts < h[j].ts
	}
	return h[i].offset < h[j].offset
}
func (h tsHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx = i
	h[j].hidx = j
}
func (h *tsHeap) Push(v any) {
	e := v.(*pendingEntry)
	e.hidx = len(*h)
	*h = append(*h, e)
}
func (h *tsHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.hidx = -1
	return e
}

// Entry encoding (version 1):
//
//	1 | uvarint offset | varint ts | flags (bit0 decision, bit1 bandit) | uvarint arms |
//	per arm: uvarint len(id) id | uvarint len(x) x... | value std choice prob aux
const pendingVersion = 1

func encodePending(e *pendingEntry) []byte {
	b := []byte{pendingVersion}
	b = binary.AppendUvarint(b, uint64(e.offset))
	b = binary.AppendVarint(b, e.ts)
	var flags byte
	if e.decision {
		flags |= 1
	}
	if e.bandit {
		flags |= 2
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(len(e.arms)))
	f := func(v float64) { b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v)) }
	for _, a := range e.arms {
		b = binary.AppendUvarint(b, uint64(len(a.id)))
		b = append(b, a.id...)
		b = binary.AppendUvarint(b, uint64(len(a.x)))
		for _, v := range a.x {
			f(v)
		}
		f(a.p.Value)
		f(a.p.Std)
		b = binary.AppendVarint(b, int64(a.p.Choice))
		f(a.p.Prob)
		f(a.p.Aux)
	}
	return b
}

var errPendingCorrupt = errors.New("corrupt pending entry")

func decodePending(key string, b []byte, dim int) (*pendingEntry, error) {
	if len(b) < 1 || b[0] != pendingVersion {
		return nil, errPendingCorrupt
	}
	b = b[1:]
	bad := false
	uv := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			bad = true
			return 0
		}
		b = b[n:]
		return v
	}
	sv := func() int64 {
		v, n := binary.Varint(b)
		if n <= 0 {
			bad = true
			return 0
		}
		b = b[n:]
		return v
	}
	f := func() float64 {
		if len(b) < 8 {
			bad = true
			return 0
		}
		v := math.Float64frombits(binary.LittleEndian.Uint64(b))
		b = b[8:]
		return v
	}
	e := &pendingEntry{key: key, offset: int64(uv()), ts: sv()}
	if len(b) < 1 {
		return nil, errPendingCorrupt
	}
	e.decision, e.bandit = b[0]&1 != 0, b[0]&2 != 0
	b = b[1:]
	n := uv()
	if bad || n > uint64(len(b)) {
		return nil, errPendingCorrupt
	}
	e.arms = make([]pendingArm, n)
	for i := range e.arms {
		l := uv()
		if bad || l > uint64(len(b)) {
			return nil, errPendingCorrupt
		}
		if l > 0 {
			e.arms[i].id = append([]byte(nil), b[:l]...)
		}
		b = b[l:]
		d := uv()
		if bad || d != uint64(dim) {
			return nil, errPendingCorrupt
		}
		x := make([]float64, d)
		for j := range x {
			x[j] = f()
		}
		e.arms[i].x = x
		e.arms[i].p = models.Prediction{Value: f(), Std: f(), Choice: int(sv()), Prob: f(), Aux: f()}
	}
	if bad || len(b) != 0 {
		return nil, errPendingCorrupt
	}
	return e, nil
}

// maxPending is the partition's count bound: MaxPending, or its share of
// MaxPendingTotal when that is smaller (Config.MaxPendingTotal says why a
// share of the topic's partitions).
func (w *worker) maxPending() int {
	m := w.cfg.MaxPending
	if t, n := w.cfg.MaxPendingTotal, int(w.p.inParts.Load()); t > 0 && n > 0 {
		m = min(m, (t+n-1)/n)
	}
	return m
}
