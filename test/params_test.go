package test

import (
	"fmt"
	"testing"
)

// TestUnknownQueryParameters: every data route refuses a query parameter
// it does not take with a 400 naming it (contract section 13), so a
// misspelt filter never silently returns unfiltered data; api_key is
// known everywhere. /t.js and /healthz take cache busters and probes'
// parameters and are exempt.
func TestUnknownQueryParameters(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "params", "", nil)
	key := s.Key(t, p, "secret", "live")
	created := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "signup", "visitor_id": "v1"})
	wantStatus(t, created, 201)
	id := created.JSON(t)["id"].(string)
	tests := []struct {
		method, path string
		body         any
		bad          string // the parameter the answer must name
	}{
		{"GET", "/events?event=signup&evnt=signup", nil, "evnt"},
		{"GET", "/events?plan=pro", nil, "plan"},
		{"GET", "/analytics?event=signup&plan=pro", nil, "plan"},
		{"GET", "/analytics?type=breakdown&group_by=event&grup=x", nil, "grup"},
		{"GET", "/events/" + id + "?fields=all", nil, "fields"},
		{"GET", "/profiles/v1?x=1", nil, "x"},
		{"GET", "/verify?verbose=1", nil, "verbose"},
		{"GET", "/rate-limit?bucket=batch", nil, "bucket"},
		{"POST", "/events?async=true", map[string]any{"event": "signup"}, "async"},
		{"POST", "/events/batch?async=true", map[string]any{"events": []any{map[string]any{"event": "signup"}}}, "async"},
		{"POST", "/v1/track?async=true", map[string]any{"event": "signup", "userId": "u"}, "async"},
		{"GET", "/stream?evnt=signup", nil, "evnt"}, // refused before the upgrade
	}
	for _, tc := range tests {
		r := Do(t, tc.method, s.Public+tc.path, key, tc.body)
		e := wantError(t, r, 400, "bad_request", "")
		if d, _ := e["details"].(map[string]any); d[tc.bad] != "is not a parameter of this route" {
			t.Errorf("%s %s: details %v", tc.method, tc.path, e["details"])
		}
	}
	// Nothing was stored by the refused writes, and known parameters still work.
	r := Do(t, "GET", s.Public+"/events?event=signup&limit=5&api_key="+key, "", nil)
	wantStatus(t, r, 200)
	if total := r.JSON(t)["pagination"].(map[string]any)["total"]; total != 1.0 {
		t.Errorf("signup events: %v, want 1", total)
	}
	wantStatus(t, Do(t, "GET", s.Public+"/t.js?v=3", "", nil), 200)
	wantStatus(t, Do(t, "GET", s.Public+"/healthz?probe=k8s", "", nil), 200)
}

// TestListWhere: GET /events?where= pages and totals the matching events
// only, ANDed with each other and with event=; a bad condition is a 400.
func TestListWhere(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "where", "", nil)
	key := s.Key(t, p, "secret", "live")
	var batch []any
	for i := range 30 {
		plan := "free"
		if i%3 == 0 {
			plan = "pro"
		}
		name := "signup"
		if i%2 == 0 {
			name = "login"
		}
		batch = append(batch, map[string]any{"event": name, "visitor_id": "v", "properties": map[string]any{
			"plan": plan, "seats": i, "context": map[string]any{"page": map[string]any{"path": "/p" + string(rune('a'+i%5))}}}})
	}
	wantStatus(t, Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": batch}), 201)
	tests := []struct {
		query string
		total float64
	}{
		{"where=plan:eq:pro", 10},
		{"where=plan:eq:pro&event=login", 5},
		{"where=plan:eq:pro&where=seats:gte:15", 5},
		{"where=seats:in:1|2|3", 3},
		{"where=context.page.path:eq:/pa", 6},
		{"where=plan:neq:pro&limit=5", 20},
		{"where=missing:exists", 0},
	}
	for _, tc := range tests {
		r := Do(t, "GET", s.Public+"/events?"+tc.query, key, nil)
		wantStatus(t, r, 200)
		m := r.JSON(t)
		if got := m["pagination"].(map[string]any)["total"]; got != tc.total {
			t.Errorf("%s: total %v, want %v", tc.query, got, tc.total)
		}
	}
	for _, bad := range []string{"where=plan", "where=plan:like:x", "where=plan:exists:x"} {
		e := wantError(t, Do(t, "GET", s.Public+"/events?"+bad, key, nil), 400, "bad_request", "")
		if e["details"].(map[string]any)["where"] == nil {
			t.Errorf("%s: details %v", bad, e["details"])
		}
	}
}

