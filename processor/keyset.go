package processor

// hashSet is a set of 64-bit key hashes: open addressing with linear
// probing in one []uint64, 0 marking an empty slot (a hash of 0 is stored
// as 1: the set may answer yes for a key never added, never no for one
// added). Load factor at most 3/4, so 8 to 16 bytes per key, where a Go
// map[uint64]struct{} takes about 38 (its slots are padded to 16 bytes).
type hashSet struct {
	slots []uint64
	n     int
}

func (s *hashSet) add(h uint64) {
	if h == 0 {
		h = 1
	}
	if 4*(s.n+1) > 3*len(s.slots) {
		s.grow()
	}
	if s.insert(h) {
		s.n++
	}
}

// insert places h; false when it was there already.
func (s *hashSet) insert(h uint64) bool {
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case h:
			return false
		case 0:
			s.slots[i] = h
			return true
		}
	}
}

func (s *hashSet) grow() {
	old := s.slots
	s.slots = make([]uint64, max(2*len(old), 1024))
	for _, h := range old {
		if h != 0 {
			s.insert(h)
		}
	}
}

func (s *hashSet) has(h uint64) bool {
	if h == 0 {
		h = 1
	}
	if len(s.slots) == 0 {
		return false
	}
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case h:
			return true
		case 0:
			return false
		}
	}
}

func (s *hashSet) reset() { s.slots, s.n = nil, 0 }
