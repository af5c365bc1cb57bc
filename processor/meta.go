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
// 1 had no sequence number (read as 0).
func (w *worker) encodeMeta() []byte {
	b := []byte{2}
	b = binary.AppendVarint(b, w.nextIn)
	b = binary.AppendVarint(b, w.nextLab)
	b = binary.AppendVarint(b, w.watermark)
	b = binary.AppendVarint(b, int64(w.ckptSeq))
	return binary.LittleEndian.AppendUint64(b, w.p.specHash)
}

func (w *worker) decodeMeta(b []byte) error {
	if len(b) < 1 || (b[0] != 1 && b[0] != 2) {
		return errors.New("unknown partition meta version")
	}
	fields := 3
	if b[0] == 2 {
		fields = 4
	}
	b = b[1:]
	var vals [4]int64
	for i := range vals[:fields] {
		v, n := binary.Varint(b)
		if n <= 0 {
			return errors.New("corrupt partition meta")
		}
		vals[i], b = v, b[n:]
	}
	if len(b) != 8 {
		return errors.New("corrupt partition meta")
	}
	if binary.LittleEndian.Uint64(b) != w.p.specHash {
		return fmt.Errorf("CheckpointDir holds state of another model spec for partition %d (use a new directory for a new model)", w.part)
	}
	w.nextIn, w.nextLab, w.watermark, w.ckptSeq = vals[0], vals[1], vals[2], uint64(vals[3])
	return nil
}

// metaSpecHash reads the spec hash of a partition meta (encodeMeta's
// layout: the version, three varints (four in version 2), the hash as 8
// little-endian bytes).
func metaSpecHash(b []byte) (uint64, error) {
	if len(b) < 1 || (b[0] != 1 && b[0] != 2) {
		return 0, errors.New("unknown partition meta version")
	}
	fields := 3
	if b[0] == 2 {
		fields = 4
	}
	b = b[1:]
	for i := 0; i < fields; i++ {
		_, n := binary.Varint(b)
		if n <= 0 {
			return 0, errors.New("corrupt partition meta")
		}
		b = b[n:]
	}
	if len(b) != 8 {
		return 0, errors.New("corrupt partition meta")
	}
	return binary.LittleEndian.Uint64(b), nil
}
