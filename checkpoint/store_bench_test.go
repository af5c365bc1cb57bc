package checkpoint

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/kernelstream/kernelstream/internal/cputime"
)

// BenchmarkReadLearner measures the cold-learner read of the processor
// (a point read of one learner blob among many) under the Badger options
// Open uses and under alternatives: keys=200000 blobs of 600 bytes written
// in checkpoints of 10,000, then reads in random order.
func BenchmarkReadLearner(b *testing.B) {
	const keys, size = 200000, 600
	for _, tc := range []struct {
		name string
		tune func(badger.Options) badger.Options
	}{
		{"default", nil},
		{"snappy", func(o badger.Options) badger.Options { return o.WithCompression(options.Snappy) }},
		{"snappy-cache256", func(o badger.Options) badger.Options {
			return o.WithCompression(options.Snappy).WithBlockCacheSize(256 << 20)
		}},
		{"none-cache0", func(o badger.Options) badger.Options { return o.WithBlockCacheSize(0) }},
		{"none-cache256", func(o badger.Options) badger.Options { return o.WithBlockCacheSize(256 << 20) }},
		{"none-block16k", func(o badger.Options) badger.Options { return o.WithBlockSize(16 << 10) }},
	} {
		b.Run(fmt.Sprintf("keys=%d/%s", keys, tc.name), func(b *testing.B) {
			s, err := Open(Options{Dir: b.TempDir(), tune: tc.tune})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			r := rand.New(rand.NewPCG(1, 2))
			val := make([]byte, size)
			for i := 0; i < keys; i += 10000 {
				cp := &Checkpoint{Meta: []byte{1}}
				for j := i; j < i+10000; j++ {
					for k := range val {
						val[k] = byte(r.Uint32())
					}
					cp.Learners = append(cp.Learners, Op{Key: benchKey(j), Value: append([]byte(nil), val...)})
				}
				if err := s.Commit(0, cp); err != nil {
					b.Fatal(err)
				}
			}
			sum := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ok, err := s.ReadLearner(0, benchKey(r.IntN(keys)), func(blob []byte) error { sum += int(blob[0]); return nil })
				if err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
	}
}

func benchKey(i int) []byte {
	return binary.BigEndian.AppendUint64([]byte("user-"), uint64(i)*2654435761)
}

// BenchmarkCommit measures checkpoint commits of learners=N blobs of 336
// bytes (the size of a small aogd-ald learner with online scaling) drawn
// from 200,000 keys, so that later commits overwrite earlier ones and
// Badger flushes and compacts as under a many-keys stream. 1,000 learners
// fit in one transaction; 10,000 (3.4 MB) take the staged path at the
// default memtable. cpu-µs/learner is the process's CPU (getrusage), which
// counts Badger's background flushes and compactions too.
func BenchmarkCommit(b *testing.B) {
	const pool, size = 200000, 336
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("learners=%d", n), func(b *testing.B) {
			s, err := Open(Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			r := rand.New(rand.NewPCG(3, 4))
			cp := &Checkpoint{Meta: []byte{1}, Learners: make([]Op, n)}
			for i := range cp.Learners {
				cp.Learners[i].Value = make([]byte, size)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cputime.Process()
			for i := 0; i < b.N; i++ {
				for j := range cp.Learners {
					o := &cp.Learners[j]
					o.Key = benchKey(r.IntN(pool))
					for k := 0; k < size; k += 8 {
						binary.LittleEndian.PutUint64(o.Value[k:], r.Uint64())
					}
				}
				if err := s.Commit(0, cp); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cputime.Process()-cpu0)/float64(time.Microsecond)/float64(b.N*n), "cpu-µs/learner")
		})
	}
}
