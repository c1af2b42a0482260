package analytics

import (
	"slices"
	"sort"
)

// DefaultSessionTimeoutMs ends a visitor's session after 30 minutes
// without an event, as Plausible and Google Analytics do (the projects'
// default).
const DefaultSessionTimeoutMs = 30 * 60_000

// Hit is one event of a visitor, for sessions: when, and the page path when
// it is a pageview ("" otherwise; Pageview tells a pageview without a path).
type Hit struct {
	TS       int64
	Pageview bool
	Page     string
}

// Session is a run of a visitor's events with no gap over the timeout.
type Session struct {
	Visitor     string
	Start, End  int64
	Pageviews   int
	Entry, Exit string // first and last page path of the session ("" without one)
}

// Bounce reports a session of one pageview and nothing else worth a second event.
func (s *Session) Bounce() bool { return s.Pageviews == 1 && s.Start == s.End }

// SplitSessions cuts each visitor's hits (any order) into sessions: a gap
// longer than timeoutMs starts a new one.
func SplitSessions(hits map[string][]Hit, timeoutMs int64) []Session {
	var out []Session
	for v, hs := range hits {
		slices.SortFunc(hs, func(a, b Hit) int { return int(a.TS - b.TS) })
		var cur *Session
		for _, h := range hs {
			if cur == nil || h.TS-cur.End > timeoutMs {
				out = append(out, Session{Visitor: v, Start: h.TS, End: h.TS})
				cur = &out[len(out)-1]
			}
			cur.End = h.TS
			if h.Pageview {
				cur.Pageviews++
				if h.Page != "" {
					if cur.Entry == "" {
						cur.Entry = h.Page
					}
					cur.Exit = h.Page
				}
			}
		}
	}
	return out
}

// SessionStats are the figures of one bucket of type=sessions.
type SessionStats struct {
	Timestamp       string  `json:"timestamp,omitempty"`
	Sessions        int     `json:"sessions"`
	Visitors        int     `json:"visitors"`
	BounceRate      float64 `json:"bounce_rate"`
	DurationMeanS   float64 `json:"duration_mean_s"`
	DurationMedianS float64 `json:"duration_median_s"`
	PagesPerSession float64 `json:"pages_per_session"`
}

// Stats summarises sessions (all of one bucket).
func Stats(ss []Session) SessionStats {
	var st SessionStats
	if len(ss) == 0 {
		return st
	}
	visitors := map[string]bool{}
	durations := make([]float64, len(ss))
	bounces, pages := 0, 0
	var total float64
	for i := range ss {
		s := &ss[i]
		visitors[s.Visitor] = true
		durations[i] = float64(s.End-s.Start) / 1000
		total += durations[i]
		pages += s.Pageviews
		if s.Bounce() {
			bounces++
		}
	}
	sort.Float64s(durations)
	n := len(ss)
	median := durations[n/2]
	if n%2 == 0 {
		median = (durations[n/2-1] + durations[n/2]) / 2
	}
	st.Sessions, st.Visitors = n, len(visitors)
	st.BounceRate = Round15(float64(bounces) / float64(n))
	st.DurationMeanS = Round15(total / float64(n))
	st.DurationMedianS = Round15(median)
	st.PagesPerSession = Round15(float64(pages) / float64(n))
	return st
}
