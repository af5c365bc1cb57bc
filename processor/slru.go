package processor

// The eviction order of a partition's learners: a segmented LRU (SLRU;
// Karedla, Love and Wherry, "Caching strategies to improve disk system
// performance", IEEE Computer 27(3), 1994). A learner enters the probation
// segment; used again while in memory it moves to the protected segment,
// and a use that leaves more than protectedPercent of the partition's
// learners protected moves protected's least recently used back to the
// front of probation. Eviction takes
// probation's least recently used first. Keys seen once (a crawl, a burst
// of one-off visitors) so leave without pushing out the keys that come
// back, which plain LRU evicts as soon as max_learners distinct keys have
// passed. Every operation is O(1) (a use may demote several learners after
// removals shrank the partition: amortized) and allocates nothing.

// protectedPercent bounds the protected segment, in percent of the
// partition's learners in memory (the usual SLRU split).
const protectedPercent = 80

type segmentedLRU struct {
	probation, protected lruList
}

func (c *segmentedLRU) init() {
	c.probation.init()
	c.protected.init()
}

func (c *segmentedLRU) len() int { return c.probation.n + c.protected.n }

// insert adds a learner just loaded or created.
func (c *segmentedLRU) insert(s *slot) {
	s.protected = false
	c.probation.pushFront(s)
}

// touch records a use of a learner in memory.
func (c *segmentedLRU) touch(s *slot) {
	c.remove(s)
	s.protected = true
	c.protected.pushFront(s)
	for c.protected.n*100 > protectedPercent*c.len() {
		d := c.protected.back()
		c.remove(d)
		c.insert(d)
	}
}

func (c *segmentedLRU) remove(s *slot) {
	if s.protected {
		c.protected.remove(s)
	} else {
		c.probation.remove(s)
	}
}

// victim is the next learner to evict, or nil. It is called right after an
// insert and never returns the learner just inserted (probation's front).
func (c *segmentedLRU) victim() *slot {
	if c.probation.n > 1 {
		return c.probation.back()
	}
	return c.protected.back()
}

// lruList is a circular doubly linked list of slots around a sentinel;
// front = most recently used.
type lruList struct {
	root slot
	n    int
}

func (l *lruList) init() {
	l.root.prev, l.root.next, l.n = &l.root, &l.root, 0
}

func (l *lruList) pushFront(s *slot) {
	if l.root.next == nil {
		l.init()
	}
	s.prev, s.next = &l.root, l.root.next
	l.root.next.prev = s
	l.root.next = s
	l.n++
}

func (l *lruList) remove(s *slot) {
	s.prev.next, s.next.prev = s.next, s.prev
	s.prev, s.next = nil, nil
	l.n--
}

func (l *lruList) moveToFront(s *slot) {
	if l.root.next == s {
		return
	}
	l.remove(s)
	l.pushFront(s)
}

// back is the least recently used slot (nil when empty).
func (l *lruList) back() *slot {
	if l.n == 0 {
		return nil
	}
	return l.root.prev
}
