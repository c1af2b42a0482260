package test

import (
	"fmt"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"
)

// anEvent is one event of the analytics fixture.
type anEvent struct {
	ts, name, visitor string
	props             map[string]any
}

// anFixture is a small, hand-checkable history: four days (2026-11-02 ..
// 2026-11-05, the 3rd empty), four visitors and an anonymous pageview,
// with events exactly on day edges. The expected numbers in the tests below
// are worked out from this table.
var anFixture = []anEvent{
	{"2026-11-02T00:00:00.000Z", "signup", "alice", map[string]any{"plan": "pro", "source": "pricing"}},
	{"2026-11-02T09:15:30.000Z", "purchase", "alice", map[string]any{"amount": 19.99, "plan": "pro"}},
	{"2026-11-02T23:59:59.999Z", "purchase", "bob", map[string]any{"amount": 5, "plan": "basic"}},
	{"2026-11-04T10:00:00.000Z", "signup", "bob", map[string]any{"plan": "basic", "source": "ads"}},
	{"2026-11-04T10:30:00.000Z", "activate", "bob", nil},
	{"2026-11-04T11:00:00.000Z", "purchase", "bob", map[string]any{"amount": 100, "plan": "basic"}},
	{"2026-11-04T12:00:00.000Z", "signup", "carol", map[string]any{"source": "pricing"}},
	{"2026-11-04T12:00:00.000Z", "pageview", "", map[string]any{"path": "/"}},
	{"2026-11-05T00:00:00.000Z", "activate", "carol", nil},
	{"2026-11-05T13:00:00.000Z", "purchase", "carol", map[string]any{"amount": 30.01, "plan": "pro"}},
	{"2026-11-05T23:59:59.999Z", "signup", "dave", map[string]any{"source": "pricing"}},
}

// anPost stores events with one batch request and checks that all were accepted.
func anPost(t *testing.T, s *Server, key string, events []anEvent) {
	t.Helper()
	if time.Now().Before(time.Date(2026, 11, 14, 0, 0, 0, 0, time.UTC)) {
		// The fixture is dated 2026-11-02..07: it must be in the past, and
		// older than the default 7-day range.
		t.Fatalf("these tests need a clock after 2026-11-14, have %s", time.Now().UTC())
	}
	var body []map[string]any
	for _, e := range events {
		m := map[string]any{"event": e.name, "timestamp": e.ts}
		if e.visitor != "" {
			m["visitor_id"] = e.visitor
		}
		if e.props != nil {
			m["properties"] = e.props
		}
		body = append(body, m)
	}
	r := Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": body})
	wantStatus(t, r, 201)
	if got := r.JSON(t)["accepted"]; got != float64(len(events)) {
		t.Fatalf("batch accepted %v of %d: %s", got, len(events), r.Body)
	}
}

// anGet calls GET /analytics with a query string and returns the decoded 200 body.
func anGet(t *testing.T, s *Server, key, query string) map[string]any {
	t.Helper()
	r := Do(t, "GET", s.Public+"/analytics?"+query, key, nil)
	if r.Status != 200 {
		t.Fatalf("GET /analytics?%s: %d %s", query, r.Status, r.Body)
	}
	return r.JSON(t)
}

// anSeries returns a timeseries' [timestamp, value] pairs.
func anSeries(t *testing.T, body map[string]any) [][2]any {
	t.Helper()
	var out [][2]any
	for _, p := range body["data"].([]any) {
		m := p.(map[string]any)
		out = append(out, [2]any{m["timestamp"], m["value"]})
	}
	return out
}

