//go:build unix

package checkpoint

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// allocated is the disk space a file uses (what du counts), which for
// Badger's preallocated, memory-mapped files is less than their length.
func allocated(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return info.Size()
}

// FreeBytes is the space left to an unprivileged writer on the file system
// holding dir.
func FreeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil //nolint:unconvert // the field types differ across platforms
}
