package test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
)

// The web dashboard (docs/dashboard.md): security over loopback against the
// real binary, and the end-to-end tour in headless Chromium driven by
// test/browser/dashboard.mjs. `make test` installs Chromium and the npm
// package first; without them the browser test skips and says why.

// noRedirect keeps 303s visible to the checks.
var noRedirect = &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// dashSession is a logged-in dashboard client.
type dashSession struct {
	base   string
	cookie *http.Cookie
	csrf   string
	client *http.Client
}

// dashLogin logs in with a form post, as the login page does.
func dashLogin(t *testing.T, base, token string, client *http.Client) *dashSession {
	t.Helper()
	if client == nil {
		client = noRedirect
	}
	req, _ := http.NewRequest("POST", base+"/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	checkContract(t, resp.Request, resp.StatusCode, resp.Header, body)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/" {
		t.Fatalf("login: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var c *http.Cookie
	for _, ck := range resp.Cookies() {
		if strings.HasSuffix(ck.Name, "eventd_session") {
			c = ck
		}
	}
	if c == nil {
		t.Fatalf("login set no session cookie: %v", resp.Header["Set-Cookie"])
	}
	d := &dashSession{base: base, cookie: c, client: client}
	r := d.do(t, "GET", "/session", nil)
	if r.Status != 200 {
		t.Fatalf("GET /session: %d %s", r.Status, r.Body)
	}
	d.csrf = r.JSON(t)["csrf_token"].(string)
	return d
}

// do sends a request with the session cookie; headers are "Name: value",
// and a CSRF token is added only when asked for with "X-CSRF-Token: !".
func (d *dashSession) do(t *testing.T, method, path string, body any, headers ...string) *Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, d.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if d.cookie != nil {
		req.AddCookie(d.cookie)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		v = strings.TrimSpace(v)
		if k == "X-CSRF-Token" && v == "!" {
			v = d.csrf
		}
		req.Header.Set(k, v)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	// resp.Request: after a followed redirect, the request that got this answer.
	checkContract(t, resp.Request, resp.StatusCode, resp.Header, b)
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// TestDashboardNoAccessWithoutSession: no page and no admin call works
// without a session or the token; a forged cookie is no session.
func TestDashboardNoAccessWithoutSession(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "p", "", nil)
	s.Key(t, p, "secret", "test")
	anon := &dashSession{base: s.Admin, client: noRedirect}
	forged := &dashSession{base: s.Admin, client: noRedirect, cookie: &http.Cookie{Name: "eventd_session", Value: "forged_0123456789abcdefghijklmnopqrstuvwxyzABC"}}
	calls := []struct{ method, path string }{
		{"GET", "/session"}, {"POST", "/logout"},
		{"GET", "/admin/v1/projects"}, {"POST", "/admin/v1/projects"}, {"GET", "/admin/v1/projects/" + p},
		{"PATCH", "/admin/v1/projects/" + p}, {"DELETE", "/admin/v1/projects/" + p},
		{"GET", "/admin/v1/projects/" + p + "/keys"}, {"POST", "/admin/v1/projects/" + p + "/keys"},
		{"DELETE", "/admin/v1/keys/key_x"}, {"GET", "/admin/v1/projects/" + p + "/usage"},
		{"GET", "/admin/v1/projects/" + p + "/analytics?environment=test"},
		{"GET", "/admin/v1/projects/" + p + "/stream?environment=test"},
		{"GET", "/admin/v1/projects/" + p + "/event-definitions"}, {"GET", "/admin/v1/projects/" + p + "/goals"},
		{"GET", "/admin/v1/projects/" + p + "/funnels"}, {"GET", "/admin/v1/projects/" + p + "/webhooks"},
		{"GET", "/admin/v1/projects/" + p + "/alerts"}, {"GET", "/admin/v1/projects/" + p + "/export?environment=test"},
		{"GET", "/debug/pprof/heap"},
	}
	for _, who := range []*dashSession{anon, forged} {
		for _, c := range calls {
			r := who.do(t, c.method, c.path, map[string]any{}, "Origin: "+s.Admin, "X-CSRF-Token: x")
			if r.Status != 401 {
				t.Errorf("%s %s (cookie %v): %d, want 401: %s", c.method, c.path, who.cookie != nil, r.Status, r.Body)
			}
		}
		// Pages send the browser to the login page instead.
		r := who.do(t, "GET", "/", nil)
		if r.Status != 303 || r.Header.Get("Location") != "/login" || bytes.Contains(r.Body, []byte("app.js")) {
			t.Errorf("GET / without a session: %d %q", r.Status, r.Header.Get("Location"))
		}
	}
	// The token still works alone, and so does the page with it.
	if r := Do(t, "GET", s.Admin+"/", s.Token, nil); r.Status != 200 || !bytes.Contains(r.Body, []byte("/assets/app.js")) {
		t.Fatalf("GET / with the admin token: %d", r.Status)
	}
	// The login page and the static code are public: they hold no data.
	for _, path := range []string{"/login", "/assets/app.css", "/assets/app.js", "/assets/pages/keys.js"} {
		if r := anon.do(t, "GET", path, nil); r.Status != 200 {
			t.Errorf("GET %s: %d", path, r.Status)
		}
	}
}

func TestDashboardLoginAndCookie(t *testing.T) {
	s := Start(t)
	// A wrong token: 401, the page again, no cookie.
	req, _ := http.NewRequest("POST", s.Admin+"/login", strings.NewReader("token=adm_wrong"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || len(resp.Cookies()) != 0 || !bytes.Contains(body, []byte("not the admin token")) {
		t.Fatalf("wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	// Login CSRF: a form on another site cannot log this browser in.
	req, _ = http.NewRequest("POST", s.Admin+"/login", strings.NewReader("token="+s.Token))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	resp, _ = noRedirect.Do(req)
	resp.Body.Close()
	if resp.StatusCode != 403 || len(resp.Cookies()) != 0 {
		t.Fatalf("login from another origin: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}

	d := dashLogin(t, s.Admin, s.Token, nil)
	r := Do(t, "POST", s.Admin+"/login", "", map[string]string{"token": s.Token})
	raw := r.Header.Get("Set-Cookie")
	for _, want := range []string{"eventd_session=", "HttpOnly", "SameSite=Strict", "path=/"} {
		if !strings.Contains(strings.ToLower(raw), strings.ToLower(want)) {
			t.Errorf("Set-Cookie %q lacks %s", raw, want)
		}
	}
	if strings.Contains(strings.ToLower(raw), "secure") || strings.Contains(strings.ToLower(raw), "domain=") {
		t.Errorf("Set-Cookie over plain HTTP %q: no Secure, no Domain expected", raw)
	}
	if !d.cookie.HttpOnly || d.cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie %+v", d.cookie)
	}
	// The app page, with the headers that keep it to itself.
	page := d.do(t, "GET", "/", nil)
	if page.Status != 200 {
		t.Fatalf("GET / with a session: %d", page.Status)
	}
	csp := page.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %s", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") || page.Header.Get("X-Frame-Options") != "DENY" ||
		page.Header.Get("X-Content-Type-Options") != "nosniff" || page.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("page headers %v", page.Header)
	}
	sess := d.do(t, "GET", "/session", nil).JSON(t)
	if sess["idle_timeout"] != float64(12*3600) {
		t.Errorf("default idle timeout %v, want 12 h", sess["idle_timeout"])
	}
}

// TestDashboardSecureCookieOverTLS: with TLS the cookie is Secure and
// __Host- prefixed, so a browser never sends it over plain HTTP.
func TestDashboardSecureCookieOverTLS(t *testing.T) {
	certFile, keyFile := selfSignedCert(t)
	s := Start(t, "--tls-cert", certFile, "--tls-key", keyFile)
	base := strings.Replace(s.Admin, "http://", "https://", 1)
	tlsClient := &http.Client{Timeout: 30 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	d := dashLogin(t, base, s.Token, tlsClient)
	if d.cookie.Name != "__Host-eventd_session" || !d.cookie.Secure || !d.cookie.HttpOnly || d.cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("TLS cookie %+v", d.cookie)
	}
	if r := d.do(t, "POST", "/admin/v1/projects", map[string]any{"name": "tls"}, "X-CSRF-Token: !", "Origin: "+base); r.Status != 201 {
		t.Fatalf("create over TLS with the session: %d %s", r.Status, r.Body)
	}
	if r := d.do(t, "POST", "/admin/v1/projects", map[string]any{"name": "tls"}, "X-CSRF-Token: !", "Origin: "+strings.Replace(s.Public, "http://", "https://", 1)); r.Status != 403 {
		t.Fatalf("the public listener is another origin: %d", r.Status)
	}
}

func TestDashboardCSRF(t *testing.T) {
	s := Start(t)
	d := dashLogin(t, s.Admin, s.Token, nil)
	p := s.Project(t, "csrf", "", nil)
	cases := []struct {
		name    string
		method  string
		path    string
		headers []string
		status  int
	}{
		{"create without the CSRF token", "POST", "/admin/v1/projects", []string{"Origin: " + s.Admin}, 403},
		{"create with a wrong CSRF token", "POST", "/admin/v1/projects", []string{"Origin: " + s.Admin, "X-CSRF-Token: " + strings.Repeat("a", 43)}, 403},
		{"create from a foreign origin", "POST", "/admin/v1/projects", []string{"Origin: http://evil.example", "X-CSRF-Token: !"}, 403},
		{"create from the public listener", "POST", "/admin/v1/projects", []string{"Origin: " + s.Public, "X-CSRF-Token: !"}, 403},
		{"cross-site fetch metadata", "POST", "/admin/v1/projects", []string{"Sec-Fetch-Site: cross-site", "X-CSRF-Token: !"}, 403},
		{"delete without the CSRF token", "DELETE", "/admin/v1/projects/" + p, nil, 403},
		{"key without the CSRF token", "POST", "/admin/v1/projects/" + p + "/keys", nil, 403},
		{"read from a foreign origin", "GET", "/admin/v1/projects", []string{"Origin: http://evil.example"}, 403},
		{"logout without the CSRF token", "POST", "/logout", nil, 403},
		{"create, same origin, with the token", "POST", "/admin/v1/projects", []string{"Origin: " + s.Admin, "Sec-Fetch-Site: same-origin", "X-CSRF-Token: !"}, 201},
		{"read, same origin", "GET", "/admin/v1/projects/" + p, []string{"Sec-Fetch-Site: same-origin"}, 200},
	}
	for _, c := range cases {
		r := d.do(t, c.method, c.path, map[string]any{"name": "x", "type": "secret", "environment": "test"}, c.headers...)
		if r.Status != c.status {
			t.Errorf("%s: %d, want %d: %s", c.name, r.Status, c.status, r.Body)
		}
		if c.status == 403 && !strings.Contains(string(r.Body), `"forbidden"`) {
			t.Errorf("%s: body %s", c.name, r.Body)
		}
	}
	if r := s.AdminDo(t, "GET", "/admin/v1/projects/"+p, nil); r.Status != 200 {
		t.Fatal("a refused DELETE deleted the project")
	}
	// The live feed: a WebSocket from another origin carries the cookie
	// only if SameSite were ignored; refused either way.
	key := s.Key(t, p, "secret", "test")
	ws := strings.Replace(s.Admin, "http://", "ws://", 1) + "/admin/v1/projects/" + p + "/stream?environment=test"
	hdr := http.Header{"Cookie": {d.cookie.Name + "=" + d.cookie.Value}, "Origin": {"http://evil.example"}}
	if _, resp, err := websocket.DefaultDialer.Dial(ws, hdr); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("cross-origin live feed: err %v, resp %v", err, resp)
	}
	hdr.Set("Origin", s.Admin)
	c, _, err := websocket.DefaultDialer.Dial(ws, hdr)
	if err != nil {
		t.Fatalf("same-origin live feed: %v", err)
	}
	defer c.Close()
	wantStatus(t, Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "through_the_feed"}), 201)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, msg, err := c.ReadMessage()
	if err != nil || !strings.Contains(string(msg), "through_the_feed") {
		t.Fatalf("feed message %s, %v", msg, err)
	}
	// Logging out closes the session's feeds at once (the idle timeout here is 12 h).
	wantStatus(t, d.do(t, "POST", "/logout", nil, "X-CSRF-Token: !", "Origin: "+s.Admin), 204)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, _, err := c.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("feed after logout: %v, want a 1001 close", err)
	}
}

func TestDashboardLogoutAndExpiry(t *testing.T) {
	s := Start(t, "--session-idle", "1s")
	p := s.Project(t, "exp", "", nil)
	key := s.Key(t, p, "secret", "test")

	// Logout ends the session and its live feed.
	d := dashLogin(t, s.Admin, s.Token, nil)
	ws := strings.Replace(s.Admin, "http://", "ws://", 1) + "/admin/v1/projects/" + p + "/stream?environment=test"
	c, _, err := websocket.DefaultDialer.Dial(ws, http.Header{"Cookie": {d.cookie.Name + "=" + d.cookie.Value}, "Origin": {s.Admin}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := d.do(t, "POST", "/logout", nil, "X-CSRF-Token: !", "Origin: "+s.Admin)
	if r.Status != 204 || !strings.Contains(strings.ToLower(r.Header.Get("Set-Cookie")), "max-age=0") {
		t.Fatalf("logout: %d, Set-Cookie %q", r.Status, r.Header.Get("Set-Cookie"))
	}
	if r := d.do(t, "GET", "/admin/v1/projects", nil); r.Status != 401 {
		t.Fatalf("admin call after logout: %d", r.Status)
	}
	if r := d.do(t, "GET", "/", nil); r.Status != 303 {
		t.Fatalf("page after logout: %d", r.Status)
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	for {
		if _, _, err := c.ReadMessage(); err != nil {
			if websocket.IsUnexpectedCloseError(err, websocket.CloseGoingAway) {
				t.Fatalf("feed after logout ended with %v, want a 1001 close", err)
			}
			break
		}
	}

	// Activity keeps a session; a second without a request ends it.
	d = dashLogin(t, s.Admin, s.Token, nil)
	for range 4 {
		time.Sleep(400 * time.Millisecond)
		if r := d.do(t, "GET", "/admin/v1/projects", nil); r.Status != 200 {
			t.Fatalf("active session ended: %d", r.Status)
		}
	}
	time.Sleep(1300 * time.Millisecond)
	if r := d.do(t, "GET", "/admin/v1/projects", nil); r.Status != 401 {
		t.Fatalf("after 1.3 s idle (timeout 1 s): %d", r.Status)
	}
	if r := d.do(t, "GET", "/session", nil); r.Status != 401 {
		t.Fatalf("GET /session after expiry: %d", r.Status)
	}
	// Keys are not sessions: the API key still works.
	wantStatus(t, Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "still_fine"}), 201)
}

func selfSignedCert(t *testing.T) (string, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(k)
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	_ = os.WriteFile(cf, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(kf, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return cf, kf
}

// ---------------------------------------------------------------- browser

// dashDriver is a running dashboard.mjs.
type dashDriver struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	next   int
	stderr *bytes.Buffer
	mu     sync.Mutex
}

// dashStartDriver starts the driver, or skips when Chromium, node or
// playwright-core is missing (make test installs them).
func dashStartDriver(t *testing.T) *dashDriver {
	t.Helper()
	p := startDriver(t, "dashboard.mjs", "dashboard browser test")
	d := &dashDriver{t: t, cmd: p.cmd, stdin: p.stdin, lines: p.lines, stderr: p.stderr}
	return d
}

// call runs one driver command and decodes its value into out (if not nil).
func (d *dashDriver) call(out any, op string, args ...any) {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next++
	cmd := map[string]any{"id": d.next, "op": op}
	for i := 0; i+1 < len(args); i += 2 {
		cmd[args[i].(string)] = args[i+1]
	}
	line, _ := json.Marshal(cmd)
	if _, err := d.stdin.Write(append(line, '\n')); err != nil {
		d.t.Fatalf("driver %s: %v\n%s", op, err, d.stderr)
	}
	select {
	case l, ok := <-d.lines:
		if !ok {
			d.t.Fatalf("driver exited during %s\n%s", op, d.stderr)
		}
		var r struct {
			ID    int             `json:"id"`
			OK    bool            `json:"ok"`
			Value json.RawMessage `json:"value"`
			Error string          `json:"error"`
		}
		if err := json.Unmarshal(l, &r); err != nil || r.ID != d.next {
			d.t.Fatalf("driver answer to %s: %s", op, l)
		}
		if !r.OK {
			d.t.Fatalf("driver %s %v: %s", op, args, r.Error)
		}
		if out != nil {
			if err := json.Unmarshal(r.Value, out); err != nil {
				d.t.Fatalf("driver %s: %s: %v", op, r.Value, err)
			}
		}
	case <-time.After(30 * time.Second):
		d.t.Fatalf("driver %s timed out\n%s", op, d.stderr)
	}
}

// signInOnPhone opens a page 390 px wide in a mobile context and signs in.
func signInOnPhone(d *dashDriver, s *Server) *dashUI {
	d.call(nil, "context", "name", "phone", "width", 390, "height", 844, "mobile", true)
	d.call(nil, "page", "ctx", "phone", "name", "m")
	m := &dashUI{d: d, page: "m", base: s.Admin}
	m.signIn(s.Token)
	return m
}

// dashUI is one browser page of the dashboard with shorthand for the tour.
type dashUI struct {
	d    *dashDriver
	page string
	base string
	shot func(name string)
}

func (u *dashUI) goTo(path string) { u.d.call(nil, "goto", "page", u.page, "url", u.base+path) }

// signIn signs in on the login page with token and waits for the dashboard.
func (u *dashUI) signIn(token string) {
	u.goTo("/login")
	u.fill("Admin token", token)
	u.click("button", "Sign in")
	u.ready()
}
func (u *dashUI) fill(label, value string, within ...string) {
	u.d.call(nil, "fill", "page", u.page, "label", label, "value", value, "within", first(within))
}
func (u *dashUI) sel(label, value string, within ...string) {
	u.d.call(nil, "select", "page", u.page, "label", label, "value", value, "within", first(within))
}
func (u *dashUI) click(role, name string, within ...string) {
	u.d.call(nil, "click", "page", u.page, "role", role, "name", name, "within", first(within))
}
func (u *dashUI) waitText(text string, within ...string) {
	u.d.call(nil, "waitText", "page", u.page, "text", text, "within", first(within))
}
func (u *dashUI) waitFor(js string) { u.d.call(nil, "waitFunction", "page", u.page, "js", js) }
func (u *dashUI) ready() {
	u.d.call(nil, "waitSelector", "page", u.page, "selector", "body[data-ready=true]")
}
func (u *dashUI) eval(js string, out any) {
	u.d.call(out, "eval", "page", u.page, "js", js)
}
func (u *dashUI) str(js string) string {
	var s string
	u.eval(js, &s)
	return s
}

// nav follows a link of the side navigation and waits for its page.
func (u *dashUI) nav(name, heading string) {
	u.click("link", name, "#nav")
	u.waitFor(fmt.Sprintf(`document.getElementById('page-title') && document.getElementById('page-title').textContent.startsWith(%q) && !document.querySelector('main .loading')`, heading))
}

// labelled fails when a form control of the current page has no accessible name.
func (u *dashUI) labelled(t *testing.T, where string) {
	t.Helper()
	var bad []string
	u.eval(`[...document.querySelectorAll('input, select, textarea')]
		.filter((e) => e.type !== 'hidden' && !e.closest('[hidden]') && !e.labels.length && !e.getAttribute('aria-label') && !e.getAttribute('aria-labelledby'))
		.map((e) => e.outerHTML.slice(0, 120))`, &bad)
	if len(bad) > 0 {
		t.Errorf("%s: controls without a label: %v", where, bad)
	}
}

func first(s []string) string {
	if len(s) > 0 {
		return s[0]
	}
	return ""
}

// TestDashboardBrowser is the tour of the issue: log in, create a project,
// create a key and read it once, send events with it, see them in the live
// feed and in the chart, define an event and get a 422 for a bad property,
// revoke the key and get 401. It also takes the screenshots of
// docs/images when EVENTD_SCREENSHOTS names a directory.
func TestDashboardBrowser(t *testing.T) {
	start := time.Now()
	d := dashStartDriver(t)
	s := Start(t)
	shots := os.Getenv("EVENTD_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if abs, err := filepath.Abs(shots); err == nil {
		shots = abs
	}
	d.call(nil, "context", "name", "desk", "width", 1280, "height", 860)
	d.call(nil, "page", "ctx", "desk", "name", "d")
	u := &dashUI{d: d, page: "d", base: s.Admin}
	u.shot = func(name string) {
		d.call(nil, "screenshot", "page", "d", "path", filepath.Join(shots, "dashboard-"+name+".png"))
	}

	// Hooks land here (test-environment webhooks may reach loopback).
	var hookMu sync.Mutex
	var hookHits []http.Header
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hookMu.Lock()
		hookHits = append(hookHits, r.Header.Clone())
		hookMu.Unlock()
		w.WriteHeader(204)
	}))
	t.Cleanup(hook.Close)

	// Driver failures end the subtest that made the call.
	run := func(name string, f func(t *testing.T)) {
		t.Run(name, func(st *testing.T) {
			d.t = st
			defer func() { d.t = t }()
			f(st)
		})
	}
	var projectID, key string
	var hist history
	send := func(event string, props map[string]any, visitor string) *Response {
		body := map[string]any{"event": event, "properties": props}
		if visitor != "" {
			body["visitor_id"] = visitor
		}
		return Do(t, "POST", s.Public+"/events", key, body)
	}

	run("log in", func(t *testing.T) {
		u.goTo("/")
		if url := u.str("location.pathname"); url != "/login" {
			t.Fatalf("without a session / shows %s", url)
		}
		u.shot("login")
		var focus string
		d.call(&focus, "focused", "page", "d")
		if focus != "input#token" {
			t.Errorf("focus on the login page is %q, want the token field", focus)
		}
		u.fill("Admin token", "adm_wrong")
		u.click("button", "Sign in")
		u.waitText("not the admin token")
		u.fill("Admin token", s.Token)
		u.click("button", "Sign in")
		u.ready()
		var cookies []struct {
			Name     string `json:"name"`
			HTTPOnly bool   `json:"httpOnly"`
			SameSite string `json:"sameSite"`
			Secure   bool   `json:"secure"`
		}
		d.call(&cookies, "cookies", "ctx", "desk")
		if len(cookies) != 1 || cookies[0].Name != "eventd_session" || !cookies[0].HTTPOnly || cookies[0].SameSite != "Strict" {
			t.Fatalf("cookies %+v", cookies)
		}
		if c := u.str("document.cookie"); c != "" {
			t.Fatalf("script can read cookies: %q", c)
		}
		var stored int
		u.eval("Object.keys(localStorage).filter((k) => /token|key|csrf|session/i.test(k) && !/^eventd\\.(project|env)$/.test(k)).length + Object.keys(sessionStorage).length", &stored)
		if stored != 0 {
			t.Fatal("the dashboard keeps a secret in web storage")
		}
		// Keyboard users reach the skip link first.
		d.call(nil, "press", "page", "d", "key", "Tab")
		if txt := u.str("document.activeElement.textContent"); txt != "Skip to content" {
			t.Errorf("first Tab stop %q, want the skip link", txt)
		}
	})

	run("create a project", func(t *testing.T) {
		u.waitText("New project")
		u.labelled(t, "projects")
		u.fill("Project name", "Storefront")
		u.sel("Plan", "professional")
		u.click("button", "Create project")
		u.waitFor(`document.getElementById('page-title') && document.getElementById('page-title').textContent === 'API keys'`)
		m := regexp.MustCompile(`#/p/([^/]+)/test/keys$`).FindStringSubmatch(u.str("location.hash"))
		if m == nil {
			t.Fatalf("after creating a project: %s", u.str("location.hash"))
		}
		projectID = m[1]
		if r := s.AdminDo(t, "GET", "/admin/v1/projects/"+projectID, nil); r.Status != 200 || r.JSON(t)["plan"] != "professional" {
			t.Fatalf("project: %d %s", r.Status, r.Body)
		}
		// The test environment is marked as such.
		if u.str("document.getElementById('env-banner').hidden ? 'hidden' : 'shown'") != "shown" || u.str("document.body.className") != "env-test" {
			t.Fatal("test environment not marked")
		}
	})

	run("create a key, shown once", func(t *testing.T) {
		u.labelled(t, "keys")
		u.fill("Key name", "Backend")
		u.sel("Type", "secret")
		u.click("button", "Create test key")
		d.call(nil, "waitSelector", "page", "d", "selector", "[data-testid=new-key]")
		d.call(&key, "value", "page", "d", "selector", "[data-testid=new-key]")
		if !regexp.MustCompile(`^sk_test_[0-9A-Za-z]{32}$`).MatchString(key) {
			t.Fatalf("key shown %q", key)
		}
		u.waitText("will not be shown again")
		u.click("button", "Copy", ".secret-once")
		var clip string
		u.eval("navigator.clipboard.readText()", &clip)
		if clip != key {
			t.Errorf("clipboard %q, want the key", clip)
		}
		u.shot("keys")
		u.click("button", "I have copied it")
		d.call(nil, "reload", "page", "d")
		u.ready()
		u.waitText("Backend", "table")
		var again bool
		u.eval(fmt.Sprintf("document.documentElement.outerHTML.includes(%q)", key), &again)
		if again {
			t.Fatal("the key is shown again after a reload")
		}
		u.waitText(key[:12]+"…", "table") // the prefix is what stays
		wantStatus(t, send("warmup", nil, ""), 201)
		hist = dashHistory(time.Now())
		for i := 0; i < len(hist.events); i += 100 {
			r := Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": hist.events[i:min(i+100, len(hist.events))]})
			wantStatus(t, r, 201)
			if bytes.Contains(r.Body, []byte(`"status":"rejected"`)) {
				t.Fatalf("history rejected: %s", r.Body)
			}
		}
	})

	run("events arrive in the live feed", func(t *testing.T) {
		u.nav("Live events", "Live events")
		u.waitFor(`document.querySelector('[data-testid=feed-status]').textContent === 'Live'`)
		u.labelled(t, "live")
		for i := range 3 {
			wantStatus(t, send("signup", map[string]any{"plan": "pro"}, fmt.Sprintf("v_%d", i)), 201)
		}
		wantStatus(t, send("purchase", map[string]any{"amount": 49.5}, "v_1"), 201)
		u.waitFor(`document.querySelectorAll('[data-testid=feed] li').length === 4`)
		if got := u.str(`[...document.querySelectorAll('[data-testid=feed] li')].map((li) => li.dataset.event).join(',')`); got != "purchase,signup,signup,signup" {
			t.Fatalf("feed %s, want newest first", got)
		}
		// Pause holds new events back and counts them.
		u.click("button", "Pause")
		wantStatus(t, send("while_paused", nil, ""), 201)
		u.waitFor(`document.querySelector('[data-testid=feed-status]').textContent.startsWith('Paused: 1 new')`)
		if u.str(`String(!!document.querySelector('[data-event=while_paused]'))`) != "false" {
			t.Fatal("a paused feed showed a new event")
		}
		u.click("button", "Resume")
		u.waitFor(`!!document.querySelector('[data-testid=feed] li[data-event=while_paused]')`)
		// A filter narrows the feed on the open connection.
		u.fill("Event names", "purchase")
		u.click("button", "Apply filters")
		u.waitFor(`document.querySelector('[data-testid=feed-status]').textContent === 'Live, filtered'`)
		wantStatus(t, send("signup", map[string]any{"plan": "free"}, "v_9"), 201)
		wantStatus(t, send("purchase", map[string]any{"amount": 120}, "v_2"), 201)
		u.waitFor(`document.querySelectorAll('[data-testid=feed] li[data-event=purchase]').length === 2`)
		if n := u.str(`String(document.querySelectorAll('[data-testid=feed] li[data-event=signup]').length)`); n != "3" {
			t.Fatalf("%s signups shown with the purchase filter, want the 3 from before", n)
		}
		u.shot("live")
	})

	run("events show in the chart", func(t *testing.T) {
		// The tour sent warmup, 4 signups, 2 purchases and while_paused, from visitors v_0, v_1, v_2 and v_9.
		total := len(hist.events) + 8
		for _, v := range []string{"v_0", "v_1", "v_2", "v_9"} {
			hist.visitors[v] = true
		}
		u.nav("Analytics", "Analytics")
		u.waitFor(fmt.Sprintf(`document.querySelector('[data-testid=total-events]') && document.querySelector('[data-testid=total-events]').textContent === %q`, fmtThousands(total)))
		var chart struct {
			Total string `json:"total"`
			Paths int    `json:"paths"`
			Label string `json:"label"`
		}
		u.eval(`(() => { const f = document.querySelector('figure[data-chart=timeseries]');
			return { total: f.dataset.total, paths: f.querySelectorAll('svg path.series-line').length, label: f.querySelector('svg').getAttribute('aria-label') }; })()`, &chart)
		if chart.Total != fmt.Sprint(total) || chart.Paths != 1 || !strings.Contains(chart.Label, fmt.Sprintf("%d events", total)) {
			t.Fatalf("chart %+v", chart)
		}
		// HyperLogLog: exact or within one at this size.
		if v, _ := strconv.Atoi(u.str(`document.querySelector('[data-testid=unique-visitors]').textContent`)); v < len(hist.visitors)-1 || v > len(hist.visitors)+1 {
			t.Errorf("unique visitors %d, want %d", v, len(hist.visitors))
		}
		u.waitFor(fmt.Sprintf(`(document.querySelector('figure[data-chart=bars] svg') || {getAttribute: () => ''}).getAttribute('aria-label').includes('signup %d,')`,
			hist.byName["signup"]+4))
		u.fill("Property name", "plan")
		u.click("button", "Break down")
		u.waitFor(`(() => { const svg = document.querySelector('form[aria-labelledby=bd-title] figure[data-chart=bars] svg');
			return !!svg && svg.getAttribute('aria-label').includes('pro ` + strconv.Itoa(hist.byPlan["pro"]+3) + `'); })()`)
		u.labelled(t, "analytics")
		u.shot("analytics")
	})

	run("profiles", func(t *testing.T) {
		// Profiles come from the Segment /v1 routes; until they land the
		// view shows its empty states: the list and a lookup that misses.
		u.nav("Profiles", "Profiles")
		u.waitText("No profiles in the test environment yet.")
		u.labelled(t, "profiles")
		u.fill("User id or anonymous id", "user/42")
		u.click("button", "Show profile")
		u.waitText("No profile or linked id “user/42” in the test environment.")
	})

	run("define an event, a bad property gets 422", func(t *testing.T) {
		u.nav("Event definitions", "Event definitions")
		u.click("button", "Define signup")
		u.fill("Display name", "Sign-up")
		u.fill("Category", "growth")
		u.click("button", "Add property")
		u.fill("Property name", "plan")
		u.sel("Type", "string")
		d.call(nil, "check", "page", "d", "label", "Required")
		u.labelled(t, "definitions")
		u.click("button", "Create definition")
		u.waitText("plan: string, required", "table")
		r := send("signup", map[string]any{"referrer": "x"}, "v_5")
		if m := wantError(t, r, 422, "validation_error", ""); m["details"].(map[string]any)["properties.plan"] == nil {
			t.Fatalf("422 without details.properties.plan: %s", r.Body)
		}
		r = send("signup", map[string]any{"plan": 5}, "v_5")
		wantError(t, r, 422, "validation_error", "")
		wantStatus(t, send("signup", map[string]any{"plan": "team"}, "v_5"), 201)
		u.shot("definitions")
	})

	run("goals and funnels", func(t *testing.T) {
		u.nav("Goals and funnels", "Goals and funnels")
		u.fill("Goal name", "Purchased", "#goal-form")
		u.fill("Event", "purchase", "#goal-form")
		u.click("button", "Create goal")
		u.waitText("Purchased", "table")
		u.fill("Funnel name", "Sign-up to purchase", "#funnel-form")
		u.fill("Steps", "signup, purchase", "#funnel-form")
		u.click("button", "Create funnel")
		u.waitFor(`!!document.querySelector('figure[data-chart=funnel] svg')`)
		wantStatus(t, send("purchase", map[string]any{"amount": 10}, "v_0"), 201)
		u.labelled(t, "goals")
		// Goals are evaluated after the commit, off the request path.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			r := s.AdminDo(t, "GET", "/admin/v1/projects/"+projectID+"/analytics?environment=test&type=goals", nil)
			wantStatus(t, r, 200)
			if bytes.Contains(r.Body, []byte(`"completions":1`)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("goal not completed: %s", r.Body)
			}
		}
		d.call(nil, "reload", "page", "d")
		u.ready()
		u.waitFor(`!!document.querySelector('figure[data-chart=funnel] svg') && !!document.querySelector('figure[data-chart=bars] svg') &&
			[...document.querySelectorAll('table tbody tr')].some((tr) => tr.cells[0].textContent === 'Purchased' && tr.cells[3].textContent === '1')`)
		u.shot("goals")
	})

	run("webhooks and alerts", func(t *testing.T) {
		u.nav("Webhooks and alerts", "Webhooks and alerts")
		u.fill("Endpoint URL", hook.URL+"/eventd")
		d.call(nil, "check", "page", "d", "label", "goal.completed: a visitor completed a goal")
		u.click("button", "Create webhook")
		var secret string
		d.call(nil, "waitSelector", "page", "d", "selector", "[data-testid=webhook-secret]")
		d.call(&secret, "value", "page", "d", "selector", "[data-testid=webhook-secret]")
		if !strings.HasPrefix(secret, "whsec_") {
			t.Fatalf("secret %q", secret)
		}
		u.click("button", "I have copied it")
		u.click("button", "Send a test to "+hook.URL+"/eventd")
		u.waitText("succeeded", "section[aria-labelledby=deliveries-title] table")
		hookMu.Lock()
		n := len(hookHits)
		signed := n > 0 && strings.HasPrefix(hookHits[n-1].Get("Webhook-Signature"), "v1,")
		hookMu.Unlock()
		if !signed {
			t.Fatalf("test send: %d requests at the endpoint, signed %v", n, signed)
		}
		u.sel("Window", "minute")
		u.fill("Threshold (% of the limit)", "50")
		u.click("button", "Create alert")
		u.waitText("50%", "section[aria-labelledby=alerts-title] table")
		u.labelled(t, "webhooks")
		u.shot("webhooks")
	})

	run("plan and usage against limits", func(t *testing.T) {
		u.nav("Settings", "Project settings")
		u.labelled(t, "settings")
		u.fill("Allowed origins", "https://shop.example.com")
		u.sel("Plan", "free")
		u.click("button", "Save changes")
		u.waitText("In force now: 100 / 5,000 / 50,000")
		if r := s.AdminDo(t, "GET", "/admin/v1/projects/"+projectID, nil); r.JSON(t)["plan"] != "free" {
			t.Fatalf("after saving: %s", r.Body)
		}
		u.shot("settings")
		u.nav("Usage", "Usage")
		u.waitFor(`!!document.querySelector('section[aria-label="Usage of key Backend"] figure[data-chart=meters] svg')`)
		label := u.str(`document.querySelector('section[aria-label="Usage of key Backend"] svg').getAttribute('aria-label')`)
		if !regexp.MustCompile(`Standard, per minute \d+ of 100, .*Standard, per day \d+ of 50,000`).MatchString(label) {
			t.Fatalf("usage chart %q", label)
		}
		u.shot("usage")
	})

	run("stream cursors", func(t *testing.T) {
		base := "/admin/v1/projects/" + projectID + "/cursors/etl"
		wantStatus(t, s.AdminDo(t, "POST", base+"/reset?environment=test", map[string]any{"to": "1970-01-01T00:00:00Z"}), 200)
		u.nav("Stream cursors", "Stream cursors")
		u.waitText("etl", "table")
		u.waitText("not connected", "table")
		u.labelled(t, "cursors")
		u.shot("cursors")
		u.click("button", "Reset cursor etl to the head")
		u.waitText("skips the", "dialog")
		u.click("button", "Reset to head", "dialog")
		u.waitFor(`[...document.querySelectorAll('main table td')].some((td) => td.textContent === '0')`)
		u.click("button", "Delete cursor etl")
		u.click("button", "Delete cursor", "dialog")
		u.waitText("No cursors in the test environment yet")
		if r := s.AdminDo(t, "GET", "/admin/v1/projects/"+projectID+"/cursors?environment=test", nil); !strings.Contains(string(r.Body), `"data":[]`) {
			t.Fatalf("after delete: %s", r.Body)
		}
	})

	run("switch to live", func(t *testing.T) {
		u.nav("API keys", "API keys")
		d.call(nil, "check", "page", "d", "label", "Live")
		u.waitText("No live keys yet.")
		if u.str("location.hash") != "#/p/"+projectID+"/live/keys" || u.str("document.body.className") != "env-live" ||
			u.str("document.getElementById('env-banner').hidden ? 'hidden' : 'shown'") != "hidden" {
			t.Fatalf("after the switch: %s %s", u.str("location.hash"), u.str("document.body.className"))
		}
		d.call(nil, "check", "page", "d", "label", "Test")
		u.waitText("Backend", "table")
	})

	run("phone width", func(t *testing.T) {
		m := signInOnPhone(d, s)
		titles := map[string]string{"analytics": "Analytics", "live": "Live events", "keys": "API keys", "webhooks": "Webhooks and alerts"}
		for _, pg := range []string{"analytics", "live", "keys", "webhooks"} {
			m.goTo("/#/p/" + projectID + "/test/" + pg)
			m.ready()
			m.waitFor(fmt.Sprintf(`document.title.startsWith(%q) && !document.querySelector('main .loading') && !!document.querySelector('main table, main figure, main .feed')`, titles[pg]))
			var overflow int
			m.eval("document.documentElement.scrollWidth - window.innerWidth", &overflow)
			if overflow > 1 {
				t.Errorf("%s at 390 px is %d px too wide", pg, overflow)
			}
			if pg == "analytics" {
				m.waitFor(`!!document.querySelector('figure[data-chart=timeseries] svg')`)
			}
			if pg == "analytics" || pg == "live" {
				d.call(nil, "screenshot", "page", "m", "path", filepath.Join(shots, "dashboard-phone-"+pg+".png"))
			}
		}
	})

	run("pages whose API the server lacks", func(t *testing.T) {
		// As against an eventd without goals, funnels, webhooks and alerts.
		d.call(nil, "context", "name", "old")
		for _, r := range []string{"goals", "funnels", "webhooks", "alerts", "profiles"} {
			d.call(nil, "missing", "ctx", "old", "pattern", "**/admin/v1/projects/*/"+r+"**")
		}
		d.call(nil, "page", "ctx", "old", "name", "o")
		o := &dashUI{d: d, page: "o", base: s.Admin}
		o.signIn(s.Token)
		o.goTo("/#/p/" + projectID + "/test/goals")
		o.waitText("Goals: not available on this server.")
		o.waitText("Funnels: not available on this server.")
		o.goTo("/#/p/" + projectID + "/test/webhooks")
		o.waitText("Webhooks: not available on this server.")
		o.waitText("Usage alerts: not available on this server.")
		o.goTo("/#/p/" + projectID + "/test/profiles")
		o.waitText("Profiles: not available on this server.")
		// The rest still works.
		o.goTo("/#/p/" + projectID + "/test/keys")
		o.waitText("Backend", "table")
		d.call(nil, "close", "page", "o")
	})

	run("revoke the key, then 401", func(t *testing.T) {
		u.click("button", "Revoke key Backend")
		u.waitText("stops working at once", "dialog")
		u.click("button", "Revoke key", "dialog")
		u.waitText("revoked", "table")
		deadline := time.Now().Add(2 * time.Second)
		for {
			r := send("after_revoke", nil, "")
			if r.Status == 401 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("revoked key still answers %d", r.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	run("all projects", func(t *testing.T) {
		u.click("link", "All projects", "#nav")
		u.waitText("Storefront", "table")
		u.shot("projects")
	})

	run("sign out", func(t *testing.T) {
		u.click("button", "Sign out")
		u.waitText("You are signed out")
		u.goTo("/")
		if p := u.str("location.pathname"); p != "/login" {
			t.Fatalf("after sign-out / shows %s", p)
		}
	})

	run("no errors, no foreign requests", func(t *testing.T) {
		for _, pg := range []string{"d", "m"} {
			var problems, reqs []string
			d.call(&problems, "problems", "page", pg)
			d.call(&reqs, "requests", "page", pg)
			for _, p := range problems {
				// The login page answers a wrong token with 401, and the profile
				// lookup of an unknown id gets 404; Chromium logs both.
				login401 := strings.Contains(p, "status of 401") && strings.HasSuffix(p, "/login")
				profile404 := strings.Contains(p, "status of 404") && strings.Contains(p, "/profiles/user%2F42?")
				if !login401 && !profile404 {
					t.Errorf("page %s: %s", pg, p)
				}
			}
			for _, r := range reqs {
				if !strings.HasPrefix(r, s.Admin+"/") && !strings.HasPrefix(r, strings.Replace(s.Admin, "http://", "ws://", 1)+"/") {
					t.Errorf("page %s asked %s", pg, r)
				}
			}
		}
	})
	t.Logf("dashboard tour: %v", time.Since(start).Round(time.Millisecond))
}

// history is a week of made-up traffic for the charts: each visitor views
// pages, and some sign up, add to the cart, check out and buy.
type history struct {
	events   []map[string]any
	byName   map[string]int
	byPlan   map[string]int
	visitors map[string]bool
}

func dashHistory(now time.Time) history {
	h := history{byName: map[string]int{}, byPlan: map[string]int{}, visitors: map[string]bool{}}
	rng := mrand.New(mrand.NewPCG(6, 2026))
	plans := []string{"free", "pro", "team"}
	add := func(name, visitor, plan string, at time.Time, props map[string]any) {
		props["plan"] = plan
		h.events = append(h.events, map[string]any{"event": name, "visitor_id": visitor, "properties": props,
			"timestamp": at.UTC().Format(time.RFC3339Nano)})
		h.byName[name]++
		h.byPlan[plan]++
		h.visitors[visitor] = true
	}
	for v := range 60 {
		visitor := fmt.Sprintf("h_%02d", v)
		plan := plans[rng.IntN(len(plans))]
		// Between 6.5 days and 2 hours ago, so the 7-day range holds it all.
		at := now.Add(-2*time.Hour - time.Duration(rng.Int64N(int64(150*time.Hour))))
		for range 1 + rng.IntN(4) {
			add("pageview", visitor, plan, at, map[string]any{"path": []string{"/", "/pricing", "/docs"}[rng.IntN(3)]})
			at = at.Add(time.Duration(1+rng.IntN(5)) * time.Minute)
		}
		steps := []string{"signup", "add_to_cart", "checkout", "purchase"}
		for i, step := range steps {
			if rng.Float64() > []float64{0.6, 0.7, 0.7, 0.8}[i] {
				break
			}
			props := map[string]any{}
			if step == "purchase" {
				props["amount"] = float64(5+rng.IntN(200)) + 0.99
			}
			add(step, visitor, plan, at, props)
			at = at.Add(time.Duration(1+rng.IntN(20)) * time.Minute)
		}
	}
	return h
}

// fmtThousands writes n as the dashboard shows it in an English locale.
func fmtThousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
