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

// TestReplyResults: a reset request keeps its last batch's results for the
// next one that fits, zeroed; a single event's come from the reply's own
// array, and results past the bound are not kept.
func TestReplyResults(t *testing.T) {
	var req Request
	rep := &req.rep
	if rs := rep.results(1); len(rs) != 1 || &rs[0] != &rep.resultsBuf[0] {
		t.Error("one result: not the reply's own")
	}
	rs := rep.results(100)
	rs[99] = Result{Outcome: Conflict}
	rep.Results = rs
	req.Reset()
	if got := rep.results(50); len(got) != 50 || &got[0] != &rs[0] || got[49] != (Result{}) {
		t.Error("a batch after a larger one: not its array, or not zeroed")
	}
	rs[49] = Result{Outcome: Duplicate}
	if got := rep.results(100); &got[0] != &rs[0] || got[49] != (Result{}) || got[99] != (Result{}) {
		t.Error("a batch as large: not its array, or not zeroed")
	}
	if got := rep.results(101); &got[0] == &rs[0] || len(got) != 101 {
		t.Error("a larger batch: the smaller array")
	}
	rep.Results = make([]Result, maxSpareResults+1)
	req.Reset()
	if rep.spare != nil {
		t.Errorf("kept %d results, past the bound", cap(rep.spare))
	}
}
