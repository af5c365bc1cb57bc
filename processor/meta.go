package processor

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The partition meta: what Badger stores with a partition checkpoint besides
// its learners and pending entries (offsets, event-time watermark, checkpoint
// sequence number, spec hash).

// Partition meta (version 2): 2 | varint nextIn | varint nextLab | varint
// watermark | varint checkpoint sequence number | spec hash (8, LE). Version
// 1 had no sequence number (read as 0). Version 3 is version 2 and a flags
// byte, written only with a flag set (so that a version without it reads
// every other meta): metaChangelogIncomplete.
func (w *worker) encodeMeta() []byte {
	b := []byte{2}
	b = binary.AppendVarint(b, w.nextIn)
	b = binary.AppendVarint(b, w.nextLab)
	b = binary.AppendVarint(b, w.watermark)
	b = binary.AppendVarint(b, int64(w.ckptSeq))
	return binary.LittleEndian.AppendUint64(b, w.p.specHash)
}

// metaChangelogIncomplete: the checkpoint's transaction landed in a
// changelog topic recreated since the one before, so the changelog lacks
// the rest of the partition's state until a checkpoint writes all of it.
// Kept in Badger's meta so that a restart before that rebuilds too.
const metaChangelogIncomplete = 1

// parsedMeta is a partition meta's fields.
type parsedMeta struct {
	nextIn, nextLab, watermark int64
	seq                        uint64
	specHash                   uint64
	flags                      byte
}

func parseMeta(b []byte) (parsedMeta, error) {
	if len(b) < 1 || b[0] < 1 || b[0] > 3 {
		return parsedMeta{}, errors.New("unknown partition meta version")
	}
	version, fields := b[0], 4
	if version == 1 {
		fields = 3
	}
	b = b[1:]
	var vals [4]int64
	for i := range vals[:fields] {
		v, n := binary.Varint(b)
		if n <= 0 {
			return parsedMeta{}, errors.New("corrupt partition meta")
		}
		vals[i], b = v, b[n:]
	}
	tail := 8
	if version == 3 {
		tail = 9
	}
	if len(b) != tail {
		return parsedMeta{}, errors.New("corrupt partition meta")
	}
	m := parsedMeta{nextIn: vals[0], nextLab: vals[1], watermark: vals[2], seq: uint64(vals[3]), specHash: binary.LittleEndian.Uint64(b)}
	if version == 3 {
		m.flags = b[8]
	}
	return m, nil
}

// withMetaFlags returns meta (an encodeMeta result) with flags set, in
// version 3; nil stays nil.
func withMetaFlags(meta []byte, flags byte) []byte {
	if len(meta) == 0 {
		return meta
	}
	out := append([]byte{3}, meta[1:]...)
	if meta[0] == 3 {
		out[len(out)-1] |= flags
		return out
	}
	return append(out, flags)
}

func (w *worker) decodeMeta(b []byte) error {
	m, err := parseMeta(b)
	if err != nil {
		return err
	}
	if m.specHash != w.p.specHash {
		return fmt.Errorf("CheckpointDir holds state of another model spec for partition %d (use a new directory for a new model)", w.part)
	}
	w.nextIn, w.nextLab, w.watermark, w.ckptSeq = m.nextIn, m.nextLab, m.watermark, m.seq
	if m.flags&metaChangelogIncomplete != 0 {
		w.rebuildChangelog = true
	}
	return nil
}

// metaSpecHash reads the spec hash of a partition meta.
func metaSpecHash(b []byte) (uint64, error) {
	m, err := parseMeta(b)
	return m.specHash, err
}
