package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

var t0 = time.Date(2026, 1, 15, 10, 30, 0, 0, time.UTC)

func TestPacerIntended(t *testing.T) {
	tests := []struct {
		rate float64
		i    uint64
		want time.Duration
	}{
		{1000, 0, 0},
		{1000, 1, time.Millisecond},
		{1000, 999, 999 * time.Millisecond},
		{16700, 16700, time.Second},
		{16700, 1, 59880},                 // 59880.24 ns, truncated
		{3, 1, 333333333},                 // a third of a second, truncated
		{3, 3_000_000, 1e6 * time.Second}, // no drift after a million seconds
		{0.5, 7, 14 * time.Second},
		{1e6, 123_456_789, 123456789 * time.Microsecond},
	}
	for _, tc := range tests {
		p := NewPacer(t0, tc.rate, 0, 0)
		if got := p.Intended(tc.i).Sub(t0); got != tc.want {
			t.Errorf("rate %v slot %d: due at +%v, want +%v", tc.rate, tc.i, got, tc.want)
		}
	}
}

func TestPacerNoDrift(t *testing.T) {
	// Adding a rounded interval drifts; computing each slot from its index
	// does not: slot i is never more than 1 ns from i/rate.
	const rate = 7919.0
	p := NewPacer(t0, rate, 0, 0)
	for _, i := range []uint64{1, 10, 1000, 1e5, 1e7, 1e9} {
		exact := float64(i) * 1e9 / rate
		got := float64(p.Intended(i).Sub(t0))
		if d := got - exact; d > 1 || d < -1 {
			t.Errorf("slot %d off by %v ns", i, d)
		}
	}
	// Intervals between consecutive slots never exceed the rounded interval
	// by more than a nanosecond.
	prev := p.Intended(0)
	for i := uint64(1); i < 10000; i++ {
		cur := p.Intended(i)
		if d := cur.Sub(prev); d < 126278 || d > 126279 { // 1e9/7919 = 126278.57
			t.Fatalf("slot %d: gap %v", i, d)
		}
		prev = cur
	}
}

func TestPacerBounds(t *testing.T) {
	tests := []struct {
		name     string
		rate     float64
		duration time.Duration
		max      uint64
		want     int
	}{
		{"duration", 1000, 100 * time.Millisecond, 0, 100},
		{"max", 1000, time.Second, 25, 25},
		{"both, duration first", 10, time.Second, 1000, 10},
		{"fractional", 2.5, 2 * time.Second, 0, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPacer(t0, tc.rate, tc.duration, tc.max)
			n := 0
			for {
				i, due, ok := p.Next()
				if !ok {
					break
				}
				if i != uint64(n) || !due.Equal(p.Intended(i)) {
					t.Fatalf("slot %d: got %d due %v", n, i, due)
				}
				n++
				if n > 1e6 {
					t.Fatal("pacer never stops")
				}
			}
			if n != tc.want {
				t.Errorf("%d slots, want %d", n, tc.want)
			}
		})
	}
}

func TestPacerConcurrentSlotsUnique(t *testing.T) {
	p := NewPacer(t0, 1e6, 0, 20000)
	seen := make([]int, 20000)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, _, ok := p.Next()
				if !ok {
					return
				}
				mu.Lock()
				seen[i]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("slot %d handed out %d times", i, n)
		}
	}
}

// fakeClock only moves when told: sleeping jumps to the wake-up time and a
// fake request advances it by its service time.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) SleepUntil(ctx context.Context, t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
	return ctx.Err() == nil
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fakeGenerator runs the generator's scheduling with a fake clock and a fake
// server that takes svc per request and answers status.
func fakeGenerator(t *testing.T, cfg Config, svc time.Duration, status int) (*Generator, *fakeClock) {
	t.Helper()
	if cfg.Target == "" {
		cfg.Target = "http://127.0.0.1:1"
	}
	if cfg.Request == nil {
		cfg.Request = func(seq uint64, req *fasthttp.Request) {
			req.Header.SetMethod("POST")
			req.SetRequestURI("/events")
		}
	}
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{now: t0}
	g.clock = clk
	g.do = func(req *fasthttp.Request, resp *fasthttp.Response) error {
		clk.advance(svc)
		if status < 0 {
			return fasthttp.ErrTimeout
		}
		resp.SetStatusCode(status)
		return nil
	}
	return g, clk
}

