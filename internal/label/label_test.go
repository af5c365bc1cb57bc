package label

import "testing"

func TestBinary(t *testing.T) {
	for _, tc := range []struct{ y, want float64 }{
		{1, 1}, {0.5, 1}, {2, 1}, {0, -1}, {-1, -1}, {-0.5, -1},
	} {
		if got := Binary(tc.y); got != tc.want {
			t.Errorf("Binary(%v) = %v, want %v", tc.y, got, tc.want)
		}
	}
}
