// Package changelog keeps kernelstream's learner state in Kafka: a compacted
// topic with one partition per input partition, written by every checkpoint
// in one Kafka transaction before Badger and the group commit, and read back
// read_committed by a member that gets a partition without its state (an
// empty disk, a moved pod, a lost volume) or with an older checkpoint than
// the changelog's last marker.
//
// # Records
//
// Every record key starts with a kind byte. A checkpoint of a partition
// writes, in one transaction of the partition's transactional producer (one
// transactional id per input partition):
//
//   - a tombstone ('K' + routing key, no value) for every routing key it
//     erased;
//   - a bundle ('K' + routing key) for every routing key whose learner or
//     idle time it changed: the key's learner, with the checkpoint's sequence
//     number and next input and labels offsets (and, value version 2, the
//     key's last-record time);
//   - a pending record ('P' + the processor's key of the entry) for every
//     pending-label entry it added, holding the entry as the local store
//     does, and a tombstone for every one labelled, expired or erased;
//   - last, one marker ('M') holding the checkpoint's sequence number and the
//     partition meta (offsets, event-time watermark, spec hash).
//
// A checkpoint that finds the changelog recreated writes the partition's
// whole state in the same transaction. A restore whose changelog has no
// marker, an older one than the local store's, or a newer one that lacks
// keys the local store holds (the topic was recreated) writes the local
// state there in one transaction, with a marker of the local checkpoint.
// Values are framed: magic, version, kind, payload, CRC-32C.
//
// Why this restores the last checkpoint exactly: a read_committed reader sees
// a transaction's records all or none, and the partition's new owner
// initialises the transactional id before it reads, which fences every
// former owner, so a restore reads committed checkpoints only (the processor
// refuses read_uncommitted with a changelog). Compaction keeps the newest
// record of each key, which is what a restore keeps anyway (State.Apply:
// the newest bundle of every key, the newest value of every pending entry,
// the last marker; a tombstone removes its key), and every checkpoint writes
// every key it changed, so each key's newest records are its state at the
// last marker. Pending entries are records of their own so that a key with
// many of them cannot make a record exceed max.message.bytes. A bundle still
// carries its offsets: a changelog written before transactions may hold
// bundles ahead of its last marker, and a restore skips that key's records
// below them. A changelog of the layout before pending records (entries
// inside bundles) is still read. docs/pipeline.md, "State in Kafka", has the
// whole argument.
package changelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Record keys: a kind byte, then the routing key (bundles) or the pending
// entry's key (pending entries).
const (
	kindBundle  = 'K'
	kindMarker  = 'M'
	kindPending = 'P'
)

