package analytics

import (
	"reflect"
	"testing"
)

func TestRetentionCohorts(t *testing.T) {
	firsts := map[string]int64{
		"a": ms("2026-11-02T10:00:00Z"), // Monday, week of 11-02
		"b": ms("2026-11-03T09:00:00Z"), // same week
		"c": ms("2026-11-10T09:00:00Z"), // next week
	}
	returns := map[string][]int64{
		"a": {ms("2026-11-02T09:00:00Z"), ms("2026-11-02T11:00:00Z"), ms("2026-11-11T00:00:00Z"), ms("2026-11-12T00:00:00Z"), ms("2026-11-17T00:00:00Z")},
		"b": {ms("2026-11-18T00:00:00Z")},
		"c": {ms("2026-11-10T09:00:00Z"), ms("2026-11-18T00:00:00Z")},
	}
	now := ms("2026-11-20T00:00:00Z")
	got := RetentionCohorts(firsts, returns, Week, 4, now)
	want := []Cohort{
		// a: period 0 (11:00, not the 09:00 before its first), 1 (twice: once), 2; b: 2.
		{Start: ms("2026-11-02T00:00:00Z"), Size: 2, Returned: []int{1, 1, 2}},
		// c: period 0 (at its first), 1. Two periods have started by now.
		{Start: ms("2026-11-09T00:00:00Z"), Size: 1, Returned: []int{1, 1}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// Periods past the requested number are not counted.
	if got := RetentionCohorts(firsts, returns, Week, 2, now); !reflect.DeepEqual(got[0].Returned, []int{1, 1}) {
		t.Fatalf("2 periods: %+v", got)
	}
	// Months are calendar months.
	m := RetentionCohorts(map[string]int64{"x": ms("2026-01-31T00:00:00Z")}, map[string][]int64{"x": {ms("2026-02-01T00:00:00Z")}}, Month, 3, ms("2026-03-05T00:00:00Z"))
	if !reflect.DeepEqual(m, []Cohort{{Start: ms("2026-01-01T00:00:00Z"), Size: 1, Returned: []int{0, 1, 0}}}) {
		t.Fatalf("months: %+v", m)
	}
}
