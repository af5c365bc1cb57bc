//go:build unix

package checkpoint

import (
	"io/fs"
	"syscall"
)

// allocated is the disk space a file uses (what du counts), which for
// Badger's preallocated, memory-mapped files is less than their length.
func allocated(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return info.Size()
}
