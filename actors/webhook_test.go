package actors

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventd/eventd/engine/ratelimit"
	"github.com/eventd/eventd/storage"
)

// fakeClock drives the retry schedule: timers fire only when the test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Schedule(at time.Time, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: at, f: f}
	if !at.After(c.now) {
		t.stopped = true
		go f()
		return func() bool { return false }
	}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// Advance moves time on and runs the timers that became due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	keep := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t.f)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// testSecret is a whsec_ secret and the key it stands for.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// verify checks a delivery the way a receiver following Standard Webhooks would.
func verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing headers")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("bad timestamp")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errors.New("timestamp outside tolerance")
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

// received is one request a test receiver got.
type received struct {
	header http.Header
	body   []byte
	status int
}

// receiver is a webhook endpoint on loopback whose answers the test scripts.
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []received
	respond func(n int) (status int, header map[string]string) // n counts requests from 0
	delay   time.Duration
	active  atomic.Int32
	maxSeen atomic.Int32
}

func newReceiver(t *testing.T, respond func(n int) (int, map[string]string)) *receiver {
	r := &receiver{respond: respond}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		cur := r.active.Add(1)
		defer r.active.Add(-1)
		for {
			m := r.maxSeen.Load()
			if cur <= m || r.maxSeen.CompareAndSwap(m, cur) {
				break
			}
		}
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		n := len(r.reqs)
		status, hdr := 200, map[string]string(nil)
		if r.respond != nil {
			status, hdr = r.respond(n)
		}
		r.reqs = append(r.reqs, received{header: req.Header.Clone(), body: body, status: status})
		delay := r.delay
		r.mu.Unlock()
		time.Sleep(delay)
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte("ok from receiver"))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

func (r *receiver) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.reqs...)
}

type envelope struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt string          `json:"created_at"`
	Data      json.RawMessage `json:"data"`
}

type eventsData struct {
	Events []struct {
		ID    string `json:"id"`
		Event string `json:"event"`
	} `json:"events"`
}

func decodeEvents(t *testing.T, body []byte) (envelope, eventsData) {
	t.Helper()
	var env envelope
	var d eventsData
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("delivery body is not JSON: %v\n%s", err, body)
	}
	if err := json.Unmarshal(env.Data, &d); err != nil {
		t.Fatalf("data: %v", err)
	}
	return env, d
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settle gives the actor a moment, for assertions that nothing happens.
func settle() { time.Sleep(150 * time.Millisecond) }

func hookConfig(id, url string) *WebhookConfig {
	return &WebhookConfig{ID: id, Dataset: 1, URL: url, Test: true, EventCreated: true, GoalCompleted: true,
		UsageAlert: true, Enabled: true, Secrets: []Secret{{Key: mustKey(testSecret)}}}
}

func mustKey(s string) []byte {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
	if err != nil {
		panic(err)
	}
	return k
}

// hookRig is a rig whose shards write outbox entries for a webhook actor on a fake clock.
type hookRig struct {
	*rig
	clock *fakeClock
	hooks *Webhooks
	opts  WebhookOptions
	stop  func()
}

func newHookRig(t *testing.T, opts WebhookOptions, cfgs ...*WebhookConfig) *hookRig {
	t.Helper()
	r := newRig(t, time.Minute)
	h := &hookRig{rig: r, clock: newFakeClock()}
	opts.Clock = h.clock
	opts.Set = NewWebhookSet(cfgs)
	opts.Metrics = r.reg
	h.opts = opts
	h.start(t)
	return h
}

func (h *hookRig) start(t *testing.T) {
	t.Helper()
	w, err := NewWebhooks(h.system, h.db, h.opts)
	if err != nil {
		t.Fatal(err)
	}
	h.hooks = w
	h.shards.SetWebhooks(w)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			w.Stop()
		}
	})
	h.stop = func() { stopped = true; w.Stop() }
}

