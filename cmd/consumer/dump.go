package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"

	"github.com/kernelstream/kernelstream/checkpoint"
)

// learnerDump is one line of -dump-state.
type learnerDump struct {
	Partition int    `json:"partition"`
	Key       string `json:"key"`
	Bytes     int    `json:"bytes"`
	SHA256    string `json:"sha256"`
	Blob      string `json:"blob,omitempty"`
}

// dumpStates prints every learner stored in the checkpoint directory dir,
// partition by partition in key order: two runs left the same state iff
// they print the same lines. The consumer must not be running on dir.
func dumpStates(dir string, partitions int, blobs bool, w io.Writer) error {
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("dump-state: %w", err)
	}
	st, err := checkpoint.Open(checkpoint.Options{Dir: dir, Logger: zerolog.Nop()})
	if err != nil {
		return err
	}
	defer st.Close()
	enc := json.NewEncoder(w)
	for part := 0; part < partitions; part++ {
		err := st.EachLearner(part, func(key, blob []byte) error {
			sum := sha256.Sum256(blob)
			d := learnerDump{Partition: part, Key: string(key), Bytes: len(blob), SHA256: hex.EncodeToString(sum[:])}
			if blobs {
				d.Blob = base64.StdEncoding.EncodeToString(blob)
			}
			return enc.Encode(d)
		})
		if err != nil {
			return fmt.Errorf("dump-state: partition %d: %w", part, err)
		}
	}
	return nil
}
