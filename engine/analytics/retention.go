package analytics

import (
	"slices"
	"strconv"
)

// Retention's limits and defaults (contract section 13).
const (
	MaxPeriods     = 12
	DefaultPeriods = 8
)

// Cohort is one row of the retention triangle: the people whose first
// cohort event fell in the period starting at Start, and how many of them
// did the return event in each period from then on.
type Cohort struct {
	Start    int64 // Unix ms, the start of the cohort's period
	Size     int
	Returned []int // Returned[k]: people who returned in period k (0: the cohort's own)
}

// RetentionCohorts builds the triangle. firsts maps each person to the time
// of their first cohort event in the query's range; returns maps people to
// the times of their return events (any order). Period k of a cohort is the
// k-th period after its own; a person counts in period 0 only for a return
// at or after their first cohort event, so with the same event for both
// period 0 is the whole cohort. Periods that start after now are left out,
// which gives later cohorts shorter rows: the triangle.
func RetentionCohorts(firsts map[string]int64, returns map[string][]int64, period Interval, periods int, now int64) []Cohort {
	byStart := map[int64]*Cohort{}
	for person, first := range firsts {
		start := period.Floor(first)
		c := byStart[start]
		if c == nil {
			c = &Cohort{Start: start}
			for s := start; len(c.Returned) < periods && s <= now; s = period.Next(s) {
				c.Returned = append(c.Returned, 0)
			}
			byStart[start] = c
		}
		c.Size++
		seen := make([]bool, len(c.Returned))
		for _, ts := range returns[person] {
			if ts < first {
				continue
			}
			k := periodIndex(period, start, ts)
			if k < len(seen) && !seen[k] {
				seen[k] = true
				c.Returned[k]++
			}
		}
	}
	out := make([]Cohort, 0, len(byStart))
	for _, c := range byStart {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Cohort) int { return int(a.Start - b.Start) })
	return out
}

// periodIndex is which period after the one starting at start holds ts.
func periodIndex(period Interval, start, ts int64) int {
	k := 0
	for s := period.Next(start); s <= ts && k <= MaxPeriods; s = period.Next(s) {
		k++
	}
	return k
}

// parsePeriods reads periods=N (1-12).
func parsePeriods(v string) (int, bool) {
	n, err := strconv.Atoi(v)
	return n, err == nil && n >= 1 && n <= MaxPeriods
}
