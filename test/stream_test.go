package test

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
)

// streamMsg is any server -> client message.
type streamMsg struct {
	Type      string          `json:"type"`
	CreatedAt string          `json:"created_at"` // typed messages (kinds=)
	Data      json.RawMessage `json:"data"`
	Error     string          `json:"error"`
	LastID    *string         `json:"last_id"`
	Event     []string        `json:"event"`
	VisitorID *string         `json:"visitor_id"`
	// Redelivered and Details: cursor connections (cursor_test.go).
	Redelivered bool              `json:"redelivered"`
	Details     map[string]string `json:"details"`
}

type streamEvent struct {
	ID         string         `json:"id"`
	Event      string         `json:"event"`
	VisitorID  string         `json:"visitor_id"`
	Properties map[string]any `json:"properties"`
	Timestamp  string         `json:"timestamp"`
	CreatedAt  string         `json:"created_at"`
}

func wsURL(s *Server, query string) string {
	return "ws" + strings.TrimPrefix(s.Public, "http") + "/stream" + query
}

// wsClient reads a stream in its own goroutine, so that a read with a
// deadline never corrupts the connection (gorilla's timeouts are permanent).
type wsClient struct {
	*websocket.Conn
	msgs    chan wsResult
	started sync.Once
}

type wsResult struct {
	m   streamMsg
	err error
}

var errSilence = errors.New("no message within the wait")

// startReading begins consuming messages; dial starts it unless lazy.
func (w *wsClient) startReading(t *testing.T) {
	w.started.Do(func() {
		go func() {
			for {
				_, b, err := w.ReadMessage()
				if err != nil {
					w.msgs <- wsResult{err: err}
					return
				}
				var m streamMsg
				if err := json.Unmarshal(b, &m); err != nil {
					w.msgs <- wsResult{err: fmt.Errorf("stream message is not JSON: %s", b)}
					return
				}
				w.msgs <- wsResult{m: m}
			}
		}()
	})
}

// dial opens a stream and starts reading it, or fails the test.
func dial(t *testing.T, url string, header http.Header) *wsClient {
	t.Helper()
	w := dialLazy(t, url, header)
	w.startReading(t)
	return w
}

// dialLazy opens a stream without reading it (a slow or silent client).
func dialLazy(t *testing.T, url string, header http.Header) *wsClient {
	t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial(url, header)
	if err != nil {
		body := ""
		if resp != nil {
			b, _ := io.ReadAll(resp.Body)
			body = fmt.Sprintf("%d %s", resp.StatusCode, b)
		}
		t.Fatalf("dial %s: %v %s", url, err, body)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &wsClient{Conn: c, msgs: make(chan wsResult, 100000)}
}

func bearer(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} }

// readMsg returns the next message, the connection's error, or errSilence after d.
func readMsg(t *testing.T, w *wsClient, d time.Duration) (streamMsg, error) {
	t.Helper()
	select {
	case r := <-w.msgs:
		if r.err != nil {
			w.msgs <- r // the error stays: every later read sees it too
		}
		return r.m, r.err
	case <-time.After(d):
		return streamMsg{}, errSilence
	}
}

