package test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Issue 13, items 3-5: request bodies are read only after the headers were
// judged, in bounded amounts, and the admin listener's reads time out.

// bodyConn is a raw client connection that sends a request's headers and
// only part of its body, so a test can show the answer came first.
type bodyConn struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

func dialBody(t *testing.T, base string) *bodyConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// Generous: the answers are expected at once; the deadline only keeps a
	// broken server from hanging the test.
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	return &bodyConn{t: t, conn: conn, br: bufio.NewReader(conn)}
}

// send writes a request head (request line and header lines, without the
// blank line) and then part of the body.
func (c *bodyConn) send(head string, partial []byte) {
	c.t.Helper()
	msg := strings.ReplaceAll(strings.TrimSpace(head), "\n", "\r\n") + "\r\n\r\n"
	if _, err := io.WriteString(c.conn, msg); err != nil {
		c.t.Fatal(err)
	}
	if len(partial) > 0 {
		if _, err := c.conn.Write(partial); err != nil {
			c.t.Fatal(err)
		}
	}
}

// response reads one answer; its body is decoded as a JSON object.
func (c *bodyConn) response() (*http.Response, map[string]any) {
	c.t.Helper()
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.t.Fatalf("read response: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("read response body: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		c.t.Fatalf("status %d, body not JSON: %v\n%s", resp.StatusCode, err, b)
	}
	return resp, m
}

// wantClosed checks that the server closes the connection (EOF or reset)
// after its answer instead of waiting for the rest of the body.
func (c *bodyConn) wantClosed() {
	c.t.Helper()
	_, err := c.br.ReadByte()
	if err == nil {
		c.t.Fatal("server sent more after the answer; want the connection closed")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatal("server kept the connection open, waiting for the unsent body")
	}
}

func wantAnswer(t *testing.T, resp *http.Response, m map[string]any, status int, code string) {
	t.Helper()
	if resp.StatusCode != status || m["error"] != code {
		t.Fatalf("got %d %v, want %d %s", resp.StatusCode, m, status, code)
	}
	if !resp.Close {
		t.Fatalf("%d without Connection: close; the unread body would be parsed as the next request", status)
	}
}

const bigBody = 8 << 20 // declared; the tests send a small part of it

func TestBodyNotReadBeforeAuthentication(t *testing.T) {
	s := Start(t)
	proj := s.Project(t, "bodies", "", nil)
	public := s.Key(t, proj, "public", "live")
	partial := []byte(`{"event":"x","properties":{"pad":"` + strings.Repeat("a", 1000))

	cases := []struct {
		name, head   string
		status       int
		code         string
		wantNoCounts bool
	}{
		{"invalid key, Content-Length", fmt.Sprintf("POST /events HTTP/1.1\nHost: x\nAuthorization: Bearer sk_live_00000000000000000000000000000000\nContent-Type: application/json\nContent-Length: %d", bigBody),
			401, "unauthorized", true},
		{"invalid api_key, chunked", "POST /events/batch?api_key=pk_live_nope HTTP/1.1\nHost: x\nContent-Type: application/json\nTransfer-Encoding: chunked",
			401, "unauthorized", true},
		{"no key", fmt.Sprintf("POST /events HTTP/1.1\nHost: x\nContent-Length: %d", bigBody), 401, "unauthorized", true},
		{"invalid key, body never sent", fmt.Sprintf("POST /events/batch HTTP/1.1\nHost: x\nAuthorization: Bearer pk_live_00000000000000000000000000000000\nContent-Length: %d", bigBody),
			401, "unauthorized", true},
		{"public key on a secret-only route", fmt.Sprintf("GET /events HTTP/1.1\nHost: x\nAuthorization: Bearer %s\nContent-Length: %d", public, bigBody),
			403, "forbidden", false},
		{"invalid key, Expect: 100-continue", fmt.Sprintf("POST /events HTTP/1.1\nHost: x\nAuthorization: Bearer sk_live_00000000000000000000000000000000\nExpect: 100-continue\nContent-Length: %d", bigBody),
			401, "unauthorized", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialBody(t, s.Public)
			body := partial
			if strings.Contains(tc.head, "chunked") {
				body = append([]byte(fmt.Sprintf("%x\r\n", bigBody)), partial...)
			}
			if strings.Contains(tc.head, "100-continue") || strings.Contains(tc.name, "never sent") {
				body = nil // a client waiting for 100 Continue sends nothing yet
			}
			c.send(tc.head, body)
			resp, m := c.response()
			wantAnswer(t, resp, m, tc.status, tc.code)
			if tc.wantNoCounts && resp.Header.Get("X-RateLimit-Limit") != "" {
				t.Fatalf("401 carries rate-limit headers: %v", resp.Header)
			}
			c.wantClosed()
		})
	}
}

