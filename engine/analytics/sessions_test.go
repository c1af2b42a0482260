package analytics

import (
	"reflect"
	"slices"
	"testing"
)

func TestSessions(t *testing.T) {
	const min = 60_000
	hits := map[string][]Hit{
		// two sessions: a 31-minute gap ends the first
		"a": {{TS: 0, Pageview: true, Page: "/"}, {TS: 5 * min, Pageview: true, Page: "/pricing"}, {TS: 6 * min},
			{TS: 37 * min, Pageview: true, Page: "/docs"}},
		// one bounce
		"b": {{TS: 10 * min, Pageview: true, Page: "/blog"}},
		// 29-minute gaps keep one session; out of order on input
		"c": {{TS: 58 * min}, {TS: 0, Pageview: true, Page: "/"}, {TS: 29 * min, Pageview: true, Page: "/x"}},
	}
	ss := SplitSessions(hits, DefaultSessionTimeoutMs)
	slices.SortFunc(ss, func(x, y Session) int { return int(x.Start-y.Start)*10 + int(x.Visitor[0]) - int(y.Visitor[0]) })
	want := []Session{
		{Visitor: "a", Start: 0, End: 6 * min, Pageviews: 2, Entry: "/", Exit: "/pricing"},
		{Visitor: "c", Start: 0, End: 58 * min, Pageviews: 2, Entry: "/", Exit: "/x"},
		{Visitor: "b", Start: 10 * min, End: 10 * min, Pageviews: 1, Entry: "/blog", Exit: "/blog"},
		{Visitor: "a", Start: 37 * min, End: 37 * min, Pageviews: 1, Entry: "/docs", Exit: "/docs"},
	}
	if !reflect.DeepEqual(ss, want) {
		t.Fatalf("sessions:\n%+v\nwant\n%+v", ss, want)
	}
	got := Stats(ss)
	wantStats := SessionStats{Sessions: 4, Visitors: 3, BounceRate: 0.5, DurationMeanS: 960, DurationMedianS: 180, PagesPerSession: 1.5}
	if got != wantStats {
		t.Fatalf("stats %+v, want %+v", got, wantStats)
	}
}
