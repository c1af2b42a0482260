package test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The Segment-compatible API (contract section 12) driven by Segment's own
// Node SDK, @segment/analytics-node, installed from npm in test/browser by
// `make test`; without node or the package the SDK tests skip and say why.
// The raw-HTTP tests below pin the limits and answers the SDK never shows.

// basicAuth is the Authorization header Segment's SDKs send for a write key.
func basicAuth(key string) string {
	return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(key+":"))
}

// segmentCall is one SDK method call of a plan for test/browser/segment.mjs.
type segmentCall struct {
	Method string         `json:"method"`
	Args   map[string]any `json:"args"`
}

// segmentSDK runs the calls through analytics-node against host and returns
// the HTTP statuses the SDK saw and the errors it reported.
func segmentSDK(t *testing.T, host, writeKey string, flushAt, maxRetries int, calls []segmentCall) (statuses []int, errs []string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("SKIP Segment SDK test: node is not installed")
	}
	dir, _ := filepath.Abs("browser")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@segment", "analytics-node")); err != nil {
		t.Skip("SKIP Segment SDK test: test/browser/node_modules lacks @segment/analytics-node (run `make browser-deps`, i.e. npm ci in test/browser)")
	}
	plan, _ := json.Marshal(map[string]any{"host": host, "writeKey": writeKey, "flushAt": flushAt, "maxRetries": maxRetries, "calls": calls})
	cmd := exec.Command(node, "segment.mjs")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(plan)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan struct{})
	timer := time.AfterFunc(2*time.Minute, func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
		}
	})
	out, err := cmd.Output()
	close(done)
	timer.Stop()
	if err != nil {
		t.Fatalf("segment.mjs: %v\n%s", err, stderr.String())
	}
	var res struct {
		Statuses []int    `json:"statuses"`
		Errors   []string `json:"errors"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
		t.Fatalf("segment.mjs output %q: %v\n%s", out, err, stderr.String())
	}
	return res.Statuses, res.Errors
}

// segmentEvents lists every event of the key's dataset named name (newest first).
func segmentEvents(t *testing.T, s *Server, key, query string) ([]map[string]any, int) {
	t.Helper()
	r := Do(t, "GET", s.Public+"/events?limit=100&"+query, key, nil)
	wantStatus(t, r, 200)
	var list struct {
		Data       []map[string]any `json:"data"`
		Pagination struct {
			Total int `json:"total"`
		} `json:"pagination"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil {
		t.Fatal(err)
	}
	return list.Data, list.Pagination.Total
}