// TestAnalyticsWhere: GET /analytics with where= counts only the matching
// events (the example: signups where plan = pro), for every metric,
// in timeseries and both breakdowns; a funnel does not take it.
func TestAnalyticsWhere(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "analytics-where", "", nil)
	key := s.Key(t, p, "secret", "live")
	var batch []any
	for i, plan := range []string{"pro", "free", "pro", "team", "pro"} {
		batch = append(batch, map[string]any{"event": "signup", "visitor_id": fmt.Sprintf("v%d", i%2),
			"properties": map[string]any{"plan": plan, "amount": i + 1, "src": map[string]any{"utm": "ads"}}})
	}
	batch = append(batch, map[string]any{"event": "login", "visitor_id": "v9", "properties": map[string]any{"plan": "pro", "amount": 100}})
	wantStatus(t, Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": batch}), 201)
	get := func(query string) map[string]any {
		t.Helper()
		r := Do(t, "GET", s.Public+"/analytics?"+query, key, nil)
		wantStatus(t, r, 200)
		return r.JSON(t)
	}
	tests := []struct {
		query string
		total float64
	}{
		{"event=signup&where=plan:eq:pro", 3},
		{"event=signup", 5},
		{"where=plan:eq:pro", 4},
		{"event=signup&where=plan:eq:pro&metric=unique_visitors", 1}, // v0 (i = 0, 2, 4)
		{"event=signup&where=plan:eq:pro&metric=sum&property=amount", 9},
		{"event=signup&where=src.utm:eq:ads&where=amount:gt:3", 2},
		{"type=breakdown&group_by=event&where=plan:eq:pro", 4},
		{"type=breakdown&group_by=properties.plan&where=amount:lte:3", 3},
	}
	for _, tc := range tests {
		if got := get(tc.query)["total"]; got != tc.total {
			t.Errorf("%s: total %v, want %v", tc.query, got, tc.total)
		}
	}
	rows := get("type=breakdown&group_by=event&where=plan:eq:pro")["data"]
	if fmt.Sprint(rows) != "[map[key:signup value:3] map[key:login value:1]]" {
		t.Errorf("breakdown by event with where: %v", rows)
	}
	// Funnels take where= too (the dashboard filters every chart): each
	// step's events must match.
	if steps := fmt.Sprint(get("type=funnel&steps=signup,login&where=plan:eq:pro")["steps"]); steps !=
		"[map[conversion_rate:1 event:signup visitors:1] map[conversion_rate:0 event:login visitors:0]]" {
		t.Errorf("funnel with where: %s", steps)
	}
	// Goals are the one type without it.
	e := wantError(t, Do(t, "GET", s.Public+"/analytics?type=goals&where=plan:eq:pro", key, nil), 400, "bad_request", "")
	if e["details"].(map[string]any)["where"] == nil {
		t.Errorf("goals with where: %v", e)
	}
}

