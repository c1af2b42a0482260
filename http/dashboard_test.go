package http

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine"
)

// fakeClock drives the session store in tests.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock           { return &fakeClock{t: time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)} }
func storeWith(idle time.Duration, c *fakeClock) *sessionStore {
	st := newSessionStore(idle)
	st.now = c.now
	return st
}

func TestSessionIdleAndAbsoluteExpiry(t *testing.T) {
	c := newFakeClock()
	st := storeWith(time.Hour, c)
	id, s := st.create()
	if len(id) < 40 || len(s.csrf) < 40 || id == s.csrf {
		t.Fatalf("id %q csrf %q: want two distinct 256-bit tokens", id, s.csrf)
	}
	if _, ok := st.byID[s.key]; !ok || bytes.Contains(s.key[:], []byte(id)) {
		t.Fatal("the store must be keyed by the hash, not the cookie value")
	}
	// Activity keeps it alive past the idle timeout...
	for range 5 {
		c.add(50 * time.Minute)
		if st.lookup([]byte(id), true) == nil {
			t.Fatalf("session ended at %v despite activity", c.t)
		}
	}
	// ...a lookup without touch does not...
	c.add(59 * time.Minute)
	if !st.alive(s) {
		t.Fatal("alive before the idle timeout")
	}
	c.add(2 * time.Minute)
	if st.alive(s) || st.lookup([]byte(id), true) != nil {
		t.Fatal("session alive after an hour without a request")
	}
	if len(st.byID) != 0 {
		t.Fatal("expired session not removed")
	}
	// ...and nothing keeps it beyond the absolute limit.
	id, s = st.create()
	for c.add(0); ; c.add(30 * time.Minute) {
		if st.lookup([]byte(id), true) == nil {
			break
		}
	}
	if age := c.t.Sub(s.created); age < sessionMaxAge || age > sessionMaxAge+30*time.Minute {
		t.Fatalf("active session lasted %v, want the absolute limit %v", age, sessionMaxAge)
	}
	if st.lookup([]byte("nope"), true) != nil || st.lookup(nil, true) != nil || st.lookup(bytes.Repeat([]byte("a"), 500), true) != nil {
		t.Fatal("unknown ids must not match")
	}
}

func TestSessionStoreBounded(t *testing.T) {
	c := newFakeClock()
	st := storeWith(time.Hour, c)
	firstID, _ := st.create()
	for range maxSessions {
		c.add(time.Millisecond)
		st.create()
	}
	if len(st.byID) != maxSessions {
		t.Fatalf("%d sessions, want at most %d", len(st.byID), maxSessions)
	}
	if st.lookup([]byte(firstID), false) != nil {
		t.Fatal("the least recently used session should have been evicted")
	}
}

// Static checks of the embedded dashboard: every referenced file exists,
// nothing is loaded from elsewhere, nothing needs 'unsafe-inline'.
func TestDashboardAssetsSelfContained(t *testing.T) {
	refRE := regexp.MustCompile(`(?:href|src)="(/assets/[^"]+)"`)
	importRE := regexp.MustCompile(`(?:from\s+|import\()\s*'(\.{1,2}/[^']+)'`)
	externalRE := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	for name, page := range map[string][]byte{"index.html": indexPage, "login.html": loginPage} {
		for _, m := range refRE.FindAllSubmatch(page, -1) {
			if dashboardAssets[strings.TrimPrefix(string(m[1]), "/assets/")] == nil {
				t.Errorf("%s references %s, which is not embedded", name, m[1])
			}
		}
		if regexp.MustCompile(`<script>|<script [^>]*>[^<]|\sstyle=|\son[a-z]+=`).Match(page) {
			t.Errorf("%s has inline script, style or handler: the CSP refuses them", name)
		}
	}
	if !bytes.Contains(loginPage, []byte(loginMarker)) {
		t.Error("login.html lacks the message marker")
	}
	for file, f := range dashboardAssets {
		if strings.HasSuffix(file, ".js") {
			dir := file[:strings.LastIndex(file, "/")+1]
			for _, m := range importRE.FindAllSubmatch(f.body, -1) {
				target := pathJoin(dir, string(m[1]))
				if dashboardAssets[target] == nil {
					t.Errorf("%s imports %s (%s), which is not embedded", file, m[1], target)
				}
			}
			// Text reaches the DOM through text nodes only.
			if bytes.Contains(f.body, []byte("innerHTML")) || bytes.Contains(f.body, []byte("insertAdjacentHTML")) || bytes.Contains(f.body, []byte("document.write")) {
				t.Errorf("%s writes HTML from strings", file)
			}
		}
		for _, m := range externalRE.FindAll(f.body, -1) {
			// The SVG namespace and example.com placeholders are never fetched.
			if string(m) != "http://www.w3.org" && !strings.HasSuffix(string(m), ".example.com") {
				t.Errorf("%s mentions the external address %s", file, m)
			}
		}
	}
	for _, need := range []string{"app.js", "api.js", "ui.js", "charts.js", "app.css", "favicon.svg", "pages/live.js"} {
		if dashboardAssets[need] == nil {
			t.Errorf("asset %s missing", need)
		}
	}
}

