package wire

import "strconv"

// Limits bound the byte strings a record brings into the state. The
// routing key is part of every key the state store and the changelog
// write for it, the id is part of its pending entry's store key, and arm
// ids are kept in pending entries: a string the store cannot take would
// stop the partition at its next checkpoint (and, once in the changelog,
// every restore of it). So each is refused here, before it touches
// anything, as a dead letter naming the field and the limit; the processor
// checks at start that the limits fit the store and the changelog.
type Limits struct {
	// Value bounds the message value, checked before parsing.
	Value int
	// Key bounds the message key (the routing key).
	Key int
	// ID bounds an id token as written, a string's quotes and escapes
	// included: the record's id, a reward's arm, every arm's id.
	ID int
}

// The default limits: a megabyte of JSON, and keys and ids far longer than
// user ids, UUIDs or composite keys need, far below Badger's 65,000-byte
// keys (a pending entry's store key holds both).
const (
	DefaultMaxValueBytes = 1 << 20
	DefaultMaxKeyBytes   = 1024
	DefaultMaxIDBytes    = 512
)

// WithDefaults returns l with zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.Value == 0 {
		l.Value = DefaultMaxValueBytes
	}
	if l.Key == 0 {
		l.Key = DefaultMaxKeyBytes
	}
	if l.ID == 0 {
		l.ID = DefaultMaxIDBytes
	}
	return l
}

// Admit refuses, before any parsing, a record whose value is larger than
// l.Value or whose key is absent (nothing to route by) or longer than l.Key.
func (l Limits) Admit(key, value []byte) error {
	if len(value) > l.Value {
		return tooLong("value", len(value), "max_value_bytes", l.Value)
	}
	if len(key) == 0 {
		return Bad(ReasonNoKey, "the message key routes the record to its learner")
	}
	if len(key) > l.Key {
		return tooLong("key", len(key), "max_key_bytes", l.Key)
	}
	return nil
}

// tooLong is the oversized dead letter of field, n bytes long, above the
// limit named name.
func tooLong(field string, n int, name string, limit int) error {
	return Bad(ReasonOversized, field+": "+strconv.Itoa(n)+" bytes, above "+name+" = "+strconv.Itoa(limit))
}
