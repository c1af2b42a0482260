package test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Server-Sent Events at GET /stream (contract section 14, docs/stream.md).

// sseMsg is one SSE event, or a comment (a keep-alive).
type sseMsg struct {
	ID      string
	HasID   bool
	Event   string
	Data    string
	Comment string
}

// msg decodes the data as a stream message.
func (m sseMsg) msg(t *testing.T) streamMsg {
	t.Helper()
	var sm streamMsg
	if err := json.Unmarshal([]byte(m.Data), &sm); err != nil {
		t.Fatalf("SSE data is not a JSON message: %q", m.Data)
	}
	return sm
}

// sseClient reads an SSE response in its own goroutine.
type sseClient struct {
	resp   *http.Response
	msgs   chan sseResult
	cancel context.CancelFunc
}

type sseResult struct {
	m   sseMsg
	err error
}

// sseURL is the /stream URL with query.
func sseURL(s *Server, query string) string { return s.Public + "/stream" + query }

// sseHTTP has no overall timeout: a stream's body lasts as long as the test wants.
var sseHTTP = &http.Client{}

// openSSE sends the request (Accept: text/event-stream) and returns the response unread.
func openSSE(t *testing.T, url, key string, header http.Header) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := sseHTTP.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", url, err)
	}
	t.Cleanup(func() { cancel(); _ = resp.Body.Close() })
	return resp, cancel
}

// dialSSE opens a stream and starts reading it; it fails unless the answer is a 200 event stream.
func dialSSE(t *testing.T, url, key string, header http.Header) *sseClient {
	t.Helper()
	c := dialSSELazy(t, url, key, header)
	c.startReading()
	return c
}

// dialSSELazy opens a stream without reading it (a slow client).
func dialSSELazy(t *testing.T, url, key string, header http.Header) *sseClient {
	t.Helper()
	resp, cancel := openSSE(t, url, key, header)
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q, want text/event-stream", ct)
	}
	return &sseClient{resp: resp, msgs: make(chan sseResult, 100000), cancel: cancel}
}

func (c *sseClient) startReading() {
	go func() {
		br := bufio.NewReader(c.resp.Body)
		var m sseMsg
		var data []string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				c.msgs <- sseResult{err: err}
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "":
				if data != nil || m.Event != "" || m.HasID {
					m.Data = strings.Join(data, "\n")
					c.msgs <- sseResult{m: m}
				}
				m, data = sseMsg{}, nil
			case strings.HasPrefix(line, ":"):
				c.msgs <- sseResult{m: sseMsg{Comment: strings.TrimSpace(line[1:])}}
			default:
				field, value, _ := strings.Cut(line, ":")
				value = strings.TrimPrefix(value, " ")
				switch field {
				case "id":
					m.ID, m.HasID = value, true
				case "event":
					m.Event = value
				case "data":
					data = append(data, value)
				}
			}
		}
	}()
}

// next returns the next SSE event (comments skipped), or the read error, or errSilence after d.
func (c *sseClient) next(t *testing.T, d time.Duration) (sseMsg, error) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case r := <-c.msgs:
			if r.err != nil {
				c.msgs <- r // stays for later reads
				return sseMsg{}, r.err
			}
			if r.m.Comment != "" {
				continue
			}
			return r.m, nil
		case <-deadline:
			return sseMsg{}, errSilence
		}
	}
}

// mustNext is next that fails the test on an error or 10 s of silence.
func (c *sseClient) mustNext(t *testing.T) sseMsg {
	t.Helper()
	m, err := c.next(t, 10*time.Second)
	if err != nil {
		t.Fatalf("read SSE: %v", err)
	}
	return m
}