func readEvent(t *testing.T, w *wsClient) streamEvent {
	t.Helper()
	m, err := readMsg(t, w, 10*time.Second)
	if err != nil {
		t.Fatalf("read stream: %v", err)
	}
	if m.Type != "event" {
		t.Fatalf("message type %q (%+v), want event", m.Type, m)
	}
	var e streamEvent
	if err := json.Unmarshal(m.Data, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// expectSilence checks that no message arrives within d.
func expectSilence(t *testing.T, w *wsClient, d time.Duration) {
	t.Helper()
	if m, err := readMsg(t, w, d); err != errSilence {
		t.Fatalf("unexpected stream message %+v / %v", m, err)
	}
}

func post(t *testing.T, s *Server, key, name, visitor string) string {
	t.Helper()
	body := map[string]any{"event": name}
	if visitor != "" {
		body["visitor_id"] = visitor
	}
	r := Do(t, "POST", s.Public+"/events", key, body)
	wantStatus(t, r, 201)
	return r.JSON(t)["id"].(string)
}

var streamLimits = map[string]int64{"minute": 1000000, "hour": 10000000, "day": 100000000}

func TestStreamAuth(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", nil)
	secret := s.Key(t, p, "secret", "live")
	public := s.Key(t, p, "public", "live")
	cases := []struct {
		name   string
		url    string
		header http.Header
		status int
		code   string
	}{
		{"no key", wsURL(s, ""), nil, 401, "unauthorized"},
		{"bad key", wsURL(s, ""), bearer("sk_live_00000000000000000000000000000000"), 401, "unauthorized"},
		{"public key", wsURL(s, ""), bearer(public), 403, "forbidden"},
		{"bad since", wsURL(s, "?since=nope"), bearer(secret), 400, "bad_request"},
		{"bad event filter", wsURL(s, "?event=no-dash"), bearer(secret), 400, "bad_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, resp, err := websocket.DefaultDialer.Dial(tc.url, tc.header)
			if err == nil || resp == nil {
				t.Fatalf("dial succeeded or no response: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			var e map[string]any
			if json.Unmarshal(b, &e) != nil || e["error"] != tc.code {
				t.Fatalf("body %s, want error %q", b, tc.code)
			}
		})
	}
	t.Run("api_key query and rate-limit headers", func(t *testing.T) {
		c, resp, err := websocket.DefaultDialer.Dial(wsURL(s, "?api_key="+secret), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if resp.StatusCode != 101 || resp.Header.Get("X-RateLimit-Limit") != "100" || resp.Header.Get("X-RateLimit-Remaining") == "" {
			t.Fatalf("upgrade response %d headers %v", resp.StatusCode, resp.Header)
		}
	})
	t.Run("connection cap", func(t *testing.T) {
		key := s.Key(t, p, "secret", "test")
		for i := 0; i < 5; i++ {
			dial(t, wsURL(s, ""), bearer(key)) // free plan: 5
		}
		_, resp, err := websocket.DefaultDialer.Dial(wsURL(s, ""), bearer(key))
		if err == nil || resp == nil || resp.StatusCode != 429 {
			t.Fatalf("6th stream: %v %v", err, resp)
		}
	})
}

func TestStreamIsolationAndFilters(t *testing.T) {
	s := Start(t)
	pa := s.Project(t, "a", "", streamLimits)
	pb := s.Project(t, "b", "", streamLimits)
	aLive := s.Key(t, pa, "secret", "live")
	aTest := s.Key(t, pa, "secret", "test")
	bLive := s.Key(t, pb, "secret", "live")

	all := dial(t, wsURL(s, ""), bearer(aLive))
	signups := dial(t, wsURL(s, "?event=signup&event=login"), bearer(aLive))
	visitor := dial(t, wsURL(s, "?visitor_id=v_7"), bearer(aLive))

	post(t, s, aTest, "signup", "v_7") // other environment
	post(t, s, bLive, "signup", "v_7") // other project
	id1 := post(t, s, aLive, "purchase", "v_1")
	id2 := post(t, s, aLive, "signup", "v_7")
	id3 := post(t, s, aLive, "login", "v_2")

	for _, want := range []string{id1, id2, id3} {
		got := readEvent(t, all)
		if got.ID != want {
			t.Fatalf("all: got %s, want %s", got.ID, want)
		}
	}
	expectSilence(t, all, 300*time.Millisecond)
	for _, want := range []string{id2, id3} {
		if got := readEvent(t, signups); got.ID != want {
			t.Fatalf("event filter: got %s, want %s", got.ID, want)
		}
	}
	expectSilence(t, signups, 200*time.Millisecond)
	got := readEvent(t, visitor)
	if got.ID != id2 || got.VisitorID != "v_7" || got.Event != "signup" || got.CreatedAt == "" || got.Properties == nil {
		t.Fatalf("visitor filter: got %+v", got)
	}
	expectSilence(t, visitor, 200*time.Millisecond)

	// Re-subscribe changes the filter and is acknowledged.
	if err := all.WriteMessage(websocket.TextMessage, []byte(`{"type":"subscribe","event":["purchase"],"visitor_id":"v_9"}`)); err != nil {
		t.Fatal(err)
	}
	m, err := readMsg(t, all, 5*time.Second)
	if err != nil || m.Type != "subscribed" || len(m.Event) != 1 || m.Event[0] != "purchase" || m.VisitorID == nil || *m.VisitorID != "v_9" {
		t.Fatalf("subscribed reply %+v %v", m, err)
	}
	post(t, s, aLive, "purchase", "v_1")
	want := post(t, s, aLive, "purchase", "v_9")
	if got := readEvent(t, all); got.ID != want {
		t.Fatalf("after subscribe: got %s, want %s", got.ID, want)
	}
	// A bad message gets an error reply and the connection stays open.
	_ = all.WriteMessage(websocket.TextMessage, []byte(`{"type":"dance"}`))
	if m, err := readMsg(t, all, 5*time.Second); err != nil || m.Type != "error" || m.Error != "bad_request" {
		t.Fatalf("bad message reply %+v %v", m, err)
	}
}

func TestStreamSinceWithConcurrentWriters(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	first := post(t, s, key, "warmup", "")

	const writers, perWriter = 4, 60
	var mu sync.Mutex
	order := make(map[int][]string) // ids per writer in the order they were acknowledged
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			<-start
			for i := 0; i < perWriter; i++ {
				r := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "tick", "visitor_id": fmt.Sprint("w", w)})
				if r.Status != 201 {
					t.Errorf("post: %d %s", r.Status, r.Body)
					return
				}
				var out struct{ ID string }
				_ = json.Unmarshal(r.Body, &out)
				mu.Lock()
				order[w] = append(order[w], out.ID)
				mu.Unlock()
			}
		}(w)
	}
	close(start)
	time.Sleep(50 * time.Millisecond) // let some events land before the stream connects
	c := dial(t, wsURL(s, "?since="+first), bearer(key))
	seen := map[string]int{}
	var got []streamEvent
	for len(got) < writers*perWriter {
		e := readEvent(t, c)
		seen[e.ID]++
		if seen[e.ID] > 1 {
			t.Fatalf("event %s delivered twice", e.ID)
		}
		got = append(got, e)
	}
	wg.Wait()
	expectSilence(t, c, 300*time.Millisecond)
	pos := map[string]int{}
	for i, e := range got {
		pos[e.ID] = i
	}
	for w, list := range order {
		for i, id := range list {
			if _, ok := pos[id]; !ok {
				t.Fatalf("acknowledged %s missing from stream", id)
			}
			if i > 0 && pos[id] < pos[list[i-1]] {
				t.Fatalf("writer %d: %s delivered before %s although recorded after it", w, id, list[i-1])
			}
		}
	}
}

