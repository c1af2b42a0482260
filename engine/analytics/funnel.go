package analytics

import (
	"bytes"
	"sort"
)

// Occ is one event of a step: its time and id. Occurrences are ordered by
// time, then id (record order), so two events of the same millisecond still
// have an order and one event never counts as two consecutive steps.
type Occ struct {
	TS int64
	ID [16]byte
}

// CompareOcc orders occurrences by time, then id.
func CompareOcc(a, b Occ) int {
	switch {
	case a.TS < b.TS:
		return -1
	case a.TS > b.TS:
		return 1
	}
	return bytes.Compare(a.ID[:], b.ID[:])
}

func (a Occ) after(b Occ) bool {
	return a.TS > b.TS || a.TS == b.TS && bytes.Compare(a.ID[:], b.ID[:]) > 0
}

// Deepest finds how far one visitor got through ordered steps: lists[j]
// holds the visitor's occurrences of step j, sorted. A visitor reaches step
// j when some occurrence of step 0 is followed, strictly later, by one of
// step 1, then of step 2 and so on up to j, all within windowMs of the first.
// It returns the number of steps reached (0 to len(lists)) and the
// occurrence that reached the last of them; when every step is reached, that
// is the earliest possible completion.
//
// For each start it takes the earliest next occurrence of each step, which
// is optimal: any later choice leaves fewer candidates for the steps after
// it. A later start can only reach deeper when an earlier one ran out of
// window, so every start is tried, earliest first.
func Deepest(lists [][]Occ, windowMs int64) (depth int, end Occ) {
	if len(lists) == 0 || len(lists[0]) == 0 {
		return 0, end
	}
	for _, s := range lists[0] {
		cur, d := s, 1
		for j := 1; j < len(lists); j++ {
			l := lists[j]
			i := sort.Search(len(l), func(i int) bool { return l[i].after(cur) })
			if i == len(l) || l[i].TS-s.TS > windowMs {
				break
			}
			cur = l[i]
			d++
		}
		if d > depth {
			depth, end = d, cur
			if d == len(lists) {
				return depth, end
			}
		}
	}
	return depth, end
}

// FunnelCounts counts, for each step, the visitors who reached it in order
// within the window. byVisitor maps a visitor to its occurrence lists, one
// sorted list per step.
func FunnelCounts(byVisitor map[string][][]Occ, steps int, windowMs int64) []int64 {
	counts := make([]int64, steps)
	for _, lists := range byVisitor {
		d, _ := Deepest(lists, windowMs)
		for j := 0; j < d; j++ {
			counts[j]++
		}
	}
	return counts
}

// ConversionRates divides each step's visitors by the first step's (0 when nobody started).
func ConversionRates(counts []int64) []float64 {
	out := make([]float64, len(counts))
	for i, c := range counts {
		if counts[0] > 0 {
			out[i] = float64(c) / float64(counts[0])
		}
	}
	return out
}