func TestBodyUnreadIsNotTheNextRequest(t *testing.T) {
	// An unread body must not be parsed as a second request on the connection.
	s := Start(t)
	inner := "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, head := range []string{
		fmt.Sprintf("POST /events HTTP/1.1\nHost: x\nAuthorization: Bearer sk_live_00000000000000000000000000000000\nContent-Length: %d", len(inner)),
		"POST /events HTTP/1.1\nHost: x\nAuthorization: Bearer sk_live_00000000000000000000000000000000\nTransfer-Encoding: chunked",
	} {
		c := dialBody(t, s.Public)
		body := inner
		if strings.Contains(head, "chunked") {
			body = fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(inner), inner)
		}
		c.send(head, []byte(body))
		resp, m := c.response()
		wantAnswer(t, resp, m, 401, "unauthorized")
		c.wantClosed() // and no 200 from /healthz
	}
}

func TestBodyForbiddenOriginNotRead(t *testing.T) {
	s := Start(t)
	proj := s.Project(t, "origins", "", nil)
	secret := s.Key(t, proj, "secret", "live")
	wantStatus(t, s.AdminDo(t, "PATCH", "/admin/v1/projects/"+proj, map[string]any{"allowed_origins": []string{"https://shop.example"}}), 200)

	c := dialBody(t, s.Public)
	c.send(fmt.Sprintf("POST /events HTTP/1.1\nHost: x\nAuthorization: Bearer %s\nOrigin: https://evil.example\nContent-Type: application/json\nContent-Length: %d", secret, 512<<10),
		[]byte(`{"event":"x",`))
	resp, m := c.response()
	wantAnswer(t, resp, m, 403, "forbidden")
	if resp.Header.Get("X-RateLimit-Remaining") == "" {
		t.Fatal("a 403 of an authenticated request counts and carries rate-limit headers")
	}
	c.wantClosed()
}

func TestBodyRateLimitedBeforeRead(t *testing.T) {
	s := Start(t)
	proj := s.Project(t, "limited", "", map[string]int64{"minute": 2, "hour": 100, "day": 1000})
	secret := s.Key(t, proj, "secret", "live")
	for i := 0; i < 2; i++ {
		wantStatus(t, Do(t, "POST", s.Public+"/events", secret, map[string]any{"event": "ok"}), 201)
	}
	for _, path := range []string{"/events", "/events/batch"} {
		if path == "/events/batch" {
			// The batch bucket (a tenth of the limits, at least one) fills with one request.
			Do(t, "POST", s.Public+path, secret, map[string]any{"events": []any{map[string]any{"event": "ok"}}})
		}
		c := dialBody(t, s.Public)
		c.send(fmt.Sprintf("POST %s HTTP/1.1\nHost: x\nAuthorization: Bearer %s\nContent-Type: application/json\nContent-Length: %d", path, secret, 512<<10),
			[]byte(`{"event":"x",`))
		resp, m := c.response()
		wantAnswer(t, resp, m, 429, "rate_limit_exceeded")
		if resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-RateLimit-Remaining") != "0" {
			t.Fatalf("%s: 429 headers %v", path, resp.Header)
		}
		c.wantClosed()
	}
	// A small body over the limit is discarded, not held: the 429 keeps the
	// connection, so a client hammering past its limit need not reconnect.
	c := dialBody(t, s.Public)
	small := []byte(`{"event":"x"}`)
	head := fmt.Sprintf("POST /events HTTP/1.1\nHost: x\nAuthorization: Bearer %s\nContent-Type: application/json\nContent-Length: %d", secret, len(small))
	for i := 0; i < 3; i++ {
		c.send(head, small)
		resp, m := c.response()
		if resp.StatusCode != 429 || m["error"] != "rate_limit_exceeded" || resp.Close {
			t.Fatalf("small body over the limit, request %d: %d %v, close %v; want 429 keeping the connection", i, resp.StatusCode, m, resp.Close)
		}
	}
	// The 429s counted nothing: two requests in the minute, as before them.
	r := Do(t, "GET", s.Public+"/rate-limit", secret, nil)
	wantStatus(t, r, 200)
	minute := r.JSON(t)["limits"].(map[string]any)["minute"].(map[string]any)
	if minute["remaining"] != float64(0) || minute["limit"] != float64(2) {
		t.Fatalf("minute window %v", minute)
	}
}

