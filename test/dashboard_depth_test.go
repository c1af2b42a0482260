package test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eventd/eventd/engine/enrich/enrichtest"
)

// depthVisitor is one visitor of the generated traffic: its browser (user
// agent) and referrer, and its events as (day, time of day, name, path).
type depthVisitor struct {
	id, ua, referrer string
	events           []depthEvent
}

type depthEvent struct {
	day        int // days after the first day
	clock      string
	name, path string
}

// depthTraffic is three days of visits with known sessions, cohorts and
// paths (the answers are worked out in TestAnalyticsDepthAnswers):
// alice (Chrome, from Google), bob (iPhone, from t.co), a Googlebot
// crawler, dave and erin (Chrome, direct).
var depthTraffic = []depthVisitor{
	{"alice", enChrome, "https://www.google.com/", []depthEvent{
		{0, "10:00", "pageview", "/"}, {0, "10:05", "pageview", "/pricing"}, {0, "10:06", "signup", ""}, {1, "10:00", "pageview", "/"}}},
	{"bob", enIPhone, "https://t.co/x", []depthEvent{{0, "11:00", "pageview", "/"}, {2, "15:00", "pageview", "/docs"}}},
	{"crawler", enGooglebot, "", []depthEvent{{0, "12:00", "pageview", "/"}, {0, "12:01", "pageview", "/docs"}}},
	{"dave", enChrome, "", []depthEvent{{1, "09:00", "pageview", "/pricing"}, {1, "09:02", "signup", ""}, {2, "08:00", "pageview", "/"}}},
	{"erin", enChrome, "", []depthEvent{{2, "14:00", "pageview", "/"}, {2, "14:03", "pageview", "/pricing"}, {2, "14:04", "signup", ""}}},
}

// depthStart starts eventd with a GeoIP database (loopback resolves to DE),
// makes a project and sends depthTraffic to its test environment with a
// public key, each visitor with its own User-Agent. day0 is the first day
// (three days before today, UTC), so the default "last 7 days" holds it all.
func depthStart(t *testing.T) (s *Server, project, secret string, day0 time.Time) {
	t.Helper()
	s = Start(t, "--geoip-db", enrichtest.WriteMMDB(t))
	project = s.Project(t, "depth", "", nil)
	secret = s.Key(t, project, "secret", "test")
	public := s.Key(t, project, "public", "test")
	day0 = time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -3)
	for _, v := range depthTraffic {
		var events []any
		for _, e := range v.events {
			at, _ := time.Parse("15:04", e.clock)
			ts := day0.AddDate(0, 0, e.day).Add(time.Duration(at.Hour())*time.Hour + time.Duration(at.Minute())*time.Minute)
			props := map[string]any{}
			if e.name == "pageview" {
				props["path"], props["url"] = e.path, "https://shop.example"+e.path
				if v.referrer != "" {
					props["referrer"] = v.referrer
				}
			}
			events = append(events, map[string]any{"event": e.name, "visitor_id": v.id, "properties": props,
				"timestamp": ts.Format(time.RFC3339)})
		}
		r := Do(t, "POST", s.Public+"/events/batch", public, map[string]any{"events": events}, "User-Agent: "+v.ua)
		wantStatus(t, r, 201)
		if strings.Contains(string(r.Body), `"status":"rejected"`) {
			t.Fatalf("%s: %s", v.id, r.Body)
		}
	}
	return s, project, secret, day0
}

