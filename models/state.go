package models

import (
	"encoding"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"unsafe"
)

// State blobs are framed as
//
//	"KS" | codec version (1 byte) | uvarint len + algorithm name | uvarint learner version | payload | CRC-32C (4 bytes, LE)
//
// so that a truncated, corrupted or foreign blob is an error rather than a
// learner silently restored from garbage. Numbers are little-endian IEEE-754
// bits, so the round trip is exact.
const (
	stateMagic0  = 'K'
	stateMagic1  = 'S'
	codecVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// StateWriter appends a learner's state to a byte slice.
type StateWriter struct {
	b     []byte
	start int // the blob's first byte in b (what buf held before it)
}

// NewStateWriter starts a blob for algorithm at learner-state version,
// appending to buf; Finish returns buf with the blob appended.
//
// It is a value, not a pointer, so that a learner's writer can live on the
// stack (a checkpoint encodes every changed learner).
func NewStateWriter(buf []byte, algorithm string, version uint64) StateWriter {
	start := len(buf)
	b := append(buf, stateMagic0, stateMagic1, codecVersion)
	b = binary.AppendUvarint(b, uint64(len(algorithm)))
	b = append(b, algorithm...)
	b = binary.AppendUvarint(b, version)
	return StateWriter{b: b, start: start}
}

func (w *StateWriter) Uint(v uint64)   { w.b = binary.LittleEndian.AppendUint64(w.b, v) }
func (w *StateWriter) Int(v int)       { w.Uint(uint64(int64(v))) }
func (w *StateWriter) Float(v float64) { w.Uint(math.Float64bits(v)) }
func (w *StateWriter) Rand(r *Rand) {
	s := r.State()
	w.Uint(s[0])
	w.Uint(s[1])
	w.Uint(s[2])
	w.Uint(s[3])
}
func (w *StateWriter) Bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// Floats writes a length-prefixed vector.
func (w *StateWriter) Floats(v []float64) {
	out := w.words(len(v))
	if littleEndian && len(v) > 0 { // the blob's byte order: one copy
		copy(out, floatBytes(v))
		return
	}
	for i, f := range v {
		binary.LittleEndian.PutUint64(out[8*i:], math.Float64bits(f))
	}
}

// littleEndian reports whether this machine keeps a float64 in the blob's
// byte order, so that a vector is written and read by a copy.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// Ints writes a length-prefixed vector of integers.
func (w *StateWriter) Ints(v []int) {
	out := w.words(len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(out[8*i:], uint64(int64(x)))
	}
}

// words appends the length n and room for n 8-byte words, and returns that
// room: a vector is written in one pass over its own bytes, not an append
// (and a capacity check) per word.
func (w *StateWriter) words(n int) []byte {
	w.b = binary.AppendUvarint(w.b, uint64(n))
	at := len(w.b)
	w.b = slices.Grow(w.b, 8*n)[:at+8*n]
	return w.b[at:]
}

// Finish appends the blob's checksum and returns buf with the blob.
func (w *StateWriter) Finish() []byte {
	return binary.LittleEndian.AppendUint32(w.b, crc32.Checksum(w.b[w.start:], castagnoli))
}

// StateReader decodes a blob written by StateWriter. Errors are sticky: after
// the first one every read returns zero and Err reports it, so decoders read
// straight through and check once.
type StateReader struct {
	b   []byte
	err error
	alg string
}

// NewStateReader checks the frame and returns a reader positioned at the
// payload and the learner-state version found. It fails on a foreign
// algorithm, a version above maxVersion, or a bad checksum.
func NewStateReader(blob []byte, algorithm string, maxVersion uint64) (*StateReader, uint64, error) {
	if len(blob) < 3+1+1+4 || blob[0] != stateMagic0 || blob[1] != stateMagic1 {
		return nil, 0, fmt.Errorf("%w: %s: not a kernelstream state blob (%d bytes)", ErrState, algorithm, len(blob))
	}
	if blob[2] != codecVersion {
		return nil, 0, fmt.Errorf("%w: %s: codec version %d, this build reads %d", ErrState, algorithm, blob[2], codecVersion)
	}
	body, sum := blob[:len(blob)-4], binary.LittleEndian.Uint32(blob[len(blob)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, 0, fmt.Errorf("%w: %s: checksum mismatch (truncated or corrupted)", ErrState, algorithm)
	}
	r := &StateReader{b: body[3:], alg: algorithm}
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.fail("algorithm name length")
	}
	if r.err != nil {
		return nil, 0, r.err
	}
	name := string(r.b[:n])
	r.b = r.b[n:]
	if name != algorithm {
		return nil, 0, fmt.Errorf("%w: blob holds %q state, want %q", ErrState, name, algorithm)
	}
	v := r.uvarint()
	if r.err != nil {
		return nil, 0, r.err
	}
	if v > maxVersion {
		return nil, 0, fmt.Errorf("%w: %s: state version %d is newer than this build's %d", ErrState, algorithm, v, maxVersion)
	}
	return r, v, nil
}

func (r *StateReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s: %s", ErrState, r.alg, what)
	}
}