func TestOpenLoopMeasuresFromIntendedTime(t *testing.T) {
	// 1,000 requests/s against a server that needs 2 ms each, one connection:
	// request i is due at i ms but can only start at 2i ms, so its latency
	// is (2i+2) - i = i+2 ms while its service time stays 2 ms. A closed-loop
	// tool would report 2 ms for all of them.
	g, clk := fakeGenerator(t, Config{Mode: OpenLoop, Conns: 1, Rate: 1000, Duration: 100 * time.Millisecond, Timeout: time.Second}, 2*time.Millisecond, 201)
	res, err := g.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 100 || res.OK != 100 || res.Events != 100 {
		t.Fatalf("requests %d ok %d events %d, want 100 each", res.Requests, res.OK, res.Events)
	}
	if res.Latency.Min() != 2*time.Millisecond || res.Latency.Max() != 101*time.Millisecond {
		t.Errorf("latency min %v max %v, want 2ms and 101ms", res.Latency.Min(), res.Latency.Max())
	}
	if res.Service.Min() != 2*time.Millisecond || res.Service.Max() != 2*time.Millisecond {
		t.Errorf("service min %v max %v, want 2ms", res.Service.Min(), res.Service.Max())
	}
	if want := 51500 * time.Microsecond; res.Latency.Mean() != want {
		t.Errorf("mean latency %v, want %v", res.Latency.Mean(), want)
	}
	if got := clk.Now().Sub(t0); got != 200*time.Millisecond || res.Elapsed != got {
		t.Errorf("run ended at +%v (elapsed %v), want +200ms", got, res.Elapsed)
	}
}

func TestOpenLoopWaitsForSlots(t *testing.T) {
	// A fast server: every request waits for its slot, so latency equals the
	// service time and the run lasts as long as the schedule.
	g, clk := fakeGenerator(t, Config{Mode: OpenLoop, Conns: 1, Rate: 500, Duration: time.Second}, 100*time.Microsecond, 201)
	res, err := g.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 500 {
		t.Fatalf("%d requests, want 500", res.Requests)
	}
	if res.Latency.Max() != 100*time.Microsecond {
		t.Errorf("max latency %v, want 100µs", res.Latency.Max())
	}
	if got := clk.Now().Sub(t0); got != 998*time.Millisecond+100*time.Microsecond {
		t.Errorf("last response at +%v", got)
	}
	if len(res.PerSecond) == 0 || res.PerSecond[0].Requests != 500 || res.PerSecond[0].OK != 500 {
		t.Errorf("per second %+v", res.PerSecond)
	}
}

func TestOpenLoopHardStopCountsUnsent(t *testing.T) {
	// The server falls behind so far that at Duration+Timeout (110 ms) the
	// requests due from 55 ms on have not left: they count as unsent, with
	// the latency they had accrued, and the run stops instead of draining.
	g, _ := fakeGenerator(t, Config{Mode: OpenLoop, Conns: 1, Rate: 1000, Duration: 100 * time.Millisecond, Timeout: 10 * time.Millisecond}, 2*time.Millisecond, 201)
	res, err := g.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 100 || res.OK != 55 || res.Errors["unsent"] != 45 {
		t.Fatalf("requests %d ok %d unsent %d, want 100/55/45", res.Requests, res.OK, res.Errors["unsent"])
	}
	if res.Failed() != 45 {
		t.Errorf("Failed() = %d", res.Failed())
	}
	// Slot 54 left at 108 ms and came back at 110 ms: 56 ms. Slot 55, found
	// unsent at 110 ms, had waited 55 ms.
	if res.Latency.Max() != 56*time.Millisecond {
		t.Errorf("max latency %v, want 56ms", res.Latency.Max())
	}
}

