package analytics

import (
	"cmp"
	"slices"
)

// Paths' limits and defaults (contract section 13).
const (
	MaxPathSteps     = 5
	DefaultPathSteps = 3
	DefaultPathLimit = 10
)

// PathNode is one event of a visitor's sequence: its name, and the label
// it shows in a path (the page path of a pageview, else the name).
type PathNode struct {
	Name, Label string
}

// Transition is one edge of the paths: at step Step (1: the first event
// after the start event, or the last before the end event), how many
// visitors went From -> To.
type Transition struct {
	Step  int    `json:"step"`
	From  string `json:"from"`
	To    string `json:"to"`
	Count int    `json:"count"`
}

// PathTransitions counts the transitions of each visitor's sequence (time
// ordered) from the first occurrence of start (counting forwards) or, with
// start empty, up to the first occurrence of end (counting backwards), for
// steps steps; it keeps the limit most frequent transitions of each step.
// A visitor counts at most once per step.
func PathTransitions(seqs [][]PathNode, start, end string, steps, limit int) []Transition {
	type edge struct {
		step     int
		from, to string
	}
	counts := map[edge]int{}
	for _, seq := range seqs {
		anchor := start
		if anchor == "" {
			anchor = end
		}
		i := slices.IndexFunc(seq, func(n PathNode) bool { return n.Name == anchor })
		if i < 0 {
			continue
		}
		for k := 1; k <= steps; k++ {
			a, b := i+k-1, i+k // forwards: the k-th event after the start
			if start == "" {
				a, b = i-k, i-k+1 // backwards: the k-th event before the end
			}
			if a < 0 || b >= len(seq) {
				break
			}
			counts[edge{k, seq[a].Label, seq[b].Label}]++
		}
	}
	out := make([]Transition, 0, len(counts))
	for e, n := range counts {
		out = append(out, Transition{Step: e.step, From: e.from, To: e.to, Count: n})
	}
	slices.SortFunc(out, func(a, b Transition) int {
		return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(b.Count, a.Count),
			cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
	kept := out[:0]
	perStep := 0
	for i, t := range out {
		if i > 0 && t.Step != out[i-1].Step {
			perStep = 0
		}
		if perStep < limit {
			kept = append(kept, t)
		}
		perStep++
	}
	return kept
}