func (h *hookRig) ingest(t *testing.T, names ...string) []storage.ID {
	t.Helper()
	cfg := keyConfig("key_hooks", ratelimit.Limits{Minute: 1e6, Hour: 1e7, Day: 1e8})
	rep := h.submit(t, cfg, ratelimit.Batch, write(names...))
	h.sync()
	out := make([]storage.ID, len(rep.Results))
	for i, r := range rep.Results {
		out[i] = r.ID
	}
	return out
}

// waitAttempts waits until the log shows n attempts of the webhook's only
// delivery: the actor has then settled the last one and set the next due
// time, so the test may move the clock. (The receiver counts a request
// before the actor hears of its answer.)
func (h *hookRig) waitAttempts(t *testing.T, webhook string, n int) {
	t.Helper()
	eventually(t, strconv.Itoa(n)+" logged attempts", func() bool {
		ds := h.deliveries(t, webhook)
		return len(ds) == 1 && ds[0].Attempts == n
	})
	h.sync()
}

// sync waits until the actor has handled what was sent to it, e.g. the outbox of a write.
func (h *hookRig) sync() {
	done := make(chan struct{})
	h.system.Root.Send(h.hooks.pid, &syncReq{done: done})
	<-done
}

func (h *hookRig) deliveries(t *testing.T, webhook string) []Delivery {
	t.Helper()
	var out []Delivery
	err := h.db.ScanDeliveries(webhook, nil, func(_ storage.ID, rec []byte) bool {
		d, err := DecodeDelivery(rec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func names(n int, name string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = name
	}
	return out
}

func TestWebhookSignatureVerifies(t *testing.T) {
	rcv := newReceiver(t, nil)
	h := newHookRig(t, WebhookOptions{}, hookConfig("wh_sig", rcv.URL))
	h.ingest(t, "signup")
	h.clock.Advance(time.Second)
	eventually(t, "a delivery", func() bool { return rcv.count() == 1 })
	got := rcv.all()[0]
	now := time.Now()
	if err := verify(testSecret, got.header, got.body, now, 5*time.Minute); err != nil {
		t.Fatalf("signature does not verify: %v", err)
	}
	if err := verify("whsec_"+base64.StdEncoding.EncodeToString([]byte("another secret of 24 bytes")), got.header, got.body, now, 5*time.Minute); err == nil {
		t.Fatal("verified with a wrong secret")
	}
	if err := verify(testSecret, got.header, got.body, now.Add(10*time.Minute), 5*time.Minute); err == nil {
		t.Fatal("verified a timestamp 10 minutes old")
	}
	tampered := append([]byte(nil), got.body...)
	tampered[len(tampered)-3] ^= 1
	if err := verify(testSecret, got.header, tampered, now, 5*time.Minute); err == nil {
		t.Fatal("verified a tampered body")
	}
	env, data := decodeEvents(t, got.body)
	if env.Type != KindEventCreated || !strings.HasPrefix(env.ID, "msg_") || got.header.Get("webhook-id") != env.ID ||
		len(data.Events) != 1 || data.Events[0].Event != "signup" || !strings.HasPrefix(data.Events[0].ID, "evt_") {
		t.Fatalf("delivery %s", got.body)
	}
	if ct := got.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
}

func TestWebhookRotatedSecretsBothSign(t *testing.T) {
	rcv := newReceiver(t, nil)
	cfg := hookConfig("wh_rot", rcv.URL)
	newSecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	cfg.Secrets = []Secret{{Key: mustKey(newSecret)}, {Key: mustKey(testSecret), ExpiresAt: time.Now().Add(24 * time.Hour).UnixMilli()}}
	h := newHookRig(t, WebhookOptions{}, cfg)
	h.ingest(t, "a")
	h.clock.Advance(time.Second)
	eventually(t, "a delivery", func() bool { return rcv.count() == 1 })
	got := rcv.all()[0]
	for _, s := range []string{newSecret, testSecret} {
		if err := verify(s, got.header, got.body, time.Now(), 5*time.Minute); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if n := len(strings.Fields(got.header.Get("webhook-signature"))); n != 2 {
		t.Fatalf("%d signatures, want 2", n)
	}
	// Past its expiry the old secret no longer signs.
	h.clock.Advance(25 * time.Hour)
	h.ingest(t, "b")
	h.clock.Advance(time.Second)
	eventually(t, "a second delivery", func() bool { return rcv.count() == 2 })
	if sig := rcv.all()[1].header.Get("webhook-signature"); len(strings.Fields(sig)) != 1 {
		t.Fatalf("expired secret still signs: %q", sig)
	}
}

func TestWebhookBatching(t *testing.T) {
	all := newReceiver(t, nil)
	signups := newReceiver(t, nil)
	filtered := hookConfig("wh_filtered", signups.URL)
	filtered.EventNames = map[string]struct{}{"signup": {}}
	h := newHookRig(t, WebhookOptions{}, hookConfig("wh_all", all.URL), filtered)
	var want []storage.ID
	for i := 0; i < 5; i++ {
		want = append(want, h.ingest(t, append(names(49, "pageview"), "signup")...)...)
	}
	// 250 events: two full deliveries of 100 go at once, the rest waits for the batch window.
	eventually(t, "two full deliveries", func() bool { return all.count() == 2 })
	settle()
	if all.count() != 2 || signups.count() != 0 {
		t.Fatalf("before the batch window: %d and %d deliveries", all.count(), signups.count())
	}
	h.clock.Advance(time.Second)
	eventually(t, "the remainder", func() bool { return all.count() == 3 && signups.count() == 1 })
	seen := map[string]bool{}
	var sizes []int
	for _, r := range all.all() {
		_, d := decodeEvents(t, r.body)
		sizes = append(sizes, len(d.Events))
		for _, e := range d.Events {
			seen[e.ID] = true
		}
	}
	if len(seen) != len(want) || sizes[0] != 100 || sizes[1] != 100 || sizes[2] != 50 {
		t.Fatalf("sizes %v, %d distinct events, want 100 100 50 and %d", sizes, len(seen), len(want))
	}
	_, d := decodeEvents(t, signups.all()[0].body)
	if len(d.Events) != 5 {
		t.Fatalf("filtered endpoint got %d events, want the 5 signups", len(d.Events))
	}
	for _, e := range d.Events {
		if e.Event != "signup" {
			t.Fatalf("filtered endpoint got %q", e.Event)
		}
	}
	eventually(t, "outbox drained", func() bool { _, ok, _ := h.db.OldestWaiting(); return !ok })
}

func TestWebhookRetryScheduleAndReplay(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	rcv := newReceiver(t, func(int) (int, map[string]string) {
		if fail.Load() {
			return 500, nil
		}
		return 204, nil
	})
	h := newHookRig(t, WebhookOptions{}, hookConfig("wh_retry", rcv.URL))
	h.ingest(t, "a")
	h.clock.Advance(time.Second)
	eventually(t, "first attempt", func() bool { return rcv.count() == 1 })
	for i, d := range RetrySchedule {
		h.waitAttempts(t, "wh_retry", i+1)
		h.clock.Advance(d - time.Millisecond)
		settle()
		if rcv.count() != i+1 {
			t.Fatalf("retry %d came %v early", i+1, time.Millisecond)
		}
		h.clock.Advance(time.Millisecond)
		eventually(t, "retry "+strconv.Itoa(i+1), func() bool { return rcv.count() == i+2 })
	}
	ds := h.deliveries(t, "wh_retry")
	eventually(t, "failed state", func() bool {
		ds = h.deliveries(t, "wh_retry")
		return len(ds) == 1 && ds[0].Status == DeliveryFailed
	})
	if ds[0].Attempts != 10 || len(ds[0].AttemptLog) != 10 || ds[0].AttemptLog[0].Status != 500 || ds[0].NextAttemptAt != nil ||
		ds[0].ResponseStatus == nil || *ds[0].ResponseStatus != 500 || ds[0].LastAttemptAt == nil {
		t.Fatalf("log after the last retry: %+v", ds[0])
	}
	if ds[0].AttemptLog[0].Response != "ok from receiver" {
		t.Fatalf("response excerpt %q", ds[0].AttemptLog[0].Response)
	}
	h.clock.Advance(48 * time.Hour)
	settle()
	if rcv.count() != 10 {
		t.Fatalf("%d attempts after giving up, want 10", rcv.count())
	}
	// Replay: same webhook-id, sent at once.
	fail.Store(false)
	id, _ := ParseMsgID(ds[0].ID)
	if _, err := h.hooks.Replay("wh_retry", id); err != nil {
		t.Fatal(err)
	}
	eventually(t, "replayed attempt", func() bool { return rcv.count() == 11 })
	reqs := rcv.all()
	if reqs[10].header.Get("webhook-id") != reqs[0].header.Get("webhook-id") {
		t.Fatal("replay changed the webhook-id")
	}
	eventually(t, "succeeded state", func() bool { return h.deliveries(t, "wh_retry")[0].Status == DeliverySucceeded })
	if q := h.hooks.pendingN.Load(); q != 0 {
		t.Fatalf("queue depth %d after success", q)
	}
}

func TestWebhookRetryAfter(t *testing.T) {
	rcv := newReceiver(t, func(n int) (int, map[string]string) {
		if n == 0 {
			return 503, map[string]string{"Retry-After": "120"}
		}
		return 200, nil
	})
	h := newHookRig(t, WebhookOptions{}, hookConfig("wh_ra", rcv.URL))
	h.ingest(t, "a")
	h.clock.Advance(time.Second)
	eventually(t, "first attempt", func() bool { return rcv.count() == 1 })
	h.waitAttempts(t, "wh_ra", 1)
	h.clock.Advance(5 * time.Second) // the schedule's first retry, which Retry-After overrides
	settle()
	if rcv.count() != 1 {
		t.Fatal("retried before Retry-After")
	}
	h.clock.Advance(115 * time.Second)
	eventually(t, "retry after 120 s", func() bool { return rcv.count() == 2 })
	if got := parseRetryAfter(time.Now().Add(90*time.Second).UTC().Format(http.TimeFormat), time.Now()); got < 85*time.Second || got > 90*time.Second {
		t.Fatalf("HTTP-date Retry-After gave %v", got)
	}
}

func TestWebhookGoneDisablesEndpoint(t *testing.T) {
	rcv := newReceiver(t, func(int) (int, map[string]string) { return 410, nil })
	var h *hookRig
	gone := make(chan string, 1)
	cfg := hookConfig("wh_gone", rcv.URL)
	h = newHookRig(t, WebhookOptions{OnGone: func(id string) {
		off := *cfg
		off.Enabled = false
		h.hooks.SetConfig(NewWebhookSet([]*WebhookConfig{&off}))
		gone <- id
	}}, cfg)
	h.ingest(t, "a")
	h.clock.Advance(time.Second)
	select {
	case id := <-gone:
		if id != "wh_gone" {
			t.Fatalf("OnGone(%q)", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("410 did not disable the endpoint")
	}
	eventually(t, "failed state", func() bool {
		ds := h.deliveries(t, "wh_gone")
		return len(ds) == 1 && ds[0].Status == DeliveryFailed
	})
	h.ingest(t, "b")
	h.clock.Advance(time.Hour)
	settle()
	if rcv.count() != 1 {
		t.Fatalf("%d requests to a disabled endpoint", rcv.count())
	}
	if h.reg.Counter("eventd_webhook_deliveries_total", "", `outcome="gone"`).Value() != 1 {
		t.Fatal("gone outcome not counted")
	}
}

// A receiver that fails for a while gets every event afterwards; an event
// arrives twice only under the same webhook-id.
func TestWebhookReceiverDownThenUp(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	rcv := newReceiver(t, func(int) (int, map[string]string) {
		if down.Load() {
			return 503, nil
		}
		return 200, nil
	})
	h := newHookRig(t, WebhookOptions{Concurrency: 2}, hookConfig("wh_down", rcv.URL))
	var want []storage.ID
	for i := 0; i < 7; i++ {
		want = append(want, h.ingest(t, names(60, "e")...)...)
		h.clock.Advance(300 * time.Millisecond)
	}
	h.clock.Advance(time.Second)
	eventually(t, "first attempts", func() bool { return rcv.count() >= 5 })
	settle()
	h.sync()
	h.clock.Advance(5 * time.Second) // every delivery fails twice
	settle()
	down.Store(false)
	for _, d := range RetrySchedule[1:3] {
		h.clock.Advance(d)
		settle()
	}
	eventually(t, "queue drained", func() bool { return h.hooks.pendingN.Load() == 0 && h.hooks.bufferedN.Load() == 0 })
	idsOf := map[string]map[string]bool{} // event id -> webhook-ids that carried it with a 2xx
	for _, r := range rcv.all() {
		if r.status != 200 {
			continue
		}
		_, d := decodeEvents(t, r.body)
		for _, e := range d.Events {
			if idsOf[e.ID] == nil {
				idsOf[e.ID] = map[string]bool{}
			}
			idsOf[e.ID][r.header.Get("webhook-id")] = true
		}
	}
	if len(idsOf) != len(want) {
		t.Fatalf("%d events delivered, want %d", len(idsOf), len(want))
	}
	for id, hooks := range idsOf {
		if len(hooks) != 1 {
			t.Fatalf("event %s delivered under %d webhook-ids", id, len(hooks))
		}
	}
	if m := rcv.maxSeen.Load(); m > 2 {
		t.Fatalf("%d concurrent requests to one endpoint, limit 2", m)
	}
}

// Deliveries and outbox entries survive a restart of the webhook actor over the same store.
func TestWebhookPendingSurvivesRestart(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	rcv := newReceiver(t, func(int) (int, map[string]string) {
		if down.Load() {
			return 500, nil
		}
		return 200, nil
	})
	h := newHookRig(t, WebhookOptions{}, hookConfig("wh_restart", rcv.URL))
	first := h.ingest(t, "a", "b")
	h.clock.Advance(time.Second)
	eventually(t, "failed first attempt", func() bool {
		ds := h.deliveries(t, "wh_restart")
		return len(ds) == 1 && ds[0].Attempts == 1
	})
	second := h.ingest(t, "c") // still in the outbox: the batch window has not passed
	h.stop()

	down.Store(false)
	h.clock = newFakeClock()
	h.opts.Clock = h.clock
	h.start(t)
	if q := h.hooks.pendingN.Load(); q != 1 {
		t.Fatalf("reloaded queue depth %d, want 1", q)
	}
	if b := h.hooks.bufferedN.Load(); b != 1 {
		t.Fatalf("reloaded outbox %d, want 1", b)
	}
	h.clock.Advance(7 * time.Second) // the first clock had moved 1 s when the retry was set for 5 s later
	eventually(t, "both delivered", func() bool { return h.hooks.pendingN.Load() == 0 && h.hooks.bufferedN.Load() == 0 })
	got := map[string]bool{}
	for _, r := range rcv.all() {
		if r.status == 200 {
			_, d := decodeEvents(t, r.body)
			for _, e := range d.Events {
				got[e.ID] = true
			}
		}
	}
	if len(got) != len(first)+len(second) {
		t.Fatalf("delivered %d events after restart, want %d", len(got), len(first)+len(second))
	}
}

func TestWebhookNoRedirectsAndSSRFGuard(t *testing.T) {
	target := newReceiver(t, nil)
	redirect := newReceiver(t, func(int) (int, map[string]string) {
		return 302, map[string]string{"Location": target.URL}
	})
	live := hookConfig("wh_live", target.URL)
	live.Test = false // a live endpoint on loopback
	h := newHookRig(t, WebhookOptions{}, hookConfig("wh_redirect", redirect.URL), live)
	h.ingest(t, "a")
	h.clock.Advance(time.Second)
	attempted := func(id string) bool {
		ds := h.deliveries(t, id)
		return len(ds) == 1 && ds[0].Attempts == 1
	}
	eventually(t, "both attempted", func() bool { return attempted("wh_redirect") && attempted("wh_live") })
	if a := h.deliveries(t, "wh_redirect")[0].AttemptLog[0]; a.Status != 302 {
		t.Fatalf("redirect attempt %+v", a)
	}
	if a := h.deliveries(t, "wh_live")[0].AttemptLog[0]; a.Status != 0 || !strings.Contains(a.Error, "not allowed") {
		t.Fatalf("live endpoint on loopback: %+v", a)
	}
	settle()
	if target.count() != 0 {
		t.Fatal("the redirect was followed or the live endpoint reached loopback")
	}
}

// addrCase is whether an address is allowed for a live webhook, a test one,
// and a live one with --webhooks-allow-private.
type addrCase struct {
	addr                 string
	live, test, liveFlag bool
}

func checkAddrCases(t *testing.T, cases []addrCase) {
	t.Helper()
	for _, c := range cases {
		a := netip.MustParseAddr(c.addr)
		if got := WebhookAddrAllowed(a, false, false); got != c.live {
			t.Errorf("%s live: %v, want %v", c.addr, got, c.live)
		}
		if got := WebhookAddrAllowed(a, true, false); got != c.test {
			t.Errorf("%s test: %v, want %v", c.addr, got, c.test)
		}
		if got := WebhookAddrAllowed(a, false, true); got != c.liveFlag {
			t.Errorf("%s live with --webhooks-allow-private: %v, want %v", c.addr, got, c.liveFlag)
		}
	}
}

func TestWebhookAddrAllowed(t *testing.T) {
	cases := []addrCase{
		{"93.184.216.34", true, true, true},
		{"2606:4700::1111", true, true, true},
		{"127.0.0.1", false, true, true},
		{"::1", false, true, true},
		{"10.1.2.3", false, true, true},
		{"192.168.1.1", false, true, true},
		{"172.16.0.1", false, true, true},
		{"100.64.0.1", false, true, true},
		{"169.254.169.254", false, false, true},
		{"fe80::1", false, false, true},
		{"::ffff:127.0.0.1", false, true, true},
		{"0.0.0.0", false, false, false},
		{"::", false, false, false},
		{"224.0.0.1", false, false, false},
		{"255.255.255.255", false, false, false},
		{"64:ff9b::a00:1", false, false, true},
		{"198.18.0.1", false, false, true},
	}
	checkAddrCases(t, cases)
}

func TestWebhookGoalCompletedIsIdempotent(t *testing.T) {
	rcv := newReceiver(t, nil)
	h := newHookRig(t, WebhookOptions{}, hookConfig("wh_goal", rcv.URL))
	ev := h.ingest(t, "purchase")[0]
	c := GoalCompletion{GoalID: "goal_1", Name: "First purchase", VisitorID: "v1", HasVisitor: true, EventID: ev}
	if err := h.hooks.EnqueueGoalCompleted(1, c); err != nil {
		t.Fatal(err)
	}
	if err := h.hooks.EnqueueGoalCompleted(1, c); err != nil {
		t.Fatal(err)
	}
	if err := h.hooks.EnqueueGoalCompleted(2, c); err != nil { // a dataset without endpoints
		t.Fatal(err)
	}
	h.clock.Advance(time.Second)
	eventually(t, "two deliveries", func() bool { return rcv.count() == 2 })
	settle()
	var goals []map[string]any
	for _, r := range rcv.all() {
		var env envelope
		_ = json.Unmarshal(r.body, &env)
		if env.Type == KindGoalCompleted {
			var d map[string]any
			_ = json.Unmarshal(env.Data, &d)
			goals = append(goals, d)
		}
	}
	if len(goals) != 1 || goals[0]["goal_id"] != "goal_1" || goals[0]["visitor_id"] != "v1" ||
		goals[0]["name"] != "First purchase" || !strings.HasPrefix(goals[0]["event_id"].(string), "evt_") {
		t.Fatalf("goal deliveries %v", goals)
	}
}

func TestUsageAlertFiresOncePerWindow(t *testing.T) {
	rcv := newReceiver(t, nil)
	h := newHookRig(t, WebhookOptions{}, hookConfig("wh_alert", rcv.URL))
	var mu sync.Mutex
	var fired []UsageAlert
	cfg := keyConfig("key_alert", ratelimit.Limits{Minute: 1000, Hour: 20, Day: 1000})
	rules := []AlertRule{
		{ID: "al_hour", Window: "hour", Percent: 47.5}, // 9.5 of 20: the 10th request
		{ID: "al_other", KeyID: "key_other", Window: "hour", Percent: 10},
	}
	cfg.Alerts = func() []AlertRule { return rules }
	cfg.OnAlert = func(a UsageAlert) {
		mu.Lock()
		fired = append(fired, a)
		mu.Unlock()
		a.Dataset = 1
		h.hooks.FireAlert(a)
		h.hooks.FireAlert(a) // the actor dedupes too: once per key, rule and period
	}
	for i := 0; i < 15; i++ {
		if !h.submit(t, cfg, ratelimit.Standard, nil).Allowed {
			t.Fatalf("request %d refused", i)
		}
	}
	mu.Lock()
	got := append([]UsageAlert(nil), fired...)
	mu.Unlock()
	if len(got) != 1 || got[0].AlertID != "al_hour" || got[0].Used != 10 || got[0].Limit != 20 || got[0].KeyID != "key_alert" {
		t.Fatalf("alerts %+v, want one of al_hour at 10/20", got)
	}
	h.clock.Advance(time.Second)
	eventually(t, "usage.alert delivery", func() bool { return rcv.count() == 1 })
	settle()
	var env envelope
	_ = json.Unmarshal(rcv.all()[0].body, &env)
	var d map[string]any
	_ = json.Unmarshal(env.Data, &d)
	if env.Type != KindUsageAlert || d["key_id"] != "key_alert" || d["window"] != "hour" || d["limit"] != 20.0 ||
		d["used"] != 10.0 || d["threshold"] != 47.5 || rcv.count() != 1 {
		t.Fatalf("alert delivery %s (%d deliveries)", rcv.all()[0].body, rcv.count())
	}
	var firings []AlertFiring
	_ = h.db.ScanAlertFirings("al_hour", func(rec []byte) bool {
		var f AlertFiring
		_ = json.Unmarshal(rec, &f)
		firings = append(firings, f)
		return true
	})
	if len(firings) != 1 || firings[0].Used != 10 {
		t.Fatalf("firings %+v", firings)
	}
}

func TestWebhookTestDelivery(t *testing.T) {
	rcv := newReceiver(t, func(int) (int, map[string]string) { return 500, nil })
	cfg := hookConfig("wh_test", rcv.URL)
	cfg.Enabled = false // a test send reaches a disabled endpoint too
	h := newHookRig(t, WebhookOptions{}, cfg)
	d, finished, err := h.hooks.Test("wh_test", 10*time.Second)
	if err != nil || !finished {
		t.Fatalf("test send: %v finished=%v", err, finished)
	}
	if d.Type != KindEventCreated || !d.Test || d.Status != DeliveryFailed || d.Attempts != 1 || *d.ResponseStatus != 500 {
		t.Fatalf("test delivery %+v", d)
	}
	_, data := decodeEvents(t, rcv.all()[0].body)
	if len(data.Events) != 1 || data.Events[0].Event != "eventd_test" {
		t.Fatalf("test delivery body %s", rcv.all()[0].body)
	}
	h.clock.Advance(time.Hour)
	settle()
	if rcv.count() != 1 {
		t.Fatal("a test delivery was retried")
	}
}

func TestWebhookForgetDeletesEverything(t *testing.T) {
	rcv := newReceiver(t, func(int) (int, map[string]string) { return 500, nil })
	h := newHookRig(t, WebhookOptions{}, hookConfig("wh_forget", rcv.URL))
	h.ingest(t, "a")
	h.clock.Advance(time.Second)
	eventually(t, "an attempt", func() bool { return rcv.count() == 1 })
	h.hooks.SetConfig(NewWebhookSet(nil))
	if err := h.hooks.Forget("wh_forget"); err != nil {
		t.Fatal(err)
	}
	h.ingest(t, "b") // routes no longer include it
	h.clock.Advance(time.Hour)
	settle()
	if rcv.count() != 1 || len(h.deliveries(t, "wh_forget")) != 0 {
		t.Fatalf("after forget: %d requests, %d records", rcv.count(), len(h.deliveries(t, "wh_forget")))
	}
	if _, ok, _ := h.db.OldestWaiting(); ok {
		t.Fatal("pending work left after forget")
	}
}

func TestMsgIDRoundTrip(t *testing.T) {
	id := derivedID(1_700_000_000_000, "a", "b")
	s := FormatMsgID(id)
	back, err := ParseMsgID(s)
	if err != nil || back != id || !strings.HasPrefix(s, "msg_") || len(s) != 30 {
		t.Fatalf("%s -> %x %v", s, back, err)
	}
	if _, err := ParseMsgID("evt_" + s[4:]); err == nil {
		t.Fatal("an event id parsed as a msg id")
	}
	if derivedID(1_700_000_000_000, "a", "b") != id || derivedID(1_700_000_000_000, "ab", "") == id {
		t.Fatal("derived ids are not stable or collide on concatenation")
	}
	keys := [][]byte{[]byte("k1"), []byte("k2")}
	sig := SignWebhook(keys, "msg_1", "1700000000", []byte(`{}`))
	parts := strings.Fields(sig)
	sort.Strings(parts)
	if len(parts) != 2 || !strings.HasPrefix(parts[0], "v1,") {
		t.Fatalf("signature header %q", sig)
	}
}

// TestWebhookAddrAllowedSpecialRanges: the IANA special-purpose ranges (from
// code.dny.dev/ssrf) are not public, whatever form the address takes.
func TestWebhookAddrAllowedSpecialRanges(t *testing.T) {
	cases := []addrCase{
		{"::127.0.0.1", false, false, true},    // IPv4-compatible ::/96 (deprecated)
		{"::10.0.0.1", false, false, true},     // same, private
		{"::ffff:10.0.0.1", false, true, true}, // IPv4-mapped: judged as the IPv4 address
		{"::ffff:93.184.216.34", true, true, true},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", false, false, true}, // Teredo
		{"2001:2::1", false, false, true},                            // benchmarking, in 2001::/23
		{"2002:7f00:1::1", false, false, true},                       // 6to4 embedding 127.0.0.1
		{"2002:5db8:d822::1", false, false, true},                    // 6to4 of a public address: still refused
		{"192.88.99.1", false, false, true},                          // 6to4 relay anycast
		{"192.31.196.1", false, false, true},                         // AS112
		{"192.52.193.1", false, false, true},                         // AMT
		{"192.175.48.1", false, false, true},                         // AS112 direct delegation
		{"3fff::1", false, false, true},                              // documentation (RFC 9637)
		{"2620:4f:8000::1", false, false, true},                      // AS112 IPv6
		{"fc00::1", false, true, true},                               // ULA: private
		{"fd12:3456::1", false, true, true},
		{"64:ff9b::7f00:1", false, false, true}, // NAT64 of 127.0.0.1
		{"100::1", false, false, true},          // discard-only
		{"ff02::1", false, false, false},        // multicast: never
		{"0.1.2.3", false, false, false},        // "this network": never
		{"8.8.8.8", true, true, true},
		{"2a00:1450:4001:81c::200e", true, true, true},
	}
	checkAddrCases(t, cases)
}

// The dial-time check refuses the special ranges too, so a hostname that
// resolves to one of them is refused at connection time.
func TestWebhookClientRefusesSpecialRangesAtDial(t *testing.T) {
	c := newWebhookClient(5*time.Second, func(a netip.Addr) bool { return WebhookAddrAllowed(a, false, false) })
	for _, u := range []string{"http://[::127.0.0.1]:9/", "http://[2002:7f00:1::1]:9/", "http://192.88.99.1:9/", "http://[::ffff:127.0.0.1]:9/"} {
		resp, err := c.Get(u)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s: connected", u)
		}
		if !errors.Is(err, errBlockedAddr) {
			t.Errorf("%s: %v, want the SSRF guard's refusal", u, err)
		}
	}
}