func (r *StateReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("truncated length")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *StateReader) Uint() uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *StateReader) Int() int       { return int(int64(r.Uint())) }
func (r *StateReader) Float() float64 { return math.Float64frombits(r.Uint()) }
func (r *StateReader) Rand(dst *Rand) {
	dst.SetState([4]uint64{r.Uint(), r.Uint(), r.Uint(), r.Uint()})
}

func (r *StateReader) Bool() bool {
	if r.err != nil {
		return false
	}
	if len(r.b) < 1 || r.b[0] > 1 {
		r.fail("bad bool")
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

// Floats reads a length-prefixed vector into dst's storage (grown if needed).
func (r *StateReader) Floats(dst []float64) []float64 {
	dst, words := readVec(r, dst)
	if littleEndian && len(dst) > 0 { // the blob's byte order: one copy
		copy(floatBytes(dst), words)
		return dst
	}
	for i := range dst {
		dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(words[8*i:]))
	}
	return dst
}

// Ints reads a length-prefixed vector of integers.
func (r *StateReader) Ints(dst []int) []int {
	dst, words := readVec(r, dst)
	for i := range dst {
		dst[i] = int(int64(binary.LittleEndian.Uint64(words[8*i:])))
	}
	return dst
}

// readVec reads a vector's length, refusing one the remaining bytes cannot
// hold before allocating anything, and returns dst resized to it (grown if
// needed) and the vector's 8-byte words, for the caller to convert.
func readVec[T any](r *StateReader, dst []T) ([]T, []byte) {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)/8) {
		r.fail("vector length exceeds blob")
	}
	if r.err != nil {
		return dst[:0], nil
	}
	if uint64(cap(dst)) < n {
		dst = make([]T, n)
	}
	words := r.b[:8*n]
	r.b = r.b[8*n:]
	return dst[:n], words
}

// floatBytes is v's memory as bytes (a little-endian machine's float64s are
// the blob's words).
func floatBytes(v []float64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 8*len(v))
}

// Check records a validation failure (a shape that does not match the spec).
func (r *StateReader) Check(ok bool, what string) {
	if !ok {
		r.fail(what)
	}
}

// Err returns the first error, or an error if bytes remain unread.
func (r *StateReader) Err() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Sprintf("%d trailing bytes", len(r.b)))
	}
	return r.err
}

// AppendState appends l's state, the bytes of l.MarshalBinary, to dst. A
// learner that implements encoding.BinaryAppender (every learner of this
// package) writes it in place, so a checkpoint's value (its own prefix, then
// the state) is one allocation, not a blob copied behind the prefix.
func AppendState(dst []byte, l Learner) ([]byte, error) {
	if a, ok := l.(encoding.BinaryAppender); ok {
		return a.AppendBinary(dst)
	}
	blob, err := l.MarshalBinary()
	if err != nil {
		return dst, err
	}
	return append(dst, blob...), nil
}
