package engine

import "testing"

func TestCreationBefore(t *testing.T) {
	const ms = "2026-11-24T07:00:00.123Z"
	for _, tc := range []struct {
		name string
		at1  string
		seq1 int64
		id1  string
		at2  string
		seq2 int64
		id2  string
		want bool
	}{
		{"earlier millisecond first, whatever the sequence", "2026-11-24T07:00:00.122Z", 9, "goal_z", ms, 1, "goal_a", true},
		{"same millisecond: sequence decides, not the random id", ms, 1, "goal_z", ms, 2, "goal_a", true},
		{"same millisecond, later sequence", ms, 2, "goal_a", ms, 1, "goal_z", false},
		{"records from before sequences: id decides", ms, 0, "goal_a", ms, 0, "goal_b", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := creation{"p", tc.at1, tc.seq1, tc.id1}, creation{"p", tc.at2, tc.seq2, tc.id2}
			if got := a.before(b); got != tc.want {
				t.Errorf("before = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNextSeqIncreases(t *testing.T) {
	var a analyticsState
	last := a.nextSeq()
	for range 1000 {
		n := a.nextSeq()
		if n <= last {
			t.Fatalf("nextSeq %d after %d", n, last)
		}
		last = n
	}
}