func TestClosedLoopBounds(t *testing.T) {
	tests := []struct {
		name     string
		duration time.Duration
		max      uint64
		want     uint64
	}{
		{"duration", time.Second, 0, 500},
		{"max requests", time.Hour, 123, 123},
		{"max only", 0, 77, 77},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := fakeGenerator(t, Config{Mode: ClosedLoop, Conns: 1, Duration: tc.duration, MaxRequests: tc.max}, 2*time.Millisecond, 201)
			res, err := g.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests != tc.want || res.OK != tc.want {
				t.Fatalf("%d requests (%d ok), want %d", res.Requests, res.OK, tc.want)
			}
			var sum uint64
			for _, s := range res.PerSecond {
				sum += s.Requests
			}
			if sum != tc.want {
				t.Errorf("per-second samples add up to %d", sum)
			}
			if res.Latency.Max() != 2*time.Millisecond {
				t.Errorf("closed-loop latency %v, want the service time", res.Latency.Max())
			}
			if got := res.RequestsPerSec(); got != 500 {
				t.Errorf("RequestsPerSec = %v, want 500", got)
			}
		})
	}
}

func TestStatusAndErrorCounting(t *testing.T) {
	g, _ := fakeGenerator(t, Config{Mode: ClosedLoop, Conns: 1, MaxRequests: 10}, time.Millisecond, 429)
	res, _ := g.Run(context.Background())
	if res.OK != 0 || res.Statuses[429] != 10 || res.Failed() != 10 || res.Events != 0 {
		t.Errorf("429s: %+v", res)
	}
	g, _ = fakeGenerator(t, Config{Mode: ClosedLoop, Conns: 1, MaxRequests: 10}, time.Millisecond, -1)
	res, _ = g.Run(context.Background())
	if res.OK != 0 || res.Errors["timeout"] != 10 || len(res.Statuses) != 0 {
		t.Errorf("timeouts: %+v", res)
	}
}

