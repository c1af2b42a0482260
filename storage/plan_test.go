package storage

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// planDay is the start of a UTC day (2024-10-04), the origin of the cases.
const planDay = 20000 * dayMs

func minB(start, end int64) bucketSpan  { return bucketSpan{LevelMinute, span{start, end}} }
func hourB(start, end int64) bucketSpan { return bucketSpan{LevelHour, span{start, end}} }
func dayB(start, end int64) bucketSpan  { return bucketSpan{LevelDay, span{start, end}} }

func TestPlanCount(t *testing.T) {
	const (
		D   = int64(planDay)
		sec = int64(1000)
		mn  = minuteMs
		hr  = hourMs
		dy  = dayMs
	)
	tests := []struct {
		name     string
		from, to int64 // [from, to)
		buckets  []bucketSpan
		edges    []span
	}{
		{name: "empty", from: D + 5*sec, to: D + 5*sec},
		{name: "from after to", from: D + hr, to: D + 5*sec},
		{name: "from after to aligned", from: D + dy, to: D},
		{name: "one ms", from: D + 7, to: D + 8, edges: []span{{D + 7, D + 8}}},
		{name: "same minute", from: D + 10*sec, to: D + 50*sec, edges: []span{{D + 10*sec, D + 50*sec}}},
		{name: "same minute from aligned", from: D + 3*mn, to: D + 3*mn + 59*sec,
			edges: []span{{D + 3*mn, D + 3*mn + 59*sec}}},
		{name: "last ms of a minute to its end", from: D + mn - 1, to: D + mn, edges: []span{{D + mn - 1, D + mn}}},
		{name: "straddles one minute boundary", from: D + 30*sec, to: D + 90*sec,
			edges: []span{{D + 30*sec, D + mn}, {D + mn, D + 90*sec}}},
		{name: "straddles one minute boundary widest", from: D + 1, to: D + 2*mn - 1,
			edges: []span{{D + 1, D + mn}, {D + mn, D + 2*mn - 1}}},
		{name: "exact minute", from: D + 5*mn, to: D + 6*mn, buckets: []bucketSpan{minB(D+5*mn, D+6*mn)}},
		{name: "exact minutes", from: D + 5*mn, to: D + 17*mn, buckets: []bucketSpan{minB(D+5*mn, D+17*mn)}},
		{name: "exact hour", from: D + 3*hr, to: D + 4*hr, buckets: []bucketSpan{hourB(D+3*hr, D+4*hr)}},
		{name: "exact hours", from: D + 3*hr, to: D + 9*hr, buckets: []bucketSpan{hourB(D+3*hr, D+9*hr)}},
		{name: "exact day", from: D, to: D + dy, buckets: []bucketSpan{dayB(D, D+dy)}},
		{name: "exact days", from: D, to: D + 3*dy, buckets: []bucketSpan{dayB(D, D+3*dy)}},
		{name: "epoch minute", from: 0, to: mn, buckets: []bucketSpan{minB(0, mn)}},
		{name: "epoch to ragged", from: 0, to: mn + 1, buckets: []bucketSpan{minB(0, mn)}, edges: []span{{mn, mn + 1}}},
		{name: "aligned minute to ragged", from: D + 10*mn, to: D + 12*mn + 5*sec,
			buckets: []bucketSpan{minB(D+10*mn, D+12*mn)}, edges: []span{{D + 12*mn, D + 12*mn + 5*sec}}},
		{name: "ragged to aligned minute", from: D + 10*mn - 1, to: D + 12*mn,
			buckets: []bucketSpan{minB(D+10*mn, D+12*mn)}, edges: []span{{D + 10*mn - 1, D + 10*mn}}},
		{name: "one ms before a day", from: D + dy - 1, to: D + dy, edges: []span{{D + dy - 1, D + dy}}},
		{name: "crosses an hour, minutes only", from: D + 3*hr + 58*mn + 30*sec, to: D + 4*hr + 2*mn + 15*sec,
			buckets: []bucketSpan{minB(D+3*hr+59*mn, D+4*hr+2*mn)},
			edges:   []span{{D + 3*hr + 58*mn + 30*sec, D + 3*hr + 59*mn}, {D + 4*hr + 2*mn, D + 4*hr + 2*mn + 15*sec}}},
		{name: "crosses hours", from: D + hr + 30*mn, to: D + 4*hr + 15*mn,
			buckets: []bucketSpan{minB(D+hr+30*mn, D+2*hr), hourB(D+2*hr, D+4*hr), minB(D+4*hr, D+4*hr+15*mn)}},
		{name: "hour plus minutes", from: D + 2*hr, to: D + 3*hr + 7*mn,
			buckets: []bucketSpan{hourB(D+2*hr, D+3*hr), minB(D+3*hr, D+3*hr+7*mn)}},
		{name: "minutes plus hour", from: D + 2*hr - 7*mn, to: D + 3*hr,
			buckets: []bucketSpan{minB(D+2*hr-7*mn, D+2*hr), hourB(D+2*hr, D+3*hr)}},
		{name: "crosses a day, no whole day", from: D + 22*hr + 30*mn + 1, to: D + dy + hr + 45*mn + 500,
			buckets: []bucketSpan{minB(D+22*hr+31*mn, D+23*hr), hourB(D+23*hr, D+dy+hr), minB(D+dy+hr, D+dy+hr+45*mn)},
			edges:   []span{{D + 22*hr + 30*mn + 1, D + 22*hr + 31*mn}, {D + dy + hr + 45*mn, D + dy + hr + 45*mn + 500}}},
		{name: "crosses a day, minutes only", from: D + dy - 2*mn - 1, to: D + dy + 3*mn + 1,
			buckets: []bucketSpan{minB(D+dy-2*mn, D+dy+3*mn)},
			edges:   []span{{D + dy - 2*mn - 1, D + dy - 2*mn}, {D + dy + 3*mn, D + dy + 3*mn + 1}}},
		{name: "hours around a day", from: D + dy - hr, to: D + 2*dy + hr,
			buckets: []bucketSpan{hourB(D+dy-hr, D+dy), dayB(D+dy, D+2*dy), hourB(D+2*dy, D+2*dy+hr)}},
		{name: "day plus ragged end", from: D, to: D + dy + 30*sec,
			buckets: []bucketSpan{dayB(D, D+dy)}, edges: []span{{D + dy, D + dy + 30*sec}}},
		{name: "several days, ragged ends", from: D + 5*hr + 7*mn + 3*sec, to: D + 3*dy + 2*hr + 9*mn + 59*sec + 999,
			buckets: []bucketSpan{
				minB(D+5*hr+8*mn, D+6*hr), hourB(D+6*hr, D+dy),
				dayB(D+dy, D+3*dy),
				hourB(D+3*dy, D+3*dy+2*hr), minB(D+3*dy+2*hr, D+3*dy+2*hr+9*mn),
			},
			edges: []span{{D + 5*hr + 7*mn + 3*sec, D + 5*hr + 8*mn}, {D + 3*dy + 2*hr + 9*mn, D + 3*dy + 2*hr + 9*mn + 59*sec + 999}}},
		{name: "several days, ragged minutes only", from: D + 59*sec, to: D + 2*dy + 1,
			buckets: []bucketSpan{minB(D+mn, D+hr), hourB(D+hr, D+dy), dayB(D+dy, D+2*dy)},
			edges:   []span{{D + 59*sec, D + mn}, {D + 2*dy, D + 2*dy + 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := planCount(tc.from, tc.to)
			if !reflect.DeepEqual(got.Buckets, tc.buckets) {
				t.Errorf("Buckets:\n got %s\nwant %s", fmtBuckets(got.Buckets), fmtBuckets(tc.buckets))
			}
			if !reflect.DeepEqual(got.Edges, tc.edges) {
				t.Errorf("Edges:\n got %s\nwant %s", fmtSpans(got.Edges), fmtSpans(tc.edges))
			}
			checkTiling(t, tc.from, tc.to, got)
		})
	}
}

func fmtMs(ms int64) string {
	d, r := ms/dayMs-20000, ms%dayMs
	return fmt.Sprintf("D%+d+%02d:%02d:%02d.%03d", d, r/hourMs, r%hourMs/minuteMs, r%minuteMs/1000, r%1000)
}

func fmtSpans(s []span) string {
	out := "["
	for _, sp := range s {
		out += fmt.Sprintf(" [%s,%s)", fmtMs(sp.Start), fmtMs(sp.End))
	}
	return out + " ]"
}

func fmtBuckets(bs []bucketSpan) string {
	out := "["
	for _, b := range bs {
		out += fmt.Sprintf(" %c[%s,%s)", b.Level, fmtMs(b.Start), fmtMs(b.End))
	}
	return out + " ]"
}

// checkTiling checks that the plan's buckets and edges cover [from, to)
// exactly once, that buckets are aligned to their level, that edges are
// shorter than a minute, and that no finer span could have used a coarser
// bucket.
func checkTiling(t *testing.T, from, to int64, p countPlan) {
	t.Helper()
	where := fmt.Sprintf("planCount(%d, %d) = %s %s: ", from, to, fmtBuckets(p.Buckets), fmtSpans(p.Edges))
	errorf := func(format string, args ...any) {
		t.Helper()
		t.Errorf(where+format, args...)
	}
	type piece struct {
		span
		level byte // 0 for an edge
	}
	var pieces []piece
	for _, b := range p.Buckets {
		w := levelWidth(b.Level)
		if b.Level != LevelMinute && b.Level != LevelHour && b.Level != LevelDay {
			errorf("bucket of unknown level %q", b.Level)
		}
		if b.Start >= b.End || b.Start%w != 0 || b.End%w != 0 {
			errorf("bucket %c [%d,%d) empty or not aligned", b.Level, b.Start, b.End)
		}
		// A finer span holds no whole bucket of a coarser level.
		for _, coarser := range []byte{LevelHour, LevelDay} {
			cw := levelWidth(coarser)
			if cw > w && ceilTo(b.Start, cw)+cw <= b.End {
				errorf("bucket %c [%d,%d) contains a whole %c bucket", b.Level, b.Start, b.End, coarser)
			}
		}
		pieces = append(pieces, piece{b.span, b.Level})
	}
	for _, e := range p.Edges {
		if e.Start >= e.End || e.End-e.Start >= minuteMs {
			errorf("edge [%d,%d) empty or not shorter than a minute", e.Start, e.End)
		}
		pieces = append(pieces, piece{e, 0})
	}
	if len(p.Edges) > 2 {
		errorf("%d edges, want at most 2", len(p.Edges))
	}
	if n := len(p.Buckets); n > 5 {
		errorf("%d bucket spans, want at most 5", n)
	}
	if from >= to {
		if len(pieces) != 0 {
			errorf("plan for empty range [%d,%d) has %d pieces", from, to, len(pieces))
		}
		return
	}
	slices.SortFunc(pieces, func(a, b piece) int { return cmp.Compare(a.Start, b.Start) })
	at := from
	for _, pc := range pieces {
		if pc.Start != at {
			errorf("gap or overlap at %d: next piece starts at %d", at, pc.Start)
			return
		}
		at = pc.End
	}
	if at != to {
		errorf("plan ends at %d, want %d", at, to)
	}
}

func TestPlanCountTilesRandomRanges(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	base := int64(planDay) - 3*dayMs
	point := func() int64 {
		ms := base + r.Int64N(10*dayMs)
		switch r.IntN(6) {
		case 0:
			ms = floorTo(ms, minuteMs)
		case 1:
			ms = floorTo(ms, hourMs)
		case 2:
			ms = floorTo(ms, dayMs)
		case 3:
			ms = floorTo(ms, []int64{minuteMs, hourMs, dayMs}[r.IntN(3)]) + r.Int64N(3) - 1
		}
		return ms
	}
	for i := range 10000 {
		from := point()
		var to int64
		switch r.IntN(4) {
		case 0: // short ranges, mostly within a few minutes
			to = from + r.Int64N(3*minuteMs)
		case 1:
			to = from + r.Int64N(3*hourMs)
		default:
			to = point()
		}
		if i < 10 {
			from = int64(i) // near the epoch
		}
		checkTiling(t, from, to, planCount(from, to))
		if t.Failed() {
			return // one failing range is enough
		}
	}
}
