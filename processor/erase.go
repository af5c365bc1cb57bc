package processor

// Erasure on request (the right to erasure): a record {"id": ..., "delete":
// true} on the input topic removes its key's learner and pending entries
// from memory, from Badger at the next checkpoint and from the changelog
// (docs/pipeline.md, "Deleting a key"). It is a record like any other, so
// its effect is at its offset: replays and restores delete at the same
// point, and a later record of the key starts a fresh learner. Idle keys
// (Config.KeyTTL, idle.go) leave the same way.

// erase deletes key's learner and pending entries on request.
func (w *worker) erase(key []byte) {
	w.removeKey(string(key), true)
	w.p.c.erased.Add(1)
}

// expireIdle erases the keys idle for more than KeyTTL at the current
// watermark.
func (w *worker) expireIdle() {
	// A pending entry of an expiring key is at least as old as the key's
	// last record, so with LabelsTTL <= KeyTTL it has already expired
	// (pending expiry runs first) and the scan of the pending map can be
	// skipped.
	scan := w.cfg.LabelsTTL > w.cfg.KeyTTL
	if n := w.idle.expire(w.watermark, func(k string) { w.removeKey(k, scan) }); n > 0 {
		w.p.c.keysExpired.Add(int64(n))
	}
}

// removeKey drops key's learner, its idle-index entry and, when
// withPending, its pending entries.
func (w *worker) removeKey(key string, withPending bool) {
	w.cache.remove(key)
	if w.idle != nil {
		w.idle.forget(key)
	}
	if withPending && w.pend.len() > 0 {
		n := 0
		for k, e := range w.pend.m {
			if string(routingOf([]byte(k))) == key {
				w.pend.remove(e)
				n++
			}
		}
		w.tally.pending -= int64(n)
	}
	if w.lastUpdated != nil && w.lastUpdated.key == key {
		w.lastUpdated = nil
	}
}