// TestAnalyticsDepthAnswers: the known answers of depthTraffic through the
// API, and where= on sessions, retention, paths and funnels (filters on
// every chart of the dashboard), bots left out of each by default.
func TestAnalyticsDepthAnswers(t *testing.T) {
	s, _, secret, day0 := depthStart(t)
	get := func(t *testing.T, q string) map[string]any {
		t.Helper()
		r := Do(t, "GET", s.Public+"/analytics?"+q, secret, nil)
		wantStatus(t, r, 200)
		return r.JSON(t)
	}
	chrome := "&where=" + url.QueryEscape("$browser:eq:Chrome")
	mobile := "&where=" + url.QueryEscape("$device:eq:mobile")

	t.Run("sessions", func(t *testing.T) {
		for _, c := range []struct {
			q                         string
			sessions, visitors, bots  float64
			bounce, mean, pagesPerSes float64
		}{
			// 7 sessions: alice d0 (3 events, 6 min) and d1, bob d0 and d2,
			// dave d1 (2 min) and d2, erin d2 (4 min); 4 bounce.
			{"type=sessions", 7, 4, 2, 4.0 / 7, 720.0 / 7, 9.0 / 7},
			{"type=sessions" + chrome, 5, 3, 0, 2.0 / 5, 720.0 / 5, 7.0 / 5},
			{"type=sessions" + mobile, 2, 1, 0, 1, 0, 1},
			{"type=sessions&bots=include", 8, 5, -1, 4.0 / 8, 780.0 / 8, 11.0 / 8},
		} {
			m := get(t, c.q)
			tot := m["total"].(map[string]any)
			if tot["sessions"] != c.sessions || tot["visitors"] != c.visitors || !near(tot["bounce_rate"], c.bounce) ||
				!near(tot["duration_mean_s"], c.mean) || !near(tot["pages_per_session"], c.pagesPerSes) {
				t.Errorf("%s: total %v", c.q, tot)
			}
			if (c.bots < 0) != (m["bots_excluded"] == nil) || (c.bots >= 0 && m["bots_excluded"] != c.bots) {
				t.Errorf("%s: bots_excluded %v, want %v", c.q, m["bots_excluded"], c.bots)
			}
		}
		m := get(t, "type=sessions&group_by=entry_page")
		if got := rowsText(m["rows"]); got != "/ 5, /docs 1, /pricing 1" {
			t.Errorf("entry pages %s", got)
		}
	})

	t.Run("breakdowns of the overview", func(t *testing.T) {
		for q, want := range map[string]string{
			"properties.path":             "/ 4, /pricing 3, /docs 1",
			"properties.$referrer_source": "direct 2, search 1, social 1",
			"properties.$device":          "desktop 3, mobile 1",
			"properties.$browser":         "Chrome 3, Mobile Safari 1",
			"properties.$os":              "Windows 3, iOS 1",
			"properties.$country":         "DE 4",
		} {
			m := get(t, "type=breakdown&event=pageview&metric=unique_visitors&group_by="+url.QueryEscape(q))
			if got := rowsText(m["data"]); got != want {
				t.Errorf("%s: %s, want %s", q, got, want)
			}
		}
	})

	t.Run("retention", func(t *testing.T) {
		d := func(n int) string { return day0.AddDate(0, 0, n).Format("2006-01-02T15:04:05.000Z") }
		for q, want := range map[string]string{
			"":                     fmt.Sprintf("%s 2 [2 1 1]; %s 1 [1 1 0]; %s 1 [1 0]", d(0), d(1), d(2)),
			"&bots=include":        fmt.Sprintf("%s 3 [3 1 1]; %s 1 [1 1 0]; %s 1 [1 0]", d(0), d(1), d(2)),
			chrome:                 fmt.Sprintf("%s 1 [1 1 0]; %s 1 [1 1 0]; %s 1 [1 0]", d(0), d(1), d(2)),
			mobile:                 fmt.Sprintf("%s 1 [1 0 1]", d(0)),
			"&return_event=signup": fmt.Sprintf("%s 2 [1 0 0]; %s 1 [1 0 0]; %s 1 [1 0]", d(0), d(1), d(2)),
		} {
			m := get(t, "type=retention&cohort_event=pageview&period=day&periods=3"+q)
			var rows []string
			for _, c := range m["cohorts"].([]any) {
				c := c.(map[string]any)
				rows = append(rows, fmt.Sprintf("%s %v %v", c["start"], c["size"], c["returned"]))
			}
			if got := strings.Join(rows, "; "); got != want {
				t.Errorf("retention%s:\n got %s\nwant %s", q, got, want)
			}
		}
	})

	t.Run("paths", func(t *testing.T) {
		for q, want := range map[string]string{
			"":              "1 / /pricing 2, 1 / /docs 1, 1 /pricing signup 1, 2 /pricing signup 2, 2 signup / 1, 3 signup / 1",
			"&bots=include": "1 / /docs 2, 1 / /pricing 2, 1 /pricing signup 1, 2 /pricing signup 2, 2 signup / 1, 3 signup / 1",
			chrome:          "1 / /pricing 2, 1 /pricing signup 1, 2 /pricing signup 2, 2 signup / 1, 3 signup / 1",
		} {
			m := get(t, "type=paths&start_event=pageview&steps=3"+q)
			var ts []string
			for _, x := range m["transitions"].([]any) {
				x := x.(map[string]any)
				ts = append(ts, fmt.Sprintf("%v %v %v %v", x["step"], x["from"], x["to"], x["count"]))
			}
			if got := strings.Join(ts, ", "); got != want {
				t.Errorf("paths%s:\n got %s\nwant %s", q, got, want)
			}
		}
	})

	t.Run("funnel", func(t *testing.T) {
		for q, want := range map[string]string{"": "4 3", chrome: "3 3", mobile: "1 0", "&bots=include": "5 3"} {
			m := get(t, "type=funnel&steps=pageview,signup"+q)
			steps := m["steps"].([]any)
			if got := fmt.Sprintf("%v %v", steps[0].(map[string]any)["visitors"], steps[1].(map[string]any)["visitors"]); got != want {
				t.Errorf("funnel%s: %s, want %s", q, got, want)
			}
		}
	})
}

// near compares a JSON number with a float to 1e-9.
func near(v any, want float64) bool {
	f, ok := v.(float64)
	return ok && f-want < 1e-9 && want-f < 1e-9
}

// rowsText writes [{key, value}] rows as "key value, key value".
func rowsText(v any) string {
	var out []string
	rows, _ := v.([]any)
	for _, r := range rows {
		r := r.(map[string]any)
		out = append(out, fmt.Sprintf("%v %v", r["key"], r["value"]))
	}
	return strings.Join(out, ", ")
}
