package test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Issue 13 item 8: numbers must be finite float64 values; 1e999 is a 400
// like NaN on every way in, and nothing is stored.
func TestHardeningNonFiniteNumbers(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := s.Project(t, "finite", "", nil)
	key := s.Key(t, p, "secret", "test")
	for _, num := range []string{"1e999", "-1e999", "1.7976931348623159e308", strings.Repeat("9", 309)} {
		r := Do(t, "POST", s.Public+"/events", key, `{"event":"big","properties":{"x":`+num+`}}`)
		m := wantError(t, r, 400, "bad_request", "")
		if d, _ := m["details"].(map[string]any); !strings.Contains(d["body"].(string), "not a finite float64 value") {
			t.Errorf("%s: details %v", num, m["details"])
		}
		r = Do(t, "POST", s.Public+"/events/batch", key, `{"events":[{"event":"fine"},{"event":"big","properties":{"x":[`+num+`]}}]}`)
		wantError(t, r, 400, "bad_request", "")
	}
	// The largest finite value is fine and comes back as sent.
	wantStatus(t, Do(t, "POST", s.Public+"/events", key, `{"event":"max","properties":{"x":1.7976931348623157e308}}`), 201)

	res := s.importBody(t, p, "test", strings.NewReader(`{"event":"imp_ok"}`+"\n"+`{"event":"imp_big","properties":{"x":1e999}}`+"\n"), false)
	if res.Lines != 2 || res.Accepted != 1 || res.Rejected != 1 || len(res.Errors) != 1 || res.Errors[0].Line != 2 || res.Errors[0].Error != "bad_request" {
		t.Fatalf("import result %+v", res)
	}
	r := Do(t, "GET", s.Public+"/events", key, nil)
	wantStatus(t, r, 200)
	names := []string{}
	for _, e := range jarr(t, r.JSON(t)["data"]) {
		names = append(names, e.(map[string]any)["event"].(string))
	}
	if strings.Join(names, ",") != "imp_ok,max" && strings.Join(names, ",") != "max,imp_ok" {
		t.Fatalf("stored events %v, want only max and imp_ok", names)
	}
}

