package kafkaio

import (
	"bytes"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestCompressorLeavesSmallBatchesPlain(t *testing.T) {
	record := `{"id":"d-1","key":"user-7","model":"bkb","arm":"item-3","y_hat":0.25,"n_updates":4,"partition":0,"offset":9}`
	body := func(n int) []byte { return []byte(strings.Repeat(record, n/len(record)+1)[:n]) }
	cases := []struct {
		codec string
		size  int
		want  kgo.CompressionCodecType
	}{
		{"lz4", 100, kgo.CodecNone},
		{"lz4", minCompressBytes - 1, kgo.CodecNone},
		{"lz4", minCompressBytes, kgo.CodecLz4},
		{"lz4", 8 << 10, kgo.CodecLz4},
		{"zstd", minCompressBytes - 1, kgo.CodecNone},
		{"zstd", 8 << 10, kgo.CodecZstd},
		{"snappy", 8 << 10, kgo.CodecSnappy},
		{"gzip", 8 << 10, kgo.CodecGzip},
	}
	for _, c := range cases {
		src := body(c.size)
		var buf bytes.Buffer
		out, codec := compressor(c.codec).Compress(&buf, src)
		if codec != c.want {
			t.Errorf("%s, %d bytes: codec %d, want %d", c.codec, c.size, codec, c.want)
			continue
		}
		if codec == kgo.CodecNone && !bytes.Equal(out, src) {
			t.Errorf("%s, %d bytes: left plain but changed", c.codec, c.size)
		}
		if codec != kgo.CodecNone && len(out) >= len(src) {
			t.Errorf("%s, %d bytes: compressed to %d", c.codec, c.size, len(out))
		}
	}
	if compressor("none") != nil {
		t.Error(`compressor("none") is not nil: kgo would compress with its default`)
	}
}