// Value frame: magic, version, kind, payload, CRC-32C of all before it.
// Version 2 differs only in bundles: they carry the key's last-record time
// after the offsets. It is written only for bundles that have one (the
// processor's state.key_ttl), so a deployment without idle-key expiry
// writes exactly what version-1 readers read.
const (
	magic0, magic1 = 'k', 'c'
	codecVersion   = 1
	codecIdle      = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt reports a changelog record that cannot be decoded.
var ErrCorrupt = errors.New("changelog: corrupt record")

// Entry is one stored key/value pair of the local store (a pending-label
// entry: the processor's composite key and its encoding).
type Entry struct {
	Key, Value []byte
}

// Bundle is one routing key's whole state as of one checkpoint.
type Bundle struct {
	// Seq is the sequence number of the checkpoint that wrote it.
	Seq uint64
	// NextIn and NextLab are that checkpoint's next input and labels
	// offsets: every record of the key below them is in this state.
	NextIn, NextLab int64
	// Learner is the key's stored learner value; nil when the key has none.
	Learner []byte
	// Pending are the key's pending-label entries.
	Pending []Entry
	// HasLastRecord says LastRecord is set: the partition's event time (ms)
	// at the key's last record, by which idle keys expire (state.key_ttl).
	HasLastRecord bool
	LastRecord    int64
}

// Empty reports a bundle that holds no state: its key was erased.
func (b *Bundle) Empty() bool {
	return b.Learner == nil && len(b.Pending) == 0 && !b.HasLastRecord
}

// Marker closes a checkpoint: Meta is the partition meta the processor
// stores with it (it holds Seq too; Seq is repeated here for the restore).
type Marker struct {
	Seq  uint64
	Meta []byte
}

// BundleKey is the record key of routing key's bundle.
func BundleKey(routing []byte) []byte { return AppendBundleKey(nil, routing) }

// AppendBundleKey appends the record key of routing key's bundle to dst.
func AppendBundleKey(dst, routing []byte) []byte {
	return append(append(dst, kindBundle), routing...)
}

// PendingKey is the record key of a pending-label entry (the processor's
// composite key of the entry).
func PendingKey(entry []byte) []byte { return append([]byte{kindPending}, entry...) }

// EncodePending appends a pending entry's record value (its stored
// encoding, framed) to dst.
func EncodePending(dst, value []byte) []byte {
	start := len(dst)
	dst = append(dst, magic0, magic1, codecVersion, kindPending)
	dst = appendBytes(dst, value)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// MarkerKey is the record key of a partition's markers.
func MarkerKey() []byte { return []byte{kindMarker} }

// EncodeBundle appends b's record value to dst.
func EncodeBundle(dst []byte, b *Bundle) []byte {
	version := byte(codecVersion)
	if b.HasLastRecord {
		version = codecIdle
	}
	start := len(dst)
	dst = append(dst, magic0, magic1, version, kindBundle)
	dst = binary.AppendUvarint(dst, b.Seq)
	dst = binary.AppendVarint(dst, b.NextIn)
	dst = binary.AppendVarint(dst, b.NextLab)
	if b.HasLastRecord {
		dst = binary.AppendVarint(dst, b.LastRecord)
	}
	if b.Learner == nil {
		dst = append(dst, 0)
	} else {
		dst = append(dst, 1)
		dst = appendBytes(dst, b.Learner)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b.Pending)))
	for _, e := range b.Pending {
		dst = appendBytes(dst, e.Key)
		dst = appendBytes(dst, e.Value)
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// EncodeMarker appends m's record value to dst.
func EncodeMarker(dst []byte, m *Marker) []byte {
	start := len(dst)
	dst = append(dst, magic0, magic1, codecVersion, kindMarker)
	dst = binary.AppendUvarint(dst, m.Seq)
	dst = appendBytes(dst, m.Meta)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// Decoded is one decoded record: exactly one of Bundle, Marker and
// Pending is set, or none for a tombstone (a deleted key or entry).
// Routing is the bundle's routing key; PendingKey the entry's key.
type Decoded struct {
	Routing    []byte
	PendingKey []byte
	Bundle     *Bundle
	Marker     *Marker
	Pending    *Entry
}

// Decode decodes a record (key, value); its slices alias neither argument.
func Decode(key, value []byte) (Decoded, error) {
	if len(key) == 0 {
		return Decoded{}, fmt.Errorf("%w: empty key", ErrCorrupt)
	}
	switch key[0] {
	case kindBundle:
		d := Decoded{Routing: append([]byte(nil), key[1:]...)}
		if value == nil {
			return d, nil // tombstone: the key was deleted
		}
		r, err := frame(value, kindBundle)
		if err != nil {
			return Decoded{}, err
		}
		b := &Bundle{Seq: r.uvarint(), NextIn: r.varint(), NextLab: r.varint()}
		if r.version == codecIdle {
			b.HasLastRecord, b.LastRecord = true, r.varint()
		}
		switch r.byte() {
		case 0:
		case 1:
			b.Learner = r.bytes()
		default:
			r.fail("learner flag")
		}
		n := r.uvarint()
		if n > uint64(len(r.b)) { // every entry takes at least two bytes
			r.fail("pending count")
		}
		for i := uint64(0); i < n && r.err == nil; i++ {
			b.Pending = append(b.Pending, Entry{Key: r.bytes(), Value: r.bytes()})
		}
		if err := r.done(); err != nil {
			return Decoded{}, err
		}
		d.Bundle = b
		return d, nil
	case kindPending:
		d := Decoded{PendingKey: append([]byte(nil), key[1:]...)}
		if value == nil {
			return d, nil // tombstone: the entry was labelled, expired or erased
		}
		r, err := frame(value, kindPending)
		if err != nil {
			return Decoded{}, err
		}
		e := &Entry{Key: d.PendingKey, Value: r.bytes()}
		if err := r.done(); err != nil {
			return Decoded{}, err
		}
		d.Pending = e
		return d, nil
	case kindMarker:
		if len(key) != 1 {
			return Decoded{}, fmt.Errorf("%w: marker key of %d bytes", ErrCorrupt, len(key))
		}
		if value == nil {
			return Decoded{}, fmt.Errorf("%w: marker tombstone", ErrCorrupt)
		}
		r, err := frame(value, kindMarker)
		if err != nil {
			return Decoded{}, err
		}
		m := &Marker{Seq: r.uvarint(), Meta: r.bytes()}
		if err := r.done(); err != nil {
			return Decoded{}, err
		}
		return Decoded{Marker: m}, nil
	}
	return Decoded{}, fmt.Errorf("%w: unknown key kind %q", ErrCorrupt, key[0])
}

// reader walks a value's payload; errors are sticky.
type reader struct {
	b       []byte
	version byte
	err     error
}

func frame(v []byte, kind byte) (*reader, error) {
	if len(v) < 4+4 || v[0] != magic0 || v[1] != magic1 {
		return nil, fmt.Errorf("%w: not a kernelstream changelog value (%d bytes)", ErrCorrupt, len(v))
	}
	if v[2] != codecVersion && (v[2] != codecIdle || kind != kindBundle) {
		return nil, fmt.Errorf("%w: codec version %d of a %q record, this build reads %d and %d (bundles)", ErrCorrupt, v[2], kind, codecVersion, codecIdle)
	}
	if v[3] != kind {
		return nil, fmt.Errorf("%w: value kind %q under a key of kind %q", ErrCorrupt, v[3], kind)
	}
	body := v[:len(v)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(v[len(v)-4:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	return &reader{b: body[4:], version: v[2]}, nil
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
	r.b = nil
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.fail("truncated")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("length beyond the value")
		return nil
	}
	out := append([]byte{}, r.b[:n]...)
	r.b = r.b[n:]
	return out
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Sprintf("%d trailing bytes", len(r.b)))
	}
	return r.err
}