func TestSegmentSDK(t *testing.T) {
	s := Start(t)
	proj := s.Project(t, "segment", "", nil)
	secret := s.Key(t, proj, "secret", "live")
	at := "2026-11-20T10:30:00.000Z"
	calls := []segmentCall{
		{"identify", map[string]any{"userId": "u1", "anonymousId": "a1", "messageId": "m-identify", "timestamp": at,
			"traits": map[string]any{"email": "ada@example.com", "plan": "pro"}}},
		{"track", map[string]any{"userId": "u1", "event": "Order Completed", "messageId": "m-track", "timestamp": at,
			"properties": map[string]any{"revenue": 49.5, "items": 2}}},
		{"page", map[string]any{"anonymousId": "a1", "name": "Pricing", "category": "Docs", "messageId": "m-page",
			"properties": map[string]any{"url": "https://example.com/pricing"}}},
		{"screen", map[string]any{"userId": "u1", "name": "Home", "messageId": "m-screen"}},
		{"group", map[string]any{"userId": "u1", "groupId": "g1", "messageId": "m-group", "traits": map[string]any{"name": "Acme"}}},
		{"alias", map[string]any{"userId": "u1", "previousId": "old-1", "messageId": "m-alias"}},
	}
	for i := range 300 {
		calls = append(calls, segmentCall{"track", map[string]any{"userId": fmt.Sprintf("u%d", i%7), "event": "Flush Test",
			"messageId": fmt.Sprintf("flush-%d", i), "properties": map[string]any{"i": i}}})
	}
	statuses, errs := segmentSDK(t, s.Public, secret, 100, 3, calls)
	if len(errs) > 0 || len(statuses) < 4 {
		t.Fatalf("SDK: statuses %v, errors %v", statuses, errs)
	}
	for _, st := range statuses {
		if st != 200 {
			t.Fatalf("SDK saw status %d: %v", st, statuses)
		}
	}

	if _, total := segmentEvents(t, s, secret, "event=Flush_Test"); total != 300 {
		t.Errorf("Flush_Test: %d events, want 300", total)
	}
	one := func(query string) map[string]any {
		t.Helper()
		data, total := segmentEvents(t, s, secret, query)
		if total != 1 || len(data) != 1 {
			t.Fatalf("%s: %d events, want 1", query, total)
		}
		r := Do(t, "GET", s.Public+"/events/"+data[0]["id"].(string), secret, nil)
		wantStatus(t, r, 200)
		return r.JSON(t) // the whole event: lists leave properties out
	}
	props := func(e map[string]any) map[string]any { return e["properties"].(map[string]any) }

	tr := one("event=Order_Completed")
	if tr["visitor_id"] != "u1" || tr["timestamp"] != at {
		t.Errorf("track: %v", tr)
	}
	p := props(tr)
	if p["revenue"] != 49.5 || p["items"] != 2.0 || p["$event_name"] != "Order Completed" || p["$user_id"] != "u1" {
		t.Errorf("track properties: %v", p)
	}
	lib, _ := p["$context"].(map[string]any)["library"].(map[string]any)
	if lib["name"] != "@segment/analytics-node" {
		t.Errorf("track $context.library: %v", p["$context"])
	}

	pv := props(one("event=pageview"))
	if pv["name"] != "Pricing" || pv["category"] != "Docs" || pv["url"] != "https://example.com/pricing" || pv["$anonymous_id"] != "a1" {
		t.Errorf("page properties: %v", pv)
	}
	if sc := props(one("event=screen")); sc["name"] != "Home" {
		t.Errorf("screen properties: %v", sc)
	}
	id := one("event=identify")
	if tr := props(id)["$traits"].(map[string]any); id["visitor_id"] != "u1" || tr["email"] != "ada@example.com" || tr["plan"] != "pro" {
		t.Errorf("identify: %v", id)
	}
	if g := props(one("event=group")); g["$group_id"] != "g1" || g["$traits"].(map[string]any)["name"] != "Acme" {
		t.Errorf("group properties: %v", g)
	}
	if a := props(one("event=alias")); a["$previous_id"] != "old-1" {
		t.Errorf("alias properties: %v", a)
	}
	if _, total := segmentEvents(t, s, secret, "visitor_id=u1"); total < 5 {
		t.Errorf("visitor u1: %d events", total)
	}

	// The profile: identify's traits, linked to the anonymous id it carried
	// and to alias's previousId; found from any of the three ids.
	for _, id := range []string{"u1", "a1", "old-1"} {
		r := Do(t, "GET", s.Public+"/profiles/"+id, secret, nil)
		wantStatus(t, r, 200)
		prof := r.JSON(t)
		traits, _ := prof["traits"].(map[string]any)
		linked := fmt.Sprint(prof["linked_ids"])
		if prof["id"] != id || traits["email"] != "ada@example.com" || traits["plan"] != "pro" {
			t.Errorf("profile %s: %s", id, r.Body)
		}
		for _, other := range []string{"u1", "a1", "old-1"} {
			if other != id && !strings.Contains(linked, other) {
				t.Errorf("profile %s: linked_ids %s lacks %s", id, linked, other)
			}
		}
		if prof["first_seen"] == nil || prof["last_seen"] == nil {
			t.Errorf("profile %s: no first/last seen: %s", id, r.Body)
		}
	}
	wantError(t, Do(t, "GET", s.Public+"/profiles/nobody", secret, nil), 404, "not_found", "")

	// Erasing the user erases its profile and its links: the anonymous
	// id's own profile no longer names it.
	r := s.AdminDo(t, "DELETE", "/admin/v1/projects/"+proj+"/visitors/u1?environment=live", nil)
	wantStatus(t, r, 202)
	if job := waitJob(t, s, r.JSON(t)["id"].(string)); job["status"] != "succeeded" {
		t.Fatalf("erase job %v", job)
	}
	wantError(t, Do(t, "GET", s.Public+"/profiles/u1", secret, nil), 404, "not_found", "")
	if r := Do(t, "GET", s.Public+"/profiles/a1", secret, nil); r.Status == 200 && strings.Contains(string(r.Body), `"u1"`) {
		t.Errorf("profile a1 still links u1 after the erasure: %s", r.Body)
	}
}

