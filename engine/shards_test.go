package engine

import "testing"

func TestDefaultShards(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{1, 1}, {2, 1}, {3, 1}, {4, 2}, {16, 8},
	} {
		if got := DefaultShards(tc.n); got != tc.want {
			t.Errorf("DefaultShards(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}