func anClose(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// anWantSeries checks bucket timestamps and values.
func anWantSeries(t *testing.T, query string, body map[string]any, total float64, want ...any) {
	t.Helper()
	got := anSeries(t, body)
	if len(got) != len(want)/2 {
		t.Fatalf("%s: %d buckets, want %d: %v", query, len(got), len(want)/2, got)
	}
	for i := range got {
		ts, v := want[2*i].(string), anFloat(want[2*i+1])
		if got[i][0] != ts || !anClose(got[i][1].(float64), v) {
			t.Errorf("%s: bucket %d = %v, want [%s %v]", query, i, got[i], ts, v)
		}
	}
	if !anClose(body["total"].(float64), total) {
		t.Errorf("%s: total %v, want %v", query, body["total"], total)
	}
}

func anFloat(v any) float64 {
	switch x := v.(type) {
	case int:
		return float64(x)
	case float64:
		return x
	}
	panic(fmt.Sprintf("not a number: %v", v))
}

// anKeys makes n secret live keys of a project: each GET /analytics counts
// in its key's bucket of 50 a minute, so tests spread their calls.
type anKeys struct {
	t    *testing.T
	s    *Server
	proj string
	env  string
	key  string
	used int
}

func (k *anKeys) next() string {
	if k.key == "" || k.used >= 45 {
		k.key, k.used = k.s.Key(k.t, k.proj, "secret", k.env), 0
	}
	k.used++
	return k.key
}

func (k *anKeys) get(query string) map[string]any {
	k.t.Helper()
	return anGet(k.t, k.s, k.next(), query)
}

func TestAnalyticsTimeseries(t *testing.T) {
	s := Start(t)
	proj := s.Project(t, "analytics", "enterprise", nil)
	keys := &anKeys{t: t, s: s, proj: proj, env: "live"}
	anPost(t, s, keys.next(), anFixture)

	const days = "from=2026-11-02&to=2026-11-05"
	q := days + "&interval=day"
	body := keys.get(q)
	if body["type"] != "timeseries" || body["metric"] != "count" || body["interval"] != "day" ||
		body["from"] != "2026-11-02T00:00:00.000Z" || body["to"] != "2026-11-05T23:59:59.999Z" {
		t.Errorf("header fields: %v", body)
	}
	anWantSeries(t, q, body, 11,
		"2026-11-02T00:00:00.000Z", 3,
		"2026-11-03T00:00:00.000Z", 0, // zero-filled
		"2026-11-04T00:00:00.000Z", 5,
		"2026-11-05T00:00:00.000Z", 3)
	// interval=day is the default, and type=timeseries.
	anWantSeries(t, days, keys.get(days), 11,
		"2026-11-02T00:00:00.000Z", 3, "2026-11-03T00:00:00.000Z", 0,
		"2026-11-04T00:00:00.000Z", 5, "2026-11-05T00:00:00.000Z", 3)

	// from and to are inclusive to the millisecond; partial buckets keep their aligned start.
	q = "from=2026-11-02T23:59:59.999Z&to=2026-11-05T00:00:00.000Z"
	anWantSeries(t, q, keys.get(q), 7,
		"2026-11-02T00:00:00.000Z", 1, "2026-11-03T00:00:00.000Z", 0,
		"2026-11-04T00:00:00.000Z", 5, "2026-11-05T00:00:00.000Z", 1)
	q = "from=2026-11-02T00:00:00.001Z&to=2026-11-05T23:59:59.998Z"
	anWantSeries(t, q, keys.get(q), 9,
		"2026-11-02T00:00:00.000Z", 2, "2026-11-03T00:00:00.000Z", 0,
		"2026-11-04T00:00:00.000Z", 5, "2026-11-05T00:00:00.000Z", 2)
	// An offset in from/to is honoured: 2026-11-04T12:00:00+02:00 is 10:00 UTC.
	q = "from=" + url.QueryEscape("2026-11-04T12:00:00+02:00") + "&to=2026-11-04T10:30:00Z&interval=hour"
	anWantSeries(t, q, keys.get(q), 2, "2026-11-04T10:00:00.000Z", 2)

	// Hours of one day: 24 buckets, only three non-zero.
	q = "from=2026-11-04&to=2026-11-04&interval=hour"
	body = keys.get(q)
	series := anSeries(t, body)
	if len(series) != 24 || series[0][0] != "2026-11-04T00:00:00.000Z" || series[23][0] != "2026-11-04T23:00:00.000Z" {
		t.Fatalf("hours: %v", series)
	}
	for i, p := range series {
		want := map[int]float64{10: 2, 11: 1, 12: 2}[i]
		if p[1].(float64) != want {
			t.Errorf("hour %d = %v, want %v", i, p[1], want)
		}
	}
	// Minutes, weeks (Monday) and months.
	q = "from=2026-11-04T10:00:00Z&to=2026-11-04T10:30:59.999Z&interval=minute"
	series = anSeries(t, keys.get(q))
	if len(series) != 31 || series[0][1].(float64) != 1 || series[30][1].(float64) != 1 || series[15][1].(float64) != 0 {
		t.Errorf("minutes: %d buckets %v", len(series), series)
	}
	q = "from=2026-11-02&to=2026-11-10&interval=week"
	anWantSeries(t, q, keys.get(q), 11, "2026-11-02T00:00:00.000Z", 11, "2026-11-09T00:00:00.000Z", 0)
	q = "from=2026-11-04&to=2026-11-05&interval=week" // Wednesday: its week starts Monday the 2nd
	anWantSeries(t, q, keys.get(q), 8, "2026-11-02T00:00:00.000Z", 8)
	q = "from=2026-10-15&to=2026-11-30&interval=month"
	anWantSeries(t, q, keys.get(q), 11, "2026-10-01T00:00:00.000Z", 0, "2026-11-01T00:00:00.000Z", 11)

	// Filters.
	q = days + "&event=signup"
	anWantSeries(t, q, keys.get(q), 4,
		"2026-11-02T00:00:00.000Z", 1, "2026-11-03T00:00:00.000Z", 0,
		"2026-11-04T00:00:00.000Z", 2, "2026-11-05T00:00:00.000Z", 1)
	q = days + "&visitor_id=bob"
	anWantSeries(t, q, keys.get(q), 4,
		"2026-11-02T00:00:00.000Z", 1, "2026-11-03T00:00:00.000Z", 0,
		"2026-11-04T00:00:00.000Z", 3, "2026-11-05T00:00:00.000Z", 0)
	q = days + "&visitor_id=bob&event=purchase&metric=sum&property=amount"
	anWantSeries(t, q, keys.get(q), 105,
		"2026-11-02T00:00:00.000Z", 5, "2026-11-03T00:00:00.000Z", 0,
		"2026-11-04T00:00:00.000Z", 100, "2026-11-05T00:00:00.000Z", 0)
	q = days + "&event=nothing_like_this"
	anWantSeries(t, q, keys.get(q), 0,
		"2026-11-02T00:00:00.000Z", 0, "2026-11-03T00:00:00.000Z", 0,
		"2026-11-04T00:00:00.000Z", 0, "2026-11-05T00:00:00.000Z", 0)

	// Sums and averages of a numeric property (events without it are left out of avg).
	q = days + "&event=purchase&metric=sum&property=amount"
	anWantSeries(t, q, keys.get(q), 155,
		"2026-11-02T00:00:00.000Z", 24.99, "2026-11-03T00:00:00.000Z", 0,
		"2026-11-04T00:00:00.000Z", 100, "2026-11-05T00:00:00.000Z", 30.01)
	q = days + "&event=purchase&metric=avg&property=amount"
	anWantSeries(t, q, keys.get(q), 38.75,
		"2026-11-02T00:00:00.000Z", 12.495, "2026-11-03T00:00:00.000Z", 0,
		"2026-11-04T00:00:00.000Z", 100, "2026-11-05T00:00:00.000Z", 30.01)
	q = days + "&metric=sum&property=amount" // every event name
	anWantSeries(t, q, keys.get(q), 155,
		"2026-11-02T00:00:00.000Z", 24.99, "2026-11-03T00:00:00.000Z", 0,
		"2026-11-04T00:00:00.000Z", 100, "2026-11-05T00:00:00.000Z", 30.01)
	q = "from=2026-11-02T09:15:30Z&to=2026-11-05T12:59:59.999Z&metric=sum&property=amount" // partial minutes at both ends
	anWantSeries(t, q, keys.get(q), 124.99,
		"2026-11-02T00:00:00.000Z", 24.99, "2026-11-03T00:00:00.000Z", 0,
		"2026-11-04T00:00:00.000Z", 100, "2026-11-05T00:00:00.000Z", 0)

	// Unique visitors: the total is the union, not the sum of the days.
	q = days + "&metric=unique_visitors"
	anWantSeries(t, q, keys.get(q), 4,
		"2026-11-02T00:00:00.000Z", 2, "2026-11-03T00:00:00.000Z", 0,
		"2026-11-04T00:00:00.000Z", 2, "2026-11-05T00:00:00.000Z", 2)
	q = days + "&metric=unique_visitors&event=purchase"
	anWantSeries(t, q, keys.get(q), 3,
		"2026-11-02T00:00:00.000Z", 2, "2026-11-03T00:00:00.000Z", 0,
		"2026-11-04T00:00:00.000Z", 1, "2026-11-05T00:00:00.000Z", 1)
	q = "from=2026-11-02T23:59:59.999Z&to=2026-11-04T10:00:00Z&metric=unique_visitors"
	anWantSeries(t, q, keys.get(q), 1,
		"2026-11-02T00:00:00.000Z", 1, "2026-11-03T00:00:00.000Z", 0, "2026-11-04T00:00:00.000Z", 1)

	// The default range is the last 7 days: the fixture is older, so all zero.
	body = keys.get("")
	if body["total"].(float64) != 0 || len(anSeries(t, body)) != 8 {
		t.Errorf("default range: %v", body)
	}
}

func TestAnalyticsBreakdown(t *testing.T) {
	s := Start(t)
	proj := s.Project(t, "analytics", "enterprise", nil)
	keys := &anKeys{t: t, s: s, proj: proj, env: "live"}
	anPost(t, s, keys.next(), anFixture)
	const days = "type=breakdown&from=2026-11-02&to=2026-11-05"

	wantRows := func(q string, total float64, rows ...any) {
		t.Helper()
		body := keys.get(q)
		if body["type"] != "breakdown" {
			t.Errorf("%s: type %v", q, body["type"])
		}
		data := body["data"].([]any)
		if len(data) != len(rows)/2 {
			t.Fatalf("%s: rows %v, want %v", q, data, rows)
		}
		for i, d := range data {
			m := d.(map[string]any)
			if m["key"] != rows[2*i] || !anClose(m["value"].(float64), anFloat(rows[2*i+1])) {
				t.Errorf("%s: row %d = %v, want %v %v", q, i, m, rows[2*i], rows[2*i+1])
			}
		}
		if !anClose(body["total"].(float64), total) {
			t.Errorf("%s: total %v, want %v", q, body["total"], total)
		}
	}
	body := keys.get(days + "&group_by=event")
	if body["metric"] != "count" || body["group_by"] != "event" {
		t.Errorf("header: %v", body)
	}
	// Largest first; ties by key.
	wantRows(days+"&group_by=event", 11, "purchase", 4, "signup", 4, "activate", 2, "pageview", 1)
	wantRows(days+"&group_by=event&limit=2", 11, "purchase", 4, "signup", 4)
	wantRows(days+"&group_by=event&metric=unique_visitors", 4, "signup", 4, "purchase", 3, "activate", 2, "pageview", 0)
	wantRows(days+"&group_by=event&metric=sum&property=amount", 155, "purchase", 155)
	wantRows(days+"&group_by=event&event=signup", 4, "signup", 4)
	wantRows(days+"&group_by=event&visitor_id=carol", 3, "activate", 1, "purchase", 1, "signup", 1)
	wantRows("type=breakdown&from=2026-11-04&to=2026-11-04&group_by=event", 5, "signup", 2, "activate", 1, "pageview", 1, "purchase", 1)

	// By property: a scan of the raw events; events without the property join no row.
	wantRows(days+"&group_by=properties.plan", 11, "basic", 3, "pro", 3)
	wantRows(days+"&group_by=properties.plan&metric=sum&property=amount", 155, "basic", 105, "pro", 50)
	wantRows(days+"&group_by=properties.plan&metric=avg&property=amount", 38.75, "basic", 52.5, "pro", 25)
	wantRows(days+"&group_by=properties.plan&metric=unique_visitors", 4, "pro", 2, "basic", 1)
	wantRows(days+"&group_by=properties.source&event=signup", 4, "pricing", 3, "ads", 1)
	wantRows(days+"&group_by=properties.source&event=signup&limit=1", 4, "pricing", 3)
	wantRows(days+"&group_by=properties.amount&event=purchase", 4, "100", 1, "19.99", 1, "30.01", 1, "5", 1)
	wantRows(days+"&group_by=properties.nothing", 11)
}

func TestAnalyticsFunnel(t *testing.T) {
	s := Start(t)
	proj := s.Project(t, "funnels", "enterprise", nil)
	keys := &anKeys{t: t, s: s, proj: proj, env: "live"}
	anPost(t, s, keys.next(), anFixture)

	wantFunnel := func(q string, window float64, want ...any) {
		t.Helper()
		body := keys.get(q)
		if body["type"] != "funnel" || body["window"] != window {
			t.Errorf("%s: %v", q, body)
		}
		steps := body["steps"].([]any)
		if len(steps) != len(want)/3 {
			t.Fatalf("%s: steps %v", q, steps)
		}
		for i, st := range steps {
			m := st.(map[string]any)
			if m["event"] != want[3*i] || m["visitors"] != anFloat(want[3*i+1]) || !anClose(m["conversion_rate"].(float64), anFloat(want[3*i+2])) {
				t.Errorf("%s: step %d = %v, want %v", q, i, m, want[3*i:3*i+3])
			}
		}
	}
	const days = "type=funnel&from=2026-11-01&to=2026-11-06"
	// alice never activates; bob does all three within 1 h; carol activates
	// 12 h after signing up but buys 25 h after: outside the default 24 h window.
	wantFunnel(days+"&steps=signup,activate,purchase", 86400,
		"signup", 4, 1.0, "activate", 2, 0.5, "purchase", 1, 0.25)
	wantFunnel(days+"&steps=signup,activate,purchase&window=90000", 90000,
		"signup", 4, 1.0, "activate", 2, 0.5, "purchase", 2, 0.5)
	// Window exactly 1 h: bob's purchase is 3600 s after his signup (inclusive).
	wantFunnel(days+"&steps=signup,purchase&window=3600", 3600, "signup", 4, 1.0, "purchase", 1, 0.25)
	wantFunnel(days+"&steps=signup,purchase&window=3599", 3599, "signup", 4, 1.0, "purchase", 0, 0.0)
	// Order matters: alice's purchase came after her signup, bob's first purchase before his.
	wantFunnel(days+"&steps=purchase,signup", 86400, "purchase", 3, 1.0, "signup", 0, 0.0)
	// Every step must fall in [from, to]: carol's activation is on the 5th.
	wantFunnel("type=funnel&from=2026-11-04&to=2026-11-04&steps=signup,activate,purchase", 86400,
		"signup", 2, 1.0, "activate", 1, 0.5, "purchase", 1, 0.5)
	wantFunnel(days+"&steps=signup,activate&visitor_id=carol", 86400, "signup", 1, 1.0, "activate", 1, 1.0)
	wantFunnel(days+"&steps=nobody,signup", 86400, "nobody", 0, 0.0, "signup", 0, 0.0)
	// A repeated step needs two events.
	wantFunnel(days+"&steps=signup,signup", 86400, "signup", 4, 1.0, "signup", 0, 0.0)

	// Saved funnels: CRUD and evaluation by id, with the saved window.
	r := s.AdminDo(t, "POST", "/admin/v1/projects/"+proj+"/funnels", map[string]any{"name": "Checkout", "steps": []string{"signup", "activate", "purchase"}, "window": 90000})
	wantStatus(t, r, 201)
	f := r.JSON(t)
	id, _ := f["id"].(string)
	if !strings.HasPrefix(id, "fnl_") || f["name"] != "Checkout" || f["window"] != float64(90000) || f["created_at"] == nil {
		t.Fatalf("created funnel %v", f)
	}
	wantFunnel("type=funnel&from=2026-11-01&to=2026-11-06&funnel_id="+id, 90000,
		"signup", 4, 1.0, "activate", 2, 0.5, "purchase", 2, 0.5)
	wantFunnel("type=funnel&from=2026-11-01&to=2026-11-06&window=3600&funnel_id="+id, 3600,
		"signup", 4, 1.0, "activate", 1, 0.25, "purchase", 1, 0.25)
	r = s.AdminDo(t, "POST", "/admin/v1/projects/"+proj+"/funnels", map[string]any{"name": "Default window", "steps": []string{"a", "b"}})
	wantStatus(t, r, 201)
	if r.JSON(t)["window"] != float64(86400) {
		t.Errorf("default window: %s", r.Body)
	}
	r = s.AdminDo(t, "GET", "/admin/v1/projects/"+proj+"/funnels", nil)
	wantStatus(t, r, 200)
	if n := len(r.JSON(t)["data"].([]any)); n != 2 {
		t.Errorf("list: %d funnels", n)
	}
	r = s.AdminDo(t, "GET", "/admin/v1/projects/"+proj+"/funnels/"+id, nil)
	wantStatus(t, r, 200)
	r = s.AdminDo(t, "PUT", "/admin/v1/projects/"+proj+"/funnels/"+id, map[string]any{"name": "Checkout 2", "steps": []string{"signup", "purchase"}, "window": 3600})
	wantStatus(t, r, 200)
	if m := r.JSON(t); m["name"] != "Checkout 2" || m["updated_at"] == nil || m["created_at"] != f["created_at"] {
		t.Errorf("updated funnel %v", m)
	}
	wantFunnel("type=funnel&from=2026-11-01&to=2026-11-06&funnel_id="+id, 3600, "signup", 4, 1.0, "purchase", 1, 0.25)
	r = s.AdminDo(t, "POST", "/admin/v1/projects/"+proj+"/funnels", map[string]any{"name": "", "steps": []string{"a"}, "window": 0})
	m := wantError(t, r, 400, "bad_request", "")
	anWantDetails(t, m, "name", "steps", "window")
	wantError(t, s.AdminDo(t, "POST", "/admin/v1/projects/proj_missing/funnels", map[string]any{"name": "x", "steps": []string{"a", "b"}}), 404, "not_found", "")
	wantStatus(t, s.AdminDo(t, "DELETE", "/admin/v1/projects/"+proj+"/funnels/"+id, nil), 204)
	wantError(t, s.AdminDo(t, "GET", "/admin/v1/projects/"+proj+"/funnels/"+id, nil), 404, "not_found", "")
	r = Do(t, "GET", s.Public+"/analytics?type=funnel&funnel_id="+id, keys.next(), nil)
	anWantDetails(t, wantError(t, r, 400, "bad_request", ""), "funnel_id")
}

// anWantDetails checks that an error body's details name exactly these fields.
func anWantDetails(t *testing.T, body map[string]any, keys ...string) {
	t.Helper()
	d, _ := body["details"].(map[string]any)
	if len(d) != len(keys) {
		t.Errorf("details %v, want keys %v", d, keys)
		return
	}
	for _, k := range keys {
		if _, ok := d[k]; !ok {
			t.Errorf("details %v lack %q", d, k)
		}
	}
}

func TestAnalyticsIsolation(t *testing.T) {
	s := Start(t)
	p1 := s.Project(t, "one", "enterprise", nil)
	p2 := s.Project(t, "two", "enterprise", nil)
	k1 := &anKeys{t: t, s: s, proj: p1, env: "live"}
	k1test := &anKeys{t: t, s: s, proj: p1, env: "test"}
	k2 := &anKeys{t: t, s: s, proj: p2, env: "live"}
	anPost(t, s, k1.next(), anFixture)
	anPost(t, s, k1test.next(), []anEvent{
		{"2026-11-03T12:00:00Z", "signup", "tess", map[string]any{"plan": "pro"}},
		{"2026-11-03T12:00:01Z", "purchase", "tess", map[string]any{"amount": 1000, "plan": "pro"}},
	})
	anPost(t, s, k2.next(), []anEvent{{"2026-11-02T12:00:00Z", "signup", "alice", map[string]any{"plan": "pro"}}})

	const q = "from=2026-11-02&to=2026-11-05"
	anWantSeries(t, q, k1.get(q), 11,
		"2026-11-02T00:00:00.000Z", 3, "2026-11-03T00:00:00.000Z", 0,
		"2026-11-04T00:00:00.000Z", 5, "2026-11-05T00:00:00.000Z", 3)
	anWantSeries(t, q, k1test.get(q), 2,
		"2026-11-02T00:00:00.000Z", 0, "2026-11-03T00:00:00.000Z", 2,
		"2026-11-04T00:00:00.000Z", 0, "2026-11-05T00:00:00.000Z", 0)
	anWantSeries(t, q, k2.get(q), 1,
		"2026-11-02T00:00:00.000Z", 1, "2026-11-03T00:00:00.000Z", 0,
		"2026-11-04T00:00:00.000Z", 0, "2026-11-05T00:00:00.000Z", 0)
	if b := k2.get("type=breakdown&group_by=event&" + q); len(b["data"].([]any)) != 1 {
		t.Errorf("project two sees other names: %v", b)
	}
	if b := k1test.get("type=breakdown&group_by=properties.plan&metric=sum&property=amount&" + q); b["total"] != float64(1000) {
		t.Errorf("test environment breakdown: %v", b)
	}
	if b := k1.get("type=funnel&steps=signup,purchase&" + q); b["steps"].([]any)[0].(map[string]any)["visitors"] != float64(4) {
		t.Errorf("funnel crosses datasets: %v", b)
	}
	if b := k2.get("metric=unique_visitors&" + q); b["total"] != float64(1) {
		t.Errorf("unique visitors cross datasets: %v", b)
	}
}

func TestAnalyticsErrorsAndLimits(t *testing.T) {
	s := Start(t)
	proj := s.Project(t, "errors", "enterprise", nil)
	keys := &anKeys{t: t, s: s, proj: proj, env: "live"}

	for _, tc := range []struct {
		query  string
		fields []string
	}{
		{"type=pie", []string{"type"}},
		{"metric=median", []string{"metric"}},
		{"metric=sum", []string{"property"}},
		{"metric=avg&property=", []string{"property"}},
		{"property=amount", []string{"property"}},
		{"event=not-a-name", []string{"event"}},
		{"event=", []string{"event"}},
		{"visitor_id=", []string{"visitor_id"}},
		{"from=yesterday", []string{"from"}},
		{"to=2026-02-30", []string{"to"}},
		{"from=2026-11-05&to=2026-11-04", []string{"from"}},
		{"interval=year", []string{"interval"}},
		{"interval=minute&from=2026-01-01&to=2026-11-01", []string{"interval"}},
		{"group_by=event", []string{"group_by"}},
		{"type=breakdown", []string{"group_by"}},
		{"type=breakdown&group_by=visitor", []string{"group_by"}},
		{"type=breakdown&group_by=properties.", []string{"group_by"}},
		{"type=breakdown&group_by=event&limit=0", []string{"limit"}},
		{"type=breakdown&group_by=event&limit=101", []string{"limit"}},
		{"type=breakdown&group_by=event&limit=x", []string{"limit"}},
		{"type=breakdown&group_by=event&interval=day", []string{"interval"}},
		{"type=funnel", []string{"steps"}},
		{"type=funnel&steps=signup", []string{"steps"}},
		{"type=funnel&steps=a,b,c,d,e,f,g,h,i,j,k", []string{"steps"}},
		{"type=funnel&steps=a,b-c", []string{"steps"}},
		{"type=funnel&steps=a,b&funnel_id=fnl_x", []string{"steps"}},
		{"type=funnel&funnel_id=fnl_missing", []string{"funnel_id"}},
		{"type=funnel&steps=a,b&window=0", []string{"window"}},
		{"type=funnel&steps=a,b&window=soon", []string{"window"}},
		{"type=funnel&steps=a,b&metric=count&event=a", []string{"metric", "event"}},
		{"type=goals&interval=day", []string{"interval"}},
		{"steps=a,b&window=60", []string{"steps", "window"}},
	} {
		r := Do(t, "GET", s.Public+"/analytics?"+tc.query, keys.next(), nil)
		m := wantError(t, r, 400, "bad_request", "")
		anWantDetails(t, m, tc.fields...)
	}

	// Public keys may not read analytics; bad and missing keys are 401.
	pk := s.Key(t, proj, "public", "live")
	wantError(t, Do(t, "GET", s.Public+"/analytics", pk, nil), 403, "forbidden", "API key does not have permission for this resource")
	wantError(t, Do(t, "GET", s.Public+"/analytics?type=pie", pk, nil), 403, "forbidden", "") // 403 before parameters
	wantError(t, Do(t, "GET", s.Public+"/analytics", "", nil), 401, "unauthorized", "Invalid or missing API key")
	wantError(t, Do(t, "GET", s.Public+"/analytics", "sk_live_"+strings.Repeat("x", 32), nil), 401, "unauthorized", "")
	wantStatus(t, Do(t, "POST", s.Public+"/analytics", keys.next(), "{}"), 405)

	// 50 requests a minute in the analytics bucket, 4xx included; then 429.
	key := s.Key(t, proj, "secret", "live")
	for i := 0; i < 50; i++ {
		q := ""
		if i%10 == 9 {
			q = "type=pie" // a 400 counts too
		}
		r := Do(t, "GET", s.Public+"/analytics?"+q, key, nil)
		if r.Status != 200 && r.Status != 400 {
			t.Fatalf("request %d: %d %s", i+1, r.Status, r.Body)
		}
		if got, want := r.Header.Get("X-RateLimit-Limit"), "50"; got != want {
			t.Fatalf("X-RateLimit-Limit %q, want %q", got, want)
		}
		if got, want := r.Header.Get("X-RateLimit-Remaining"), fmt.Sprint(49-i); got != want {
			t.Fatalf("request %d: X-RateLimit-Remaining %q, want %q", i+1, got, want)
		}
	}
	r := Do(t, "GET", s.Public+"/analytics", key, nil)
	m := wantError(t, r, 429, "rate_limit_exceeded", "Rate limit exceeded")
	if ra, _ := m["retry_after"].(float64); ra < 1 || r.Header.Get("Retry-After") == "" {
		t.Errorf("429 without retry_after: %s %v", r.Body, r.Header)
	}
	// Analytics has its own bucket: the standard one is untouched.
	wantStatus(t, Do(t, "GET", s.Public+"/events?limit=1", key, nil), 200)
}