func TestStreamPingTimeout(t *testing.T) {
	s := Start(t, "--stream-ping", "100ms", "--stream-pong", "400ms")
	p := s.Project(t, "a", "", nil)
	key := s.Key(t, p, "secret", "live")

	// A client that answers pings (gorilla answers them while reading) stays.
	alive := dial(t, wsURL(s, ""), bearer(key))
	// A client that never reads sends no pong and is closed.
	silent := dialLazy(t, wsURL(s, ""), bearer(key))
	expectSilence(t, alive, 1200*time.Millisecond)
	post(t, s, key, "still_here", "")
	if e := readEvent(t, alive); e.Event != "still_here" {
		t.Fatalf("alive client got %+v", e)
	}
	// The silent one: once it reads, it finds its buffered pings, then the connection is gone.
	silent.startReading(t)
	for {
		m, err := readMsg(t, silent, 5*time.Second)
		if err == errSilence {
			t.Fatal("silent client was not disconnected")
		}
		if err != nil {
			break
		}
		_ = m
	}
}

func TestStreamSlowConsumer(t *testing.T) {
	s := Start(t, "--stream-queue", "200")
	p := s.Project(t, "a", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	normal := dial(t, wsURL(s, ""), bearer(key))
	slow := dialLazy(t, wsURL(s, ""), bearer(key))

	// The normal subscriber on the same dataset gets everything, in order.
	ids := fillUntilDropped(t, s, key, func(batch []string) {
		for i, want := range batch {
			if got := readEvent(t, normal); got.ID != want {
				t.Fatalf("normal subscriber event %d of a batch: %s, want %s", i, got.ID, want)
			}
		}
	})
	slow.startReading(t)
	// The slow one gets what was written before the overflow, then the error and 4008.
	var last string
	for {
		m, err := readMsg(t, slow, 10*time.Second)
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != 4008 {
				t.Fatalf("slow consumer closed with %v, want close 4008", err)
			}
			break
		}
		switch m.Type {
		case "event":
			var e streamEvent
			_ = json.Unmarshal(m.Data, &e)
			last = e.ID
		case "error":
			if m.Error != "slow_consumer" || m.LastID == nil || *m.LastID != last {
				t.Fatalf("error message %+v, want slow_consumer with last_id %s", m, last)
			}
		}
	}
	m := metricsText(t, s)
	if !strings.Contains(m, "eventd_stream_slow_consumer_closes_total 1") {
		t.Fatalf("metrics do not count the slow consumer:\n%s", m)
	}
	// Resuming with since=last_id gives the rest, without a gap.
	resumed := dial(t, wsURL(s, "?since="+last), bearer(key))
	next := 0
	for i, id := range ids {
		if id == last {
			next = i + 1
		}
	}
	if next < len(ids) {
		if got := readEvent(t, resumed); got.ID != ids[next] {
			t.Fatalf("resume: got %s, want %s", got.ID, ids[next])
		}
	}
}

func metricsText(t *testing.T, s *Server) string {
	t.Helper()
	r := Do(t, "GET", s.Admin+"/metrics", "", nil)
	wantStatus(t, r, 200)
	return string(r.Body)
}