// readSSEEvent reads the next message, which must be an event message with
// the id: line of its event, and returns it with its redelivered flag.
func readSSEEvent(t *testing.T, c *sseClient) (streamEvent, bool) {
	t.Helper()
	m := c.mustNext(t)
	sm := m.msg(t)
	if m.Event != "event" || sm.Type != "event" {
		t.Fatalf("SSE event %q (%s), want an event message", m.Event, m.Data)
	}
	var e streamEvent
	if err := json.Unmarshal(sm.Data, &e); err != nil {
		t.Fatal(err)
	}
	if m.ID != e.ID {
		t.Fatalf("id: line %q, event id %q", m.ID, e.ID)
	}
	return e, sm.Redelivered
}

// wantSSEEnd reads the final error event and the end of the body.
func wantSSEEnd(t *testing.T, c *sseClient, code int, errName string) map[string]any {
	t.Helper()
	m := c.mustNext(t)
	var body map[string]any
	if err := json.Unmarshal([]byte(m.Data), &body); err != nil || m.Event != "error" || m.HasID {
		t.Fatalf("last SSE event %q id %q %s, want an error event without id", m.Event, m.ID, m.Data)
	}
	if body["type"] != "error" || body["code"] != float64(code) || body["error"] != errName {
		t.Fatalf("error event %s, want code %d error %s", m.Data, code, errName)
	}
	if _, err := c.next(t, 10*time.Second); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("after the error event: %v, want the end of the body", err)
	}
	return body
}

// TestSSEStreamFiltersAndResume: events arrive as id/event/data with the
// WebSocket's JSON, filtered by the query; a reconnect resumes with
// Last-Event-ID, which wins over the URL's since=.
func TestSSEStreamFiltersAndResume(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	first := post(t, s, key, "signup", "v_1")
	c := dialSSE(t, sseURL(s, "?event=signup&event=purchase&where=plan:eq:pro"), key, nil)
	if cc := c.resp.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Fatalf("Cache-Control %q", cc)
	}
	if c.resp.Header.Get("X-RateLimit-Limit") == "" {
		t.Fatal("an SSE response is counted like a REST call and carries the rate-limit headers")
	}
	postProps := func(name string, props map[string]any) string {
		r := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": name, "visitor_id": "v_1", "properties": props})
		wantStatus(t, r, 201)
		return r.JSON(t)["id"].(string)
	}
	postProps("signup", map[string]any{"plan": "free"})        // where= filters it out
	pv := postProps("pageview", map[string]any{"plan": "pro"}) // event= filters it out
	a := postProps("signup", map[string]any{"plan": "pro"})
	b := postProps("purchase", map[string]any{"plan": "pro", "amount": 3})
	for _, want := range []string{a, b} {
		if e, _ := readSSEEvent(t, c); e.ID != want {
			t.Fatalf("got %s, want %s", e.ID, want)
		}
	}
	c.cancel()
	later := postProps("purchase", map[string]any{"plan": "pro"})
	// since=first would replay a and b again: Last-Event-ID (b) wins.
	h := http.Header{"Last-Event-Id": {b}}
	again := dialSSE(t, sseURL(s, "?since="+first+"&event=purchase&where=plan:eq:pro"), key, h)
	if e, _ := readSSEEvent(t, again); e.ID != later {
		t.Fatalf("resumed with %s, want %s (the first event after Last-Event-ID)", e.ID, later)
	}
	// since= alone replays from there, with its filters.
	replay := dialSSE(t, sseURL(s, "?since="+first+"&where=plan:eq:pro"), key, nil)
	for _, want := range []string{pv, a, b, later} {
		if e, _ := readSSEEvent(t, replay); e.ID != want {
			t.Fatalf("replay: got %s, want %s", e.ID, want)
		}
	}
}

