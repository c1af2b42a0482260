package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"
)

func TestParseStamp(t *testing.T) {
	got, ok := ParseStamp([]byte("2026-01-15T10:30:05.123Z"))
	if want := time.Date(2026, 1, 15, 10, 30, 5, 123e6, time.UTC); !ok || !got.Equal(want) {
		t.Errorf("got %v %v", got, ok)
	}
	for _, bad := range []string{"", "2026-01-15T10:30:05Z", "2026-01-15 10:30:05.123Z", "2026-01-15T10:30:05.12xZ", "2026-01-15T10:30:05.123+"} {
		if _, ok := ParseStamp([]byte(bad)); ok {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestStreamEventRequest(t *testing.T) {
	parts := splitPlaceholders("a{n}b{t}{x}{n}")
	var kinds []string
	for _, p := range parts {
		if p.hole != 0 {
			kinds = append(kinds, string(p.hole))
		} else {
			kinds = append(kinds, string(p.text))
		}
	}
	if fmt.Sprint(kinds) != "[a n b t {x} n]" {
		t.Errorf("parts %v", kinds)
	}
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	before := time.Now().UnixNano()
	StreamEventRequest("/events", "sk_live_x")(42, req)
	var ev struct {
		Event      string `json:"event"`
		VisitorID  string `json:"visitor_id"`
		Properties struct {
			SentNs string `json:"sent_ns"`
			Seq    int    `json:"seq"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(req.Body(), &ev); err != nil {
		t.Fatalf("%v in %s", err, req.Body())
	}
	ns, err := strconv.ParseInt(ev.Properties.SentNs, 10, 64)
	if err != nil || ns < before || ev.Properties.Seq != 42 || ev.VisitorID != "v_42" || ev.Event != "stream_bench" {
		t.Errorf("body %s", req.Body())
	}
	if string(req.Header.Peek("Authorization")) != "Bearer sk_live_x" {
		t.Error("no auth header")
	}
}

func TestStreamHandleBooksMessages(t *testing.T) {
	s := &Subscribers{}
	now := time.Date(2026, 1, 15, 10, 30, 0, 0, time.UTC)
	s.start.Store(now.Add(-1500 * time.Millisecond).UnixNano())
	sub := &streamSub{s: s, closes: map[string]uint64{}}
	sent := now.Add(-3 * time.Millisecond).UnixNano()
	msg := fmt.Sprintf(`{"type":"event","data":{"id":"evt_01ABC","event":"x","properties":{"sent_ns":"%d"},"timestamp":"2026-01-15T10:29:59.990Z","created_at":"2026-01-15T10:29:59.990Z"}}`, sent)
	sub.handle([]byte(msg), now)
	sub.handle([]byte(`{"type":"subscribed","event":null,"visitor_id":null}`), now)
	sub.handle([]byte(`{"type":"error","error":"slow_consumer","message":"m","last_id":"evt_01XYZ"}`), now)
	if sub.delivered.Load() != 1 || sub.lat.Count() != 1 || sub.lat.Max() != 3*time.Millisecond {
		t.Errorf("delivered %d latency %v", sub.delivered.Load(), sub.lat.Max())
	}
	if sub.created.Max() != 10*time.Millisecond {
		t.Errorf("created_at latency %v", sub.created.Max())
	}
	// Properties that repeat the fields' names do not move them: the id
	// is the first, created_at the last.
	sub.handle([]byte(fmt.Sprintf(`{"type":"event","data":{"id":"evt_02DEF","event":"x","properties":{"sent_ns":"%d","id":"p","created_at":"2026-01-15T10:29:59.000Z"},"timestamp":"2026-01-15T10:29:59.980Z","created_at":"2026-01-15T10:29:59.980Z"}}`, sent)), now)
	if string(sub.lastID) != "evt_02DEF" || sub.created.Max() != 20*time.Millisecond || sub.lat.Count() != 2 {
		t.Errorf("last id %s, created_at latency %v, %d latencies", sub.lastID, sub.created.Max(), sub.lat.Count())
	}
	sub.handle([]byte(`{"type":"error","error":"slow_consumer","message":"m","last_id":"evt_01XYZ"}`), now)
	if sub.slow != 2 || string(sub.lastID) != "evt_01XYZ" {
		t.Errorf("slow %d last id %s", sub.slow, sub.lastID)
	}
	if len(sub.perSec) != 2 || sub.perSec[1] != 2 {
		t.Errorf("per second %v", sub.perSec)
	}
}

// streamServer is a stand-in for eventd's /stream: on a first connection it
// sends events 1-5, then slow_consumer and close 4008; on a reconnection
// with since=evt_5 it sends 6-10 and waits for the client to leave.
func streamServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := websocket.FastHTTPUpgrader{}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Request.Header.Peek("Authorization")) != "Bearer sk_live_t" {
			ctx.SetStatusCode(fasthttp.StatusUnauthorized)
			return
		}
		since := string(ctx.QueryArgs().Peek("since"))
		_ = up.Upgrade(ctx, func(c *websocket.Conn) {
			defer c.Close()
			first, last := 1, 5
			if since == "evt_5" {
				first, last = 6, 10
			}
			for i := first; i <= last; i++ {
				msg := fmt.Sprintf(`{"type":"event","data":{"id":"evt_%d","properties":{"sent_ns":"%d"},"created_at":"%s"}}`,
					i, time.Now().UnixNano(), time.Now().UTC().Format("2006-01-02T15:04:05.000Z"))
				if c.WriteMessage(websocket.TextMessage, []byte(msg)) != nil {
					return
				}
			}
			if since == "" {
				_ = c.WriteMessage(websocket.TextMessage, []byte(`{"type":"error","error":"slow_consumer","last_id":"evt_5"}`))
				_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4008, "slow consumer"), time.Now().Add(time.Second))
				return
			}
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					return
				}
			}
		})
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return "http://" + ln.Addr().String()
}

func TestSubscribersReconnectWithSince(t *testing.T) {
	url := streamServer(t)
	ctx := context.Background()
	if _, err := StartSubscribers(ctx, StreamOptions{Target: url, Key: "wrong", Subscribers: 1}); err == nil {
		t.Fatal("a refused upgrade was not reported")
	}
	s, err := StartSubscribers(ctx, StreamOptions{Target: url, Key: "sk_live_t", Subscribers: 3, Reconnect: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Mark()
	s.WaitDrained(ctx, 30, time.Minute, time.Minute)
	r := s.Stop()
	if r.Subscribers != 3 || r.Delivered != 30 || r.Latency.Count() != 30 || r.CreatedLatency.Count() != 30 {
		t.Errorf("delivered %d, latencies %d/%d", r.Delivered, r.Latency.Count(), r.CreatedLatency.Count())
	}
	if r.Closes["4008"] != 3 || r.Reconnects != 3 || r.SlowConsumer != 3 || r.DialErrors != 0 {
		t.Errorf("closes %v reconnects %d slow %d dial errors %d", r.Closes, r.Reconnects, r.SlowConsumer, r.DialErrors)
	}
	var sum uint64
	for _, n := range r.PerSecond {
		sum += n
	}
	if sum != 30 || r.MessagesPerSec() <= 0 {
		t.Errorf("per second %v, rate %v", r.PerSecond, r.MessagesPerSec())
	}
	merged := &StreamResult{}
	merged.Merge(r)
	merged.Merge(r)
	if merged.Delivered != 60 || merged.Closes["4008"] != 6 || merged.Latency.Count() != 60 {
		t.Errorf("merged %+v", merged)
	}
}

func TestAckPolicy(t *testing.T) {
	every := []struct {
		window, want int
	}{
		{0, 500}, // the server's default window of 1,000
		{1000, 500},
		{10000, 5000},
		{3, 1},
		{1, 1}, // never 0: an ack per event
	}
	for _, tc := range every {
		if got := AckEvery(tc.window); got != tc.want {
			t.Errorf("AckEvery(%d) = %d, want %d", tc.window, got, tc.want)
		}
	}
	ms := time.Millisecond
	due := []struct {
		name    string
		pending int
		since   time.Duration
		want    bool
	}{
		{"nothing pending, long ago", 0, time.Hour, false},
		{"half a window", 500, 0, true},
		{"more than half", 700, ms, true},
		{"a few, fresh", 10, 20 * ms, false},
		{"a few, 100 ms after the last ack", 10, 100 * ms, true},
		{"one, just under the delay", 1, 99 * ms, false},
	}
	for _, tc := range due {
		if got := AckDue(tc.pending, 500, tc.since, 100*ms); got != tc.want {
			t.Errorf("%s: AckDue(%d, 500, %v) = %v", tc.name, tc.pending, tc.since, got)
		}
	}
	if got := string(AppendAck([]byte("x"), []byte("evt_01ABC"))); got != `x{"type":"ack","id":"evt_01ABC"}` {
		t.Errorf("AppendAck: %s", got)
	}
	if got := CursorName("live", 7); got != "live-7" {
		t.Errorf("CursorName: %s", got)
	}
}

// TestCursorSubscribersAck: cursor subscribers dial with their own cursor
// and window, and acknowledge cumulatively, at least every half window.
func TestCursorSubscribersAck(t *testing.T) {
	const events = 1200
	type conn struct {
		query string
		acks  []string
	}
	got := make(chan conn, 2)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := websocket.FastHTTPUpgrader{}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		q := ctx.QueryArgs().String()
		_ = up.Upgrade(ctx, func(c *websocket.Conn) {
			defer c.Close()
			acks := make(chan []string, 1)
			go func() {
				var a []string
				defer func() { acks <- a }()
				for {
					_, m, err := c.ReadMessage()
					if err != nil {
						return
					}
					a = append(a, string(m))
				}
			}()
			for i := 1; i <= events; i++ {
				if i == events/2 { // before the last event, so it is booked once all are delivered
					_ = c.WriteMessage(websocket.TextMessage, []byte(`{"type":"error","error":"bad_request","message":"m","details":{"id":"x"}}`))
				}
				if c.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `{"type":"event","data":{"id":"evt_%04d"}}`, i)) != nil {
					return
				}
			}
			got <- conn{query: q, acks: <-acks}
		})
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	ctx := context.Background()
	s, err := StartSubscribers(ctx, StreamOptions{Target: "http://" + ln.Addr().String(), Key: "k", Subscribers: 1, Cursor: "sink", AckWindow: 1000})
	if err != nil {
		t.Fatal(err)
	}
	s.WaitDrained(ctx, events, time.Minute, time.Minute)
	r := s.Stop()
	c := <-got
	if c.query != "ack_window=1000&cursor=sink-0" {
		t.Errorf("query %q", c.query)
	}
	if r.Delivered != events || r.Acks != uint64(len(c.acks)) || r.Acks < 2 {
		t.Errorf("delivered %d, acks %d booked, %d received", r.Delivered, r.Acks, len(c.acks))
	}
	// Cumulative and in order, and never more than half a window apart:
	// the 500th and 1,000th events are acknowledged at the latest.
	last := 0
	for _, a := range c.acks {
		var n int
		if _, err := fmt.Sscanf(a, `{"type":"ack","id":"evt_%04d"}`, &n); err != nil || n <= last || n-last > 500 {
			t.Fatalf("ack %s after evt_%04d", a, last)
		}
		last = n
	}
	if last < 1000 {
		t.Errorf("last ack evt_%04d, want at least evt_1000", last)
	}
	if r.AckErrors != 1 {
		t.Errorf("ack errors %d, want 1", r.AckErrors)
	}
}

// TestMarkKeepStart: a catch-up's clock runs from the dial, since events
// arrive before the parent's Mark could; plain runs start it at Mark.
func TestMarkKeepStart(t *testing.T) {
	for _, keep := range []bool{false, true} {
		s := &Subscribers{opts: StreamOptions{KeepStart: keep}}
		s.start.Store(1)
		s.Mark()
		if moved := s.start.Load() != 1; moved == keep {
			t.Errorf("KeepStart %v: Mark moved the start: %v", keep, moved)
		}
	}
}

// BenchmarkStreamHandle books the event messages of the stream scenario as
// eventd sends them, as each of its subscribers does.
func BenchmarkStreamHandle(b *testing.B) {
	s := &Subscribers{}
	now := time.Now()
	s.start.Store(now.UnixNano())
	sub := &streamSub{s: s, closes: map[string]uint64{}}
	msg := []byte(fmt.Sprintf(`{"type":"event","data":{"id":"evt_01JE5B7ZC3M2Q8R4T6V8X0Y2A4","event":"stream_bench","visitor_id":"v_123456","properties":{"sent_ns":"%d","seq":123456,"amount":12.5,"currency":"EUR","page":"/checkout/confirm","referrer":"https://www.example.com/products/sku_123456"},"timestamp":"2026-01-15T10:29:59.990Z","created_at":"2026-01-15T10:29:59.990Z"}}`, now.UnixNano()))
	for range b.N {
		sub.handle(msg, now)
	}
}

func TestCreatedAt(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{`{"type":"event","data":{"id":"e","created_at":"2026-01-15T10:29:59.990Z"}}`, "2026-01-15T10:29:59.990Z"},
		// Not where eventd puts it: found wherever it is last.
		{`{"type":"event","data":{"created_at":"2026-01-15T10:29:59.990Z","id":"e"}}`, "2026-01-15T10:29:59.990Z"},
		{`{"type":"event","data":{"properties":{"created_at":"x"},"created_at":"2026-01-15T10:29:59.991Z"} }`, "2026-01-15T10:29:59.991Z"},
		{`{"type":"event","data":{"id":"e","timestamp":"2026-01-15T10:29:59.990Z"}}`, ""},
		{`"}}`, ""},
	} {
		v, ok := createdAt([]byte(tc.msg))
		if string(v) != tc.want || ok != (tc.want != "") {
			t.Errorf("createdAt(%s) = %q, %v; want %q", tc.msg, v, ok, tc.want)
		}
	}
}
