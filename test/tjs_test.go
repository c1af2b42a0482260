package test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The browser test of t.js: headless Chromium (driven by test/browser/driver.mjs
// through playwright-core) loads pages served here on loopback, on origins
// other than eventd's, and the checks read eventd back with a secret key.
// `make test` installs Chromium and the npm package first; without them the
// test skips and says why.

// TestTJSServed checks the script's HTTP contract on the real server.
func TestTJSServed(t *testing.T) {
	s := Start(t)
	r := Do(t, "GET", s.Public+"/t.js", "", nil)
	wantStatus(t, r, 200)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/javascript") {
		t.Fatalf("Content-Type %q", ct)
	}
	etag, cc := r.Header.Get("ETag"), r.Header.Get("Cache-Control")
	if etag == "" || !strings.Contains(cc, "max-age=") || r.Header.Get("X-Request-Id") == "" {
		t.Fatalf("ETag %q, Cache-Control %q", etag, cc)
	}
	if !bytes.Contains(r.Body, []byte("/events/batch")) {
		t.Fatalf("body does not look like t.js: %.80s", r.Body)
	}
	r304 := Do(t, "GET", s.Public+"/t.js", "", nil, "If-None-Match: "+etag)
	if r304.Status != 304 || len(r304.Body) != 0 {
		t.Fatalf("If-None-Match: %d, %d bytes", r304.Status, len(r304.Body))
	}
	// Raw transport so Go does not decode gzip for us: the wire size is what the budget is about.
	req, _ := http.NewRequest("GET", s.Public+"/t.js", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	gz, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" || len(gz) >= 3072 {
		t.Fatalf("gzip: Content-Encoding %q, %d bytes (budget 3072)", resp.Header.Get("Content-Encoding"), len(gz))
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	if plain, _ := io.ReadAll(zr); !bytes.Equal(plain, r.Body) {
		t.Fatal("gzip body differs from the plain one")
	}
	t.Logf("t.js: %d bytes, %d gzipped", len(r.Body), len(gz))
}

// tjsBrowser is a running driver.mjs.
type tjsBrowser struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	next   int
	stderr *bytes.Buffer
}

// tjsStartBrowser starts the driver, or skips the test when Chromium, node or
// playwright-core is missing (make test installs them).
func tjsStartBrowser(t *testing.T) *tjsBrowser {
	t.Helper()
	p := startDriver(t, "driver.mjs", "browser test")
	b := &tjsBrowser{t: t, cmd: p.cmd, stdin: p.stdin, lines: p.lines, stderr: p.stderr}
	return b
}

// call runs one driver command and returns its value.
func (b *tjsBrowser) call(op string, args map[string]any) json.RawMessage {
	b.t.Helper()
	b.next++
	cmd := map[string]any{"id": b.next, "op": op}
	for k, v := range args {
		cmd[k] = v
	}
	line, _ := json.Marshal(cmd)
	if _, err := b.stdin.Write(append(line, '\n')); err != nil {
		b.t.Fatalf("driver %s: %v\n%s", op, err, b.stderr)
	}
	select {
	case l, ok := <-b.lines:
		if !ok {
			b.t.Fatalf("driver exited during %s\n%s", op, b.stderr)
		}
		var r struct {
			ID    int             `json:"id"`
			OK    bool            `json:"ok"`
			Value json.RawMessage `json:"value"`
			Error string          `json:"error"`
		}
		if err := json.Unmarshal(l, &r); err != nil || r.ID != b.next {
			b.t.Fatalf("driver answer to %s: %s", op, l)
		}
		if !r.OK {
			b.t.Fatalf("driver %s %v: %s", op, args, r.Error)
		}
		return r.Value
	case <-time.After(30 * time.Second):
		b.t.Fatalf("driver %s timed out\n%s", op, b.stderr)
	}
	return nil
}

