package test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
)

// keyWithID creates an API key and returns its text and id.
func keyWithID(t *testing.T, s *Server, projectID, typ, env string) (text, id string) {
	t.Helper()
	r := s.AdminDo(t, "POST", "/admin/v1/projects/"+projectID+"/keys", map[string]any{"name": typ + " " + env, "type": typ, "environment": env})
	wantStatus(t, r, 201)
	m := r.JSON(t)
	return m["key"].(string), m["id"].(string)
}

// waitClose reads past any events until the stream ends and returns its
// close frame. The contract promises 1 s; the wait is generous because the
// test must not time a loaded machine.
func waitClose(t *testing.T, w *wsClient) *websocket.CloseError {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := readMsg(t, w, time.Until(deadline))
		if err == nil {
			continue // events committed before the revocation may still arrive
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("stream ended with %v, want a close frame", err)
		}
		return ce
	}
}

func wantClose(t *testing.T, w *wsClient, code int, reason string) {
	t.Helper()
	if ce := waitClose(t, w); ce.Code != code || ce.Text != reason {
		t.Fatalf("closed with %d %q, want %d %q", ce.Code, ce.Text, code, reason)
	}
}

// readEventID reads events until the one with id arrives (others are skipped).
func readEventID(t *testing.T, w *wsClient, id string) {
	t.Helper()
	for {
		if e := readEvent(t, w); e.ID == id {
			return
		}
	}
}

// TestStreamClosedWhenKeyRevoked: revoking a key closes its streams with
// 4001 "key revoked"; another key of the same project keeps streaming.
func TestStreamClosedWhenKeyRevoked(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "revoke", "", streamLimits)
	doomed, doomedID := keyWithID(t, s, p, "secret", "live")
	other := s.Key(t, p, "secret", "live")
	w1 := dial(t, wsURL(s, ""), bearer(doomed))
	w1b := dial(t, wsURL(s, "?event=never"), bearer(doomed)) // a second stream of the key, silent by filter
	w2 := dial(t, wsURL(s, ""), bearer(other))
	// Both keys' streams are live before the revocation.
	id := post(t, s, other, "before", "")
	readEventID(t, w1, id)
	readEventID(t, w2, id)

	wantStatus(t, s.AdminDo(t, "DELETE", "/admin/v1/keys/"+doomedID, nil), 204)
	wantClose(t, w1, 4001, "key revoked")
	wantClose(t, w1b, 4001, "key revoked")

	id = post(t, s, other, "after", "")
	readEventID(t, w2, id)
	// The revoked key cannot open a new stream.
	_, resp, err := websocket.DefaultDialer.Dial(wsURL(s, ""), bearer(doomed))
	if err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("revoked key's new stream: %v %v", err, resp)
	}
	m := scrapeMetric(t, s, "eventd_stream_revoked_closes_total")
	if m < 2 {
		t.Fatalf("eventd_stream_revoked_closes_total = %v, want >= 2", m)
	}
}

// TestStreamClosedWhenProjectDeleted: deleting a project closes its keys'
// streams and its dashboard feeds with 4001 "project deleted"; another
// project's stream is untouched.
func TestStreamClosedWhenProjectDeleted(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "doomed", "", streamLimits)
	q := s.Project(t, "kept", "", streamLimits)
	key := s.Key(t, p, "secret", "test")
	kept := s.Key(t, q, "secret", "test")
	w := dial(t, wsURL(s, ""), bearer(key))
	feedURL := "ws" + strings.TrimPrefix(s.Admin, "http") + "/admin/v1/projects/" + p + "/stream?environment=test"
	feed := dial(t, feedURL, bearer(s.Token))
	wq := dial(t, wsURL(s, ""), bearer(kept))
	id := post(t, s, key, "before", "")
	readEventID(t, w, id)
	readEventID(t, feed, id)

	wantStatus(t, s.AdminDo(t, "DELETE", "/admin/v1/projects/"+p, nil), 204)
	wantClose(t, w, 4001, "project deleted")
	wantClose(t, feed, 4001, "project deleted")

	id = post(t, s, kept, "after", "")
	readEventID(t, wq, id)
}

// scrapeMetric reads one unlabelled sample from /metrics.
func scrapeMetric(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	r := Do(t, "GET", s.Admin+"/metrics", s.Token, nil)
	wantStatus(t, r, 200)
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if err := json.Unmarshal([]byte(v), &f); err != nil {
				t.Fatalf("metric %s: %q", name, line)
			}
			return f
		}
	}
	t.Fatalf("metric %s not in /metrics", name)
	return 0
}

const visitorMsg = "must be a string of 1-256 characters"

