package processor

import "github.com/segmentio/kafka-go"

// compressionCodecs maps Config.Compression to kafka-go's codecs ("none" is
// the zero value: no compression).
var compressionCodecs = map[string]kafka.Compression{
	"none":   0,
	"gzip":   kafka.Gzip,
	"snappy": kafka.Snappy,
	"lz4":    kafka.Lz4,
	"zstd":   kafka.Zstd,
}