// TestSegmentSDKRetry: the SDK retries a batch whose answer was lost (a 500
// after eventd stored it, from a proxy in between), with the same
// messageIds and a new sentAt; each message is stored once.
func TestSegmentSDKRetry(t *testing.T) {
	s := Start(t)
	proj := s.Project(t, "segment-retry", "", nil)
	secret := s.Key(t, proj, "secret", "live")
	target, _ := url.Parse(s.Public)
	var requests atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if requests.Add(1) == 1 && r.StatusCode == 200 {
			r.StatusCode = 500 // stored, but the SDK is told it failed
			r.Status = "500 Internal Server Error"
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	var calls []segmentCall
	for i := range 20 {
		calls = append(calls, segmentCall{"track", map[string]any{"anonymousId": "anon-r", "event": "retried",
			"messageId": fmt.Sprintf("r-%d", i), "properties": map[string]any{"i": i}}})
	}
	statuses, errs := segmentSDK(t, front.URL, secret, 20, 3, calls)
	if len(errs) > 0 || len(statuses) != 2 || statuses[0] != 500 || statuses[1] != 200 {
		t.Fatalf("SDK: statuses %v (want 500 then 200), errors %v", statuses, errs)
	}
	if _, total := segmentEvents(t, s, secret, "event=retried"); total != 20 {
		t.Errorf("after the retry: %d events, want 20", total)
	}
}

func TestSegmentHTTP(t *testing.T) {
	s := Start(t)
	proj := s.Project(t, "segment-http", "", nil)
	secret := s.Key(t, proj, "secret", "live")
	public := s.Key(t, proj, "public", "live")
	auth := basicAuth(secret)
	track := func(id, event string, props map[string]any) map[string]any {
		return map[string]any{"type": "track", "userId": "u-http", "event": event, "messageId": id, "properties": props}
	}

	t.Run("single track with Basic auth", func(t *testing.T) {
		r := Do(t, "POST", s.Public+"/v1/track", "", track("h-1", "Signed Up", nil), auth)
		wantStatus(t, r, 200)
		if string(r.Body) != `{"success":true}` || r.Header.Get("X-RateLimit-Limit") == "" {
			t.Fatalf("body %s, headers %v", r.Body, r.Header)
		}
		// The same message again: a replay, no second event.
		r = Do(t, "POST", s.Public+"/v1/track", "", track("h-1", "Signed Up", nil), auth)
		wantStatus(t, r, 200)
		if r.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay: headers %v", r.Header)
		}
		// The same messageId with another message: 409, still one event.
		wantError(t, Do(t, "POST", s.Public+"/v1/track", "", track("h-1", "Signed Up", map[string]any{"x": 1}), auth),
			409, "idempotency_conflict", "")
		if _, total := segmentEvents(t, s, secret, "event=Signed_Up"); total != 1 {
			t.Errorf("Signed_Up: %d events", total)
		}
	})

	t.Run("bearer and public keys send", func(t *testing.T) {
		wantStatus(t, Do(t, "POST", s.Public+"/v1/page", secret, map[string]any{"anonymousId": "a-b", "name": "Home"}), 200)
		wantStatus(t, Do(t, "POST", s.Public+"/v1/page", "", map[string]any{"anonymousId": "a-p", "name": "Home"}, basicAuth(public)), 200)
	})

	t.Run("batch with a rejected message", func(t *testing.T) {
		big := strings.Repeat("x", 33<<10)
		body := map[string]any{"batch": []any{
			track("b-1", "Batched", nil),
			track("b-2", "Batched", map[string]any{"big": big}),
			map[string]any{"type": "track", "userId": "u-http"}, // no event
			track("b-3", "Batched", nil),
		}}
		r := Do(t, "POST", s.Public+"/v1/batch", "", body, auth)
		wantStatus(t, r, 200)
		var res struct {
			Success  bool `json:"success"`
			Rejected []struct {
				Index int    `json:"index"`
				Error string `json:"error"`
			} `json:"rejected"`
		}
		_ = json.Unmarshal(r.Body, &res)
		if !res.Success || len(res.Rejected) != 2 || res.Rejected[0].Index != 1 || res.Rejected[0].Error != "payload_too_large" ||
			res.Rejected[1].Index != 2 {
			t.Fatalf("batch answer %s", r.Body)
		}
		if _, total := segmentEvents(t, s, secret, "event=Batched"); total != 2 {
			t.Errorf("Batched: %d events, want 2", total)
		}
		// The whole batch again (a retry): nothing new, nothing rejected but the same two.
		wantStatus(t, Do(t, "POST", s.Public+"/v1/import", "", body, auth), 200)
		if _, total := segmentEvents(t, s, secret, "event=Batched"); total != 2 {
			t.Errorf("Batched after the retry: %d events, want 2", total)
		}
	})

	t.Run("gzip batch", func(t *testing.T) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_ = json.NewEncoder(zw).Encode(map[string]any{"batch": []any{track("z-1", "Zipped", nil)}})
		_ = zw.Close()
		wantStatus(t, Do(t, "POST", s.Public+"/v1/batch", "", buf.Bytes(), auth, "Content-Encoding: gzip"), 200)
		if _, total := segmentEvents(t, s, secret, "event=Zipped"); total != 1 {
			t.Errorf("Zipped: %d events", total)
		}
	})

	t.Run("limits and refusals", func(t *testing.T) {
		wantError(t, Do(t, "POST", s.Public+"/v1/track", "", track("l-1", "Big", map[string]any{"big": strings.Repeat("x", 33<<10)}), auth),
			413, "payload_too_large", "")
		var batch []any
		for i := 0; i < 20; i++ {
			batch = append(batch, track(fmt.Sprintf("l-b-%d", i), "Big", map[string]any{"pad": strings.Repeat("y", 26<<10)}))
		}
		wantError(t, Do(t, "POST", s.Public+"/v1/batch", "", map[string]any{"batch": batch}, auth), 413, "payload_too_large", "")
		wantError(t, Do(t, "POST", s.Public+"/v1/batch", "", `{"batch":[`, auth), 400, "bad_request", "")
		wantError(t, Do(t, "POST", s.Public+"/v1/batch", "", `{"events":[]}`, auth), 400, "bad_request", "")
		wantError(t, Do(t, "POST", s.Public+"/v1/track", "", map[string]any{"userId": "u"}, auth), 400, "bad_request", "")
		wantError(t, Do(t, "POST", s.Public+"/v1/track", "", track("l-2", "x", nil), basicAuth("sk_live_nope")), 401, "unauthorized", "")
		if _, total := segmentEvents(t, s, secret, "event=Big"); total != 0 {
			t.Errorf("Big: %d events stored", total)
		}
	})

	t.Run("event definitions apply to mapped events", func(t *testing.T) {
		def := map[string]any{"name": "Plan_Chosen", "properties": []any{
			map[string]any{"name": "plan", "type": "string", "required": true}}}
		wantStatus(t, s.AdminDo(t, "POST", "/admin/v1/projects/"+proj+"/event-definitions", def), 201)
		e := wantError(t, Do(t, "POST", s.Public+"/v1/track", "", track("d-1", "Plan Chosen", nil), auth), 422, "validation_error", "")
		if e["details"].(map[string]any)["properties.plan"] == nil {
			t.Errorf("422 details %v", e["details"])
		}
		r := Do(t, "POST", s.Public+"/v1/batch", "", map[string]any{"batch": []any{
			track("d-2", "Plan Chosen", map[string]any{"plan": "pro"}), track("d-3", "Plan Chosen", nil)}}, auth)
		wantStatus(t, r, 200)
		if !strings.Contains(string(r.Body), `"rejected":[{"index":1,"error":"validation_error"`) {
			t.Errorf("batch with one invalid message: %s", r.Body)
		}
		if _, total := segmentEvents(t, s, secret, "event=Plan_Chosen"); total != 1 {
			t.Errorf("Plan_Chosen: %d events, want 1", total)
		}
	})

	t.Run("analytics.js metrics are accepted and dropped", func(t *testing.T) {
		r := Do(t, "POST", s.Public+"/v1/m", "", `{"series":[{"type":"Counter","metric":"analytics_js.invoke","value":1}]}`,
			"Content-Type: text/plain", "Origin: https://shop.example")
		wantStatus(t, r, 200)
		if string(r.Body) != `{"success":true}` || r.Header.Get("Access-Control-Allow-Origin") != "https://shop.example" {
			t.Fatalf("/v1/m: %s %v", r.Body, r.Header)
		}
	})

	t.Run("revoked key", func(t *testing.T) {
		r := s.AdminDo(t, "POST", "/admin/v1/projects/"+proj+"/keys", map[string]any{"name": "to revoke", "type": "secret", "environment": "live"})
		wantStatus(t, r, 201)
		k := r.JSON(t)
		wantStatus(t, Do(t, "POST", s.Public+"/v1/track", "", track("rv-1", "Revoked", nil), basicAuth(k["key"].(string))), 200)
		wantStatus(t, s.AdminDo(t, "DELETE", "/admin/v1/keys/"+k["id"].(string), nil), 204)
		// Revocation is synchronous (engine.RevokeKey drops the principal before the 204).
		wantError(t, Do(t, "POST", s.Public+"/v1/track", "", track("rv-2", "Revoked", nil), basicAuth(k["key"].(string))),
			401, "unauthorized", "")
	})
}