// TestAnalyticsRetention: the classic triangle on known data, daily.
func TestAnalyticsRetention(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "retention", "", nil)
	key := s.Key(t, p, "secret", "live")
	ev := func(name, visitor, ts string) map[string]any {
		return map[string]any{"event": name, "visitor_id": visitor, "timestamp": ts}
	}
	batch := []any{
		ev("signup", "v1", "2026-11-01T10:00:00Z"), ev("login", "v1", "2026-11-02T10:00:00Z"), ev("login", "v1", "2026-11-03T10:00:00Z"),
		ev("signup", "v2", "2026-11-01T12:00:00Z"), ev("login", "v2", "2026-11-01T09:00:00Z"), ev("login", "v2", "2026-11-03T08:00:00Z"),
		ev("signup", "v3", "2026-11-02T10:00:00Z"), ev("login", "v3", "2026-11-02T11:00:00Z"),
		ev("login", "v4", "2026-11-02T11:00:00Z"),  // never signed up: in no cohort
		ev("signup", "v5", "2026-11-05T10:00:00Z"), // after the range
	}
	wantStatus(t, Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": batch}), 201)
	r := Do(t, "GET", s.Public+"/analytics?type=retention&cohort_event=signup&return_event=login&period=day&periods=3&from=2026-11-01&to=2026-11-02", key, nil)
	wantStatus(t, r, 200)
	want := `{"type":"retention","period":"day","cohorts":[` +
		`{"start":"2026-11-01T00:00:00.000Z","size":2,"returned":[0,1,2]},` + // v2's login before its signup does not count
		`{"start":"2026-11-02T00:00:00.000Z","size":1,"returned":[1,0,0]}],"bots_excluded":0}`
	if string(r.Body) != want {
		t.Errorf("retention:\n%s\nwant\n%s", r.Body, want)
	}
	for _, bad := range []string{"type=retention", "type=retention&cohort_event=signup&periods=13", "type=retention&cohort_event=signup&period=hour"} {
		wantError(t, Do(t, "GET", s.Public+"/analytics?"+bad, key, nil), 400, "bad_request", "")
	}
}

// TestAnalyticsPaths: transitions after a start event and before an end
// event on known sequences; pageviews are labelled by their path.
func TestAnalyticsPaths(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "paths", "", nil)
	key := s.Key(t, p, "secret", "live")
	var batch []any
	seq := func(visitor string, steps ...string) {
		for i, st := range steps {
			e := map[string]any{"event": st, "visitor_id": visitor, "timestamp": fmt.Sprintf("2026-11-10T10:%02d:00Z", i)}
			if st[0] == '/' {
				e["event"], e["properties"] = "pageview", map[string]any{"path": st}
			}
			batch = append(batch, e)
		}
	}
	seq("v1", "/", "/pricing", "signup")
	seq("v2", "/", "/pricing", "/docs")
	seq("v3", "login", "/", "/docs", "signup")
	wantStatus(t, Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": batch}), 201)
	r := Do(t, "GET", s.Public+"/analytics?type=paths&start_event=pageview&steps=2&from=2026-11-10&to=2026-11-10", key, nil)
	wantStatus(t, r, 200)
	want := `{"type":"paths","start_event":"pageview","steps":2,"transitions":[` +
		`{"step":1,"from":"/","to":"/pricing","count":2},{"step":1,"from":"/","to":"/docs","count":1},` +
		`{"step":2,"from":"/docs","to":"signup","count":1},{"step":2,"from":"/pricing","to":"/docs","count":1},{"step":2,"from":"/pricing","to":"signup","count":1}],"bots_excluded":0}`
	if string(r.Body) != want {
		t.Errorf("paths forwards:\n%s\nwant\n%s", r.Body, want)
	}
	r = Do(t, "GET", s.Public+"/analytics?type=paths&end_event=signup&steps=1&from=2026-11-10&to=2026-11-10", key, nil)
	wantStatus(t, r, 200)
	if want := `{"type":"paths","end_event":"signup","steps":1,"transitions":[{"step":1,"from":"/docs","to":"signup","count":1},{"step":1,"from":"/pricing","to":"signup","count":1}],"bots_excluded":0}`; string(r.Body) != want {
		t.Errorf("paths backwards:\n%s\nwant\n%s", r.Body, want)
	}
	for _, bad := range []string{"type=paths", "type=paths&start_event=a&end_event=b", "type=paths&start_event=a&steps=6"} {
		wantError(t, Do(t, "GET", s.Public+"/analytics?"+bad, key, nil), 400, "bad_request", "")
	}
}

