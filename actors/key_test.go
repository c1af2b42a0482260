package actors

import "testing"

// TestRepeatOf: a key repeated within a write is found by its hash,
// and two keys that share a hash are still told apart by their text.
func TestRepeatOf(t *testing.T) {
	ev := func(key string, hash uint64) Pending { return Pending{IdemKey: key, IdemHash: hash} }
	cases := []struct {
		name   string
		events []Pending
		want   []int // per event: the first event with its key, -1 for none
	}{
		{"distinct", []Pending{ev("a", 1), ev("b", 2), ev("c", 3)}, []int{-1, -1, -1}},
		{"repeated", []Pending{ev("a", 1), ev("b", 2), ev("a", 1), ev("a", 1)}, []int{-1, -1, 0, 0}},
		{"shared hash", []Pending{ev("a", 7), ev("b", 7), ev("a", 7), ev("b", 7)}, []int{-1, -1, 0, 1}},
		{"shared hash, second first", []Pending{ev("x", 1), ev("b", 7), ev("a", 7), ev("a", 7), ev("b", 7)}, []int{-1, -1, -1, 2, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			local := map[uint64]int{}
			for i, p := range tc.events {
				j, ok := repeatOf(tc.events, local, i)
				got := -1
				if ok {
					got = j
				}
				if got != tc.want[i] {
					t.Fatalf("event %d (%s): first with its key %d, want %d", i, p.IdemKey, got, tc.want[i])
				}
			}
		})
	}
}