// TestSSERefusals: the same JSON errors as the WebSocket before any byte
// of the stream, plus a bad Last-Event-ID.
func TestSSERefusals(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	public := s.Key(t, p, "public", "live")
	cases := []struct {
		name, query, key string
		header           http.Header
		status           int
		detail           string
	}{
		{"no key", "", "", nil, 401, ""},
		{"public key", "", public, nil, 403, ""},
		{"unknown kind", "?kinds=event.created,goal.done", key, nil, 400, "kinds"},
		{"bad where", "?where=plan:like:pro", key, nil, 400, "where"},
		{"bad since", "?since=nope", key, nil, 400, "since"},
		{"bad Last-Event-ID", "", key, http.Header{"Last-Event-Id": {"nope"}}, 400, "Last-Event-ID"},
		{"unknown parameter", "?foo=1", key, nil, 400, "foo"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := openSSE(t, sseURL(s, tc.query), tc.key, tc.header)
			b, _ := io.ReadAll(resp.Body)
			var body struct {
				Error   string
				Details map[string]string
			}
			if resp.StatusCode != tc.status || json.Unmarshal(b, &body) != nil || body.Error == "" {
				t.Fatalf("%d %s, want a JSON %d", resp.StatusCode, b, tc.status)
			}
			if tc.detail != "" && body.Details[tc.detail] == "" {
				t.Fatalf("details %v do not name %s", body.Details, tc.detail)
			}
		})
	}
	// A GET that is neither an upgrade nor an SSE request stays a 400.
	r := Do(t, "GET", s.Public+"/stream", key, nil)
	wantStatus(t, r, 400)
}

// TestSSEKeepAlive: a silent stream gets ": ping" comments on the ping interval.
func TestSSEKeepAlive(t *testing.T) {
	s := Start(t, "--stream-ping", "50ms")
	p := s.Project(t, "a", "", streamLimits)
	c := dialSSE(t, sseURL(s, ""), s.Key(t, p, "secret", "live"), nil)
	deadline := time.After(10 * time.Second)
	for pings := 0; pings < 2; {
		select {
		case r := <-c.msgs:
			if r.err != nil {
				t.Fatalf("stream ended: %v", r.err)
			}
			if r.m.Comment == "ping" {
				pings++
			}
		case <-deadline:
			t.Fatal("no two keep-alive comments within 10 s at a 50 ms interval")
		}
	}
}

// TestSSEShutdown: SIGTERM sends what was committed, then a final error
// event with code 1001, then ends the body; the server exits (it does not
// wait for the stream, which never ends by itself).
func TestSSEShutdown(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	c := dialSSE(t, sseURL(s, ""), key, nil)
	cur := dialSSE(t, sseURL(s, "?cursor=shut"), key, nil)
	id := post(t, s, key, "last_words", "")
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, cl := range []*sseClient{c, cur} {
		if e, _ := readSSEEvent(t, cl); e.ID != id {
			t.Fatalf("got %s, want %s before the end", e.ID, id)
		}
		wantSSEEnd(t, cl, 1001, "server_shutting_down")
	}
}

// TestSSEClosedWhenKeyRevoked: the WebSocket's 4001 is the SSE's last error event.
func TestSSEClosedWhenKeyRevoked(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", streamLimits)
	key, keyID := keyWithID(t, s, p, "secret", "live")
	c := dialSSE(t, sseURL(s, ""), key, nil)
	wantStatus(t, s.AdminDo(t, "DELETE", "/admin/v1/keys/"+keyID, nil), 204)
	body := wantSSEEnd(t, c, 4001, "key_revoked")
	if body["message"] != "key revoked" {
		t.Fatalf("message %v", body["message"])
	}
}