// Issue 13 item 9: the SSRF guard knows the special-purpose ranges (from
// code.dny.dev/ssrf) and refuses numeric host forms at creation, with the
// same 400 as any other bad webhook URL.
func TestHardeningWebhookURLGuard(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := s.Project(t, "ssrf", "", nil)
	base := "/admin/v1/projects/" + p + "/webhooks"
	cases := []struct {
		url, env, want string
	}{
		{"http://[::127.0.0.1]/", "live", "only reach public addresses"},
		{"http://[::127.0.0.1]/", "test", "can never be reached"},
		{"http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "live", "only reach public addresses"},
		{"http://[2002:7f00:1::1]/", "live", "only reach public addresses"},
		{"http://192.88.99.1/", "live", "only reach public addresses"},
		{"http://[64:ff9b::a00:1]/", "live", "only reach public addresses"},
		{"http://2130706433/", "live", "numeric forms"},
		{"http://0x7f.1/", "live", "numeric forms"},
		{"http://0177.0.0.1/", "test", "numeric forms"},
		{"http://127.1:9/", "test", "numeric forms"},
	}
	for _, c := range cases {
		r := s.AdminDo(t, "POST", base, map[string]any{"url": c.url, "environment": c.env, "kinds": []string{"event.created"}})
		m := wantError(t, r, 400, "bad_request", "")
		if d, _ := m["details"].(map[string]any); !strings.Contains(fmt.Sprint(d["url"]), c.want) {
			t.Errorf("%s (%s): details %v, want url: %q", c.url, c.env, m["details"], c.want)
		}
	}
	// An update is checked the same way.
	id, _ := createWebhook(t, s, p, map[string]any{"url": "https://hooks.example.com/x", "environment": "live", "kinds": []string{"event.created"}})
	r := s.AdminDo(t, "PUT", base+"/"+id, map[string]any{"url": "http://2130706433/", "environment": "live", "kinds": []string{"event.created"}})
	wantError(t, r, 400, "bad_request", "")
}

// Issue 13 item 10: a backup target inside --data (also through a symlink)
// or on a pseudo-filesystem is a 400 naming the rule, not a 201 or a 500.
func TestHardeningBackupTargets(t *testing.T) {
	t.Parallel()
	s := Start(t)
	outside := t.TempDir()
	link := filepath.Join(outside, "to-data")
	if err := os.Symlink(s.Dir, link); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ dir, want string }{
		{filepath.Join(s.Dir, "backup"), "must not be inside the data directory"},
		{filepath.Join(s.Dir, "pebble", "backup"), "must not be inside the data directory"},
		{s.Dir, "must not be inside the data directory"},
		{filepath.Join(link, "backup"), "must not be inside the data directory"},
		{"/proc/eventd-backup", "must not be on a pseudo-filesystem"},
		{"/proc/self/cwd/eventd-backup", "must not be on a pseudo-filesystem"},
		{"/sys/eventd-backup", "must not be on a pseudo-filesystem"},
		{"/dev/eventd-backup", "must not be on a pseudo-filesystem"},
		{"relative/backup", "absolute path"},
	}
	for _, c := range cases {
		r := s.AdminDo(t, "POST", "/admin/v1/backup", map[string]any{"dir": c.dir})
		m := wantError(t, r, 400, "bad_request", "")
		if d, _ := m["details"].(map[string]any); !strings.Contains(fmt.Sprint(d["dir"]), c.want) {
			t.Errorf("%s: details %v, want dir: %q", c.dir, m["details"], c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "backup")); !os.IsNotExist(err) {
		t.Errorf("a refused backup left %s/backup behind (%v)", s.Dir, err)
	}
	// The CLI shows the rule too.
	res := runCLI(t, nil, "backup", "--admin-url", s.Admin, "--admin-token", s.Token, filepath.Join(s.Dir, "bk"))
	if res.code == 0 || !strings.Contains(res.stderr, "400") || !strings.Contains(res.stderr, "must not be inside the data directory") {
		t.Errorf("eventd backup inside --data: exit %d, stderr %q", res.code, res.stderr)
	}
	// A directory outside is fine.
	wantStatus(t, s.AdminDo(t, "POST", "/admin/v1/backup", map[string]any{"dir": filepath.Join(outside, "ok")}), 201)
}

// Issue 13 item 12: every answer that carries a secret shown once says
// Cache-Control: no-store; the generated admin token is a 0600 file.
func TestHardeningSecretsNotCached(t *testing.T) {
	t.Parallel()
	s := StartNoToken(t)
	p := s.Project(t, "secrets", "", nil)
	noStore := func(what string, r *Response, status int) map[string]any {
		t.Helper()
		wantStatus(t, r, status)
		if got := r.Header.Values("Cache-Control"); len(got) != 1 || got[0] != "no-store" {
			t.Errorf("%s: Cache-Control %q, want no-store", what, got)
		}
		return r.JSON(t)
	}
	k := noStore("key create", s.AdminDo(t, "POST", "/admin/v1/projects/"+p+"/keys", map[string]any{"name": "k", "type": "secret", "environment": "live"}), 201)
	if !strings.HasPrefix(fmt.Sprint(k["key"]), "sk_live_") {
		t.Fatalf("key create: %v", k)
	}
	base := "/admin/v1/projects/" + p + "/webhooks"
	w := noStore("webhook create", s.AdminDo(t, "POST", base, map[string]any{"url": "https://hooks.example.com/x", "environment": "live", "kinds": []string{"event.created"}}), 201)
	if !strings.HasPrefix(fmt.Sprint(w["secret"]), "whsec_") {
		t.Fatalf("webhook create: %v", w)
	}
	rot := noStore("webhook rotate", s.AdminDo(t, "POST", base+"/"+w["id"].(string)+"/rotate-secret", nil), 200)
	if !strings.HasPrefix(fmt.Sprint(rot["secret"]), "whsec_") {
		t.Fatalf("rotate: %v", rot)
	}
	// A refused create carries no secret and needs no header; a list never shows secrets.
	if r := s.AdminDo(t, "GET", base, nil); strings.Contains(string(r.Body), "whsec_") {
		t.Errorf("webhook list shows a secret: %s", r.Body)
	}
	st, err := os.Stat(filepath.Join(s.Dir, "admin_token"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("admin_token: mode %v, want 0600", st.Mode().Perm())
	}
}

// Issue 13 item 14: help output names the environment variable of each flag
// but never shows its value; a bad environment value is a usage error
// (status 2) in every subcommand.
func TestHardeningFlagHelpAndEnvironment(t *testing.T) {
	t.Parallel()
	const secret = "adm_secret_from_the_environment_0123"
	secretDir := filepath.Join(t.TempDir(), "private-data-path")
	env := []string{"EVENTD_ADMIN_TOKEN=" + secret, "EVENTD_DATA=" + secretDir}
	for _, args := range [][]string{{"serve", "-h"}, {"projects", "list", "-h"}, {"keys", "create", "-h"}, {"import", "-h"}, {"export", "-h"}, {"backup", "-h"}} {
		r := runCLI(t, env, args...)
		out := r.stdout + r.stderr
		if r.code != 0 {
			t.Errorf("eventd %v: exit %d, want 0\n%s", args, r.code, out)
		}
		if strings.Contains(out, secret) || strings.Contains(out, secretDir) {
			t.Errorf("eventd %v shows an environment value:\n%s", args, out)
		}
		if !strings.Contains(out, "[$EVENTD_ADMIN_TOKEN]") || !strings.Contains(out, "[$EVENTD_DATA]") {
			t.Errorf("eventd %v: help does not name the variables:\n%s", args, out)
		}
	}
	if r := runCLI(t, nil, "serve", "-h"); !strings.Contains(r.stderr, "[$EVENTD_SHARDS]") || !strings.Contains(r.stderr, `(default "./data")`) {
		t.Errorf("serve -h: %s", r.stderr)
	}

	cases := []struct {
		env  string
		args []string
	}{
		{"EVENTD_SHARDS=abc", []string{"serve"}},
		{"EVENTD_STREAM_PING=soon", []string{"serve"}},
		{"EVENTD_WEBHOOKS_ALLOW_PRIVATE=perhaps", []string{"serve"}},
		{"EVENTD_QUIET=maybe", []string{"import", "--project", "proj_x", "/nonexistent.ndjson"}},
		{"EVENTD_FORCE=maybe", []string{"restore", "/nonexistent"}},
	}
	for _, c := range cases {
		name := c.env[:strings.IndexByte(c.env, '=')]
		r := runCLI(t, []string{c.env, "EVENTD_DATA=" + t.TempDir(), "EVENTD_LISTEN=127.0.0.1:0", "EVENTD_ADMIN_LISTEN=127.0.0.1:0"}, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, name) || !strings.Contains(r.stderr, "invalid value") {
			t.Errorf("%s eventd %v: exit %d, stderr %q; want 2 naming %s", c.env, c.args, r.code, r.stderr, name)
		}
	}
}

// Issue 13 item 7: serve refuses an admin token shorter than 24 characters
// with status 2 and a message that does not show the token.
func TestHardeningShortAdminToken(t *testing.T) {
	t.Parallel()
	base := []string{"EVENTD_LISTEN=127.0.0.1:0", "EVENTD_ADMIN_LISTEN=127.0.0.1:0"}
	const short = "adm_short1" // 10 characters
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"flag", nil, []string{"--admin-token", short}, "--admin-token (or EVENTD_ADMIN_TOKEN) is 10 characters long"},
		{"environment", []string{"EVENTD_ADMIN_TOKEN=" + short}, nil, "is 10 characters long"},
		{"23 characters", []string{"EVENTD_ADMIN_TOKEN=" + strings.Repeat("x", 23)}, nil, "is 23 characters long"},
	} {
		data := t.TempDir()
		r := runCLI(t, append(append([]string{"EVENTD_DATA=" + data}, base...), c.env...), append([]string{"serve"}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, "at least 24 characters") || strings.Contains(r.stderr, short) {
			t.Errorf("%s: exit %d, stderr %q", c.name, r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(data, "pebble")); !os.IsNotExist(err) {
			t.Errorf("%s: the store was opened before the token was checked (%v)", c.name, err)
		}
	}
	// A short token kept in <data>/admin_token is refused as well.
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "admin_token"), []byte(short+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, append([]string{"EVENTD_DATA=" + data}, base...), "serve")
	if r.code != 2 || !strings.Contains(r.stderr, "<data>/admin_token is 10 characters long") {
		t.Errorf("short kept token: exit %d, stderr %q", r.code, r.stderr)
	}
	// 24 characters are enough.
	s := startWithEnv(t, nil, strings.Repeat("k", 24))
	wantStatus(t, s.AdminDo(t, "GET", "/admin/v1/projects", nil), 200)
}

// startWithEnv is Start with extra environment variables and a chosen admin token.
func startWithEnv(t *testing.T, env []string, token string, extra ...string) *Server {
	t.Helper()
	s := &Server{t: t, Dir: t.TempDir(), Token: token, Args: extra, Env: env}
	s.start()
	t.Cleanup(func() {
		if s.cmd != nil {
			s.Kill()
		}
	})
	return s
}

// Issue 13 item 7: failed admin-token attempts per client address. The 6th
// failure in 10 minutes gets 429 with Retry-After 1; the dashboard login and
// the bearer API share the count; after the lockout the correct token passes
// and resets. (That a correct token is refused during a lockout, and the
// doubling, are checked with a controlled clock in http/authguard_test.go.)
func TestHardeningAdminTokenThrottle(t *testing.T) {
	t.Parallel()
	s := Start(t)
	projects := s.Admin + "/admin/v1/projects"
	wrong := func() *Response {
		t.Helper()
		return Do(t, "GET", projects, "adm_wrong_token_guess_0000000", nil)
	}
	for i := range 5 {
		r := wrong()
		wantError(t, r, 401, "unauthorized", "")
		if r.Header.Get("Retry-After") != "" {
			t.Fatalf("failure %d: Retry-After %q on a 401", i+1, r.Header.Get("Retry-After"))
		}
	}
	r := wrong()
	m := wantError(t, r, 429, "rate_limit_exceeded", "Too many failed admin token attempts from this address; retry later")
	if r.Header.Get("Retry-After") != "1" || m["retry_after"] != 1.0 {
		t.Fatalf("6th failure: Retry-After %q, body %s", r.Header.Get("Retry-After"), r.Body)
	}
	// Until the lockout ends, every attempt is 429 (the correct token too);
	// then the correct token passes.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := s.AdminDo(t, "GET", "/admin/v1/projects", nil)
		if r.Status == 200 {
			break
		}
		wantError(t, r, 429, "rate_limit_exceeded", "")
		if ra := r.Header.Get("Retry-After"); ra != "1" {
			t.Fatalf("Retry-After %q during the first lockout, want 1", ra)
		}
		if time.Now().After(deadline) {
			t.Fatal("the correct token was still refused 30 s after a 1 s lockout")
		}
		time.Sleep(100 * time.Millisecond) // polling interval, not synchronisation
	}
	// The success reset the count. The dashboard login counts with the bearer API.
	login := func(token string) *Response {
		t.Helper()
		return Do(t, "POST", s.Admin+"/login", "", map[string]string{"token": token}, "Origin: "+s.Admin)
	}
	for range 3 {
		wantError(t, login("adm_wrong_token_guess_0000000"), 401, "unauthorized", "")
	}
	wantError(t, wrong(), 401, "unauthorized", "")
	wantError(t, wrong(), 401, "unauthorized", "")
	r = login("adm_wrong_token_guess_0000000")
	wantError(t, r, 429, "rate_limit_exceeded", "")
	if r.Header.Get("Retry-After") != "1" {
		t.Fatalf("6th failure by login: Retry-After %q", r.Header.Get("Retry-After"))
	}
	if !strings.Contains(s.Logs(), "admin token attempts throttled") {
		t.Errorf("no log line for the lockout:\n%s", s.Logs())
	}
	metrics := Do(t, "GET", s.Admin+"/metrics", "", nil)
	if !strings.Contains(string(metrics.Body), "eventd_admin_auth_failures_total 12") {
		t.Errorf("metrics: %s", grepMetric(string(metrics.Body), "eventd_admin_auth"))
	}
}

