package test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
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

// TestDashboardAnalyticsDepth drives the overview, retention, paths and
// analytics pages in headless Chromium on depthTraffic: the numbers
// rendered, a property filter and the bots toggle changing them, the
// retention triangle's cells and a path transition's count. Every wait is
// on a DOM condition, never on time.
func TestDashboardAnalyticsDepth(t *testing.T) {
	d := dashStartDriver(t)
	s, project, _, day0 := depthStart(t)
	d.call(nil, "context", "name", "desk", "width", 1280, "height", 900)
	d.call(nil, "page", "ctx", "desk", "name", "d")
	u := &dashUI{d: d, page: "d", base: s.Admin}
	// EVENTD_SCREENSHOTS=../docs/images rewrites the pictures of these pages.
	shots := os.Getenv("EVENTD_SCREENSHOTS")
	if abs, err := filepath.Abs(shots); shots != "" && err == nil {
		shots = abs
	}
	shot := func(page, name string) {
		if shots != "" {
			d.call(nil, "screenshot", "page", page, "path", filepath.Join(shots, "dashboard-"+name+".png"))
		}
	}
	run := func(name string, f func(t *testing.T)) {
		t.Run(name, func(st *testing.T) {
			d.t = st
			defer func() { d.t = t }()
			f(st)
		})
	}
	// card waits until the overview card testid reads want.
	card := func(testid, want string) {
		u.waitFor(fmt.Sprintf(`(document.querySelector('[data-testid=%s]') || {}).textContent === %q`, testid, want))
	}
	// panel waits until the bar chart of an overview panel states want.
	panel := func(id, want string) {
		u.waitFor(fmt.Sprintf(`(() => { const svg = document.querySelector('[data-panel=%s] figure[data-chart=bars] svg');
			return !!svg && svg.getAttribute('aria-label').endsWith(%q); })()`, id, ": "+want+"."))
	}

	run("log in", func(t *testing.T) { u.signIn(s.Token) })

	run("overview: known numbers", func(t *testing.T) {
		u.goTo("/#/p/" + project + "/test/overview")
		u.ready()
		card("ov-visitors", "4")
		card("ov-sessions", "7")
		card("ov-bounce", "57%")
		card("ov-duration", "1m 43s")
		card("ov-pageviews", "9")
		card("ov-pages-per-session", "1.29")
		card("ov-bots", "2")
		u.waitText("2 bot events excluded.")
		panel("top-pages", "/ 4, /pricing 3, /docs 1")
		panel("sources", "direct 2, search 1, social 1")
		panel("referrers", "google.com 1, t.co 1")
		panel("devices", "desktop 3, mobile 1")
		panel("browsers", "Chrome 3, Mobile Safari 1")
		panel("os", "Windows 3, iOS 1")
		panel("countries", "DE 4")
		u.waitFor(`(() => { const svg = document.querySelector('section[aria-labelledby=entry-pages-title] figure[data-chart=bars] svg');
			return !!svg && svg.getAttribute('aria-label') === 'Sessions by entry page: / 5, /docs 1, /pricing 1.'; })()`)
		u.waitFor(`(document.querySelector('figure[data-chart=timeseries]') || {dataset: {}}).dataset.total === '4'`)
		u.labelled(t, "overview")
		shot("d", "overview")
	})

	run("overview: a filter and the bots toggle change the numbers", func(t *testing.T) {
		u.fill("Filter property", "$browser")
		u.sel("Operator", "eq")
		u.fill("Filter value", "Chrome")
		u.click("button", "Add filter")
		card("ov-visitors", "3")
		card("ov-sessions", "5")
		card("ov-bounce", "40%")
		card("ov-pageviews", "7")
		panel("browsers", "Chrome 3")
		u.waitText("Filtered: $browser is Chrome.")
		u.click("button", "Remove filter $browser is Chrome")
		card("ov-visitors", "4")
		d.call(nil, "check", "page", "d", "label", "Count bots")
		card("ov-visitors", "5")
		card("ov-sessions", "8")
		card("ov-bots", "counted")
		panel("browsers", "Chrome 3, Googlebot 1, Mobile Safari 1")
		u.waitText("Bots are counted.")
		d.call(nil, "check", "page", "d", "label", "Count bots", "checked", false)
		card("ov-visitors", "4")
	})

	// triangle reads the retention table: per cohort row, start, size and
	// the returned counts of its cells.
	triangle := func() string {
		return u.str(`[...document.querySelectorAll('table.triangle tbody tr')].map((tr) =>
			[tr.querySelector('td.cell').dataset.cohort, tr.querySelectorAll('td')[0].textContent,
			 [...tr.querySelectorAll('td.cell')].map((td) => td.dataset.returned).join(',')].join(' ')).join('; ')`)
	}
	run("retention triangle", func(t *testing.T) {
		u.nav("Retention", "Retention")
		u.fill("Cohort event", "pageview")
		u.sel("Period", "day")
		u.sel("Periods", "3")
		u.click("button", "Show retention")
		d0 := day0.Format("2006-01-02T15:04:05.000Z")
		d1 := day0.AddDate(0, 0, 1).Format("2006-01-02T15:04:05.000Z")
		d2 := day0.AddDate(0, 0, 2).Format("2006-01-02T15:04:05.000Z")
		u.waitFor(`document.querySelectorAll('table.triangle tbody tr').length === 3 && !!document.querySelector('table.triangle td.cell[data-k="2"]')`)
		if got, want := triangle(), fmt.Sprintf("%s 2 2,1,1; %s 1 1,1,0; %s 1 1,0", d0, d1, d2); got != want {
			t.Errorf("triangle:\n got %s\nwant %s", got, want)
		}
		// The first cohort's cells show their share and count.
		if got := u.str(`[...document.querySelectorAll('table.triangle tbody tr:first-child td.cell')].map((td) => td.textContent).join(' | ')`); got != "100% (2) | 50% (1) | 50% (1)" {
			t.Errorf("first cohort's cells: %s", got)
		}
		// The later cohorts have shorter rows: a cell for a day not begun is blank.
		if n := u.str(`String(document.querySelectorAll('table.triangle td.future').length)`); n != "1" {
			t.Errorf("%s blank cells, want 1 (the last cohort's day 2)", n)
		}
		d.call(nil, "check", "page", "d", "label", "Count bots")
		u.waitFor(`(document.querySelector('table.triangle tbody tr:first-child td:nth-of-type(1)') || {}).textContent === '3'`)
		if got, want := triangle(), fmt.Sprintf("%s 3 3,1,1; %s 1 1,1,0; %s 1 1,0", d0, d1, d2); got != want {
			t.Errorf("triangle with bots:\n got %s\nwant %s", got, want)
		}
		d.call(nil, "check", "page", "d", "label", "Count bots", "checked", false)
		u.waitFor(`(document.querySelector('table.triangle tbody tr:first-child td:nth-of-type(1)') || {}).textContent === '2'`)
		u.labelled(t, "retention")
		shot("d", "retention")
	})

	// transition is the count shown for one transition of one step ("" if absent).
	transition := func(step int, from, to string) string {
		return fmt.Sprintf(`(document.querySelector('section.path-step[data-step="%d"] tr[data-from=%q][data-to=%q]') || {dataset: {}}).dataset.count`, step, from, to)
	}
	run("paths", func(t *testing.T) {
		u.nav("Paths", "Paths")
		u.waitFor(transition(1, "/", "/pricing") + ` === '2'`)
		u.waitFor(transition(1, "/", "/docs") + ` === '1'`)
		u.waitFor(transition(2, "/pricing", "signup") + ` === '2'`)
		u.waitText("2 bot events excluded.")
		shot("d", "paths")
		u.fill("Filter property", "$browser")
		u.fill("Filter value", "Chrome")
		u.click("button", "Add filter")
		u.waitFor(transition(1, "/", "/docs") + ` === undefined && ` + transition(1, "/", "/pricing") + ` === '2'`)
		u.labelled(t, "paths")
	})

	run("analytics page follows the same filters", func(t *testing.T) {
		// The Chrome filter set on the paths page holds here too: alice,
		// dave and erin sent 10 events; without it 12 (the crawler's 2
		// are excluded).
		u.nav("Analytics", "Analytics")
		u.waitFor(`(document.querySelector('[data-testid=total-events]') || {}).textContent === '10'`)
		u.click("button", "Remove filter $browser is Chrome")
		u.waitFor(`(document.querySelector('[data-testid=total-events]') || {}).textContent === '12'`)
		u.waitText("2 bot events excluded.")
		u.labelled(t, "analytics")
	})

	run("phone width", func(t *testing.T) {
		m := signInOnPhone(d, s)
		for _, pg := range []struct{ slug, ready string }{
			{"overview", `(document.querySelector('[data-testid=ov-sessions]') || {}).textContent === '7' && !!document.querySelector('[data-panel=countries] svg')`},
			{"retention", `!!document.querySelector('table.triangle td.cell')`},
			{"paths", `!!document.querySelector('section.path-step svg')`},
		} {
			m.goTo("/#/p/" + project + "/test/" + pg.slug)
			m.ready()
			m.waitFor(pg.ready)
			var overflow int
			m.eval("document.documentElement.scrollWidth - window.innerWidth", &overflow)
			if overflow > 1 {
				t.Errorf("%s at 390 px is %d px too wide", pg.slug, overflow)
			}
			if pg.slug == "overview" {
				shot("m", "phone-overview")
			}
		}
	})

	run("no errors, no foreign requests", func(t *testing.T) {
		for _, pg := range []string{"d", "m"} {
			var problems, reqs []string
			d.call(&problems, "problems", "page", pg)
			d.call(&reqs, "requests", "page", pg)
			for _, p := range problems {
				t.Errorf("page %s: %s", pg, p)
			}
			for _, r := range reqs {
				if !strings.HasPrefix(r, s.Admin+"/") {
					t.Errorf("page %s asked %s", pg, r)
				}
			}
		}
	})
}