func pathJoin(dir, rel string) string {
	u, _ := url.Parse("http://x/" + dir)
	r, _ := url.Parse(rel)
	return strings.TrimPrefix(u.ResolveReference(r).Path, "/")
}

// testRequest runs one request through the admin router in process.
func testRequest(s *Server, method, uri string, body string, headers ...string) *fasthttp.Response {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetHost("127.0.0.1:8081")
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		ctx.Request.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	if body != "" {
		ctx.Request.SetBodyString(body)
	}
	s.adminRouter.Handler(&ctx)
	out := &fasthttp.Response{}
	ctx.Response.CopyTo(out)
	return out
}

func newTestServer(t *testing.T) (*Server, *fakeClock) {
	t.Helper()
	eng, err := engine.Open(engine.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	s := New(Config{Engine: eng, AdminToken: "adm_secret", SessionIdle: time.Hour})
	c := newFakeClock()
	s.dash.sessions.now = c.now
	return s, c
}

func TestDashboardSessionFlow(t *testing.T) {
	s, clock := newTestServer(t)
	const origin = "Origin: http://127.0.0.1:8081"

	if r := testRequest(s, "GET", "/", ""); r.StatusCode() != 303 || string(r.Header.Peek("Location")) != "/login" {
		t.Fatalf("GET / without a session: %d %q", r.StatusCode(), r.Header.Peek("Location"))
	}
	if r := testRequest(s, "GET", "/", "", "Authorization: Bearer adm_secret"); r.StatusCode() != 200 {
		t.Fatalf("GET / with the token: %d", r.StatusCode())
	}
	r := testRequest(s, "POST", "/login", "token=wrong", origin, "Content-Type: application/x-www-form-urlencoded")
	if r.StatusCode() != 401 || len(r.Header.PeekCookie(sessionCookie)) != 0 || !bytes.Contains(r.Body(), []byte("not the admin token")) {
		t.Fatalf("wrong token: %d cookie %q", r.StatusCode(), r.Header.PeekCookie(sessionCookie))
	}
	r = testRequest(s, "POST", "/login", "token=adm_secret%0A", origin, "Content-Type: application/x-www-form-urlencoded")
	if r.StatusCode() != 303 || string(r.Header.Peek("Location")) != "/" {
		t.Fatalf("login: %d", r.StatusCode())
	}
	var ck fasthttp.Cookie
	if err := ck.ParseBytes(r.Header.PeekCookie(sessionCookie)); err != nil {
		t.Fatal(err)
	}
	if !ck.HTTPOnly() || ck.SameSite() != fasthttp.CookieSameSiteStrictMode || string(ck.Path()) != "/" || ck.Secure() {
		t.Fatalf("cookie flags: %s", r.Header.PeekCookie(sessionCookie))
	}
	cookie := "Cookie: " + sessionCookie + "=" + string(ck.Value())

	r = testRequest(s, "GET", "/session", "", cookie)
	var sv sessionView
	if err := json.Unmarshal(r.Body(), &sv); err != nil || r.StatusCode() != 200 || sv.CSRFToken == "" || sv.IdleTimeout != 3600 {
		t.Fatalf("GET /session: %d %s", r.StatusCode(), r.Body())
	}
	csrf := "X-CSRF-Token: " + sv.CSRFToken
	create := `{"name":"p"}`
	for _, c := range []struct {
		name    string
		headers []string
		status  int
	}{
		{"no CSRF token", []string{cookie, origin}, 403},
		{"wrong CSRF token", []string{cookie, origin, "X-CSRF-Token: x"}, 403},
		{"foreign origin", []string{cookie, csrf, "Origin: http://evil.example"}, 403},
		{"cross-site fetch", []string{cookie, csrf, "Sec-Fetch-Site: cross-site"}, 403},
		{"same-site but other origin", []string{cookie, csrf, "Sec-Fetch-Site: same-site"}, 403},
		{"unknown session", []string{"Cookie: " + sessionCookie + "=forged", csrf, origin}, 401},
		{"session and token", []string{cookie, csrf, origin, "Sec-Fetch-Site: same-origin"}, 201},
	} {
		if r := testRequest(s, "POST", "/admin/v1/projects", create, c.headers...); r.StatusCode() != c.status {
			t.Errorf("%s: %d, want %d: %s", c.name, r.StatusCode(), c.status, r.Body())
		}
	}
	// Reads need the session but no CSRF token; another origin is refused even for reads.
	if r := testRequest(s, "GET", "/admin/v1/projects", "", cookie); r.StatusCode() != 200 {
		t.Fatalf("GET with session: %d", r.StatusCode())
	}
	if r := testRequest(s, "GET", "/admin/v1/projects", "", cookie, "Origin: http://127.0.0.1:8080"); r.StatusCode() != 403 {
		t.Fatalf("GET from the public listener's origin: %d", r.StatusCode())
	}
	// The absolute limit ends even a busy session.
	for i := 0; i < 30; i++ {
		clock.add(50 * time.Minute)
		if r := testRequest(s, "GET", "/admin/v1/projects", "", cookie); r.StatusCode() != 200 {
			if clock.t.Sub(newFakeClock().t) < sessionMaxAge {
				t.Fatalf("session ended early, after %v", clock.t.Sub(newFakeClock().t))
			}
			return
		}
	}
	t.Fatal("session outlived its absolute limit")
}

func TestDashboardLogoutAndAssets(t *testing.T) {
	s, _ := newTestServer(t)
	r := testRequest(s, "POST", "/login", `{"token":"adm_secret"}`, "Content-Type: application/json")
	var sv sessionView
	if err := json.Unmarshal(r.Body(), &sv); err != nil || r.StatusCode() != 200 {
		t.Fatalf("JSON login: %d %s", r.StatusCode(), r.Body())
	}
	var ck fasthttp.Cookie
	_ = ck.ParseBytes(r.Header.PeekCookie(sessionCookie))
	cookie := "Cookie: " + sessionCookie + "=" + string(ck.Value())
	if r := testRequest(s, "POST", "/logout", "", cookie); r.StatusCode() != 403 {
		t.Fatalf("logout without CSRF token: %d", r.StatusCode())
	}
	r = testRequest(s, "POST", "/logout", "csrf_token="+sv.CSRFToken, cookie, "Content-Type: application/x-www-form-urlencoded")
	if r.StatusCode() != 303 || !strings.Contains(string(r.Header.PeekCookie(sessionCookie)), "max-age=0") {
		t.Fatalf("form logout: %d %s", r.StatusCode(), r.Header.PeekCookie(sessionCookie))
	}
	if r := testRequest(s, "GET", "/session", "", cookie); r.StatusCode() != 401 {
		t.Fatalf("session after logout: %d", r.StatusCode())
	}

	r = testRequest(s, "GET", "/assets/app.js", "")
	etag := string(r.Header.Peek("ETag"))
	if r.StatusCode() != 200 || !strings.HasPrefix(string(r.Header.ContentType()), "text/javascript") || etag == "" ||
		!strings.Contains(string(r.Header.Peek("Content-Security-Policy")), "script-src 'self'") {
		t.Fatalf("asset: %d %q %q", r.StatusCode(), r.Header.ContentType(), etag)
	}
	if r := testRequest(s, "GET", "/assets/app.js", "", "If-None-Match: "+etag); r.StatusCode() != 304 {
		t.Fatalf("revalidation: %d", r.StatusCode())
	}
	if r := testRequest(s, "GET", "/assets/app.js", "", "Accept-Encoding: gzip"); string(r.Header.Peek("Content-Encoding")) != "gzip" {
		t.Fatal("no gzip")
	}
	for _, p := range []string{"/assets/nope.js", "/assets/../index.html", "/assets/%2e%2e/login.html", "/assets/"} {
		if r := testRequest(s, "GET", p, ""); r.StatusCode() != 404 {
			t.Errorf("%s: %d", p, r.StatusCode())
		}
	}
}

// Behind a TLS-terminating proxy the cookie is still Secure and __Host-
// prefixed, and the https Origin of the page is this origin.
func TestDashboardBehindTLSProxy(t *testing.T) {
	s, _ := newTestServer(t)
	r := testRequest(s, "POST", "/login", "token=adm_secret", "Content-Type: application/x-www-form-urlencoded",
		"X-Forwarded-Proto: https", "Origin: https://127.0.0.1:8081")
	raw := string(r.Header.PeekCookie(sessionCookieTLS))
	if r.StatusCode() != 303 || !strings.Contains(raw, "secure") || !strings.HasPrefix(raw, sessionCookieTLS+"=") {
		t.Fatalf("login behind a proxy: %d %q", r.StatusCode(), raw)
	}
	var ck fasthttp.Cookie
	_ = ck.ParseBytes(r.Header.PeekCookie(sessionCookieTLS))
	cookie := "Cookie: " + sessionCookieTLS + "=" + string(ck.Value())
	r = testRequest(s, "GET", "/session", "", cookie, "X-Forwarded-Proto: https")
	var sv sessionView
	if err := json.Unmarshal(r.Body(), &sv); err != nil {
		t.Fatalf("session: %d %s", r.StatusCode(), r.Body())
	}
	if r := testRequest(s, "POST", "/admin/v1/projects", `{"name":"p"}`, cookie, "X-Forwarded-Proto: https",
		"Origin: https://127.0.0.1:8081", "X-CSRF-Token: "+sv.CSRFToken); r.StatusCode() != 201 {
		t.Fatalf("create behind a proxy: %d %s", r.StatusCode(), r.Body())
	}
	if r := testRequest(s, "POST", "/admin/v1/projects", `{"name":"p"}`, cookie, "X-Forwarded-Proto: https",
		"Origin: https://127.0.0.1:8082", "X-CSRF-Token: "+sv.CSRFToken); r.StatusCode() != 403 {
		t.Fatalf("another port is another origin: %d", r.StatusCode())
	}
	// Without the header the plain cookie name applies: the __Host- cookie is not looked at.
	if r := testRequest(s, "GET", "/session", "", cookie); r.StatusCode() != 401 {
		t.Fatalf("plain request with the __Host- cookie: %d", r.StatusCode())
	}
}
