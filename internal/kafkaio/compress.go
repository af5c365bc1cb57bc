package kafkaio

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kgo"
)

// minCompressBytes is the smallest batch body (its records, framed) that
// is compressed. LZ codecs find their matches between records (the JSON
// field names repeat from one record to the next, rarely within one), so a
// batch of one prediction shrinks by a few bytes (lz4: 180 to 177) for the
// codec's whole fixed cost: a frame, and lookups in a 128 KiB match table
// whose in-use map (8 KiB) is cleared per call; 0.53 us a batch in a warm
// loop, more when the table is cold in the cache. A stream of sparse
// decisions sends such batches one by one.
const minCompressBytes = 512

// smallPlain leaves batches under minCompressBytes uncompressed and hands
// the others to kgo's compressor for the configured codec.
type smallPlain struct{ kgo.Compressor }

func (c smallPlain) Compress(dst *bytes.Buffer, src []byte, flags ...kgo.CompressFlag) ([]byte, kgo.CompressionCodecType) {
	if len(src) < minCompressBytes {
		return src, kgo.CodecNone
	}
	return c.Compressor.Compress(dst, src, flags...)
}

// compressor returns the compressor of codec ("none": none).
func compressor(codec string) kgo.Compressor {
	c, _ := kgo.DefaultCompressor(codecs[codec]) // codecs holds valid codecs only
	if c == nil {
		return nil
	}
	return smallPlain{c}
}
