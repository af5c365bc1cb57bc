package processor

import (
	"testing"
	"time"
)

// TestWallClock: the latency histogram's clock tells time.Now()'s wall time.
func TestWallClock(t *testing.T) {
	var c wallClock
	for i := 0; i < 3; i++ {
		before := time.Now().UnixNano()
		got := c.now()
		after := time.Now().UnixNano()
		if got < before-int64(time.Millisecond) || got > after+int64(time.Millisecond) {
			t.Fatalf("wallClock %d, time.Now() %d..%d", got, before, after)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