func TestAcceptedEvents(t *testing.T) {
	cfg := Config{Mode: ClosedLoop, Conns: 1, MaxRequests: 4, EventsPerRequest: 100,
		Accepted: func(*fasthttp.Response) int { return 97 }}
	g, _ := fakeGenerator(t, cfg, time.Millisecond, 201)
	res, _ := g.Run(context.Background())
	if res.Events != 388 || res.RejectedEvents != 12 {
		t.Errorf("events %d rejected %d, want 388/12", res.Events, res.RejectedEvents)
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	g, _ := fakeGenerator(t, Config{Mode: ClosedLoop, Conns: 2, Duration: time.Hour}, time.Millisecond, 201)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := g.Run(ctx)
	if !errors.Is(err, context.Canceled) || res == nil {
		t.Fatalf("err %v", err)
	}
}

func TestNewGeneratorChecks(t *testing.T) {
	req := func(uint64, *fasthttp.Request) {}
	bad := []Config{
		{Target: "http://x:1", Conns: 1, Duration: time.Second},
		{Target: "http://x:1", Request: req, Duration: time.Second},
		{Target: "http://x:1", Request: req, Conns: 1},
		{Target: "http://x:1", Request: req, Conns: 1, Duration: time.Second, Mode: OpenLoop},
		{Target: "ftp://x:1", Request: req, Conns: 1, Duration: time.Second},
		{Target: "http://x:1/api", Request: req, Conns: 1, Duration: time.Second},
	}
	for i, cfg := range bad {
		if _, err := NewGenerator(cfg); err == nil {
			t.Errorf("config %d accepted", i)
		}
	}
}

func TestTemplates(t *testing.T) {
	tm := NewTemplate(`{"v":"v_{n}","s":"{n}"}`)
	if got := string(tm.AppendTo(nil, 42)); got != `{"v":"v_42","s":"42"}` {
		t.Errorf("AppendTo = %s", got)
	}
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	EventRequest("/events", "sk_test_x", NewTemplate(EventTemplate))(7, req)
	if n := len(req.Body()); n < 200 || n > 240 {
		t.Errorf("event body is %d bytes, want about 220", n)
	}
	if string(req.Header.Method()) != "POST" || string(req.RequestURI()) != "/events" ||
		string(req.Header.Peek("Authorization")) != "Bearer sk_test_x" {
		t.Errorf("bad request: %s", req.String())
	}
	req.Reset()
	BatchRequest("/events/batch", "k", NewTemplate(`{"event":"e","visitor_id":"v_{n}"}`), 3)(2, req)
	if got := string(req.Body()); got != `{"events":[{"event":"e","visitor_id":"v_6"},{"event":"e","visitor_id":"v_7"},{"event":"e","visitor_id":"v_8"}]}` {
		t.Errorf("batch body %s", got)
	}
}

// TestTemplateNames: "{name}" takes one of BackfillNames by n, with their
// weights, in AppendTo and AppendBody alike.
func TestTemplateNames(t *testing.T) {
	tm := NewTemplate(WithEventNames(EventTemplate))
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	counts := map[string]int{}
	const n = 12800
	for i := range uint64(n) {
		body := tm.AppendTo(nil, i)
		req.ResetBody()
		tm.AppendBody(req, i)
		if string(req.Body()) != string(body) {
			t.Fatalf("AppendBody = %s, AppendTo = %s", req.Body(), body)
		}
		var e struct {
			Event     string `json:"event"`
			VisitorID string `json:"visitor_id"`
		}
		if err := json.Unmarshal(body, &e); err != nil || e.VisitorID != fmt.Sprint("v_", i) {
			t.Fatalf("%s: %v", body, err)
		}
		counts[e.Event]++
	}
	for i, name := range BackfillNames {
		want := n >> (i + 1)
		if i == len(BackfillNames)-1 {
			want = n >> i
		}
		if got := counts[name]; got < want*3/4 || got > want*5/4 {
			t.Errorf("%s: %d of %d events, want about %d", name, got, n, want)
		}
	}
	if got := string(NewTemplate(`{n}-{name}-{n}`).AppendTo(nil, 3)); got != "3-"+BackfillName(3)+"-3" {
		t.Errorf("AppendTo = %s", got)
	}
}

// TestTemplateUUIDs: "{uuid}" is a UUID v4 made from n, the same in
// AppendTo and AppendBody, different for every n and not in n's order.
func TestTemplateUUIDs(t *testing.T) {
	tm := NewTemplate(`{"messageId":"{uuid}","userId":"v_{n}"}`)
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-a[0-9a-f]{3}-[0-9a-f]{12}$`)
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	seen := map[string]bool{}
	sorted := true
	prev := ""
	for i := range uint64(1000) {
		body := tm.AppendTo(nil, i)
		req.ResetBody()
		tm.AppendBody(req, i)
		if string(req.Body()) != string(body) {
			t.Fatalf("AppendBody = %s, AppendTo = %s", req.Body(), body)
		}
		var m struct{ MessageID, UserID string }
		if err := json.Unmarshal(body, &m); err != nil || m.UserID != fmt.Sprint("v_", i) || !uuid.MatchString(m.MessageID) {
			t.Fatalf("%s: %v", body, err)
		}
		if seen[m.MessageID] {
			t.Fatalf("%s twice", m.MessageID)
		}
		seen[m.MessageID] = true
		sorted = sorted && m.MessageID > prev
		prev = m.MessageID
	}
	if sorted {
		t.Error("the UUIDs of consecutive numbers are in order")
	}
}

func TestBatchAccepted(t *testing.T) {
	tests := []struct {
		body string
		want int
	}{
		{`{"accepted":100,"rejected":0,"results":[]}`, 100},
		{`{"rejected":3, "accepted": 97}`, 97},
		{`{"error":"bad_request"}`, 0},
		{``, 0},
	}
	for _, tc := range tests {
		resp := fasthttp.AcquireResponse()
		resp.SetBodyString(tc.body)
		if got := BatchAccepted(resp); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.body, got, tc.want)
		}
		fasthttp.ReleaseResponse(resp)
	}
}

// runLoopback runs a generator with cfg against a real server to its end.
func runLoopback(t *testing.T, cfg Config) *Result {
	t.Helper()
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	res, err := g.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestLoopbackAgainstNoop(t *testing.T) {
	srv, err := StartNoop("")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tmpl := NewTemplate(EventTemplate)

	// Closed loop: bounded by count, so it takes a fraction of a second.
	res := runLoopback(t, Config{Target: srv.URL, Conns: 8, Duration: 2 * time.Second, MaxRequests: 3000,
		Request: EventRequest("/events", "sk_test_noop", tmpl)})
	if res.Requests != 3000 || res.OK != 3000 || res.Statuses[201] != 3000 || len(res.Errors) != 0 {
		t.Fatalf("closed loop: requests %d ok %d statuses %v errors %v", res.Requests, res.OK, res.Statuses, res.Errors)
	}
	if res.Dials > 8 {
		t.Errorf("%d dials for 8 connections: keep-alive not held", res.Dials)
	}
	if res.BytesSent < 3000*200 || res.BytesReceived < 3000*100 {
		t.Errorf("bytes sent %d received %d", res.BytesSent, res.BytesReceived)
	}
	if res.Latency.Count() != 3000 || res.Latency.Max() <= 0 {
		t.Errorf("latency count %d", res.Latency.Count())
	}

	// Batches, with the accepted count read from the body.
	g, _ := NewGenerator(Config{Target: srv.URL, Conns: 4, Duration: 2 * time.Second, MaxRequests: 200,
		Request: BatchRequest("/events/batch", "k", tmpl, 100), EventsPerRequest: 100, Accepted: BatchAccepted})
	res, err = g.Run(context.Background())
	g.Close()
	if err != nil || res.OK != 200 || res.Events != 20000 || res.RejectedEvents != 0 {
		t.Fatalf("batch: err %v ok %d events %d rejected %d", err, res.OK, res.Events, res.RejectedEvents)
	}

	// Open loop: 2,000 requests/s for half a second.
	g, _ = NewGenerator(Config{Target: srv.URL, Mode: OpenLoop, Rate: 2000, Conns: 8, Duration: 500 * time.Millisecond,
		Request: EventRequest("/events", "k", tmpl)})
	res, err = g.Run(context.Background())
	g.Close()
	if err != nil || res.Requests != 1000 || res.OK != 1000 {
		t.Fatalf("open loop: err %v requests %d ok %d errors %v", err, res.Requests, res.OK, res.Errors)
	}
}

func TestLoopbackConnectionRefused(t *testing.T) {
	srv, err := StartNoop("")
	if err != nil {
		t.Fatal(err)
	}
	url := srv.URL
	srv.Close()
	g, _ := NewGenerator(Config{Target: url, Conns: 1, MaxRequests: 3, Timeout: time.Second,
		Request: EventRequest("/events", "k", NewTemplate(EventTemplate))})
	res, _ := g.Run(context.Background())
	if res.OK != 0 || res.Errors["connection_refused"] != 3 {
		t.Errorf("errors %v", res.Errors)
	}
}

func TestRequestFactoriesDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes pool behaviour")
	}
	tmpl := NewTemplate(EventTemplate)
	for name, f := range map[string]RequestFunc{
		"single": EventRequest("/events", "sk_live_x", tmpl),
		"batch":  BatchRequest("/events/batch", "sk_live_x", tmpl, 100),
	} {
		req := fasthttp.AcquireRequest()
		seq := uint64(0)
		n := testing.AllocsPerRun(200, func() {
			req.Reset()
			f(seq, req)
			seq++
		})
		fasthttp.ReleaseRequest(req)
		if n > 0 {
			t.Errorf("%s: %v allocations per request", name, n)
		}
	}
}

func TestVerdictAndClasses(t *testing.T) {
	// Even sequence numbers are "reads" answered 200, odd ones "writes"
	// answered 201 that store 2 events and refuse 1; the fake server answers
	// 200 to everything, so the writes fail and must show up as failed 200s.
	cfg := Config{Mode: ClosedLoop, Conns: 1, MaxRequests: 10,
		Classes: []string{"read", "write"}, Class: func(seq uint64) int { return int(seq % 2) },
		Verdict: func(seq uint64, resp *fasthttp.Response) Verdict {
			if seq%2 == 0 {
				return Verdict{OK: resp.StatusCode() == 200}
			}
			return Verdict{OK: resp.StatusCode() == 201, Events: 2, Rejected: 1}
		}}
	g, _ := fakeGenerator(t, cfg, time.Millisecond, 200)
	res, err := g.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 5 || res.Events != 0 || res.FailedStatuses[200] != 5 || res.Statuses[200] != 10 {
		t.Errorf("ok %d events %d failed %v statuses %v", res.OK, res.Events, res.FailedStatuses, res.Statuses)
	}
	if len(res.Classes) != 2 || res.Classes[0].Requests != 5 || res.Classes[0].OK != 5 || res.Classes[1].OK != 0 ||
		res.Classes[1].Latency.Count() != 5 {
		t.Errorf("classes %+v %+v", res.Classes[0], res.Classes[1])
	}
	if b := Breakdown(res); b != "5 of 10 requests failed: 5×200" {
		t.Errorf("breakdown %q", b)
	}
	g, _ = fakeGenerator(t, cfg, time.Millisecond, 201)
	res, _ = g.Run(context.Background())
	if res.OK != 5 || res.Events != 10 || res.RejectedEvents != 5 {
		t.Errorf("writes: ok %d events %d rejected %d", res.OK, res.Events, res.RejectedEvents)
	}
	if _, err := NewGenerator(Config{Target: "http://x:1", Request: func(uint64, *fasthttp.Request) {}, Conns: 1,
		Duration: time.Second, Classes: []string{"a"}}); err == nil {
		t.Error("Classes without Class accepted")
	}
}

func TestEventRequestKeysSpreadsKeys(t *testing.T) {
	f := EventRequestKeys("/events", []string{"k0", "k1", "k2"}, NewTemplate(`{"event":"e","n":{n}}`))
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	for seq := uint64(0); seq < 6; seq++ {
		req.Reset()
		f(seq, req)
		if want := fmt.Sprintf("Bearer k%d", seq%3); string(req.Header.Peek("Authorization")) != want {
			t.Errorf("seq %d: %s", seq, req.Header.Peek("Authorization"))
		}
	}
}

func TestBackfillRequest(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(30 * 24 * time.Hour)
	f := BackfillRequest("/events/batch", "k", 100, 1000, from, to, 50)
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	names := map[string]int{}
	var last time.Time
	for seq := uint64(0); seq < 10; seq++ {
		req.Reset()
		f(seq, req)
		var body struct {
			Events []struct {
				Event      string         `json:"event"`
				VisitorID  string         `json:"visitor_id"`
				Timestamp  time.Time      `json:"timestamp"`
				Properties map[string]any `json:"properties"`
			} `json:"events"`
		}
		if err := json.Unmarshal(req.Body(), &body); err != nil {
			t.Fatalf("%v: %s", err, req.Body())
		}
		if len(body.Events) != 100 {
			t.Fatalf("%d events", len(body.Events))
		}
		for _, ev := range body.Events {
			if ev.Timestamp.Before(from) || !ev.Timestamp.Before(to) || ev.Timestamp.Before(last) {
				t.Fatalf("timestamp %v out of order or range", ev.Timestamp)
			}
			last = ev.Timestamp
			names[ev.Event]++
			if a, ok := ev.Properties["amount"].(float64); !ok || a <= 0 {
				t.Fatalf("amount %v", ev.Properties["amount"])
			}
		}
	}
	if last.Sub(from) < 29*24*time.Hour {
		t.Errorf("last event at %v: the month is not covered", last)
	}
	if names["page_view"] < 400 || names["page_view"] > 600 || names["click"] < names["signup"] || len(names) < 6 {
		t.Errorf("names %v", names)
	}
}

// TestTemplateNow: "{now}" is the time the body is built, as analytics-node
// writes a timestamp.
func TestTemplateNow(t *testing.T) {
	tm := NewTemplate(`{"timestamp":"{now}"}`)
	before := time.Now().UTC().Truncate(time.Millisecond)
	got := string(tm.AppendTo(nil, 1))
	after := time.Now().UTC()
	at, err := time.Parse(`{"timestamp":"`+segmentTime+`"}`, got)
	if err != nil || at.Before(before) || at.After(after) {
		t.Errorf("AppendTo = %s (%v), want a time between %v and %v", got, err, before, after)
	}
}