// TestKill9SegmentProfiles: a 200 from /v1/identify means the profile
// change is durable, as the event is (they commit in one fsynced batch):
// after kill -9 every acknowledged identify's traits and link are there,
// and so is its messageId (the idempotency record commits with the event):
// a retry of any of them by the SDK stores nothing again.
func TestKill9SegmentProfiles(t *testing.T) {
	s := Start(t)
	proj := s.Project(t, "segment-kill", "", highLimits)
	secret := s.Key(t, proj, "secret", "live")
	auth := basicAuth(secret)
	c := &http.Client{Timeout: 10 * time.Second}
	identify := func(i int) string {
		return fmt.Sprintf(`{"userId":"ku-%d","anonymousId":"ka-%d","messageId":"k-%d","traits":{"n":%d}}`, i, i, i, i)
	}
	var mu sync.Mutex
	var acked []int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i += 8 {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", s.Public+"/v1/identify", strings.NewReader(identify(i)))
				name, value, _ := strings.Cut(auth, ":")
				req.Header.Set(name, strings.TrimSpace(value))
				req.Header.Set("Content-Type", "application/json")
				status, _, err := sendAndRead(c, req)
				if err != nil {
					return // the server is gone
				}
				if status == 200 {
					mu.Lock()
					acked = append(acked, i)
					mu.Unlock()
				}
			}
		}()
	}
	// Kill once a fair number of identifies were acknowledged (bounded wait).
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 200 {
			break
		}
	}
	s.Kill()
	close(stop)
	wg.Wait()
	if len(acked) == 0 {
		t.Fatal("no identify acknowledged before the kill")
	}
	s.Restart()
	t.Logf("%d identifies acknowledged before kill -9", len(acked))
	_, before := segmentEvents(t, s, secret, "event=identify")
	if before < len(acked) {
		t.Fatalf("%d identify events after kill -9, want at least the %d acknowledged", before, len(acked))
	}
	for _, i := range acked {
		wantStatus(t, Do(t, "POST", s.Public+"/v1/identify", "", identify(i), auth), 200)
	}
	if _, after := segmentEvents(t, s, secret, "event=identify"); after != before {
		t.Errorf("%d identify events after retrying the acknowledged ones, want %d: a retry was stored again", after, before)
	}
	for _, i := range acked {
		r := Do(t, "GET", fmt.Sprintf("%s/profiles/ka-%d", s.Public, i), secret, nil)
		if r.Status != 200 {
			t.Fatalf("profile ka-%d after kill -9: %d %s", i, r.Status, r.Body)
		}
		prof := r.JSON(t)
		if traits, _ := prof["traits"].(map[string]any); traits["n"] != float64(i) || !strings.Contains(fmt.Sprint(prof["linked_ids"]), fmt.Sprintf("ku-%d", i)) {
			t.Fatalf("profile ka-%d after kill -9: %s", i, r.Body)
		}
	}
}

