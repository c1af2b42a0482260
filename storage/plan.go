package storage

// span is a half-open millisecond range [Start, End).
type span struct{ Start, End int64 }

// bucketSpan asks for the counters of one level whose bucket starts lie in [Start, End).
type bucketSpan struct {
	Level byte
	span
}

// countPlan is how an exact count over a time range is assembled: whole
// buckets from the counters, and the ragged edges (less than a minute each)
// from the index.
type countPlan struct {
	Buckets []bucketSpan
	Edges   []span
}

func floorTo(ms, w int64) int64 { return ms - ms%w }

func ceilTo(ms, w int64) int64 {
	if r := ms % w; r != 0 {
		return ms + w - r
	}
	return ms
}

// planCount splits [from, to) into the fewest counter buckets (days inside,
// then hours, then minutes) plus index scans for partial minutes at the ends.
// Times are non-negative Unix milliseconds.
func planCount(from, to int64) countPlan {
	var p countPlan
	if from >= to {
		return p
	}
	a, b := ceilTo(from, minuteMs), floorTo(to, minuteMs)
	if a > b { // from and to inside one minute: a single edge
		p.Edges = append(p.Edges, span{from, to})
		return p
	}
	if from < a {
		p.Edges = append(p.Edges, span{from, a})
	}
	if b < to {
		p.Edges = append(p.Edges, span{b, to})
	}
	p.Buckets = decompose(p.Buckets, a, b, []byte{LevelDay, LevelHour, LevelMinute})
	return p
}

// decompose covers the aligned range [a, b) with buckets of the coarsest
// level that fits, recursing into finer levels for the ends.
func decompose(out []bucketSpan, a, b int64, levels []byte) []bucketSpan {
	if a >= b {
		return out
	}
	w := levelWidth(levels[0])
	if len(levels) == 1 {
		return append(out, bucketSpan{levels[0], span{a, b}})
	}
	ca, fb := ceilTo(a, w), floorTo(b, w)
	if ca >= fb {
		return decompose(out, a, b, levels[1:])
	}
	out = decompose(out, a, ca, levels[1:])
	out = append(out, bucketSpan{levels[0], span{ca, fb}})
	return decompose(out, fb, b, levels[1:])
}
