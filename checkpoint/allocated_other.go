//go:build !unix

package checkpoint

import (
	"errors"
	"io/fs"
)

// allocated is the file's length where block counts are not available.
func allocated(info fs.FileInfo) int64 { return info.Size() }

// FreeBytes is not known on this platform.
func FreeBytes(string) (int64, error) { return 0, errors.ErrUnsupported }