// TestSSESlowConsumer: an SSE client that does not read is bounded like a
// WebSocket one: its queue overflows, it gets slow_consumer with last_id
// (and code 4008) as its last event, and the others get everything.
func TestSSESlowConsumer(t *testing.T) {
	s := Start(t, "--stream-queue", "200")
	p := s.Project(t, "a", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	normal := dialSSE(t, sseURL(s, ""), key, nil)
	slow := dialSSELazy(t, sseURL(s, ""), key, nil)

	fillUntilDropped(t, s, key, func(batch []string) {
		for i, want := range batch {
			if got, _ := readSSEEvent(t, normal); got.ID != want {
				t.Fatalf("normal subscriber event %d of a batch: %s, want %s", i, got.ID, want)
			}
		}
	})
	slow.startReading()
	var last string
	for {
		m := slow.mustNext(t)
		if m.Event == "error" {
			var body map[string]any
			_ = json.Unmarshal([]byte(m.Data), &body)
			if body["error"] != "slow_consumer" || body["code"] != float64(4008) || body["last_id"] != last || last == "" {
				t.Fatalf("error event %s, want slow_consumer, code 4008, last_id %s", m.Data, last)
			}
			break
		}
		last = m.ID
	}
	if _, err := slow.next(t, 10*time.Second); !errors.Is(err, io.EOF) {
		t.Fatalf("after slow_consumer: %v, want the end of the body", err)
	}
	if n := scrapeMetric(t, s, "eventd_stream_slow_consumer_closes_total"); n != 1 {
		t.Fatalf("slow consumer closes %v, want 1", n)
	}
}

// ackOverHTTP posts an acknowledgement for a cursor.
func ackOverHTTP(t *testing.T, s *Server, key, cursor, id string) *Response {
	t.Helper()
	return Do(t, "POST", s.Public+"/stream/cursors/"+cursor+"/ack", key, map[string]any{"id": id})
}

// TestSSECursor: a cursor over SSE acknowledged with POST .../ack: the
// window bounds what is sent ahead, unacknowledged events are redelivered
// on the next connection, a newer connection takes the cursor over (the
// older gets error 4009), and acks are refused as the ack message is.
func TestSSECursor(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	wantError(t, ackOverHTTP(t, s, key, "sink", "evt_01M7ZXYKBC0YQVV787K3YZYKF1"), 404, "not_found", "")

	c := dialSSE(t, sseURL(s, "?cursor=sink&ack_window=2"), key, nil)
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, post(t, s, key, "e", ""))
	}
	for _, want := range ids[:2] {
		if e, re := readSSEEvent(t, c); e.ID != want || re {
			t.Fatalf("got %s redelivered=%v, want %s", e.ID, re, want)
		}
	}
	waitFor(t, 10*time.Second, "the window to fill", func() bool { return scrapeMetric(t, s, "eventd_cursor_window_full_total") >= 1 })
	wantError(t, ackOverHTTP(t, s, key, "sink", ids[2]), 400, "bad_request", "")     // not sent yet
	wantError(t, ackOverHTTP(t, s, key, "sink", "evt_nope"), 400, "bad_request", "") // not an id
	wantStatus(t, ackOverHTTP(t, s, key, "sink", ids[0]), 204)
	if e, _ := readSSEEvent(t, c); e.ID != ids[2] {
		t.Fatalf("after the ack: %s, want %s", e.ID, ids[2])
	}
	wantStatus(t, ackOverHTTP(t, s, key, "sink", ids[0]), 204) // again: a no-op

	// A newer connection takes over; what the old one did not ack comes again.
	c2 := dialSSE(t, sseURL(s, "?cursor=sink&ack_window=2"), key, http.Header{"Last-Event-Id": {ids[2]}})
	wantSSEEnd(t, c, 4009, "cursor_taken_over")
	for _, want := range ids[1:] {
		if e, re := readSSEEvent(t, c2); e.ID != want || !re {
			t.Fatalf("got %s redelivered=%v, want %s redelivered (Last-Event-ID does not move a cursor)", e.ID, re, want)
		}
	}
	wantStatus(t, ackOverHTTP(t, s, key, "sink", ids[2]), 204)
	waitCursor(t, s, p, "sink", func(ci cursorInfo) bool { return ci.Position == ids[2] })
	c2.cancel()
	waitCursor(t, s, p, "sink", func(ci cursorInfo) bool { return !ci.Connected })
	r := ackOverHTTP(t, s, key, "sink", ids[2])
	wantError(t, r, 409, "conflict", "")
}
