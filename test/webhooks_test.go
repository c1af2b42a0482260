package test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// verifyWebhook checks a delivery as a receiver following Standard Webhooks
// would: the secret's base64 part is the HMAC key, the signed content is
// "id.timestamp.body", and the timestamp must be recent.
func verifyWebhook(secret string, h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook headers")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("bad timestamp")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return errors.New("timestamp outside the 5 minute tolerance")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		v, sig, _ := strings.Cut(s, ",")
		got, err := base64.StdEncoding.DecodeString(sig)
		if v == "v1" && err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no matching signature")
}

// hookReceiver is a webhook endpoint on loopback.
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []hookRequest
	status atomic.Int32  // answer; 200 unless set
	sleep  atomic.Int64  // ns to wait before answering
	active atomic.Int32  // requests being served
	quit   chan struct{} // ends sleeps at cleanup
}

type hookRequest struct {
	header http.Header
	body   []byte
	status int
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{quit: make(chan struct{})}
	r.status.Store(200)
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.active.Add(1)
		defer r.active.Add(-1)
		body, _ := io.ReadAll(req.Body)
		select {
		case <-time.After(time.Duration(r.sleep.Load())):
		case <-r.quit:
		}
		st := int(r.status.Load())
		r.mu.Lock()
		r.got = append(r.got, hookRequest{header: req.Header.Clone(), body: body, status: st})
		r.mu.Unlock()
		w.WriteHeader(st)
	}))
	t.Cleanup(func() {
		close(r.quit)
		r.Close()
	})
	return r
}

func (r *hookReceiver) requests() []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookRequest(nil), r.got...)
}

// delivered maps each event id received with a 2xx to the webhook-ids that carried it.
func (r *hookReceiver) delivered(t *testing.T) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	for _, q := range r.requests() {
		if q.status/100 != 2 {
			continue
		}
		var env struct {
			Type string `json:"type"`
			Data struct {
				Events []struct {
					ID string `json:"id"`
				} `json:"events"`
			} `json:"data"`
		}
		if err := json.Unmarshal(q.body, &env); err != nil {
			t.Fatalf("delivery is not JSON: %s", q.body)
		}
		for _, e := range env.Data.Events {
			if out[e.ID] == nil {
				out[e.ID] = map[string]bool{}
			}
			out[e.ID][q.header.Get("webhook-id")] = true
		}
	}
	return out
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// createWebhook makes an endpoint and returns its id and secret.
func createWebhook(t *testing.T, s *Server, project string, body map[string]any) (string, string) {
	t.Helper()
	r := s.AdminDo(t, "POST", "/admin/v1/projects/"+project+"/webhooks", body)
	wantStatus(t, r, 201)
	m := r.JSON(t)
	return m["id"].(string), m["secret"].(string)
}

func postEvent(t *testing.T, s *Server, key, name string) string {
	t.Helper()
	r := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": name, "visitor_id": "v_1"})
	wantStatus(t, r, 201)
	return r.JSON(t)["id"].(string)
}