func TestBodyInflightBound(t *testing.T) {
	const budget = 100_000
	s := Start(t, "--max-inflight-body", fmt.Sprint(budget))
	proj := s.Project(t, "budget", "", nil)
	secret := s.Key(t, proj, "secret", "live")
	head := func(n int) string {
		return fmt.Sprintf("POST /events HTTP/1.1\nHost: x\nAuthorization: Bearer %s\nContent-Type: application/json\nContent-Length: %d", secret, n)
	}

	// One body larger than the whole budget.
	c := dialBody(t, s.Public)
	c.send(head(budget+1), []byte(`{"event":"x",`))
	resp, m := c.response()
	wantAnswer(t, resp, m, 503, "unavailable")
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	c.wantClosed()

	// A slow body holds 60,000 bytes of the budget: a second one does not fit...
	const size = 60_000
	body := []byte(`{"event":"held"` + strings.Repeat(" ", size-len(`{"event":"held"}`)) + `}`)
	slow := dialBody(t, s.Public)
	slow.send(head(size), body[:10_000]) // past the 8 KiB fasthttp prefetches
	waitBodyGauge(t, s, func(v int) bool { return v >= size })
	c = dialBody(t, s.Public)
	c.send(head(size), body)
	resp, m = c.response()
	wantAnswer(t, resp, m, 503, "unavailable")
	// ...until the first is done, which gives its bytes back.
	if _, err := slow.conn.Write(body[10_000:]); err != nil {
		t.Fatal(err)
	}
	slowResp, _ := slow.response()
	if slowResp.StatusCode != 201 {
		t.Fatalf("slow request: %d", slowResp.StatusCode)
	}
	waitBodyGauge(t, s, func(v int) bool { return v == 0 })
	r := Do(t, "POST", s.Public+"/events", secret, string(body))
	wantStatus(t, r, 201)
	if m := s.AdminDo(t, "GET", "/metrics", nil); !strings.Contains(string(m.Body), `eventd_http_body_refused_total{listener="public"} 2`) {
		t.Fatalf("refusals not counted:\n%s", m.Body)
	}
}

