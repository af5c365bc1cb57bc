//go:build !unix

package checkpoint

import "io/fs"

// allocated is the file's length where block counts are not available.
func allocated(info fs.FileInfo) int64 { return info.Size() }