// eval runs js in the page and decodes the result into out (if not nil).
func (b *tjsBrowser) eval(page, js string, out any) {
	b.t.Helper()
	v := b.call("eval", map[string]any{"page": page, "js": js})
	if out != nil {
		if err := json.Unmarshal(v, out); err != nil {
			b.t.Fatalf("eval %s: %s: %v", js, v, err)
		}
	}
}

type tjsNetEntry struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Body    string            `json:"body"`
	Headers map[string]string `json:"headers"`
	Status  int               `json:"status"`
	Failure string            `json:"failure"`
	T       int64             `json:"t"`
}

func (b *tjsBrowser) net(page string) []tjsNetEntry {
	b.t.Helper()
	var out []tjsNetEntry
	if err := json.Unmarshal(b.call("net", map[string]any{"page": page}), &out); err != nil {
		b.t.Fatal(err)
	}
	return out
}

type tjsEvent struct {
	ID         string         `json:"id"`
	Event      string         `json:"event"`
	VisitorID  string         `json:"visitor_id"`
	Properties map[string]any `json:"properties"`
	Timestamp  string         `json:"timestamp"`
}

// tjsWait polls GET /events until query matches at least n events and
// returns them (full, via GET /events/{id}), newest first.
func tjsWait(t *testing.T, s *Server, secret, query string, n int, within time.Duration) []tjsEvent {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := Do(t, "GET", s.Public+"/events?limit=100&"+query, secret, nil)
		wantStatus(t, r, 200)
		var l struct {
			Data []tjsEvent `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &l); err != nil {
			t.Fatal(err)
		}
		if len(l.Data) >= n {
			out := make([]tjsEvent, len(l.Data))
			for i, e := range l.Data {
				g := Do(t, "GET", s.Public+"/events/"+e.ID, secret, nil)
				wantStatus(t, g, 200)
				if err := json.Unmarshal(g.Body, &out[i]); err != nil {
					t.Fatal(err)
				}
			}
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %d events for %q, want %d", within, len(l.Data), query, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tjsCount is the number of stored events matching query.
func tjsCount(t *testing.T, s *Server, secret, query string) int {
	t.Helper()
	r := Do(t, "GET", s.Public+"/events?limit=1&"+query, secret, nil)
	wantStatus(t, r, 200)
	var l struct {
		Pagination struct {
			Total int `json:"total"`
		} `json:"pagination"`
	}
	_ = json.Unmarshal(r.Body, &l)
	return l.Pagination.Total
}

// tjsSite serves page.html on its own loopback origin.
func tjsSite(t *testing.T, eventd, key string) *httptest.Server {
	t.Helper()
	tmpl, err := os.ReadFile(filepath.Join("testdata", "tjs", "page.html"))
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attrs := ""
		switch {
		case strings.HasPrefix(r.URL.Path, "/dnt"):
			attrs = "data-respect-dnt"
		case r.URL.Query().Get("api") != "":
			// ?api=<base URL>: send the events elsewhere with data-api.
			attrs = `data-api="` + r.URL.Query().Get("api") + `"`
		case r.URL.Path == "/favicon.ico":
			http.NotFound(w, r)
			return
		}
		page := strings.NewReplacer("{{EVENTD}}", eventd, "{{KEY}}", key, "{{ATTRS}}", attrs,
			"{{TITLE}}", "Test page "+r.URL.Path).Replace(string(tmpl))
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, page)
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// tjsStub is an endpoint in front of eventd for data-api: it answers the
// first batches itself as told (429 with Retry-After, 400) and forwards the
// rest, recording when each batch arrived.
type tjsStub struct {
	mu      sync.Mutex
	plan    []int // statuses to answer before forwarding
	arrived []tjsStubHit
}

type tjsStubHit struct {
	at     time.Time
	body   string
	status int
}

func (st *tjsStub) hits() []tjsStubHit {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]tjsStubHit(nil), st.arrived...)
}

func tjsStartStub(t *testing.T, eventd string, st *tjsStub) *httptest.Server {
	t.Helper()
	target, _ := url.Parse(eventd)
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		st.mu.Lock()
		status := 0
		if strings.Contains(string(body), "no_retry") {
			status = 400
		} else if len(st.plan) > 0 {
			status, st.plan = st.plan[0], st.plan[1:]
		}
		st.arrived = append(st.arrived, tjsStubHit{at: time.Now(), body: string(body), status: status})
		st.mu.Unlock()
		if status == 0 {
			rp.ServeHTTP(w, r)
			return
		}
		// The page may read these only if CORS lets it, as eventd's own answers do.
		w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
		w.Header().Set("Access-Control-Expose-Headers", "Retry-After")
		w.Header().Set("Content-Type", "application/json")
		if status == 429 {
			w.Header().Set("Retry-After", "2")
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":"stub","message":"answered by the test stub"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestTJSBrowser(t *testing.T) {
	b := tjsStartBrowser(t)
	s := Start(t)
	p := s.Project(t, "browser", "", map[string]int64{"minute": 100000, "hour": 1000000, "day": 10000000})
	pk := s.Key(t, p, "public", "live")
	sk := s.Key(t, p, "secret", "live")
	site := tjsSite(t, s.Public, pk)
	evil := tjsSite(t, s.Public, pk) // same pages, another origin (another port)
	r := s.AdminDo(t, "PATCH", "/admin/v1/projects/"+p, map[string]any{"allowed_origins": []string{site.URL}})
	wantStatus(t, r, 200)

	b.call("context", map[string]any{"name": "c1"})
	b.call("page", map[string]any{"ctx": "c1", "name": "p1"})
	var vid string

	t.Run("pageview on load, sent by the 5 s timer", func(t *testing.T) {
		b.call("goto", map[string]any{"page": "p1", "url": site.URL + "/index.html?utm_source=news&utm_medium=email&utm_campaign=launch&x=1"})
		b.eval("p1", "eventd.visitorId()", &vid)
		var stored string
		b.eval("p1", "localStorage.getItem('eventd_vid')", &stored)
		if len(vid) != 32 || stored != vid {
			t.Fatalf("visitor id %q, localStorage %q", vid, stored)
		}
		evs := tjsWait(t, s, sk, "event=pageview", 1, 10*time.Second)
		pv := evs[0]
		pr := pv.Properties
		if pv.VisitorID != vid || pr["path"] != "/index.html" || !strings.HasPrefix(pr["url"].(string), site.URL+"/index.html?utm_source=news") ||
			pr["title"] != "Test page /index.html" || pr["referrer"] != "" || pr["utm_source"] != "news" || pr["utm_medium"] != "email" ||
			pr["utm_campaign"] != "launch" || pr["x"] != nil {
			t.Fatalf("pageview %+v", pv)
		}
		if w, _ := pr["screen_width"].(float64); w <= 0 {
			t.Fatalf("screen_width %v", pr["screen_width"])
		}
		if _, ok := pr["screen_height"].(float64); !ok {
			t.Fatalf("screen_height %v", pr["screen_height"])
		}
		// Enriched at ingest from the browser's own User-Agent (a public
		// key): headless Chromium says HeadlessChrome, which crawler lists
		// call a bot, flagged and stored all the same.
		t.Logf("enriched: $browser %v, $os %v, $device %v, $bot %v", pr["$browser"], pr["$os"], pr["$device"], pr["$bot"])
		switch b := pr["$browser"]; b {
		case "HeadlessChrome":
			if pr["$bot"] != true || pr["$device"] != "bot" {
				t.Fatalf("headless pageview not flagged: %v", pr)
			}
		case "Chrome", "Chromium":
		default:
			t.Fatalf("$browser %v: %v", b, pr)
		}
		if pr["$os"] != "Linux" || pr["$referrer_source"] != "email" {
			t.Fatalf("enrichment %v", pr)
		}
		// eventdq calls made before the script loaded were replayed.
		q := tjsWait(t, s, sk, "event=queued_before_load", 1, 5*time.Second)
		if q[0].Properties["from"] != "eventdq" || q[0].VisitorID != vid {
			t.Fatalf("queued call %+v", q[0])
		}
		// The request was a simple CORS request: text/plain, key in the query, no preflight.
		nets := b.net("p1")
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			pending := len(nets) == 0
			for _, n := range nets {
				pending = pending || n.Status == 0
			}
			if !pending {
				break
			}
			nets = b.net("p1")
		}
		for _, n := range nets {
			if n.Method != "POST" || n.Status != 201 || !strings.HasPrefix(n.Headers["content-type"], "text/plain") ||
				n.Headers["authorization"] != "" || !strings.Contains(n.URL, "api_key="+pk) {
				t.Fatalf("batch request %+v", n)
			}
			// Pageviews travel alone so that they count in no rate-limit bucket.
			var body struct {
				Events []struct {
					Event string `json:"event"`
				} `json:"events"`
			}
			_ = json.Unmarshal([]byte(n.Body), &body)
			kinds := map[bool]int{}
			for _, e := range body.Events {
				kinds[e.Event == "pageview"]++
			}
			if len(kinds) != 1 {
				t.Fatalf("a batch mixes pageviews and other events: %s", n.Body)
			}
		}
	})

	t.Run("pageview on pushState and popstate, not on a same-URL replaceState", func(t *testing.T) {
		b.eval("p1", `history.pushState({}, '', '/app/step2?utm_source=ad'); history.replaceState({s: 1}, ''); eventd.flush()`, nil)
		evs := tjsWait(t, s, sk, "event=pageview", 2, 5*time.Second)
		pv := evs[0].Properties
		if pv["path"] != "/app/step2" || pv["url"] != site.URL+"/app/step2?utm_source=ad" || pv["utm_source"] != "ad" ||
			!strings.HasPrefix(pv["referrer"].(string), site.URL+"/index.html?") || evs[0].VisitorID != vid {
			t.Fatalf("pushState pageview %+v", evs[0])
		}
		b.eval("p1", `new Promise(r => { addEventListener('popstate', () => setTimeout(r, 10), {once: true}); history.back(); }).then(() => eventd.flush())`, nil)
		evs = tjsWait(t, s, sk, "event=pageview", 3, 5*time.Second)
		if evs[0].Properties["path"] != "/index.html" {
			t.Fatalf("popstate pageview %+v", evs[0])
		}
		time.Sleep(300 * time.Millisecond)
		if n := tjsCount(t, s, sk, "event=pageview"); n != 3 {
			t.Fatalf("%d pageviews, want 3 (replaceState to the same URL is not one)", n)
		}
	})

	t.Run("track arrives with its properties", func(t *testing.T) {
		b.eval("p1", `eventd.track('signup', {plan: 'pro', amount: 9.5, tags: ['a', 'b'], nested: {ok: true}}); eventd.flush()`, nil)
		e := tjsWait(t, s, sk, "event=signup", 1, 5*time.Second)[0]
		pr := e.Properties
		if e.VisitorID != vid || pr["plan"] != "pro" || pr["amount"] != 9.5 || fmt.Sprint(pr["tags"]) != "[a b]" ||
			fmt.Sprint(pr["nested"]) != "map[ok:true]" {
			t.Fatalf("signup %+v", e)
		}
		// A rejected entry is dropped with a console warning, not retried.
		b.eval("p1", `eventd.track('bad name!'); eventd.flush()`, nil)
		time.Sleep(500 * time.Millisecond)
		var logs []string
		_ = json.Unmarshal(b.call("console", map[string]any{"page": "p1"}), &logs)
		if !strings.Contains(strings.Join(logs, "\n"), "eventd:") {
			t.Fatalf("no console warning for the rejected event: %q", logs)
		}
	})

	t.Run("visitor id stable across reloads, new in a new browser profile", func(t *testing.T) {
		b.call("reload", map[string]any{"page": "p1"})
		var again string
		b.eval("p1", "eventd.visitorId()", &again)
		if again != vid {
			t.Fatalf("visitor id %q after reload, was %q", again, vid)
		}
		b.eval("p1", "eventd.flush()", nil)
		evs := tjsWait(t, s, sk, "event=pageview&visitor_id="+vid, 4, 5*time.Second)
		if evs[0].Properties["path"] != "/index.html" {
			t.Fatalf("pageview after reload %+v", evs[0])
		}
		var cookie string
		b.eval("p1", "document.cookie", &cookie)
		var cookies []any
		_ = json.Unmarshal(b.call("cookies", map[string]any{"ctx": "c1"}), &cookies)
		if cookie != "" || len(cookies) != 0 {
			t.Fatalf("cookies were set: %q %v", cookie, cookies)
		}
		b.call("context", map[string]any{"name": "c2"})
		b.call("page", map[string]any{"ctx": "c2", "name": "p2"})
		b.call("goto", map[string]any{"page": "p2", "url": site.URL + "/other.html"})
		var other string
		b.eval("p2", "eventd.visitorId()", &other)
		if other == "" || other == vid {
			t.Fatalf("a fresh profile got visitor id %q (first profile %q)", other, vid)
		}
		b.eval("p2", "eventd.identify('user_42'); eventd.track('after_identify'); eventd.flush()", nil)
		e := tjsWait(t, s, sk, "event=after_identify", 1, 5*time.Second)[0]
		if e.VisitorID != "user_42" {
			t.Fatalf("after identify: visitor %q", e.VisitorID)
		}
	})

	t.Run("events sent on page hide", func(t *testing.T) {
		// Queued, then the tab closes at once: only the pagehide flush (keepalive) can deliver it.
		b.eval("p1", `eventd.track('on_close', {n: 1})`, nil)
		b.call("close", map[string]any{"page": "p1"})
		e := tjsWait(t, s, sk, "event=on_close", 1, 5*time.Second)[0]
		if e.VisitorID != vid || e.Properties["n"] != float64(1) {
			t.Fatalf("on_close %+v", e)
		}
		// Navigating away hides the page too.
		b.eval("p2", `eventd.track('on_navigate')`, nil)
		b.call("goto", map[string]any{"page": "p2", "url": "about:blank"})
		tjsWait(t, s, sk, "event=on_navigate", 1, 5*time.Second)
		// Switching tabs (visibilitychange to hidden) sends at once, well before the 5 s timer.
		b.call("page", map[string]any{"ctx": "c2", "name": "p3"})
		b.call("goto", map[string]any{"page": "p3", "url": site.URL + "/third.html"})
		b.eval("p3", `eventd.track('on_hidden');
			Object.defineProperty(document, 'visibilityState', {value: 'hidden', configurable: true});
			document.dispatchEvent(new Event('visibilitychange'))`, nil)
		tjsWait(t, s, sk, "event=on_hidden", 1, 2*time.Second)
	})

	t.Run("CORS: another origin is refused and nothing is stored", func(t *testing.T) {
		b.call("context", map[string]any{"name": "c3"})
		b.call("page", map[string]any{"ctx": "c3", "name": "evil"})
		b.call("goto", map[string]any{"page": "evil", "url": evil.URL + "/index.html"})
		var evilVid string
		b.eval("evil", "eventd.visitorId()", &evilVid)
		b.eval("evil", `eventd.track('evil_event'); eventd.flush()`, nil)
		// The page's script only sees a network error; DevTools sees the 403 and the CORS failure.
		type wire struct {
			Status  int    `json:"status"`
			Failure string `json:"failure"`
			CORS    string `json:"cors"`
		}
		var refused, corsFailed int
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var log []wire
			_ = json.Unmarshal(b.call("wire", map[string]any{"page": "evil"}), &log)
			refused, corsFailed = 0, 0
			for _, w := range log {
				if w.Status == 403 {
					refused++
				}
				if w.CORS != "" {
					corsFailed++
				}
				if w.Status != 0 && w.Status != 403 {
					t.Fatalf("foreign origin got status %d", w.Status)
				}
			}
			if (refused >= 2 && corsFailed >= 2) || time.Now().After(deadline) {
				break
			}
		}
		if refused == 0 || corsFailed == 0 {
			t.Fatalf("foreign origin: %d answers 403, %d CORS failures seen; want both", refused, corsFailed)
		}
		// Preflight-free requests still reach the server, which refuses them: confirm the answer.
		r := Do(t, "POST", s.Public+"/events/batch?api_key="+pk, "", `{"events":[{"event":"evil_event"}]}`,
			"Origin: "+evil.URL, "Content-Type: text/plain")
		m := wantError(t, r, 403, "forbidden", "")
		if !strings.Contains(m["message"].(string), evil.URL) {
			t.Fatalf("403 message %q does not name the origin", m["message"])
		}
		if n := tjsCount(t, s, sk, "visitor_id="+evilVid) + tjsCount(t, s, sk, "event=evil_event"); n != 0 {
			t.Fatalf("%d events stored from the refused origin", n)
		}
	})

	t.Run("Do Not Track / Global Privacy Control with data-respect-dnt", func(t *testing.T) {
		b.call("context", map[string]any{"name": "c4"})
		b.call("page", map[string]any{"ctx": "c4", "name": "dnt",
			"init": `Object.defineProperty(Navigator.prototype, 'globalPrivacyControl', {get: () => true})`})
		b.call("goto", map[string]any{"page": "dnt", "url": site.URL + "/dnt.html"})
		var typ string
		b.eval("dnt", `eventd.track('dnt_event'); eventd.flush(); typeof eventd.track`, &typ)
		time.Sleep(500 * time.Millisecond)
		var stored any
		b.eval("dnt", "localStorage.getItem('eventd_vid')", &stored)
		if n := b.net("dnt"); typ != "function" || len(n) != 0 || stored != nil {
			t.Fatalf("with GPC: track is %s, %d requests, stored id %v", typ, len(n), stored)
		}
	})

	t.Run("retries honour Retry-After; other 4xx are not retried", func(t *testing.T) {
		st := &tjsStub{plan: []int{429}}
		stub := tjsStartStub(t, s.Public, st)
		b.call("context", map[string]any{"name": "c5"})
		b.call("page", map[string]any{"ctx": "c5", "name": "retry"})
		b.call("goto", map[string]any{"page": "retry", "url": site.URL + "/retry.html?api=" + url.QueryEscape(stub.URL)})
		b.eval("retry", `eventd.track('retried', {k: 'v'}); eventd.flush()`, nil)
		e := tjsWait(t, s, sk, "event=retried", 1, 10*time.Second)[0]
		if e.Properties["k"] != "v" {
			t.Fatalf("retried %+v", e)
		}
		h := st.hits()
		if len(h) < 2 || h[0].status != 429 {
			t.Fatalf("stub saw %d requests", len(h))
		}
		if gap := h[1].at.Sub(h[0].at); gap < 1900*time.Millisecond {
			t.Fatalf("retried after %v, Retry-After was 2 s", gap)
		}
		var first, second struct {
			Events []struct {
				Event string `json:"event"`
				Key   string `json:"idempotency_key"`
			} `json:"events"`
		}
		_ = json.Unmarshal([]byte(h[0].body), &first)
		_ = json.Unmarshal([]byte(h[1].body), &second)
		if len(first.Events) == 0 || len(second.Events) != len(first.Events) || first.Events[0].Key == "" || first.Events[0].Key != second.Events[0].Key {
			t.Fatalf("the retry did not resend the same entries with the same idempotency keys:\n%s\n%s", h[0].body, h[1].body)
		}
		if n := tjsCount(t, s, sk, "event=retried"); n != 1 {
			t.Fatalf("%d stored", n)
		}

		b.eval("retry", `eventd.track('no_retry'); eventd.flush()`, nil)
		time.Sleep(2500 * time.Millisecond) // longer than the first backoff step
		n := 0
		for _, hit := range st.hits() {
			if strings.Contains(hit.body, "no_retry") {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("a 400 was sent %d times, want once", n)
		}
	})
}
