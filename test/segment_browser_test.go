package test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Segment's browser SDK, analytics.js (npm @segment/analytics-next), in
// headless Chromium against eventd's Segment-compatible API (contract
// section 12), with no network: the UMD bundle and the chunks it loads
// lazily come from test/browser/node_modules through a test server on
// loopback, the source settings Segment's CDN would serve are given to
// AnalyticsBrowser.load (cdnSettings), and Chromium sends any request to a
// host that is not loopback to a proxy that is not there, so it fails
// (the test fails too: every request of the page is logged and checked).
// The checks read the wire (method, headers, bodies, answers) as the
// browser saw it, then what eventd stored, through GET /events with a
// secret key: names, visitor ids and properties mapped per contract
// section 12. `make test` installs Chromium and the npm packages; without
// them the test skips and says why.

// ajsVersion is the pinned @segment/analytics-next of test/browser/package.json.
const ajsVersion = "1.84.3"

// ajsPage loads dist/umd/index.js (global AnalyticsNext) and starts
// AnalyticsBrowser.load with the configuration the Go test put in
// {{CONFIG}}. The bundle sets its webpack public path, where it loads its
// chunks from, when it runs: getCDN() + "/analytics-next/bundles/", getCDN()
// being window.analytics._cdn if set (Segment's documented custom CDN
// setting, as in the snippet: analytics._cdn = "https://...") and
// https://cdn.segment.com otherwise; AnalyticsBrowser.load's cdnURL comes
// too late for that. So the page sets _cdn to this server before the
// bundle runs, and this server serves the bundle's folder at
// /analytics-next/bundles/; cdnURL says the same for what else would go to
// the CDN (getCDN: next-integrations, remote plugins).
const ajsPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>analytics.js test page</title>
<script>window.analytics = {_cdn: location.origin};</script>
<script src="/analytics-next/bundles/index.js"></script>
<script>
window.ajsErrors = [];
const cfg = {{CONFIG}};
window.ajs = AnalyticsNext.AnalyticsBrowser.load(cfg.settings, cfg.options);
window.ajs.on('error', (e) => window.ajsErrors.push(e.code + ': ' + String(e.reason)));
window.ajs.catch((e) => window.ajsErrors.push('load: ' + String(e)));
</script></head>
<body><h1>analytics.js</h1></body></html>`

// ajsBundles is where the page and the bundle look for the bundle's files.
const ajsBundles = "/analytics-next/bundles/"

// ajsSite serves the page (any /page/<config>.html) and the UMD bundle's
// folder at /analytics-next/bundles/ on its own loopback origin.
func ajsSite(t *testing.T, dist string, configs map[string]map[string]any) *httptest.Server {
	t.Helper()
	files := http.StripPrefix(ajsBundles, http.FileServer(http.Dir(dist)))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, ajsBundles) {
			files.ServeHTTP(w, r)
			return
		}
		name, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/page/"), ".html")
		cfg, found := configs[name]
		if !ok || !found || !strings.HasPrefix(r.URL.Path, "/page/") {
			http.NotFound(w, r)
			return
		}
		js, _ := json.Marshal(cfg)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, strings.Replace(ajsPage, "{{CONFIG}}", string(js), 1))
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// ajsRequest is one request of the page as the driver logged it.
type ajsRequest struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Type    string            `json:"type"`
	Body    string            `json:"body"`
	Headers map[string]string `json:"headers"`
	Status  int               `json:"status"`
	Failure string            `json:"failure"`
	Done    bool              `json:"done"`
}

func (b *tjsBrowser) requests(page string) []ajsRequest {
	b.t.Helper()
	var out []ajsRequest
	if err := json.Unmarshal(b.call("requests", map[string]any{"page": page}), &out); err != nil {
		b.t.Fatal(err)
	}
	return out
}

// ajsSettle waits until every request the page made so far has its answer
// or its failure (bounded) and returns the log.
func ajsSettle(t *testing.T, b *tjsBrowser, page string, within time.Duration) []ajsRequest {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rs := b.requests(page)
		pending := 0
		for _, r := range rs {
			if !r.Done {
				pending++
			}
		}
		if pending == 0 {
			return rs
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, %d of the page's %d requests have no answer yet: %+v", within, pending, len(rs), rs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ajsCheckLoopback fails the test for any request to a host that is not one
// of the two test servers: the network is closed, and analytics.js must
// take nothing from cdn.segment.com or api.segment.io.
func ajsCheckLoopback(t *testing.T, rs []ajsRequest, allowed ...string) {
	t.Helper()
	for _, r := range rs {
		u, err := url.Parse(r.URL)
		if err != nil {
			t.Fatalf("request to %q: %v", r.URL, err)
		}
		ok := false
		for _, a := range allowed {
			ok = ok || u.Scheme+"://"+u.Host == a
		}
		if !ok {
			t.Errorf("the page requested %s %s (%s), which is neither test server (%v); failure %q", r.Method, r.URL, r.Type, allowed, r.Failure)
		}
	}
}

// ajsMessage is what analytics.js puts in the body of one /v1/<letter> request.
type ajsMessage struct {
	Type        string         `json:"type"`
	Event       string         `json:"event"`
	Name        string         `json:"name"`
	Category    string         `json:"category"`
	UserID      string         `json:"userId"`
	GroupID     string         `json:"groupId"`
	PreviousID  string         `json:"previousId"`
	AnonymousID string         `json:"anonymousId"`
	MessageID   string         `json:"messageId"`
	WriteKey    string         `json:"writeKey"`
	Timestamp   string         `json:"timestamp"`
	SentAt      string         `json:"sentAt"`
	Properties  map[string]any `json:"properties"`
	Traits      map[string]any `json:"traits"`
	Context     struct {
		Library   map[string]any `json:"library"`
		Page      map[string]any `json:"page"`
		UserAgent string         `json:"userAgent"`
	} `json:"context"`
}

// ajsStart starts the driver, or skips the test saying what is missing.
func ajsStart(t *testing.T) (*tjsBrowser, string) {
	t.Helper()
	dist, _ := filepath.Abs(filepath.Join("browser", "node_modules", "@segment", "analytics-next", "dist", "umd"))
	if _, err := os.Stat(filepath.Join(dist, "index.js")); err != nil {
		t.Skipf("SKIP analytics.js browser test: %s is missing: test/browser/node_modules lacks @segment/analytics-next %s (run `make browser-deps`, i.e. npm ci in test/browser)", filepath.Join(dist, "index.js"), ajsVersion)
	}
	t.Setenv("EVENTD_LOOPBACK_ONLY", "1") // driver.mjs: requests to other hosts fail in the browser
	p := startDriver(t, "driver.mjs", "analytics.js browser test")
	return &tjsBrowser{t: t, cmd: p.cmd, stdin: p.stdin, lines: p.lines, stderr: p.stderr}, dist
}

// ajsConfig is the page configuration: AnalyticsBrowser.load's settings
// (writeKey, cdnURL, and cdnSettings, the source settings Segment's CDN
// would serve, so that none are fetched) and its options, where the
// Segment.io integration's apiHost and protocol go (Segment's documented
// way to send to another API host; only there do they also move the
// remote metrics, which otherwise go to api.segment.io). segmentio are
// more settings of that integration (deliveryStrategy).
func ajsConfig(writeKey, eventd, site string, segmentio map[string]any) map[string]any {
	sio := map[string]any{"apiHost": strings.TrimPrefix(eventd, "http://") + "/v1", "protocol": "http"}
	for k, v := range segmentio {
		sio[k] = v
	}
	return map[string]any{
		"settings": map[string]any{
			"writeKey": writeKey,
			"cdnURL":   site,
			"cdnSettings": map[string]any{
				"integrations": map[string]any{"Segment.io": map[string]any{"apiKey": writeKey}},
				// Remote metrics: analytics.js would POST counters to
				// <apiHost>/m every 30 s, which eventd does not serve, and
				// which would make the page's requests depend on timing.
				"metrics": map[string]any{"sampleRate": 0},
			},
		},
		"options": map[string]any{"integrations": map[string]any{"Segment.io": sio}},
	}
}

// ajsSent is the page's requests to eventd (or the stub before it) with
// their bodies decoded, in the order the page made them.
type ajsSent struct {
	ajsRequest
	Path  string
	Msg   ajsMessage // /v1/<letter>
	Batch struct {   // /v1/b
		WriteKey string       `json:"writeKey"`
		SentAt   string       `json:"sentAt"`
		Batch    []ajsMessage `json:"batch"`
	}
}

func ajsToAPI(t *testing.T, rs []ajsRequest, api string) []ajsSent {
	t.Helper()
	var out []ajsSent
	for _, r := range rs {
		if !strings.HasPrefix(r.URL, api+"/") {
			continue
		}
		x := ajsSent{ajsRequest: r, Path: strings.TrimPrefix(r.URL, api)}
		var err error
		if x.Path == "/v1/b" {
			err = json.Unmarshal([]byte(r.Body), &x.Batch)
		} else {
			err = json.Unmarshal([]byte(r.Body), &x.Msg)
		}
		if err != nil {
			t.Fatalf("%s %s: body %q: %v", r.Method, r.URL, r.Body, err)
		}
		out = append(out, x)
	}
	return out
}

// ajsCheckRequest checks what every analytics.js request to the API has:
// POST, the write key as HTTP Basic user name, text/plain (analytics.js's
// choice; eventd reads the body as JSON whatever the type), the page's
// origin (so a CORS preflight came first, for Authorization), and a 200.
func ajsCheckRequest(t *testing.T, x ajsSent, auth, origin string) {
	t.Helper()
	h := x.Headers
	if x.Method != "POST" || h["authorization"] != auth || h["content-type"] != "text/plain" || h["origin"] != origin ||
		x.Type != "fetch" || x.Status != 200 || x.Failure != "" {
		t.Fatalf("request %s %s (%s): status %d, failure %q, headers %v", x.Method, x.URL, x.Type, x.Status, x.Failure, h)
	}
}

// ajsCheckMessage checks the fields analytics.js puts in every message.
func ajsCheckMessage(t *testing.T, m ajsMessage, typ, writeKey, pageURL string) {
	t.Helper()
	c := m.Context
	if m.Type != typ || m.MessageID == "" || m.AnonymousID == "" || m.Timestamp == "" ||
		(m.WriteKey != "" && m.WriteKey != writeKey) || c.Library["name"] != "analytics.js" ||
		c.Library["version"] != "next-"+ajsVersion || c.Page["url"] != pageURL || !strings.Contains(c.UserAgent, "Chrome") {
		t.Fatalf("%s message %+v", typ, m)
	}
}

// ajsProxy is a stub in front of eventd that records every request it
// forwards (preflights included) and, with failFirst, answers the first POST
// itself with 503 (readable by the page: it has CORS headers).
type ajsProxy struct {
	*httptest.Server
	mu   sync.Mutex
	seen []ajsProxied
}

type ajsProxied struct {
	method, path, retryCount string
	status                   int
}

func (p *ajsProxy) log() []ajsProxied {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ajsProxied(nil), p.seen...)
}

func ajsStartProxy(t *testing.T, eventd string, failFirst bool) *ajsProxy {
	t.Helper()
	target, _ := url.Parse(eventd)
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &ajsProxy{}
	posts := 0
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := ajsProxied{method: r.Method, path: r.URL.Path, retryCount: r.Header.Get("X-Retry-Count")}
		p.mu.Lock()
		if r.Method == "POST" {
			posts++
		}
		first := posts == 1 && r.Method == "POST"
		p.mu.Unlock()
		sw := &ajsStatus{ResponseWriter: w, status: 200}
		if failFirst && first {
			w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
			w.Header().Set("Content-Type", "application/json")
			sw.WriteHeader(503)
			_, _ = io.WriteString(w, `{"error":"stub","message":"answered by the test stub"}`)
		} else {
			rp.ServeHTTP(sw, r)
		}
		rec.status = sw.status
		p.mu.Lock()
		p.seen = append(p.seen, rec)
		p.mu.Unlock()
	}))
	t.Cleanup(p.Server.Close)
	return p
}

type ajsStatus struct {
	http.ResponseWriter
	status int
}

func (w *ajsStatus) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// ajsStored waits (bounded) for the one event query matches and returns it
// in full; a second match fails the test (messageId makes each message one
// event, whatever the retries).
func ajsStored(t *testing.T, s *Server, secret, query string) tjsEvent {
	t.Helper()
	e := tjsWait(t, s, secret, query, 1, 10*time.Second)
	if len(e) != 1 {
		t.Fatalf("%d events for %q, want 1: %+v", len(e), query, e)
	}
	return e[0]
}

// ajsCheckStored checks the mapping of contract section 12 common to every
// message: visitor_id, the event time, $context as analytics.js sent it,
// $user_id and $anonymous_id.
func ajsCheckStored(t *testing.T, e tjsEvent, m ajsMessage, visitor string) {
	t.Helper()
	pr := e.Properties
	c, _ := pr["$context"].(map[string]any)
	page, _ := c["page"].(map[string]any)
	lib, _ := c["library"].(map[string]any)
	if e.VisitorID != visitor || page["url"] != m.Context.Page["url"] || c["userAgent"] != m.Context.UserAgent ||
		lib["name"] != "analytics.js" || lib["version"] != m.Context.Library["version"] || pr["$anonymous_id"] != m.AnonymousID {
		t.Fatalf("%s stored as %+v, sent as %+v", m.Type, e, m)
	}
	if uid, has := pr["$user_id"]; (m.UserID == "" && has) || (m.UserID != "" && uid != m.UserID) {
		t.Fatalf("%s: $user_id %v, sent userId %q", m.Type, uid, m.UserID)
	}
	sent, err1 := time.Parse(time.RFC3339Nano, m.Timestamp)
	stored, err2 := time.Parse(time.RFC3339Nano, e.Timestamp)
	if err1 != nil || err2 != nil || !stored.Equal(sent) {
		t.Fatalf("%s: stored timestamp %q, sent %q", m.Type, e.Timestamp, m.Timestamp)
	}
}

func TestSegmentBrowser(t *testing.T) {
	b, dist := ajsStart(t)
	s := Start(t)
	p := s.Project(t, "ajs", "", map[string]int64{"minute": 100000, "hour": 1000000, "day": 10000000})
	pk := s.Key(t, p, "public", "live")
	sk := s.Key(t, p, "secret", "live")
	configs := map[string]map[string]any{}
	site := ajsSite(t, dist, configs)
	stub := ajsStartProxy(t, s.Public, true)
	recorder := ajsStartProxy(t, s.Public, false)
	configs["standard"] = ajsConfig(pk, s.Public, site.URL, nil)
	// Batches of 4; the 60 s timer never fires within the test, so a batch
	// leaves exactly when its fourth message is queued.
	configs["batching"] = ajsConfig(pk, s.Public, site.URL, map[string]any{
		"deliveryStrategy": map[string]any{"strategy": "batching", "config": map[string]any{"size": 4, "timeout": 60000}},
	})
	configs["retry"] = ajsConfig(pk, stub.URL, site.URL, nil)
	configs["unload"] = ajsConfig(pk, recorder.URL, site.URL, map[string]any{
		"deliveryStrategy": map[string]any{"strategy": "batching", "config": map[string]any{"size": 4, "timeout": 60000}},
	})
	r := s.AdminDo(t, "PATCH", "/admin/v1/projects/"+p, map[string]any{"allowed_origins": []string{site.URL}})
	wantStatus(t, r, 200)
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(pk+":"))

	t.Run("standard delivery: one POST /v1/<letter> per call, each stored mapped", func(t *testing.T) {
		b.call("context", map[string]any{"name": "std"})
		b.call("page", map[string]any{"ctx": "std", "name": "std"})
		pageURL := site.URL + "/page/standard.html"
		if st := b.call("goto", map[string]any{"page": "std", "url": pageURL}); string(st) != "200" {
			t.Fatalf("page status %s", st)
		}
		var anon string
		b.eval("std", `(async () => {
			const [a] = await window.ajs;
			await a.track('Before Identify', {step: 1});
			// alias while anonymous, as Segment documents it (once a user id
			// is set, analytics.js 1.84 sends that id as the alias's userId).
			await a.alias('u-web');
			await a.identify('u-web', {plan: 'pro'});
			await a.track('Button Clicked', {color: 'red'});
			await a.page('Docs', 'Intro');
			await a.group('org-1', {name: 'Acme'});
			return a.user().anonymousId();
		})()`, &anon)
		rs := ajsSettle(t, b, "std", 10*time.Second)
		ajsCheckLoopback(t, rs, site.URL, s.Public)
		var errs []string
		b.eval("std", "window.ajsErrors", &errs)
		if len(errs) != 0 || anon == "" {
			t.Fatalf("analytics.js errors %q, anonymousId %q", errs, anon)
		}
		// The page itself: the document and the bundle, nothing else.
		var fromSite []string
		for _, r := range rs {
			if strings.HasPrefix(r.URL, site.URL) {
				fromSite = append(fromSite, r.URL)
				if r.Status != 200 {
					t.Fatalf("%s: %d", r.URL, r.Status)
				}
			}
		}
		if strings.Join(fromSite, " ") != pageURL+" "+site.URL+ajsBundles+"index.js" {
			t.Fatalf("page requests %q", fromSite)
		}
		sent := ajsToAPI(t, rs, s.Public)
		var paths []string
		for _, x := range sent {
			paths = append(paths, x.Path)
			ajsCheckRequest(t, x, auth, site.URL)
			ajsCheckMessage(t, x.Msg, map[string]string{"/v1/t": "track", "/v1/i": "identify", "/v1/p": "page", "/v1/g": "group", "/v1/a": "alias"}[x.Path], pk, pageURL)
			if x.Msg.AnonymousID != anon {
				t.Fatalf("%s anonymousId %q, the page's is %q", x.Path, x.Msg.AnonymousID, anon)
			}
		}
		if strings.Join(paths, " ") != "/v1/t /v1/a /v1/i /v1/t /v1/p /v1/g" {
			t.Fatalf("paths %v", paths)
		}
		before, alias, ident, click, page, group := sent[0].Msg, sent[1].Msg, sent[2].Msg, sent[3].Msg, sent[4].Msg, sent[5].Msg
		if before.Event != "Before Identify" || before.UserID != "" || before.Properties["step"] != float64(1) {
			t.Fatalf("track before identify %+v", before)
		}
		if ident.UserID != "u-web" || ident.Traits["plan"] != "pro" {
			t.Fatalf("identify %+v", ident)
		}
		if click.Event != "Button Clicked" || click.UserID != "u-web" || click.Properties["color"] != "red" {
			t.Fatalf("track %+v", click)
		}
		if page.Name != "Intro" || page.Category != "Docs" || page.UserID != "u-web" || page.Properties["url"] != pageURL {
			t.Fatalf("page %+v", page)
		}
		if group.GroupID != "org-1" || group.Traits["name"] != "Acme" || group.UserID != "u-web" {
			t.Fatalf("group %+v", group)
		}
		if alias.UserID != "u-web" || alias.PreviousID != anon {
			t.Fatalf("alias %+v", alias)
		}

		// What eventd stored, read back through the native API.
		e := ajsStored(t, s, sk, "event=Before_Identify")
		ajsCheckStored(t, e, before, anon)
		if e.Properties["$event_name"] != "Before Identify" || e.Properties["step"] != float64(1) {
			t.Fatalf("Before_Identify %+v", e)
		}
		e = ajsStored(t, s, sk, "event=identify&visitor_id=u-web")
		ajsCheckStored(t, e, ident, "u-web")
		if tr, _ := e.Properties["$traits"].(map[string]any); tr["plan"] != "pro" {
			t.Fatalf("identify %+v", e)
		}
		e = ajsStored(t, s, sk, "event=Button_Clicked&visitor_id=u-web")
		ajsCheckStored(t, e, click, "u-web")
		if e.Properties["$event_name"] != "Button Clicked" || e.Properties["color"] != "red" {
			t.Fatalf("Button_Clicked %+v", e)
		}
		e = ajsStored(t, s, sk, "event=pageview&visitor_id=u-web")
		ajsCheckStored(t, e, page, "u-web")
		if e.Properties["name"] != "Intro" || e.Properties["category"] != "Docs" || e.Properties["url"] != pageURL ||
			e.Properties["title"] != "analytics.js test page" {
			t.Fatalf("pageview %+v", e)
		}
		e = ajsStored(t, s, sk, "event=group&visitor_id=u-web")
		ajsCheckStored(t, e, group, "u-web")
		if tr, _ := e.Properties["$traits"].(map[string]any); tr["name"] != "Acme" || e.Properties["$group_id"] != "org-1" {
			t.Fatalf("group %+v", e)
		}
		e = ajsStored(t, s, sk, "event=alias")
		ajsCheckStored(t, e, alias, "u-web")
		if e.Properties["$previous_id"] != anon {
			t.Fatalf("alias %+v", e)
		}
		if n := tjsCount(t, s, sk, "visitor_id="+anon) + tjsCount(t, s, sk, "visitor_id=u-web"); n != 6 {
			t.Fatalf("%d events stored for the page's ids, want 6", n)
		}

		// identify gave u-web its traits; alias (and identify, carrying both
		// ids) linked the anonymousId analytics.js generated to it: one
		// person, found from either id.
		for _, id := range []string{"u-web", anon} {
			r := Do(t, "GET", s.Public+"/profiles/"+url.PathEscape(id), sk, nil)
			wantStatus(t, r, 200)
			var prof struct {
				ID        string         `json:"id"`
				Traits    map[string]any `json:"traits"`
				LinkedIDs []string       `json:"linked_ids"`
			}
			if err := json.Unmarshal(r.Body, &prof); err != nil {
				t.Fatal(err)
			}
			other := map[string]string{"u-web": anon, anon: "u-web"}[id]
			if prof.ID != id || prof.Traits["plan"] != "pro" || !slices.Contains(prof.LinkedIDs, other) {
				t.Fatalf("profile of %s: %s", id, r.Body)
			}
		}
	})

	t.Run("batching delivery: one POST /v1/b per 4 messages, each stored; the lazily loaded chunk comes from the test server", func(t *testing.T) {
		b.call("context", map[string]any{"name": "bat"})
		b.call("page", map[string]any{"ctx": "bat", "name": "bat"})
		// ?ajs_aid= sets the anonymousId through the queryString chunk, which
		// analytics.js imports lazily: it must come from this server.
		pageURL := site.URL + "/page/batching.html?ajs_aid=anon-batch-1"
		if st := b.call("goto", map[string]any{"page": "bat", "url": pageURL}); string(st) != "200" {
			t.Fatalf("page status %s", st)
		}
		b.eval("bat", `(async () => {
			const [a] = await window.ajs;
			await a.track('Batch Start', {n: 1});
			await a.identify('u-batch', {plan: 'team'});
			await a.track('Button Clicked', {color: 'blue'});
		})()`, nil)
		rs := ajsSettle(t, b, "bat", 10*time.Second)
		if n := len(ajsToAPI(t, rs, s.Public)); n != 0 {
			t.Fatalf("%d requests to eventd before the batch is full", n)
		}
		b.eval("bat", `window.ajs.then(([a]) => a.page('Docs', 'Batch')).then(() => null)`, nil)
		var sent []ajsSent
		for deadline := time.Now().Add(10 * time.Second); len(sent) == 0; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no batch within 10 s of the fourth message")
			}
			rs = ajsSettle(t, b, "bat", 10*time.Second)
			sent = ajsToAPI(t, rs, s.Public)
		}
		ajsCheckLoopback(t, rs, site.URL, s.Public)
		chunk := false
		for _, r := range rs {
			if strings.HasPrefix(r.URL, site.URL+ajsBundles+"queryString.bundle.") && strings.HasSuffix(r.URL, ".js") && r.Status == 200 {
				chunk = true
			}
		}
		if !chunk {
			t.Fatalf("the queryString chunk was not loaded from %s%s: %+v", site.URL, ajsBundles, rs)
		}
		if len(sent) != 1 || sent[0].Path != "/v1/b" {
			t.Fatalf("requests to eventd: %+v", sent)
		}
		x := sent[0]
		ajsCheckRequest(t, x, auth, site.URL)
		if x.Batch.WriteKey != pk || x.Batch.SentAt == "" || len(x.Batch.Batch) != 4 {
			t.Fatalf("batch body %s", x.Body)
		}
		var types []string
		for _, m := range x.Batch.Batch {
			types = append(types, m.Type)
			ajsCheckMessage(t, m, m.Type, pk, pageURL)
			if m.AnonymousID != "anon-batch-1" || m.SentAt != "" {
				t.Fatalf("batched message %+v", m)
			}
		}
		if strings.Join(types, " ") != "track identify track page" {
			t.Fatalf("batched types %v", types)
		}

		msgs := x.Batch.Batch
		e := ajsStored(t, s, sk, "event=Batch_Start")
		ajsCheckStored(t, e, msgs[0], "anon-batch-1")
		if e.Properties["$event_name"] != "Batch Start" || e.Properties["n"] != float64(1) {
			t.Fatalf("Batch_Start %+v", e)
		}
		e = ajsStored(t, s, sk, "event=identify&visitor_id=u-batch")
		ajsCheckStored(t, e, msgs[1], "u-batch")
		if tr, _ := e.Properties["$traits"].(map[string]any); tr["plan"] != "team" {
			t.Fatalf("identify %+v", e)
		}
		e = ajsStored(t, s, sk, "event=Button_Clicked&visitor_id=u-batch")
		ajsCheckStored(t, e, msgs[2], "u-batch")
		if e.Properties["$event_name"] != "Button Clicked" || e.Properties["color"] != "blue" {
			t.Fatalf("Button_Clicked %+v", e)
		}
		e = ajsStored(t, s, sk, "event=pageview&visitor_id=u-batch")
		ajsCheckStored(t, e, msgs[3], "u-batch")
		if e.Properties["name"] != "Batch" || e.Properties["category"] != "Docs" {
			t.Fatalf("pageview %+v", e)
		}
	})

	t.Run("batching: messages still queued when the page goes away leave with keepalive", func(t *testing.T) {
		// Through the recorder: the browser does not report a keepalive
		// request of a page it has left, so the server side says what arrived.
		b.call("context", map[string]any{"name": "unload"})
		b.call("page", map[string]any{"ctx": "unload", "name": "unload"})
		b.call("goto", map[string]any{"page": "unload", "url": site.URL + "/page/unload.html"})
		b.eval("unload", `window.ajs.then(async ([a]) => {
			await a.identify('u-leaving', {plan: 'free'});
			await a.track('Leaving Soon', {k: 1});
			return null;
		})`, nil)
		ajsCheckLoopback(t, ajsSettle(t, b, "unload", 10*time.Second), site.URL, recorder.URL)
		if l := recorder.log(); len(l) != 0 {
			t.Fatalf("requests to eventd before the page went away: %+v", l)
		}
		// pagehide: the batched dispatcher sends what it holds at once, with keepalive.
		b.call("goto", map[string]any{"page": "unload", "url": "about:blank"})
		var posts []ajsProxied
		for deadline := time.Now().Add(10 * time.Second); len(posts) == 0; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no batch within 10 s of leaving the page; the recorder saw %+v", recorder.log())
			}
			for _, x := range recorder.log() {
				if x.method == "POST" {
					posts = append(posts, x)
				}
			}
		}
		l := recorder.log()
		if len(posts) != 1 || posts[0].path != "/v1/b" || posts[0].status != 200 ||
			l[0].method != "OPTIONS" || l[0].path != "/v1/b" || l[0].status != 204 {
			t.Fatalf("after leaving the page the recorder saw %+v (want eventd's preflight, then the batch)", l)
		}
		ajsStored(t, s, sk, "event=identify&visitor_id=u-leaving")
		if e := ajsStored(t, s, sk, "event=Leaving_Soon"); e.VisitorID != "u-leaving" || e.Properties["k"] != float64(1) {
			t.Fatalf("Leaving_Soon %+v", e)
		}
	})

	t.Run("a retried message (X-Retry-Count) passes eventd's CORS preflight and is stored once", func(t *testing.T) {
		b.call("context", map[string]any{"name": "retry"})
		b.call("page", map[string]any{"ctx": "retry", "name": "retry"})
		b.call("goto", map[string]any{"page": "retry", "url": site.URL + "/page/retry.html"})
		b.eval("retry", `window.ajs.then(([a]) => { a.track('Retried Once', {k: 'v'}); return null })`, nil)
		var sent []ajsSent
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			sent = ajsToAPI(t, b.requests("retry"), stub.URL)
			if n := len(sent); n >= 2 && sent[n-1].Status == 200 {
				break
			}
			if time.Now().After(deadline) {
				var wire any
				_ = json.Unmarshal(b.call("wire", map[string]any{"page": "retry"}), &wire)
				t.Fatalf("no retry delivered within 15 s; requests %+v\nDevTools: %v", sent, wire)
			}
		}
		ajsCheckLoopback(t, b.requests("retry"), site.URL, stub.URL)
		if sent[0].Status != 503 || sent[0].Headers["x-retry-count"] != "" {
			t.Fatalf("first attempt %+v", sent[0])
		}
		last := sent[len(sent)-1]
		ajsCheckRequest(t, last, auth, site.URL)
		if last.Headers["x-retry-count"] == "" || last.Msg.MessageID != sent[0].Msg.MessageID {
			t.Fatalf("retry %+v (first %+v)", last, sent[0])
		}
		posts := 0
		for _, x := range stub.log() {
			if x.method == "POST" {
				posts++
			}
		}
		if posts != len(sent) {
			t.Fatalf("the stub saw %d POSTs, the page made %d: %+v", posts, len(sent), stub.log())
		}
		if e := ajsStored(t, s, sk, "event=Retried_Once"); e.Properties["k"] != "v" || e.Properties["$event_name"] != "Retried Once" {
			t.Fatalf("Retried_Once %+v", e)
		}
	})
}