// TestAnalyticsSessions: sessions, bounces, durations and entry/exit pages
// on known visits.
func TestAnalyticsSessions(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "sessions", "", nil)
	key := s.Key(t, p, "secret", "live")
	pv := func(visitor, ts, path string) map[string]any {
		return map[string]any{"event": "pageview", "visitor_id": visitor, "timestamp": ts, "properties": map[string]any{"path": path}}
	}
	batch := []any{
		pv("a", "2026-11-10T10:00:00Z", "/"), pv("a", "2026-11-10T10:05:00Z", "/pricing"),
		map[string]any{"event": "signup", "visitor_id": "a", "timestamp": "2026-11-10T10:06:00Z"},
		pv("a", "2026-11-10T10:37:00Z", "/docs"), // 31 minutes later: a second session, a bounce
		pv("b", "2026-11-10T11:00:00Z", "/blog"), // a bounce
		pv("c", "2026-11-11T09:00:00Z", "/"), pv("c", "2026-11-11T09:29:00Z", "/docs"),
	}
	wantStatus(t, Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": batch}), 201)
	r := Do(t, "GET", s.Public+"/analytics?type=sessions&interval=day&from=2026-11-10&to=2026-11-11", key, nil)
	wantStatus(t, r, 200)
	want := `{"type":"sessions","interval":"day",` +
		`"total":{"sessions":4,"visitors":3,"bounce_rate":0.5,"duration_mean_s":525,"duration_median_s":180,"pages_per_session":1.5},` +
		`"data":[{"timestamp":"2026-11-10T00:00:00.000Z","sessions":3,"visitors":2,"bounce_rate":0.666666666666667,"duration_mean_s":120,"duration_median_s":0,"pages_per_session":1.33333333333333},` +
		`{"timestamp":"2026-11-11T00:00:00.000Z","sessions":1,"visitors":1,"bounce_rate":0,"duration_mean_s":1740,"duration_median_s":1740,"pages_per_session":2}],"bots_excluded":0}`
	if string(r.Body) != want {
		t.Errorf("sessions:\n%s\nwant\n%s", r.Body, want)
	}
	r = Do(t, "GET", s.Public+"/analytics?type=sessions&group_by=entry_page&from=2026-11-10&to=2026-11-11", key, nil)
	wantStatus(t, r, 200)
	if rows := fmt.Sprint(r.JSON(t)["rows"]); rows != "[map[key:/ value:2] map[key:/blog value:1] map[key:/docs value:1]]" {
		t.Errorf("entry pages: %s", rows)
	}
	wantError(t, Do(t, "GET", s.Public+"/analytics?type=sessions&group_by=event", key, nil), 400, "bad_request", "")

	// A project's own timeout: at 60 minutes a's 31-minute gap no longer
	// starts a second session.
	r = s.AdminDo(t, "PATCH", "/admin/v1/projects/"+p, map[string]any{"session_timeout_minutes": 60})
	wantStatus(t, r, 200)
	if r.JSON(t)["session_timeout_minutes"] != 60.0 {
		t.Fatalf("PATCH: %s", r.Body)
	}
	r = Do(t, "GET", s.Public+"/analytics?type=sessions&from=2026-11-10&to=2026-11-11", key, nil)
	wantStatus(t, r, 200)
	if total := r.JSON(t)["total"].(map[string]any); total["sessions"] != 3.0 {
		t.Errorf("sessions with a 60-minute timeout: %v", total)
	}
	wantError(t, s.AdminDo(t, "PATCH", "/admin/v1/projects/"+p, map[string]any{"session_timeout_minutes": 0}), 400, "bad_request", "")
}
