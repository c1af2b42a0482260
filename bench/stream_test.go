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
	if sub.slow != 1 || string(sub.lastID) != "evt_01XYZ" {
		t.Errorf("slow %d last id %s", sub.slow, sub.lastID)
	}
	if len(sub.perSec) != 2 || sub.perSec[1] != 1 {
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