func TestWebhookAdminAPI(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := s.Project(t, "hooks", "", nil)
	base := "/admin/v1/projects/" + p + "/webhooks"

	r := s.AdminDo(t, "POST", base, map[string]any{"url": "https://example.com/hook", "environment": "live",
		"kinds": []string{"usage.alert", "event.created"}, "event_names": []string{"signup", "purchase"}})
	wantStatus(t, r, 201)
	created := r.JSON(t)
	id, _ := created["id"].(string)
	secret, _ := created["secret"].(string)
	if !strings.HasPrefix(id, "wh_") || !strings.HasPrefix(secret, "whsec_") || created["enabled"] != true ||
		fmt.Sprint(created["kinds"]) != "[event.created usage.alert]" || fmt.Sprint(created["event_names"]) != "[purchase signup]" ||
		created["created_at"] == nil || created["url"] != "https://example.com/hook" || created["environment"] != "live" {
		t.Fatalf("create: %s", r.Body)
	}
	for _, path := range []string{base, base + "/" + id} {
		r = s.AdminDo(t, "GET", path, nil)
		wantStatus(t, r, 200)
		if strings.Contains(string(r.Body), "whsec_") || !strings.Contains(string(r.Body), id) {
			t.Fatalf("GET %s shows the secret or misses the webhook: %s", path, r.Body)
		}
	}
	r = s.AdminDo(t, "PUT", base+"/"+id, map[string]any{"enabled": false, "event_names": nil})
	wantStatus(t, r, 200)
	if m := r.JSON(t); m["enabled"] != false || fmt.Sprint(m["event_names"]) != "[]" || m["disabled_reason"] == nil {
		t.Fatalf("patch: %s", r.Body)
	}
	r = s.AdminDo(t, "PUT", base+"/"+id, map[string]any{"enabled": true, "kinds": []string{"goal.completed"}})
	wantStatus(t, r, 200)
	if m := r.JSON(t); m["enabled"] != true || fmt.Sprint(m["kinds"]) != "[goal.completed]" || m["disabled_reason"] != nil {
		t.Fatalf("put: %s", r.Body)
	}

	r = s.AdminDo(t, "POST", base+"/"+id+"/rotate-secret", nil)
	wantStatus(t, r, 200)
	if m := r.JSON(t); !strings.HasPrefix(fmt.Sprint(m["secret"]), "whsec_") || m["secret"] == secret || m["previous_secret_expires_at"] == nil {
		t.Fatalf("rotate: %s", r.Body)
	}

	bad := []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"url": "ftp://example.com", "kinds": []string{"event.created"}}, "url"},
		{map[string]any{"url": "http://127.0.0.1:9/x", "environment": "live", "kinds": []string{"event.created"}}, "url"},
		{map[string]any{"url": "http://10.0.0.1/x", "kinds": []string{"event.created"}}, "url"},
		{map[string]any{"url": "http://169.254.169.254/", "environment": "test", "kinds": []string{"event.created"}}, "url"},
		{map[string]any{"url": "https://example.com", "kinds": []string{}}, "kinds"},
		{map[string]any{"url": "https://example.com", "kinds": []string{"event.deleted"}}, "kinds"},
		{map[string]any{"url": "https://example.com", "kinds": []string{"event.created"}, "event_names": []string{"bad name"}}, "event_names"},
		{map[string]any{"url": "https://example.com", "kinds": []string{"event.created"}, "environment": "prod"}, "environment"},
	}
	for _, b := range bad {
		r = s.AdminDo(t, "POST", base, b.body)
		m := wantError(t, r, 400, "bad_request", "")
		if d, _ := m["details"].(map[string]any); d[b.field] == nil {
			t.Fatalf("%v: details %v, want %s", b.body, m["details"], b.field)
		}
	}
	// Loopback is fine for a test-environment endpoint.
	createWebhook(t, s, p, map[string]any{"url": "http://127.0.0.1:9/x", "environment": "test", "kinds": []string{"event.created"}})

	other := s.Project(t, "other", "", nil)
	wantError(t, s.AdminDo(t, "GET", "/admin/v1/projects/"+other+"/webhooks/"+id, nil), 404, "not_found", "")
	wantError(t, s.AdminDo(t, "POST", base+"/"+id+"/deliveries/msg_nope/replay", nil), 404, "not_found", "")
	wantError(t, s.AdminDo(t, "GET", base+"/"+id+"/deliveries?limit=0", nil), 400, "bad_request", "")
	wantStatus(t, s.AdminDo(t, "DELETE", base+"/"+id, nil), 204)
	wantError(t, s.AdminDo(t, "GET", base+"/"+id, nil), 404, "not_found", "")
	wantError(t, Do(t, "GET", s.Admin+base, "wrong-token", nil), 401, "unauthorized", "")

	// Alerts.
	ab := "/admin/v1/projects/" + p + "/alerts"
	r = s.AdminDo(t, "POST", ab, map[string]any{"window": "hour", "threshold_percent": 80})
	wantStatus(t, r, 201)
	alert := r.JSON(t)
	aid, _ := alert["id"].(string)
	if !strings.HasPrefix(aid, "alt_") || alert["key_id"] != nil || alert["window"] != "hour" || alert["threshold_percent"] != 80.0 || alert["last_fired_at"] != nil {
		t.Fatalf("alert: %s", r.Body)
	}
	wantError(t, s.AdminDo(t, "POST", ab, map[string]any{"window": "week", "threshold_percent": 80}), 400, "bad_request", "")
	wantError(t, s.AdminDo(t, "POST", ab, map[string]any{"window": "day", "threshold_percent": 0}), 400, "bad_request", "")
	wantError(t, s.AdminDo(t, "POST", ab, map[string]any{"window": "day", "threshold_percent": 50, "key_id": "key_nope"}), 400, "bad_request", "")
	r = s.AdminDo(t, "PUT", ab+"/"+aid, map[string]any{"threshold_percent": 90})
	wantStatus(t, r, 200)
	if m := r.JSON(t); m["threshold_percent"] != 90.0 || m["window"] != "hour" {
		t.Fatalf("alert update: %s", r.Body)
	}
	r = s.AdminDo(t, "GET", ab+"/"+aid, nil)
	wantStatus(t, r, 200)
	if fmt.Sprint(r.JSON(t)["firings"]) != "[]" {
		t.Fatalf("alert get: %s", r.Body)
	}
	wantStatus(t, s.AdminDo(t, "DELETE", ab+"/"+aid, nil), 204)
	wantError(t, s.AdminDo(t, "GET", ab+"/"+aid, nil), 404, "not_found", "")

	// Deleting the project deletes its webhooks and alerts with it, for good.
	wantStatus(t, s.AdminDo(t, "POST", ab, map[string]any{"window": "day", "threshold_percent": 50}), 201)
	wantStatus(t, s.AdminDo(t, "DELETE", "/admin/v1/projects/"+p, nil), 204)
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	s.Restart()
	if logs := s.Logs(); strings.Contains(logs, "level=ERROR") {
		t.Fatalf("errors after deleting a project with webhooks:\n%s", logLines(logs, "level=ERROR", 5))
	}
}