// TestSegmentBuckets: a single route counts in the standard bucket, a batch
// (however many messages) once in the batch bucket, with the native headers
// and 429 (a project of 50 a minute: batches get a tenth).
func TestSegmentBuckets(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "segment-buckets", "", map[string]int64{"minute": 50, "hour": 5000, "day": 50000})
	key := s.Key(t, p, "secret", "live")
	auth := basicAuth(key)
	msg := func(i int) map[string]any {
		return map[string]any{"type": "track", "event": "bucketed", "anonymousId": "a", "messageId": fmt.Sprintf("b-%d", i)}
	}
	r := Do(t, "POST", s.Public+"/v1/track", "", msg(0), auth)
	wantStatus(t, r, 200)
	pubWantRemaining(t, r, 50, 49)
	for i := 0; i < 5; i++ {
		batch := []any{msg(100 + 3*i), msg(101 + 3*i), msg(102 + 3*i)}
		r := Do(t, "POST", s.Public+"/v1/batch", "", map[string]any{"batch": batch}, auth)
		wantStatus(t, r, 200)
		pubWantRemaining(t, r, 5, int64(4-i))
	}
	pubWant429(t, Do(t, "POST", s.Public+"/v1/batch", "", map[string]any{"batch": []any{msg(1)}}, auth))
	rs := pubRateStatus(t, s, key)
	if rs.Limits["minute"].Remaining != 49 || rs.Buckets["batch"]["minute"].Remaining != 0 {
		t.Fatalf("buckets after one track and six batches: %+v", rs)
	}
	if _, total := segmentEvents(t, s, key, "event=bucketed"); total != 16 {
		t.Errorf("bucketed: %d events, want 16", total)
	}
}
