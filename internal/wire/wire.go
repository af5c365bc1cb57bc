// Package wire is kernelstream's record contract, in one place: the input
// records (their kinds, the decoder, its limits and the dead-letter reasons
// of the records it refuses), the output records (the encoder and a plain
// struct for their readers), the header names of dead letters, and encoders
// of well-formed input records for the programs that feed the service.
// docs/pipeline.md, "Records", is its reference.
//
// It knows no Kafka client: a record is a key and a value, header names are
// strings and their values bytes; the processor adapts them to its client.
// Stored state has its own contract, in package changelog.
package wire

import "errors"

// Kind is what an input record asks for: a row of the contract's table.
type Kind uint8

const (
	KindFeatures Kind = iota // id, x: predict, keep pending
	KindLabeled              // id, x, y: predict, emit, update at once
	KindLabel                // id, y | id, reward (, arm): the delayed label or reward
	KindDecision             // id, arms: choose (bandit) or rank (regression)
	KindDead                 // dead-lettered
	KindDelete               // id, delete: true: erase the key's learner and pending entries
	NumKinds
)

var kindNames = [NumKinds]string{"features", "labeled", "label", "decision", "dead", "delete"}

// String is the kind's name, the label of the records metric.
func (k Kind) String() string { return kindNames[k] }

// KindNames lists the kinds' names, indexed by Kind.
func KindNames() []string { return kindNames[:] }

// Reason is why a record is dead-lettered: the value of the HeaderReason
// header and the label of the dead-letter metric.
type Reason uint8

const (
	ReasonBadJSON        Reason = iota // not one JSON object
	ReasonWrongType                    // a known field holds the wrong JSON type
	ReasonMissingField                 // no id, or neither x, arms, y nor reward
	ReasonBadFields                    // a combination of fields the contract does not define
	ReasonDimension                    // x of the wrong length, sparse index out of range or repeated
	ReasonNonFinite                    // NaN, Inf, a number out of float64 range, or one the learner cannot take
	ReasonOversized                    // value, key or id above its limit (Limits)
	ReasonNoKey                        // record without a message key
	ReasonUnknownArm                   // reward names an arm that was not offered
	ReasonBadTimestamp                 // ts farther than MaxTsSkew from the Kafka timestamp
	ReasonWrongPartition               // key belongs to another partition under murmur2 (WrongPartition dead_letter)
	ReasonCorruptState                 // the key's stored learner cannot be decoded (quarantined)
	ReasonLearnerPanic                 // the learner panicked on this record (state restored)
	NumReasons
)

var reasonNames = [NumReasons]string{"bad_json", "wrong_type", "missing_field", "bad_fields", "dimension", "non_finite", "oversized", "no_key", "unknown_arm",
	"bad_timestamp", "wrong_partition", "corrupt_state", "learner_panic"}

// String is the reason's name as the dead-letter header and metric carry it.
func (r Reason) String() string { return reasonNames[r] }

// ReasonNames lists the reasons' names, indexed by Reason.
func ReasonNames() []string { return reasonNames[:] }

// BadRecord is the error of a record the contract cannot use, whoever
// finds it (the decoder, a check of the processor, the learner): the record
// is dead-lettered with Reason and the message, and touches no state.
type BadRecord struct {
	Reason Reason
	Msg    string
}

func (e *BadRecord) Error() string { return e.Reason.String() + ": " + e.Msg }

// Bad returns the error of a bad record.
func Bad(r Reason, msg string) error { return &BadRecord{Reason: r, Msg: msg} }

// IsBad reports whether err is a record's fault (a *BadRecord in its chain).
// It allocates only for a wrapped error: errors.As's target escapes, and
// the worker asks for every record.
func IsBad(err error) bool {
	if _, ok := err.(*BadRecord); ok || err == nil {
		return ok
	}
	var b *BadRecord
	return errors.As(err, &b)
}

// ReasonOf is the dead-letter reason of a bad record's error.
func ReasonOf(err error) Reason {
	var b *BadRecord
	if errors.As(err, &b) {
		return b.Reason
	}
	return ReasonBadJSON
}

// Dead-letter headers, added to the record sent unchanged to the
// dead-letter topic.
const (
	HeaderReason    = "kernelstream-error-reason"     // Reason.String()
	HeaderError     = "kernelstream-error"            // BadRecord.Error()
	HeaderTopic     = "kernelstream-source-topic"     // where the record came from
	HeaderPartition = "kernelstream-source-partition" // decimal
	HeaderOffset    = "kernelstream-source-offset"    // decimal
	HeaderOmitted   = "kernelstream-value-omitted"    // original size, when the DLQ refused the value
)