func TestWebhookDeliveriesSignedLoggedReplayed(t *testing.T) {
	t.Parallel()
	rcv := newHookReceiver(t)
	s := Start(t)
	p := s.Project(t, "deliveries", "", nil)
	key := s.Key(t, p, "secret", "test")
	liveKey := s.Key(t, p, "secret", "live")
	id, secret := createWebhook(t, s, p, map[string]any{"url": rcv.URL + "/hook", "environment": "test",
		"kinds": []string{"event.created"}})

	want := map[string]bool{postEvent(t, s, key, "signup"): true, postEvent(t, s, key, "purchase"): true}
	postEvent(t, s, liveKey, "signup") // the live dataset has no endpoint
	waitFor(t, 10*time.Second, "the delivery", func() bool { return len(rcv.delivered(t)) == 2 })
	got := rcv.delivered(t)
	for ev := range want {
		if got[ev] == nil {
			t.Fatalf("event %s not delivered; got %v", ev, got)
		}
	}
	reqs := rcv.requests()
	if err := verifyWebhook(secret, reqs[0].header, reqs[0].body, time.Now()); err != nil {
		t.Fatalf("signature: %v", err)
	}
	if err := verifyWebhook("whsec_"+base64.StdEncoding.EncodeToString([]byte("not the secret, 32 bytes long..")), reqs[0].header, reqs[0].body, time.Now()); err == nil {
		t.Fatal("verified with a wrong secret")
	}
	if err := verifyWebhook(secret, reqs[0].header, reqs[0].body, time.Now().Add(time.Hour)); err == nil {
		t.Fatal("verified an hour-old timestamp")
	}
	var env map[string]any
	_ = json.Unmarshal(reqs[0].body, &env)
	msg := reqs[0].header.Get("webhook-id")
	if env["id"] != msg || env["type"] != "event.created" || !strings.HasPrefix(msg, "msg_") || env["created_at"] == nil {
		t.Fatalf("envelope: %s", reqs[0].body)
	}
	events := env["data"].(map[string]any)["events"].([]any)
	first := events[0].(map[string]any)
	for _, f := range []string{"id", "event", "visitor_id", "properties", "timestamp", "created_at"} {
		if _, ok := first[f]; !ok {
			t.Fatalf("event in delivery lacks %s: %v", f, first)
		}
	}

	// The log: the attempt with its status and latency, newest first.
	base := "/admin/v1/projects/" + p + "/webhooks/" + id
	var log map[string]any
	waitFor(t, 5*time.Second, "the logged attempt", func() bool {
		r := s.AdminDo(t, "GET", base+"/deliveries", nil)
		wantStatus(t, r, 200)
		log = r.JSON(t)
		data := log["data"].([]any)
		return len(data) > 0 && data[len(data)-1].(map[string]any)["status"] == "succeeded"
	})
	data := log["data"].([]any)
	oldest := data[len(data)-1].(map[string]any)
	atts := oldest["attempt_log"].([]any)
	if oldest["id"] != msg || oldest["attempts"] != 1.0 || oldest["response_status"] != 200.0 || len(atts) != 1 ||
		atts[0].(map[string]any)["status"] != 200.0 || atts[0].(map[string]any)["latency_ms"] == nil {
		t.Fatalf("delivery log: %v", oldest)
	}
	if p := log["pagination"].(map[string]any); p["total"] != float64(len(data)) || p["has_more"] != false {
		t.Fatalf("pagination %v", p)
	}
	r := s.AdminDo(t, "GET", base+"/deliveries?status=failed", nil)
	wantStatus(t, r, 200)
	if n := len(r.JSON(t)["data"].([]any)); n != 0 {
		t.Fatalf("%d failed deliveries", n)
	}

	// Replay: the same webhook-id again.
	n := len(rcv.requests())
	wantStatus(t, s.AdminDo(t, "POST", base+"/deliveries/"+msg+"/replay", nil), 202)
	waitFor(t, 10*time.Second, "the replay", func() bool { return len(rcv.requests()) > n })
	if rcv.requests()[n].header.Get("webhook-id") != msg {
		t.Fatal("replay came with another webhook-id")
	}

	// Test send: answered with its attempt.
	r = s.AdminDo(t, "POST", base+"/test", nil)
	wantStatus(t, r, 200)
	if m := r.JSON(t); m["type"] != "event.created" || m["test"] != true || m["status"] != "succeeded" || m["response_status"] != 200.0 {
		t.Fatalf("test send: %s", r.Body)
	}

	// After a rotation both secrets sign for a while.
	r = s.AdminDo(t, "POST", base+"/rotate-secret", nil)
	wantStatus(t, r, 200)
	newSecret := r.JSON(t)["secret"].(string)
	n = len(rcv.requests())
	postEvent(t, s, key, "after_rotation")
	waitFor(t, 10*time.Second, "a delivery after rotation", func() bool { return len(rcv.requests()) > n })
	q := rcv.requests()[n]
	for _, sec := range []string{secret, newSecret} {
		if err := verifyWebhook(sec, q.header, q.body, time.Now()); err != nil {
			t.Fatalf("after rotation: %v", err)
		}
	}

	m := Do(t, "GET", s.Admin+"/metrics", "", nil)
	for _, want := range []string{`eventd_webhook_deliveries_total{outcome="success"}`, "eventd_webhook_queue_depth",
		"eventd_webhook_oldest_pending_seconds"} {
		if !strings.Contains(string(m.Body), want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
}

// kill -9 with deliveries pending (failed once) and events still in the
// outbox: after a restart every event reaches the receiver, and an event
// comes twice only under the same webhook-id.
func TestWebhookKill9PendingDeliveredAfterRestart(t *testing.T) {
	t.Parallel()
	rcv := newHookReceiver(t)
	rcv.status.Store(503)
	s := Start(t)
	p := s.Project(t, "kill9", "", nil)
	key := s.Key(t, p, "secret", "test")
	createWebhook(t, s, p, map[string]any{"url": rcv.URL, "environment": "test", "kinds": []string{"event.created"}})

	want := map[string]bool{}
	for i := 0; i < 30; i++ {
		want[postEvent(t, s, key, "before_failure")] = true
	}
	waitFor(t, 10*time.Second, "a failed attempt", func() bool { return len(rcv.requests()) > 0 })
	for i := 0; i < 20; i++ { // some of these are still in the outbox at the kill
		want[postEvent(t, s, key, "at_kill")] = true
	}
	s.Kill()
	rcv.status.Store(200)
	s.Restart()
	waitFor(t, 30*time.Second, "every event after the restart", func() bool { return len(rcv.delivered(t)) >= len(want) })
	got := rcv.delivered(t)
	for ev := range want {
		if got[ev] == nil {
			t.Fatalf("event %s lost", ev)
		}
		if len(got[ev]) != 1 {
			t.Fatalf("event %s delivered under %d webhook-ids", ev, len(got[ev]))
		}
	}
}

// A receiver that hangs for 5 s on every request does not slow ingest: the
// shard only writes outbox records, and sending is the webhook actor's.
func TestWebhookSlowReceiverDoesNotSlowIngest(t *testing.T) {
	t.Parallel()
	rcv := newHookReceiver(t)
	rcv.sleep.Store(int64(5 * time.Second))
	s := Start(t)
	p := s.Project(t, "slow", "", highLimits)
	key := s.Key(t, p, "secret", "test")
	createWebhook(t, s, p, map[string]any{"url": rcv.URL, "environment": "test", "kinds": []string{"event.created"}})
	postEvent(t, s, key, "warmup")
	waitFor(t, 10*time.Second, "the receiver to hang", func() bool { return rcv.active.Load() > 0 })

	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int32
	var slowest atomic.Int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				t0 := time.Now()
				r := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "while_hanging"})
				if r.Status != 201 {
					failed.Add(1)
				}
				if d := int64(time.Since(t0)); d > slowest.Load() {
					slowest.Store(d)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failed.Load() > 0 {
		t.Fatalf("%d requests not 201 while the receiver hung", failed.Load())
	}
	if rcv.active.Load() == 0 {
		t.Log("note: the receiver was not hanging at the end of the burst")
	}
	// Generous: 400 writes take well under a second here; a blocked pipeline would take minutes.
	if elapsed > 20*time.Second {
		t.Fatalf("400 writes took %v while the receiver hung", elapsed)
	}
	t.Logf("400 writes in %v, slowest %v, while the receiver hung", elapsed, time.Duration(slowest.Load()))
}

func TestWebhookUsageAlertFiresOncePerWindow(t *testing.T) {
	t.Parallel()
	// The alert fires once per clock hour: keep the test inside one.
	if left := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour)); left < 20*time.Second {
		time.Sleep(left + time.Second)
	}
	rcv := newHookReceiver(t)
	s := Start(t)
	p := s.Project(t, "alerts", "", map[string]int64{"minute": 1000, "hour": 20, "day": 10000})
	key := s.Key(t, p, "secret", "test")
	createWebhook(t, s, p, map[string]any{"url": rcv.URL, "environment": "test", "kinds": []string{"usage.alert"}})
	r := s.AdminDo(t, "POST", "/admin/v1/projects/"+p+"/alerts", map[string]any{"window": "hour", "threshold_percent": 50})
	wantStatus(t, r, 201)
	aid := r.JSON(t)["id"].(string)

	for i := 0; i < 15; i++ {
		wantStatus(t, Do(t, "GET", s.Public+"/verify", key, nil), 200)
	}
	waitFor(t, 10*time.Second, "the usage.alert delivery", func() bool { return len(rcv.requests()) >= 1 })
	time.Sleep(300 * time.Millisecond)
	reqs := rcv.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d usage.alert deliveries, want 1", len(reqs))
	}
	var env struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	_ = json.Unmarshal(reqs[0].body, &env)
	if env.Type != "usage.alert" || env.Data["window"] != "hour" || env.Data["limit"] != 20.0 || env.Data["used"] != 10.0 ||
		env.Data["threshold"] != 50.0 || !strings.HasPrefix(fmt.Sprint(env.Data["key_id"]), "key_") {
		t.Fatalf("usage.alert body: %s", reqs[0].body)
	}
	r = s.AdminDo(t, "GET", "/admin/v1/projects/"+p+"/alerts/"+aid, nil)
	wantStatus(t, r, 200)
	m := r.JSON(t)
	if m["last_fired_at"] == nil || len(m["firings"].([]any)) != 1 {
		t.Fatalf("alert view: %s", r.Body)
	}
	// A restart forgets nothing: the same window period does not fire again.
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	s.Restart()
	for i := 0; i < 3; i++ {
		wantStatus(t, Do(t, "GET", s.Public+"/verify", key, nil), 200)
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(rcv.requests()); n != 1 {
		t.Fatalf("%d usage.alert deliveries after a restart, want 1", n)
	}
}