// waitBodyGauge polls the public listener's body-bytes gauge until ok.
func waitBodyGauge(t *testing.T, s *Server, ok func(int) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := s.AdminDo(t, "GET", "/metrics", nil)
		var v int
		for _, l := range strings.Split(string(m.Body), "\n") {
			if rest, found := strings.CutPrefix(l, `eventd_http_inflight_body_bytes{listener="public"} `); found {
				fmt.Sscan(rest, &v)
			}
		}
		if ok(v) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("body bytes in flight stayed at %d", v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sendChunked writes a chunked body of total bytes in the background and
// ignores write errors: the server is expected to answer and close early.
func sendChunked(conn net.Conn, total int) {
	go func() {
		chunk := strings.Repeat("a", 64<<10)
		for sent := 0; sent < total; sent += len(chunk) {
			if _, err := fmt.Fprintf(conn, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
				return
			}
		}
		_, _ = io.WriteString(conn, "0\r\n\r\n")
	}()
}

func TestAdminBodyLimits(t *testing.T) {
	s := Start(t)
	for _, tc := range []struct {
		name, path, auth string
		total            int
		status           int
		code             string
	}{
		{"login", "/login", "", 1 << 20, 413, "payload_too_large"},
		{"logout", "/logout", "", 1 << 20, 413, "payload_too_large"},
		{"JSON route over 16 MiB", "/admin/v1/projects", "Authorization: Bearer " + s.Token + "\n", 17 << 20, 413, "payload_too_large"},
		{"JSON route without token", "/admin/v1/projects", "", 17 << 20, 401, "unauthorized"},
		{"import without token", "/admin/v1/projects/proj_x/import", "", 17 << 20, 401, "unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialBody(t, s.Admin)
			c.send("POST "+tc.path+" HTTP/1.1\nHost: x\n"+tc.auth+"Content-Type: application/json\nTransfer-Encoding: chunked", nil)
			sendChunked(c.conn, tc.total)
			resp, m := c.response()
			if resp.StatusCode != tc.status || m["error"] != tc.code {
				t.Fatalf("got %d %v, want %d %s", resp.StatusCode, m, tc.status, tc.code)
			}
			if !resp.Close {
				t.Fatal("answer without Connection: close while the body was still coming")
			}
		})
	}
	// Refused from the headers: no body byte is read, not even after 100 Continue.
	for _, head := range []string{
		"POST /admin/v1/projects/proj_x/import HTTP/1.1\nHost: x\nContent-Length: 8388608",
		"POST /admin/v1/projects/proj_x/import HTTP/1.1\nHost: x\nExpect: 100-continue\nContent-Length: 8388608",
		"POST /login HTTP/1.1\nHost: x\nContent-Type: application/json\nContent-Length: 8388608",
	} {
		c := dialBody(t, s.Admin)
		c.send(head, nil) // the body never comes
		resp, m := c.response()
		want, code := 401, "unauthorized"
		if strings.Contains(head, "/login") {
			want, code = 413, "payload_too_large"
		}
		wantAnswer(t, resp, m, want, code)
		c.wantClosed()
	}
	// Within the limits everything works as before.
	wantStatus(t, s.AdminDo(t, "POST", "/admin/v1/projects", map[string]any{"name": "fine"}), 201)
	r := Do(t, "POST", s.Admin+"/login", "", map[string]any{"token": s.Token})
	wantStatus(t, r, 200)
}

func TestAdminSlowHeadersClosed(t *testing.T) {
	s := Start(t, "--admin-header-timeout", "1s", "--admin-body-timeout", "1s")
	c := dialBody(t, s.Admin)
	c.send("GET /healthz HTTP/1.1", nil) // no blank line: the headers go on...
	closed := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, c.br) // whatever the server answers, until it closes
		closed <- err
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for i := 0; ; i++ {
		select {
		case err := <-closed:
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("client deadline hit; the server never closed the slow connection")
			}
			return
		case <-deadline:
			t.Fatal("the server kept a connection open whose headers never ended")
		case <-tick.C:
			// ...one line at a time, each well inside any per-read timeout.
			_, _ = fmt.Fprintf(c.conn, "X-Slow-%d: 1\r\n", i)
		}
	}
}

func TestAdminSlowBodyTimesOut(t *testing.T) {
	s := Start(t, "--admin-header-timeout", "1s", "--admin-body-timeout", "1s")
	c := dialBody(t, s.Admin)
	c.send("POST /admin/v1/projects HTTP/1.1\nHost: x\nAuthorization: Bearer "+s.Token+"\nContent-Type: application/json\nContent-Length: 100",
		[]byte(`{"name":`))
	resp, m := c.response()
	if resp.StatusCode != 408 || m["error"] != "bad_request" {
		t.Fatalf("got %d %v, want 408 once the body timeout passed", resp.StatusCode, m)
	}
	c.wantClosed()
}

func TestAdminSlowImportSucceeds(t *testing.T) {
	s := Start(t, "--admin-header-timeout", "1s", "--admin-body-timeout", "1s")
	proj := s.Project(t, "slow import", "", nil)
	c := dialBody(t, s.Admin)
	c.send("POST /admin/v1/projects/"+proj+"/import?environment=live HTTP/1.1\nHost: x\nAuthorization: Bearer "+s.Token+"\nTransfer-Encoding: chunked", nil)
	// Three lines over about three seconds: longer than the body timeout, which
	// an authenticated import does not have (the slowness is the point here).
	for i := 0; i < 3; i++ {
		line := fmt.Sprintf(`{"event":"imported","visitor_id":"v%d"}`+"\n", i)
		if _, err := fmt.Fprintf(c.conn, "%x\r\n%s\r\n", len(line), line); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
	}
	if _, err := io.WriteString(c.conn, "0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, m := c.response()
	if resp.StatusCode != 200 || m["accepted"] != float64(3) {
		t.Fatalf("slow import: %d %v", resp.StatusCode, m)
	}
}
