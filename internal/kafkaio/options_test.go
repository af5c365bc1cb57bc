package kafkaio

import (
	"strings"
	"testing"
	"time"
)

// TestOptionsValidate: each invalid field is refused with its name, and the
// defaults fill what was left zero (the transactional producers' codec
// defaults to the others').
func TestOptionsValidate(t *testing.T) {
	ok := Options{Brokers: []string{"localhost:9092"}}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string // "" = valid
	}{
		{"minimal", func(*Options) {}, ""},
		{"no brokers", func(o *Options) { o.Brokers = nil }, "Brokers"},
		{"codec", func(o *Options) { o.Compression = "brotli" }, "Compression"},
		{"transaction codec", func(o *Options) { o.TransactionCompression = "lz5" }, "TransactionCompression"},
		{"transaction codec none", func(o *Options) { o.TransactionCompression = "none" }, ""},
		{"mechanism", func(o *Options) { o.SASL = &SASL{Mechanism: "gssapi"} }, "SASL.Mechanism"},
		{"fetch wait", func(o *Options) { o.FetchMaxWait = -time.Second }, "FetchMaxWait"},
		{"partition bytes", func(o *Options) { o.FetchMaxPartitionBytes = -1 }, "FetchMaxPartitionBytes"},
		{"queue bytes", func(o *Options) { o.ReaderQueueBytes = -1 }, "ReaderQueueBytes"},
		{"linger", func(o *Options) { o.Linger = -time.Millisecond }, "Linger"},
		{"buffered bytes", func(o *Options) { o.MaxBufferedBytes = -1 }, "MaxBufferedBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.edit(&o)
			err := o.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "kafkaio: "+tc.want)):
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
	d := Options{Compression: "zstd"}.withDefaults()
	if d.TransactionCompression != "zstd" {
		t.Errorf("TransactionCompression defaults to %q, want the Compression zstd", d.TransactionCompression)
	}
	if d := (Options{}).withDefaults(); d.Compression != DefaultCompression || d.TransactionCompression != DefaultCompression {
		t.Errorf("defaults %q and %q, want %q for both", d.Compression, d.TransactionCompression, DefaultCompression)
	}
	if d := (Options{TransactionCompression: "none"}).withDefaults(); d.TransactionCompression != "none" {
		t.Errorf("TransactionCompression none became %q", d.TransactionCompression)
	}
}
