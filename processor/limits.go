package processor

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kernelstream/kernelstream/changelog"
	"github.com/kernelstream/kernelstream/checkpoint"
	"github.com/kernelstream/kernelstream/internal/wire"
)

// CheckRecordLimits reports whether records within the limits on keys and
// ids (MaxKeyBytes, MaxIDBytes) can always be stored: the longest store key
// a record makes, its pending entry's (the routing key with its length,
// then the id), must be within Badger's limit, and with the changelog on
// (changelogMax, its record limit; 0 = off) the bundle of a key holding one
// such entry must fit a changelog record, which carries the routing key in
// its own key and in its entries' keys. A key or id the store refuses would
// fail every checkpoint of its partition, and every restore once in the
// changelog; the limits refuse them as dead letters instead (wire.Limits).
// The learner state and the pending entries' values come on top, as for any
// key (a state above changelogMax is refused at checkpoint).
func CheckRecordLimits(maxKey, maxID, changelogMax int) error {
	store := len(binary.AppendUvarint(nil, uint64(maxKey))) + maxKey + maxID // pendingKey's length
	if store > checkpoint.MaxKeySuffixBytes {
		return fmt.Errorf("a key of %d bytes and an id of %d make a state store key of up to %d bytes, above Badger's limit %d",
			maxKey, maxID, store, checkpoint.MaxKeySuffixBytes)
	}
	if changelogMax == 0 {
		return nil
	}
	key := make([]byte, maxKey)
	b := changelog.Bundle{Seq: math.MaxUint64, NextIn: math.MaxInt64, NextLab: math.MaxInt64, HasLastRecord: true, LastRecord: math.MaxInt64,
		Pending: []changelog.Entry{{Key: pendingKey(nil, key, make([]byte, maxID))}}}
	if n := len(changelog.BundleKey(key)) + len(changelog.EncodeBundle(nil, &b)); n > changelogMax {
		return fmt.Errorf("a key of %d bytes and an id of %d make a changelog record of at least %d bytes, above changelog.max_message_bytes %d",
			maxKey, maxID, n, changelogMax)
	}
	return nil
}

// limits are the decoder's limits of cfg.
func (cfg *Config) limits() wire.Limits {
	return wire.Limits{Value: cfg.MaxValueBytes, Key: cfg.MaxKeyBytes, ID: cfg.MaxIDBytes}
}
