package processor

// Erasure on request (the right to erasure): a record {"id": ..., "delete":
// true} on the input topic removes its key's learner and pending entries
// from memory, from Badger at the next checkpoint and from the changelog
// (docs/pipeline.md, "Deleting a key"). It is a record like any other, so
// its effect is at its offset: replays and restores delete at the same
// point, and a later record of the key starts a fresh learner.

// erase deletes key's learner and pending entries.
func (w *worker) erase(key []byte) {
	w.cache.remove(string(key))
	n := 0
	for k, e := range w.pend.m {
		if string(routingOf([]byte(k))) == string(key) {
			w.pend.remove(e)
			n++
		}
	}
	w.p.c.pending.Add(-int64(n))
	w.p.c.erased.Add(1)
	if w.lastUpdated != nil && w.lastUpdated.key == string(key) {
		w.lastUpdated = nil
	}
}