func grepMetric(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// doHost sends a GET with the admin token and the given Host header.
func doHost(t *testing.T, s *Server, path, host string) *Response {
	t.Helper()
	req, err := http.NewRequest("GET", s.Admin+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	checkContract(t, req, resp.StatusCode, resp.Header, b)
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// Issue 13 item 7: --admin-host (EVENTD_ADMIN_HOST) answers 421 for another
// Host header on every admin-listener route; IP addresses always pass.
func TestHardeningAdminHost(t *testing.T) {
	t.Parallel()
	for _, viaEnv := range []bool{false, true} {
		var s *Server
		if viaEnv {
			s = startWithEnv(t, []string{"EVENTD_ADMIN_HOST=eventd.example.com,admin.internal"}, "adm_test_token_0123456789")
		} else {
			s = Start(t, "--admin-host", "eventd.example.com,admin.internal")
		}
		port := s.Admin[strings.LastIndexByte(s.Admin, ':')+1:]
		for _, path := range []string{"/admin/v1/projects", "/healthz", "/metrics", "/login", "/"} {
			for _, host := range []string{"evil.example", "evil.example:" + port, "eventd.example.com.evil.example", "localhost:" + port} {
				r := doHost(t, s, path, host)
				m := wantError(t, r, 421, "misdirected_request", "")
				if d, _ := m["details"].(map[string]any); d["host"] == nil {
					t.Errorf("%s Host %s: details %v", path, host, m["details"])
				}
			}
		}
		for _, host := range []string{"eventd.example.com", "EVENTD.example.com:" + port, "admin.internal:" + port, "127.0.0.1:" + port} {
			wantStatus(t, doHost(t, s, "/admin/v1/projects", host), 200)
		}
		// The public listener does not check.
		r, err := http.NewRequest("GET", s.Public+"/healthz", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Host = "evil.example"
		resp, err := client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("public listener with a foreign Host: %d", resp.StatusCode)
		}
	}
}