func TestStreamMessageTooBig(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", nil)
	c := dial(t, wsURL(s, ""), bearer(s.Key(t, p, "secret", "live")))
	if err := c.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("x", 5000))); err != nil {
		t.Fatal(err)
	}
	_, err := readMsg(t, c, 5*time.Second)
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseMessageTooBig {
		t.Fatalf("got %v, want close 1009", err)
	}
}

func TestStreamOrigin(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", nil)
	key := s.Key(t, p, "secret", "live")
	r := s.AdminDo(t, "PATCH", "/admin/v1/projects/"+p, map[string]any{"allowed_origins": []string{"https://shop.example"}})
	wantStatus(t, r, 200)
	h := bearer(key)
	h.Set("Origin", "https://evil.example")
	_, resp, err := websocket.DefaultDialer.Dial(wsURL(s, ""), h)
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("foreign origin: %v %v", err, resp)
	}
	h.Set("Origin", "https://shop.example")
	dial(t, wsURL(s, ""), h)
}

func TestStreamShutdownClosesWith1001(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	c := dial(t, wsURL(s, ""), bearer(key))
	id := post(t, s, key, "last_words", "")
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if e := readEvent(t, c); e.ID != id {
		t.Fatalf("got %s, want %s before close", e.ID, id)
	}
	_, err := readMsg(t, c, 5*time.Second)
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
		t.Fatalf("got %v, want close 1001", err)
	}
}

func TestStreamOverTLS(t *testing.T) {
	certFile, keyFile := selfSignedCert(t)
	s := Start(t, "--tls-cert", certFile, "--tls-key", keyFile)
	pub := strings.Replace(s.Public, "http://", "https://", 1)
	adm := strings.Replace(s.Admin, "http://", "https://", 1)
	insecure := &tls.Config{InsecureSkipVerify: true} // the test's own self-signed certificate
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: insecure}}
	call := func(method, url, key string, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %v", method, url, resp.StatusCode, err)
		}
		return m
	}
	p := call("POST", adm+"/admin/v1/projects", s.Token, `{"name":"tls"}`)["id"].(string)
	key := call("POST", adm+"/admin/v1/projects/"+p+"/keys", s.Token, `{"name":"k","type":"secret","environment":"live"}`)["key"].(string)

	d := websocket.Dialer{TLSClientConfig: insecure}
	url := "wss" + strings.TrimPrefix(pub, "https") + "/stream"
	c, resp, err := d.Dial(url, bearer(key))
	if err != nil {
		t.Fatalf("wss dial: %v %v", err, resp)
	}
	t.Cleanup(func() { _ = c.Close() })
	w := &wsClient{Conn: c, msgs: make(chan wsResult, 16)}
	w.startReading(t)
	id := call("POST", pub+"/events", key, `{"event":"over_tls"}`)["id"].(string)
	if e := readEvent(t, w); e.ID != id {
		t.Fatalf("got %s over wss, want %s", e.ID, id)
	}
	// Plain ws:// to a TLS listener does not get a stream.
	if _, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(s.Public, "http")+"/stream", bearer(key)); err == nil {
		t.Fatal("plain ws:// reached a TLS listener")
	}
}

// fillUntilDropped posts batches of large events (they fill the socket
// buffers quickly, then a 200-slot queue in two batches) until a subscriber
// that does not read overflowed its queue, and returns the events' ids.
// After each batch, consume reads that batch from the subscribers that
// do read, so that they never hold more than one batch (100 events) in their
// 200-slot queues however slowly this process is scheduled: only the slow
// one can overflow. It stops at once so that the slow subscriber's writer
// is not left blocked on a full socket for long.
func fillUntilDropped(t *testing.T, s *Server, key string, consume func(batch []string)) []string {
	t.Helper()
	pad := strings.Repeat("x", 30000)
	const maxBatches, per = 40, 100
	var ids []string
	for b := 0; b < maxBatches; b++ {
		events := make([]map[string]any, per)
		for i := range events {
			events[i] = map[string]any{"event": "big", "properties": map[string]any{"pad": pad, "n": b*per + i}}
		}
		r := Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": events})
		wantStatus(t, r, 201)
		var out struct{ Results []struct{ ID string } }
		_ = json.Unmarshal(r.Body, &out)
		batch := make([]string, 0, per)
		for _, res := range out.Results {
			batch = append(batch, res.ID)
		}
		ids = append(ids, batch...)
		consume(batch)
		if scrapeMetric(t, s, "eventd_stream_drops_total") > 0 {
			return ids
		}
	}
	t.Fatal("no subscriber ever overflowed its queue")
	return nil
}
