package test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
)

// Property filters (where=) and typed messages (kinds=) on /stream
// (issue 16 items 3 and 4; docs/stream.md).

// dialRefused dials a stream that must be refused before the upgrade and
// returns the JSON error's details.
func dialRefused(t *testing.T, url, key string, status int) map[string]any {
	t.Helper()
	_, resp, err := websocket.DefaultDialer.Dial(url, bearer(key))
	if err == nil || resp == nil {
		t.Fatalf("dial %s succeeded: %v", url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	d, _ := wantError(t, &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, status, "bad_request", "")["details"].(map[string]any)
	return d
}

// sendSubscribe sends a subscribe message and returns the answer.
func sendSubscribe(t *testing.T, w *wsClient, m map[string]any) streamMsg {
	t.Helper()
	m["type"] = "subscribe"
	b, _ := json.Marshal(m)
	if err := w.WriteMessage(websocket.TextMessage, b); err != nil {
		t.Fatal(err)
	}
	r, err := readMsg(t, w, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func postWith(t *testing.T, s *Server, key, name, visitor string, props map[string]any) string {
	t.Helper()
	body := map[string]any{"event": name, "properties": props}
	if visitor != "" {
		body["visitor_id"] = visitor
	}
	r := Do(t, "POST", s.Public+"/events", key, body)
	wantStatus(t, r, 201)
	return r.JSON(t)["id"].(string)
}

// TestStreamWhere: where= filters streamed events with the syntax and the
// errors of GET /events, in the query and in a subscribe message.
func TestStreamWhere(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "where", "", streamLimits)
	key := s.Key(t, p, "secret", "live")

	for _, bad := range []string{"price:between:1", "price", "a.b.c.d.e.f.g.h.i:eq:1", "x:exists:1"} {
		d := dialRefused(t, wsURL(s, "?where="+url.QueryEscape(bad)), key, 400)
		list := wantError(t, Do(t, "GET", s.Public+"/events?where="+url.QueryEscape(bad), key, nil), 400, "bad_request", "")
		if want := list["details"].(map[string]any)["where"]; d["where"] != want || want == nil {
			t.Fatalf("where=%s: stream details %v, GET /events says %v", bad, d, want)
		}
	}
	eleven := "?where=" + strings.TrimSuffix(strings.Repeat("a:exists&where=", 11), "&where=")
	if d := dialRefused(t, wsURL(s, eleven), key, 400); d["where"] == nil {
		t.Fatalf("11 conditions: details %v", d)
	}

	w := dial(t, wsURL(s, "?where=price:gt:10&where=context.page.path:contains:/checkout"), bearer(key))
	page := func(path string) map[string]any { return map[string]any{"page": map[string]any{"path": path}} }
	postWith(t, s, key, "buy", "", map[string]any{"price": 5, "context": page("/checkout/a")})
	postWith(t, s, key, "buy", "", map[string]any{"price": 50, "context": page("/home")})
	postWith(t, s, key, "buy", "", map[string]any{"price": "lots"}) // a string > "10", but no path
	want := postWith(t, s, key, "buy", "", map[string]any{"price": 20, "context": page("/checkout/b")})
	if e := readEvent(t, w); e.ID != want {
		t.Fatalf("got %s (%v), want %s", e.ID, e.Properties, want)
	}

	// subscribe replaces the filters, where included; a bad one changes nothing.
	if m := sendSubscribe(t, w, map[string]any{"where": []string{"plan:in:pro|team"}}); m.Type != "subscribed" {
		t.Fatalf("subscribe answered %+v", m)
	}
	if m := sendSubscribe(t, w, map[string]any{"where": []string{"plan:like:x"}}); m.Type != "error" || m.Details["where"] == "" {
		t.Fatalf("a bad where in subscribe answered %+v, want bad_request with details.where", m)
	}
	postWith(t, s, key, "buy", "", map[string]any{"plan": "free"})
	want = postWith(t, s, key, "buy", "", map[string]any{"plan": "team"})
	if e := readEvent(t, w); e.ID != want {
		t.Fatalf("after subscribe: got %s (%v), want %s", e.ID, e.Properties, want)
	}

	// The replay of since= is filtered too.
	r := dial(t, wsURL(s, "?where=plan:eq:team&since=evt_00000000000000000000000000"), bearer(key))
	if e := readEvent(t, r); e.ID != want {
		t.Fatalf("replay: got %s, want %s", e.ID, want)
	}
}

// TestCursorFilterAdvances: on a filtered cursor, events filtered out need
// no ack. With nothing sent and unacknowledged before them, the position
// passes them without any ack, so lag stays 0 even when no event matches.
// After an ack covers everything sent, it also passes the events that
// were filtered out after it. They are not sent again to a later
// connection with another filter.
func TestCursorFilterAdvances(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "narrow", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	w := dial(t, cursorURL(s, "narrow", "&where=keep:eq:true"), bearer(key))
	var drops []string
	for i := 0; i < 3; i++ {
		drops = append(drops, postWith(t, s, key, "e", "", map[string]any{"keep": false}))
	}
	waitCursor(t, s, p, "narrow", func(c cursorInfo) bool { return c.Position == drops[2] && c.LagEvents == 0 })

	k := postWith(t, s, key, "e", "", map[string]any{"keep": true})
	if e, _ := readCursorEvent(t, w); e.ID != k {
		t.Fatalf("got %s, want %s", e.ID, k)
	}
	d4 := postWith(t, s, key, "e", "", map[string]any{"keep": false})
	// k is sent and not acknowledged: the position must not pass it.
	waitCursor(t, s, p, "narrow", func(c cursorInfo) bool { return c.Position == drops[2] && c.LagEvents == 2 })
	sendAck(t, w, k)
	waitCursor(t, s, p, "narrow", func(c cursorInfo) bool { return c.Position == d4 && c.LagEvents == 0 })
	_ = w.Close()
	waitCursor(t, s, p, "narrow", func(c cursorInfo) bool { return !c.Connected })

	// Another connection without the filter starts after d4: nothing
	// filtered out earlier comes back.
	w2 := dial(t, cursorURL(s, "narrow", ""), bearer(key))
	next := post(t, s, key, "e", "")
	if e, re := readCursorEvent(t, w2); e.ID != next || re {
		t.Fatalf("got %s redelivered=%v, want %s", e.ID, re, next)
	}
}

// keysOf lists a JSON object's keys, sorted.
func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// typedMsg is a goal.completed or usage.alert message.
type typedMsg struct {
	Type      string         `json:"type"`
	CreatedAt string         `json:"created_at"`
	Data      map[string]any `json:"data"`
}

// nextTyped reads messages until one of type typ (others are returned in skipped).
func nextTyped(t *testing.T, w *wsClient, typ string) (m typedMsg, skipped []string) {
	t.Helper()
	for i := 0; i < 20; i++ {
		raw, err := readMsg(t, w, 10*time.Second)
		if err != nil {
			t.Fatalf("waiting for %s: %v (skipped %v)", typ, err, skipped)
		}
		if raw.Type != typ {
			skipped = append(skipped, raw.Type)
			continue
		}
		m.Type, m.CreatedAt = raw.Type, raw.CreatedAt
		if err := json.Unmarshal(raw.Data, &m.Data); err != nil {
			t.Fatalf("%s data: %v", typ, err)
		}
		return m, skipped
	}
	t.Fatalf("no %s among 20 messages", typ)
	return m, skipped
}

// TestStreamKinds: kinds= adds goal completions and usage alerts as typed
// messages with the webhook bodies' data; the default is events only; an
// unknown kind is a 400 naming it; a visitor filter applies to goal
// completions; typed messages reach SSE and cursor connections too.
func TestStreamKinds(t *testing.T) {
	s := Start(t)
	// A day window: its edge is the only clock this test depends on.
	p := s.Project(t, "kinds", "professional", map[string]int64{"minute": 1000, "hour": 1000, "day": 20})
	key, keyID := keyWithID(t, s, p, "secret", "live")
	r := s.AdminDo(t, "POST", "/admin/v1/projects/"+p+"/goals", map[string]any{
		"name": "signed_up", "environment": "live", "type": "occurrence", "event": "signup"})
	wantStatus(t, r, 201)
	goalID := r.JSON(t)["id"].(string)

	d := dialRefused(t, wsURL(s, "?kinds=event.created,goal.done"), key, 400)
	if msg, _ := d["kinds"].(string); !strings.Contains(msg, `"goal.done"`) {
		t.Fatalf("unknown kind: details %v do not name it", d)
	}
	if d := dialRefused(t, wsURL(s, "?kinds=goal.completed&cursor=c"), key, 400); d["cursor"] == nil {
		t.Fatalf("a cursor without event.created: details %v", d)
	}

	all := dial(t, wsURL(s, "?kinds=event.created,goal.completed&kinds=usage.alert"), bearer(key))
	goalsOnly := dial(t, wsURL(s, "?kinds=goal.completed&visitor_id=v_1"), bearer(key))
	otherVisitor := dial(t, wsURL(s, "?kinds=goal.completed&visitor_id=v_2"), bearer(key))
	plain := dial(t, wsURL(s, ""), bearer(key))
	cur := dial(t, cursorURL(s, "typed", "&kinds=event.created,goal.completed"), bearer(key))
	sse := dialSSE(t, sseURL(s, "?kinds=goal.completed,event.created"), key, nil)
	// Two refusals and six connections counted 8 of the day's 20; the
	// alert fires at 50 %, on the 10th request.
	r = s.AdminDo(t, "POST", "/admin/v1/projects/"+p+"/alerts", map[string]any{"window": "day", "threshold_percent": 50})
	wantStatus(t, r, 201)
	alertID := r.JSON(t)["id"].(string)

	id := post(t, s, key, "signup", "v_1") // 9th request
	wantGoal := map[string]any{"goal_id": goalID, "name": "signed_up", "visitor_id": "v_1", "event_id": id}

	if e := readEvent(t, all); e.ID != id {
		t.Fatalf("all: event %s, want %s", e.ID, id)
	}
	g, _ := nextTyped(t, all, "goal.completed")
	if !reflect.DeepEqual(g.Data, wantGoal) || g.CreatedAt == "" {
		t.Fatalf("goal.completed %+v, want data %v", g, wantGoal)
	}
	if g, skipped := nextTyped(t, goalsOnly, "goal.completed"); len(skipped) > 0 || !reflect.DeepEqual(g.Data, wantGoal) {
		t.Fatalf("kinds=goal.completed: %+v after %v, want only the completion", g, skipped)
	}
	if e, _ := readCursorEvent(t, cur); e.ID != id {
		t.Fatalf("cursor: %s, want %s", e.ID, id)
	}
	if g, _ := nextTyped(t, cur, "goal.completed"); !reflect.DeepEqual(g.Data, wantGoal) {
		t.Fatalf("cursor goal.completed %+v", g)
	}
	if e, _ := readSSEEvent(t, sse); e.ID != id {
		t.Fatalf("SSE event %s, want %s", e.ID, id)
	}
	m := sse.mustNext(t)
	if m.Event != "goal.completed" || m.HasID {
		t.Fatalf("SSE typed message: event %q id %q (%s), want event: goal.completed and no id", m.Event, m.ID, m.Data)
	}
	var sg typedMsg
	if err := json.Unmarshal([]byte(m.Data), &sg); err != nil || sg.Type != "goal.completed" || !reflect.DeepEqual(sg.Data, wantGoal) {
		t.Fatalf("SSE goal.completed data %s", m.Data)
	}

	// 10th request: 50 % of 20 reached.
	post(t, s, key, "pageview", "v_9")
	a, _ := nextTyped(t, all, "usage.alert")
	if got := keysOf(a.Data); !reflect.DeepEqual(got, []string{"alert_id", "key_id", "limit", "threshold", "used", "window"}) {
		t.Fatalf("usage.alert data keys %v", got)
	}
	if a.Data["alert_id"] != alertID || a.Data["key_id"] != keyID || a.Data["window"] != "day" || a.Data["limit"] != 20.0 ||
		a.Data["threshold"] != 50.0 || a.Data["used"].(float64) < 10 {
		t.Fatalf("usage.alert %+v", a)
	}

	// The default stream got the events only, in order.
	if e := readEvent(t, plain); e.ID != id {
		t.Fatalf("plain: %s, want %s", e.ID, id)
	}
	readEvent(t, plain) // the pageview
	// The other visitor's filter kept v_1's completion away: its first
	// message is v_2's.
	id2 := post(t, s, key, "signup", "v_2")
	if g, skipped := nextTyped(t, otherVisitor, "goal.completed"); len(skipped) > 0 || g.Data["event_id"] != id2 {
		t.Fatalf("visitor_id=v_2: %+v after %v, want v_2's completion first", g, skipped)
	}
	if e := readEvent(t, plain); e.ID != id2 {
		t.Fatalf("plain: %s, want %s (no typed message before it)", e.ID, id2)
	}
}

// An EventSource on typed messages only reconnects with the Last-Event-ID
// of the events it never asked for: nothing is replayed to it.
func TestSSETypedOnlyIgnoresLastEventID(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "typed", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	wantStatus(t, s.AdminDo(t, "POST", "/admin/v1/projects/"+p+"/goals", map[string]any{
		"name": "signed_up", "environment": "live", "type": "occurrence", "event": "signup"}), 201)
	first := post(t, s, key, "before", "v_1")
	post(t, s, key, "before", "v_1") // would be replayed after first
	c := dialSSE(t, sseURL(s, "?kinds=goal.completed"), key, http.Header{"Last-Event-Id": {first}})
	post(t, s, key, "signup", "v_1")
	for {
		m := c.mustNext(t)
		if m.Comment != "" || m.Event == "" {
			continue // retry:, pings
		}
		if m.Event != "goal.completed" {
			t.Fatalf("first message %q (%s), want goal.completed", m.Event, m.Data)
		}
		return
	}
}