// TestStreamVisitorIDRule: the /stream query refuses a visitor_id over 256
// characters before the upgrade (it used to take 1024 bytes), with the same
// rule and message as every other route; the subscribe message does too.
func TestStreamVisitorIDRule(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "visitors", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	long := strings.Repeat("a", 257)
	wide := strings.Repeat("é", 256) // 512 bytes, 256 characters: allowed

	t.Run("query", func(t *testing.T) {
		for _, v := range []string{long, strings.Repeat("a", 1024), strings.Repeat("é", 257)} {
			_, resp, err := websocket.DefaultDialer.Dial(wsURL(s, "?visitor_id="+url.QueryEscape(v)), bearer(key))
			if err == nil || resp == nil {
				t.Fatalf("dial with a %d-byte visitor_id succeeded: %v", len(v), err)
			}
			b, _ := io.ReadAll(resp.Body)
			r := &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
			d := wantError(t, r, 400, "bad_request", "")["details"].(map[string]any)
			if d["visitor_id"] != visitorMsg {
				t.Fatalf("details %v, want visitor_id %q", d, visitorMsg)
			}
		}
		w := dial(t, wsURL(s, "?visitor_id="+url.QueryEscape(wide)), bearer(key))
		id := post(t, s, key, "wide", wide)
		readEventID(t, w, id)
	})

	t.Run("subscribe message", func(t *testing.T) {
		w := dial(t, wsURL(s, ""), bearer(key))
		send := func(v string) streamMsg {
			t.Helper()
			b, _ := json.Marshal(map[string]any{"type": "subscribe", "visitor_id": v})
			if err := w.WriteMessage(websocket.TextMessage, b); err != nil {
				t.Fatal(err)
			}
			m, err := readMsg(t, w, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		if m := send(long); m.Type != "error" || m.Error != "bad_request" {
			t.Fatalf("257-character visitor_id answered %+v, want a bad_request error", m)
		}
		// The refused subscribe left the filter alone: events still arrive unfiltered.
		id := post(t, s, key, "unfiltered", "someone")
		readEventID(t, w, id)
		if m := send(wide); m.Type != "subscribed" || m.VisitorID == nil || *m.VisitorID != wide {
			t.Fatalf("256-character visitor_id answered %+v, want subscribed", m)
		}
	})

	t.Run("subscribe error details", func(t *testing.T) {
		c, _, err := websocket.DefaultDialer.Dial(wsURL(s, ""), bearer(key))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		b, _ := json.Marshal(map[string]any{"type": "subscribe", "visitor_id": ""})
		if err := c.WriteMessage(websocket.TextMessage, b); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, raw, err := c.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Type    string            `json:"type"`
			Error   string            `json:"error"`
			Details map[string]string `json:"details"`
		}
		if json.Unmarshal(raw, &m) != nil || m.Type != "error" || m.Details["visitor_id"] != visitorMsg {
			t.Fatalf("empty visitor_id answered %s, want details.visitor_id %q", raw, visitorMsg)
		}
	})

	// Every other route that takes a visitor_id says the same.
	t.Run("same message everywhere", func(t *testing.T) {
		q := "visitor_id=" + url.QueryEscape(long)
		routes := []struct {
			name string
			r    func() *Response
		}{
			{"POST /events", func() *Response {
				return Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "e", "visitor_id": long})
			}},
			{"GET /events", func() *Response { return Do(t, "GET", s.Public+"/events?"+q, key, nil) }},
			{"GET /analytics", func() *Response { return Do(t, "GET", s.Public+"/analytics?"+q, key, nil) }},
			{"erase", func() *Response {
				return s.AdminDo(t, "DELETE", "/admin/v1/projects/"+p+"/visitors/"+long+"?environment=live", nil)
			}},
		}
		for _, rt := range routes {
			r := rt.r()
			if r.Status != 400 {
				t.Fatalf("%s: status %d, want 400: %s", rt.name, r.Status, r.Body)
			}
			d, _ := r.JSON(t)["details"].(map[string]any)
			if d["visitor_id"] != visitorMsg {
				t.Fatalf("%s: details %v, want visitor_id %q", rt.name, d, visitorMsg)
			}
		}
	})
}

// TestStreamEndDoesNotLeakItsConnection: a stream that the server ends must
// not leave its reader goroutine running on the connection's buffered reader,
// which fasthttp hands to the next connection once the handler returns: a
// request on a fresh connection then lost bytes to it (400) or was reset,
// as TestDashboardLogoutAndExpiry once was after its feed ended at logout.
// Many streams end at once while fresh connections arrive on the same
// listener; every request must succeed, and a -race server must report no race.
func TestStreamEndDoesNotLeakItsConnection(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "churn", "enterprise", streamLimits)
	for round := range 3 {
		key, keyID := keyWithID(t, s, p, "secret", "live")
		streams := make([]*wsClient, 40)
		for i := range streams {
			streams[i] = dial(t, wsURL(s, ""), bearer(key))
		}
		churn(t, s.Public, streams, func() {
			wantStatus(t, s.AdminDo(t, "DELETE", "/admin/v1/keys/"+keyID, nil), 204)
		}, "key revoked", round)
	}
	// Dashboard feeds on the admin listener, ended by deleting their project.
	for round := range 2 {
		q := s.Project(t, "feeds", "", nil)
		s.Key(t, q, "secret", "test") // a feed needs an active key in its environment
		feedURL := "ws" + strings.TrimPrefix(s.Admin, "http") + "/admin/v1/projects/" + q + "/stream?environment=test"
		feeds := make([]*wsClient, 30)
		for i := range feeds {
			feeds[i] = dial(t, feedURL, bearer(s.Token))
		}
		churn(t, s.Admin, feeds, func() {
			wantStatus(t, s.AdminDo(t, "DELETE", "/admin/v1/projects/"+q, nil), 204)
		}, "project deleted", round)
	}
	if logs := s.Logs(); strings.Contains(logs, "DATA RACE") {
		t.Fatalf("the server reported a data race:\n%s", logs)
	}
}

// churn ends streams with end while fresh connections (no keep-alive) ask
// base/healthz, and fails on any request that does not get its 200.
func churn(t *testing.T, base string, streams []*wsClient, end func(), reason string, round int) {
	t.Helper()
	fresh := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	stop := make(chan struct{})
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 500; n++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := fresh.Get(base + "/healthz")
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	end()
	for _, w := range streams {
		wantClose(t, w, 4001, reason)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("round %d (%s): request beside ending streams: %v", round, reason, err)
	}
}
