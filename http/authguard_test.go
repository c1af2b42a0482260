package http

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine"
)

// requestFrom runs one request through the whole admin listener handler
// (Host guard included) as if it came from ip.
func requestFrom(s *Server, ip, method, uri, body string, headers ...string) *fasthttp.Response {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(uri)
	req.Header.SetHost("127.0.0.1:8081")
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	if body != "" {
		req.SetBodyString(body)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}, nil)
	s.admin.Handler(&ctx)
	out := &fasthttp.Response{}
	ctx.Response.CopyTo(out)
	return out
}

func TestAdminTokenThrottle(t *testing.T) {
	s, _ := newTestServer(t)
	clock := newFakeClock()
	s.auth.now = clock.now
	const (
		ip     = "203.0.113.7"
		good   = "Authorization: Bearer adm_secret"
		bad    = "Authorization: Bearer adm_wrong"
		origin = "Origin: http://127.0.0.1:8081"
		form   = "Content-Type: application/x-www-form-urlencoded"
		asJSON = "Content-Type: application/json"
	)
	get := func(from string, headers ...string) *fasthttp.Response {
		return requestFrom(s, from, "GET", "/admin/v1/projects", "", headers...)
	}
	want := func(what string, r *fasthttp.Response, status int, retryAfter string) {
		t.Helper()
		if r.StatusCode() != status || string(r.Header.Peek("Retry-After")) != retryAfter {
			t.Fatalf("%s: %d Retry-After %q, want %d %q; body %s", what, r.StatusCode(), r.Header.Peek("Retry-After"), status, retryAfter, r.Body())
		}
	}
	// Five wrong tokens, spread over the bearer API, the login form, the
	// JSON login and GET / with a bearer: 401 (303 for GET /).
	want("1st", get(ip, bad), 401, "")
	want("2nd (login form)", requestFrom(s, ip, "POST", "/login", "token=nope", origin, form), 401, "")
	want("3rd (JSON login)", requestFrom(s, ip, "POST", "/login", `{"token":"nope"}`, origin, asJSON), 401, "")
	want("4th (GET / with a bearer)", requestFrom(s, ip, "GET", "/", "", bad), 303, "")
	want("5th", get(ip, "Authorization: Basic adm_secret"), 401, "")
	// Requests without credentials are not attempts.
	for range 10 {
		want("no credentials", get(ip), 401, "")
	}
	// The sixth: 429, Retry-After 1, JSON error with retry_after.
	r := get(ip, bad)
	want("6th", r, 429, "1")
	if !bytes.Contains(r.Body(), []byte(`"error":"rate_limit_exceeded"`)) || !bytes.Contains(r.Body(), []byte(`"retry_after":1`)) ||
		!bytes.Contains(r.Body(), []byte(msgAuthThrottle)) {
		t.Fatalf("6th body: %s", r.Body())
	}
	// During the lockout the correct token is refused too, unseen; so are
	// the login form (HTML page) and GET / (back to the login page).
	clock.add(400 * time.Millisecond)
	want("good token while locked", get(ip, good), 429, "1")
	want("no credentials while locked", get(ip), 429, "1")
	r = requestFrom(s, ip, "POST", "/login", "token=adm_secret", origin, form)
	want("login form while locked", r, 429, "1")
	if !bytes.Contains(r.Body(), []byte("Too many wrong tokens")) || len(r.Header.PeekCookie(sessionCookie)) != 0 {
		t.Fatalf("login page while locked: %s", r.Body())
	}
	want("JSON login while locked", requestFrom(s, ip, "POST", "/login", `{"token":"adm_secret"}`, origin, asJSON), 429, "1")
	want("GET / while locked", requestFrom(s, ip, "GET", "/", "", good), 303, "")
	// Another address is not affected.
	want("other address", get("203.0.113.8", good), 200, "")
	// After the lockout, each failure doubles it.
	for i, secs := range []string{"2", "4", "8", "16"} {
		clock.add(time.Duration(1<<i) * time.Second)
		want("failure after lockout "+secs, get(ip, bad), 429, secs)
	}
	// Retry-After counts down, rounded up to whole seconds.
	clock.add(10500 * time.Millisecond)
	want("while locked", get(ip, good), 429, "6")
	// A success after the lockout resets: five free failures again.
	clock.add(6 * time.Second)
	want("good token after the lockout", get(ip, good), 200, "")
	for range 5 {
		want("after reset", get(ip, bad), 401, "")
	}
	want("6th after reset", get(ip, bad), 429, "1")
	// A successful login resets too.
	clock.add(time.Second)
	if r := requestFrom(s, ip, "POST", "/login", "token=adm_secret", origin, form); r.StatusCode() != 303 {
		t.Fatalf("login after the lockout: %d", r.StatusCode())
	}
	want("after login", get(ip, bad), 401, "")
	// The counters are exported.
	var m bytes.Buffer
	_, _ = s.metrics.WriteTo(&m)
	for _, name := range []string{"eventd_admin_auth_failures_total 17", "eventd_admin_auth_throttled_total 11"} {
		if !strings.Contains(m.String(), name) {
			t.Errorf("metrics lack %q:\n%s", name, grepLines(m.String(), "eventd_admin_auth"))
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestAdminHostGuard(t *testing.T) {
	eng, err := engine.Open(engine.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	s := New(Config{Engine: eng, AdminToken: "adm_secret", AdminHosts: []string{" Admin.Example.com ", "", "eventd.internal.:8081"}})
	cases := []struct {
		host   string
		status int
	}{
		{"admin.example.com", 200},
		{"ADMIN.example.com:8081", 200},
		{"admin.example.com.", 200},
		{"eventd.internal", 200},
		{"127.0.0.1:8081", 200},
		{"[::1]:8081", 200},
		{"10.1.2.3", 200},
		{"evil.example", 421},
		{"evil.example:8081", 421},
		{"admin.example.com.evil.example", 421},
		{"localhost:8081", 421},
		{"", 421},
	}
	for _, c := range cases {
		var req fasthttp.Request
		req.SetRequestURI("/admin/v1/projects")
		req.Header.Set("Authorization", "Bearer adm_secret")
		req.Header.SetHost(c.host)
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
		s.admin.Handler(&ctx)
		if got := ctx.Response.StatusCode(); got != c.status {
			t.Errorf("Host %q: %d, want %d; body %s", c.host, got, c.status, ctx.Response.Body())
			continue
		}
		if c.status == 421 {
			body := string(ctx.Response.Body())
			if !strings.Contains(body, `"error":"misdirected_request"`) || !strings.Contains(body, `"host"`) ||
				string(ctx.Response.Header.ContentType()) != "application/json" || len(ctx.Response.Header.Peek("X-Request-Id")) == 0 {
				t.Errorf("Host %q: 421 body %s", c.host, body)
			}
		}
	}
	// Without --admin-host every Host is answered.
	s2, _ := newTestServer(t)
	var req fasthttp.Request
	req.SetRequestURI("/healthz")
	req.Header.SetHost("evil.example")
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
	s2.admin.Handler(&ctx)
	if ctx.Response.StatusCode() != 200 {
		t.Fatalf("no --admin-host: %d", ctx.Response.StatusCode())
	}
}
