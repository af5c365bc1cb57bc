package processor

import "github.com/kernelstream/kernelstream/checkpoint"

// warmBlobs are the learners a restore read from the changelog and has not
// yet written into Badger. A restore does not wait for Badger (writing a
// large partition's state costs more than reading it from Kafka): the
// partition starts at once, a learner is decoded from here on its first
// record, and each checkpoint writes a chunk of the rest into Badger. Until
// the last chunk is committed, the checkpoints leave the partition without
// a Badger meta, so a crash meanwhile restores from the changelog again
// (docs/pipeline.md, "State in Kafka").
//
// Values are in the stored layout (uvarint n_updates | learner blob).
type warmBlobs struct {
	idle     map[string][]byte // in no checkpoint yet
	inflight map[string][]byte // in the checkpoint in flight
	limit    int               // chunk bytes; 0 = warmChunkBytes (tests set less)
}

// warmChunkBytes bounds the blob bytes one checkpoint writes from the warm
// set: a 1,000,000-key partition of 1.5 KB learners is in Badger after 24
// checkpoints, and no checkpoint takes long enough to delay the next.
const warmChunkBytes = 64 << 20

// warming reports whether some restored learner is not yet in Badger.
func (w *warmBlobs) warming() bool { return len(w.idle)+len(w.inflight) > 0 }

// take returns key's blob. An idle blob leaves the set (its learner, once
// in memory, is written by the next checkpoint like any held blob); one in
// flight stays, since the checkpoint in flight may yet be abandoned.
func (w *warmBlobs) take(k string) (blob []byte, ok, idle bool) {
	if b, ok := w.idle[k]; ok {
		delete(w.idle, k)
		return b, true, true
	}
	b, ok := w.inflight[k]
	return b, ok, false
}

// peek returns key's blob without taking it.
func (w *warmBlobs) peek(k string) ([]byte, bool) {
	if b, ok := w.idle[k]; ok {
		return b, true
	}
	b, ok := w.inflight[k]
	return b, ok
}

// drop forgets an erased key.
func (w *warmBlobs) drop(k string) {
	delete(w.idle, k)
	delete(w.inflight, k)
}

// chunk moves up to warmChunkBytes of idle blobs into flight and returns
// them as learner operations; stored notes each key as stored in Badger.
func (w *warmBlobs) chunk(stored func(key []byte)) []checkpoint.Op {
	if len(w.idle) == 0 {
		return nil
	}
	if w.inflight == nil {
		w.inflight = map[string][]byte{}
	}
	limit := w.limit
	if limit == 0 {
		limit = warmChunkBytes
	}
	var ops []checkpoint.Op
	n := 0
	for k, b := range w.idle {
		if n >= limit {
			break
		}
		kb := []byte(k)
		stored(kb)
		ops = append(ops, checkpoint.Op{Key: kb, Value: b})
		w.inflight[k] = b
		delete(w.idle, k)
		n += len(b)
	}
	return ops
}

// committed ends the checkpoint in flight: its chunk is in Badger. It
// returns how many learners that added to Badger.
func (w *warmBlobs) committed() int {
	n := len(w.inflight)
	clear(w.inflight)
	return n
}

// abandoned puts the chunk in flight back, but for the keys with a newer
// version (newer says which).
func (w *warmBlobs) abandoned(newer func(k string) bool) {
	for k, b := range w.inflight {
		if !newer(k) {
			w.idle[k] = b
		}
	}
	clear(w.inflight)
}