// A goal completion becomes one goal.completed delivery, once per visitor.
func TestWebhookGoalCompleted(t *testing.T) {
	t.Parallel()
	rcv := newHookReceiver(t)
	s := Start(t)
	p := s.Project(t, "goal hooks", "", nil)
	key := s.Key(t, p, "secret", "test")
	_, secret := createWebhook(t, s, p, map[string]any{"url": rcv.URL, "environment": "test", "kinds": []string{"goal.completed"}})
	r := s.AdminDo(t, "POST", "/admin/v1/projects/"+p+"/goals", map[string]any{"name": "Purchased", "environment": "test",
		"type": "occurrence", "event": "purchase"})
	wantStatus(t, r, 201)
	goalID := r.JSON(t)["id"].(string)

	first := postEvent(t, s, key, "purchase")
	postEvent(t, s, key, "purchase") // the same visitor: no second completion
	postEvent(t, s, key, "pageview")
	waitFor(t, 15*time.Second, "the goal.completed delivery", func() bool { return len(rcv.requests()) >= 1 })
	time.Sleep(500 * time.Millisecond)
	reqs := rcv.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d goal.completed deliveries, want 1", len(reqs))
	}
	if err := verifyWebhook(secret, reqs[0].header, reqs[0].body, time.Now()); err != nil {
		t.Fatal(err)
	}
	var env struct {
		Type string            `json:"type"`
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(reqs[0].body, &env); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"goal_id": goalID, "name": "Purchased", "visitor_id": "v_1", "event_id": first}
	if env.Type != "goal.completed" || fmt.Sprint(env.Data) != fmt.Sprint(want) {
		t.Fatalf("goal.completed body %s, want data %v", reqs[0].body, want)
	}
}
