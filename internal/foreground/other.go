//go:build !linux

package foreground

// Run does nothing outside Linux: the caller goes on in its own process.
func Run() (code int, ok bool) { return 0, false }
