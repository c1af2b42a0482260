package test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// highLimits keeps the rate limiter out of the way of load tests.
var highLimits = map[string]int64{"minute": 10_000_000, "hour": 100_000_000, "day": 1_000_000_000}

// ackedEvent is an event the server answered 201 for.
type ackedEvent struct {
	id, name, visitor string
	ts                string // the time the client sent with it, if any
	// A keyed event's route and a request body that repeats it (with its
	// Idempotency-Key header on POST /events).
	path, idemKey string
	replay        []byte
}

// loadResult is what the clients of a load saw.
type loadResult struct {
	acked      []ackedEvent
	requests   int      // requests answered 201
	connErrors int      // transport errors (expected when the server dies)
	unexpected []string // any other answer
}

// writeLoad is a set of concurrent writers against one server. Half of the clients
// send POST /events, half POST /events/batch with 10-50 events; half of
// each send idempotency keys; each keeps a keep-alive connection of its own
// and records every id it got in a 201.
type writeLoad struct {
	stopc   chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	res     loadResult
	clients []*http.Client
	// acked is closed at the first 201 (once).
	acked     chan struct{}
	ackedOnce sync.Once
}

func startLoad(url, key string, round, clients int, seed int64) *writeLoad {
	l := &writeLoad{stopc: make(chan struct{}), acked: make(chan struct{})}
	for i := 0; i < clients; i++ {
		c := &http.Client{
			Timeout:   20 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: 2, DisableCompression: true},
		}
		l.clients = append(l.clients, c)
		rng := rand.New(rand.NewSource(seed + int64(i)))
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.client(c, rng, url, key, fmt.Sprintf("dur_r%d_c%d", round, i), i%2 == 1, i%4 >= 2, i%8 >= 4)
		}()
	}
	return l
}

// client sends single events or batches until stopped. With clientTime
// each event carries a time up to 10 s before it is sent, as an SDK that
// queues its events sends them: their records go under their Z keys and
// their time keys through the late memory (storage/latemem.go). With
// keyed each event carries an idempotency key (the header of a single
// event, idempotency_key in a batch).
func (l *writeLoad) client(c *http.Client, rng *rand.Rand, url, key, name string, batch, clientTime, keyed bool) {
	event := func(a *ackedEvent, props map[string]any) map[string]any {
		e := map[string]any{"event": name, "visitor_id": a.visitor, "properties": props}
		if clientTime {
			a.ts = time.Now().Add(-time.Duration(rng.Int63n(int64(10 * time.Second)))).UTC().Format("2006-01-02T15:04:05.000Z")
			e["timestamp"] = a.ts
		}
		if keyed {
			a.idemKey = "k_" + a.visitor
			if batch {
				e["idempotency_key"] = a.idemKey
				a.path = "/events/batch"
				a.replay, _ = json.Marshal(map[string]any{"events": []any{e}})
			} else {
				a.path = "/events"
				a.replay, _ = json.Marshal(e)
			}
		}
		return e
	}
	for seq := 0; ; seq++ {
		select {
		case <-l.stopc:
			return
		default:
		}
		var events []ackedEvent
		var body []byte
		path := "/events"
		if batch {
			path = "/events/batch"
			n := 10 + rng.Intn(41)
			entries := make([]map[string]any, n)
			events = make([]ackedEvent, n)
			for j := range entries {
				events[j] = ackedEvent{name: name, visitor: fmt.Sprintf("v_%s_%d_%d", name, seq, j)}
				entries[j] = event(&events[j], map[string]any{"seq": seq, "j": j})
			}
			body, _ = json.Marshal(map[string]any{"events": entries})
		} else {
			events = []ackedEvent{{name: name, visitor: fmt.Sprintf("v_%s_%d", name, seq)}}
			body, _ = json.Marshal(event(&events[0], map[string]any{"seq": seq}))
		}
		req, _ := http.NewRequest("POST", url+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		if keyed && !batch {
			req.Header.Set("Idempotency-Key", events[0].idemKey)
		}
		status, rb, err := sendAndRead(c, req)
		if err != nil {
			l.mu.Lock()
			l.res.connErrors++
			l.mu.Unlock()
			// The server is going away; do not spin.
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if status != 201 {
			l.fail("%s %s: status %d %s", req.Method, path, status, rb)
			continue
		}
		if batch {
			var out struct {
				Accepted int
				Results  []struct{ ID, Status string }
			}
			if err := json.Unmarshal(rb, &out); err != nil || len(out.Results) != len(events) || out.Accepted != len(events) {
				l.fail("batch answer does not match its %d events: %v %s", len(events), err, rb)
				continue
			}
			for j, r := range out.Results {
				if r.Status != "accepted" || !strings.HasPrefix(r.ID, "evt_") {
					l.fail("batch result %d: %+v", j, r)
				}
				events[j].id = r.ID
			}
		} else {
			var out struct{ ID, Event, Status string }
			if err := json.Unmarshal(rb, &out); err != nil || out.Event != name || out.Status != "accepted" || !strings.HasPrefix(out.ID, "evt_") {
				l.fail("create answer: %v %s", err, rb)
				continue
			}
			events[0].id = out.ID
		}
		l.mu.Lock()
		l.res.requests++
		l.res.acked = append(l.res.acked, events...)
		l.mu.Unlock()
		l.ackedOnce.Do(func() { close(l.acked) })
	}
}

func (l *writeLoad) fail(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.res.unexpected) < 20 {
		l.res.unexpected = append(l.res.unexpected, fmt.Sprintf(format, args...))
	}
}

// sleepAfterFirstAck waits for the load's first 201 (a minute at most),
// then d: a kill or stop lands a random time into the load, not after the
// start, since how long a start takes (its rebuilds, on a loaded machine)
// is not a test's to assume.
func (l *writeLoad) sleepAfterFirstAck(d time.Duration) {
	select {
	case <-l.acked:
	case <-time.After(time.Minute):
	}
	time.Sleep(d)
}

// stop ends the clients and returns what they saw.
func (l *writeLoad) stop() loadResult {
	close(l.stopc)
	l.wg.Wait()
	for _, c := range l.clients {
		c.CloseIdleConnections()
	}
	return l.res
}

// sendAndRead sends req and reads the whole answer; a body cut short is an error.
func sendAndRead(c *http.Client, req *http.Request) (int, []byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}

// verifyAcked checks that every acknowledged event is stored with its name
// and visitor, and that the list total counts at least wantTotal events.
// Every event is looked up in GET /events?event=<name> pages; getLimit of them
// (all when there are fewer, else a random sample) are also read one by one
// with GET /events/{id}, which keeps the test fast under -race.
func verifyAcked(t *testing.T, url, key string, acked []ackedEvent, wantTotal, getLimit int, rng *rand.Rand) {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer c.CloseIdleConnections()
	var failures []string
	// Every id through the list, by event name.
	byName := map[string][]ackedEvent{}
	for _, a := range acked {
		byName[a.name] = append(byName[a.name], a)
	}
	for name, want := range byName {
		stored, err := listByName(c, url, key, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range want {
			if v, ok := stored[a.id]; !ok {
				failures = append(failures, fmt.Sprintf("%s (%s) missing from GET /events?event=%s", a.id, a.visitor, name))
			} else if v != a.visitor {
				failures = append(failures, fmt.Sprintf("%s listed with visitor %q, want %q", a.id, v, a.visitor))
			}
		}
	}
	// Then one by one.
	work := make(chan ackedEvent)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				if err := checkAcked(c, url, key, a); err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
				}
			}
		}()
	}
	for _, a := range sampleAcked(rng, acked, getLimit) {
		work <- a
	}
	close(work)
	wg.Wait()
	if len(failures) > 0 {
		n := min(len(failures), 10)
		t.Fatalf("%d problems with %d acknowledged events after restart; first %d:\n%s",
			len(failures), len(acked), n, strings.Join(failures[:n], "\n"))
	}
	r := Do(t, "GET", url+"/events?limit=1", key, nil)
	wantStatus(t, r, 200)
	total := int(r.JSON(t)["pagination"].(map[string]any)["total"].(float64))
	if total < wantTotal {
		t.Fatalf("GET /events total %d, want at least the %d acknowledged events", total, wantTotal)
	}
}

// listByName pages through GET /events?event=name and returns id -> visitor.
func listByName(c *http.Client, url, key, name string) (map[string]string, error) {
	out := map[string]string{}
	for offset, pages := 0, 0; pages < 10000; pages++ {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/events?event=%s&limit=100&offset=%d", url, name, offset), nil)
		req.Header.Set("Authorization", "Bearer "+key)
		status, b, err := sendAndRead(c, req)
		if err != nil || status != 200 {
			return nil, fmt.Errorf("list %s at %d: %d %v %s", name, offset, status, err, b)
		}
		var page struct {
			Data []struct {
				ID      string
				Visitor string `json:"visitor_id"`
			}
			Pagination struct {
				HasMore bool `json:"has_more"`
			}
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return nil, fmt.Errorf("list %s: %v %s", name, err, b)
		}
		for _, e := range page.Data {
			out[e.ID] = e.Visitor
		}
		offset += len(page.Data)
		if !page.Pagination.HasMore || len(page.Data) == 0 {
			return out, nil
		}
	}
	return nil, fmt.Errorf("list %s: too many pages", name)
}

func checkAcked(c *http.Client, url, key string, a ackedEvent) error {
	req, _ := http.NewRequest("GET", url+"/events/"+a.id, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	status, b, err := sendAndRead(c, req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", a.id, err)
	}
	if status != 200 {
		return fmt.Errorf("GET %s: status %d %s", a.id, status, b)
	}
	var ev struct {
		ID, Event string
		Visitor   string    `json:"visitor_id"`
		Timestamp time.Time `json:"timestamp"`
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		return fmt.Errorf("GET %s: %v %s", a.id, err, b)
	}
	if ev.ID != a.id || ev.Event != a.name || ev.Visitor != a.visitor {
		return fmt.Errorf("GET %s: got %s/%s/%s, want %s/%s", a.id, ev.ID, ev.Event, ev.Visitor, a.name, a.visitor)
	}
	if sent, err := time.Parse(time.RFC3339Nano, a.ts); a.ts != "" && (err != nil || !ev.Timestamp.Equal(sent)) {
		return fmt.Errorf("GET %s: timestamp %v, the client sent %s", a.id, ev.Timestamp, a.ts)
	}
	// The visitor index too: today's is held in memory and rebuilt at start.
	req, _ = http.NewRequest("GET", url+"/events?visitor_id="+a.visitor, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if status, b, err = sendAndRead(c, req); err != nil || status != 200 {
		return fmt.Errorf("GET /events?visitor_id=%s: %d %v %s", a.visitor, status, err, b)
	}
	var list struct {
		Data []struct {
			ID string
		}
		Pagination struct {
			Total int
		}
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("GET /events?visitor_id=%s: %v %s", a.visitor, err, b)
	}
	// Each visitor sent one event, acknowledged.
	if list.Pagination.Total != 1 || len(list.Data) != 1 || list.Data[0].ID != a.id {
		return fmt.Errorf("GET /events?visitor_id=%s: %s, want %s alone", a.visitor, b, a.id)
	}
	return nil
}

func TestKill9NoAcknowledgedEventLost(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	// Counters and rollups are checkpointed every 20 ms instead of every
	// five seconds, so the kills land during or between checkpoints; the visitor
	// memory holds 1,500 entries, so today is split again and again and the
	// kills land before, during and after splits (the visitor index of each
	// acknowledged event is read back by checkAcked). The events sent with
	// client times 0-10 s back have their time and name index keys held in
	// memory, 300 at most, so those are written early again and again too,
	// and rebuilt from their records after each kill.
	const visitorMemory = 1500
	// The idempotency filter is saved every 50 ms, so the kills land
	// before, during and after saves too; each start reads the last save
	// and the records from its floor on.
	s := Start(t, "--derived-interval", "20ms", "--visitor-memory", fmt.Sprint(visitorMemory), "--late-memory", "300", "--idempotency-filter-save", "50ms")
	p := s.Project(t, "durability", "", highLimits)
	key := s.Key(t, p, "secret", "live")
	var all []ackedEvent
	const clients = 16
	for round := 1; round <= 4; round++ {
		url := s.Public
		l := startLoad(url, key, round, clients, rng.Int63())
		wait := time.Duration(300+rng.Intn(1201)) * time.Millisecond
		l.sleepAfterFirstAck(wait)
		s.Kill()
		res := l.stop()
		t.Logf("round %d: killed %v after the first acknowledgement; %d requests acknowledged (%d events), %d connection errors",
			round, wait, res.requests, len(res.acked), res.connErrors)
		if len(res.unexpected) > 0 {
			t.Errorf("round %d: unexpected answers:\n%s", round, strings.Join(res.unexpected, "\n"))
		}
		if len(res.acked) == 0 {
			t.Fatalf("round %d: no event acknowledged within a minute of the start", round)
		}
		all = append(all, res.acked...)
		s.Restart()
		verifyReplays(t, s.Public, key, sampleAcked(rng, keyedOf(res.acked), 200))
		verifyAcked(t, s.Public, key, res.acked, len(all), 1000, rng)
		verifyTotals(t, s, p, key, round, clients)
	}
	// Events of earlier rounds are still there after later crashes, and
	// their idempotency keys are remembered.
	verifyAcked(t, s.Public, key, sampleAcked(rng, all, 500), len(all), 500, rng)
	verifyReplays(t, s.Public, key, sampleAcked(rng, keyedOf(all), 200))
	// Past the bound by then: the sealer splits today at the last start at
	// the latest (a minute is far more than a split of a few thousand
	// entries takes, even on a loaded machine).
	if len(all) > visitorMemory {
		for deadline := time.Now().Add(time.Minute); !strings.Contains(s.Logs(), "visitor index day split"); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("%d events acknowledged and no visitor index day split (bound %d)", len(all), visitorMemory)
				break
			}
		}
		if logs := s.Logs(); strings.Contains(logs, "visitor index day split") && !strings.Contains(logs, "commits_held") {
			t.Errorf("the split's log line does not say how long it held the commits")
		}
	}
}

// verifyTotals checks that the counters behind list and analytics totals
// equal the events stored, for every event name the load could have used
// and over all of them: exact after a crash, whatever checkpoint of the
// derived data it interrupted. What is stored is read through each name's
// index (every page of GET /events?event=), which no counter feeds.
func verifyTotals(t *testing.T, s *Server, p, key string, rounds, clients int) {
	t.Helper()
	// Analytics allows 50 queries a minute per key: a fresh key per check.
	akey := s.Key(t, p, "secret", "live")
	c := &http.Client{Timeout: 30 * time.Second}
	defer c.CloseIdleConnections()
	today := time.Now().UTC()
	days := "from=" + today.Add(-24*time.Hour).Format("2006-01-02") + "&to=" + today.Format("2006-01-02")
	sum := 0
	for r := 1; r <= rounds; r++ {
		for i := 0; i < clients; i++ {
			name := fmt.Sprintf("dur_r%d_c%d", r, i)
			stored, err := listByName(c, s.Public, key, name)
			if err != nil {
				t.Fatal(err)
			}
			n := float64(len(stored))
			sum += len(stored)
			if got := listTotal(t, s, key, "limit=1&event="+name); got != n {
				t.Errorf("%s: list total %v, but %v events stored", name, got, n)
			}
			if r < rounds {
				continue // the analytics of earlier rounds' names were checked then
			}
			if got := analyticsTotal(t, s, akey, "type=timeseries&interval=day&event="+name+"&"+days); got != n {
				t.Errorf("%s: analytics total %v, but %v events stored", name, got, n)
			}
		}
	}
	if got := listTotal(t, s, key, "limit=1"); got != float64(sum) {
		t.Errorf("list total %v, but %d events stored", got, sum)
	}
	if got := analyticsTotal(t, s, akey, "type=timeseries&interval=hour&"+days); got != float64(sum) {
		t.Errorf("analytics total %v, but %d events stored", got, sum)
	}
}

// keyedOf is the events of all sent with idempotency keys.
func keyedOf(all []ackedEvent) []ackedEvent {
	var out []ackedEvent
	for _, a := range all {
		if a.idemKey != "" {
			out = append(out, a)
		}
	}
	return out
}

// verifyReplays repeats each keyed event and checks that the answer is the
// acknowledged event, not a new one: the idempotency records, and the
// filter in memory that finds them (rebuilt at start), survived the crash.
func verifyReplays(t *testing.T, url, key string, keyed []ackedEvent) {
	t.Helper()
	if len(keyed) == 0 {
		t.Fatal("no keyed event acknowledged")
	}
	c := &http.Client{Timeout: 30 * time.Second}
	defer c.CloseIdleConnections()
	for _, a := range keyed {
		req, _ := http.NewRequest("POST", url+a.path, bytes.NewReader(a.replay))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		if a.path == "/events" {
			req.Header.Set("Idempotency-Key", a.idemKey)
		}
		status, b, err := sendAndRead(c, req)
		if err != nil || status != 201 {
			t.Fatalf("repeat of %s: %d %v %s", a.id, status, err, b)
		}
		var out struct {
			ID      string
			Results []struct{ ID string }
		}
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("repeat of %s: %v %s", a.id, err, b)
		}
		if len(out.Results) == 1 {
			out.ID = out.Results[0].ID
		}
		if out.ID != a.id {
			t.Fatalf("repeat of %s (key %s) answered %s: stored again after the crash", a.id, a.idemKey, b)
		}
	}
}

// sampleAcked picks up to n events of all at random.
func sampleAcked(rng *rand.Rand, all []ackedEvent, n int) []ackedEvent {
	if len(all) <= n {
		return all
	}
	out := make([]ackedEvent, 0, n)
	for _, i := range rng.Perm(len(all))[:n] {
		out = append(out, all[i])
	}
	return out
}

func TestSIGTERMGracefulStop(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	s := Start(t)
	p := s.Project(t, "graceful", "", highLimits)
	key := s.Key(t, p, "secret", "live")
	l := startLoad(s.Public, key, 0, 16, rng.Int63())
	wait := time.Duration(300+rng.Intn(700)) * time.Millisecond
	l.sleepAfterFirstAck(wait)
	err := s.Stop()
	res := l.stop()
	t.Logf("stopped %v after the first acknowledgement; %d requests acknowledged (%d events), %d connection errors",
		wait, res.requests, len(res.acked), res.connErrors)
	if err != nil {
		var ee interface{ ExitCode() int }
		if errors.As(err, &ee) {
			t.Errorf("exit code %d after SIGTERM, want 0", ee.ExitCode())
		}
		t.Fatalf("SIGTERM exit: %v\n%s", err, s.Logs())
	}
	if len(res.unexpected) > 0 {
		t.Errorf("requests during shutdown got answers other than 201 or a connection error:\n%s\nserver errors:\n%s",
			strings.Join(res.unexpected, "\n"), logLines(s.Logs(), "level=ERROR", 10))
	}
	if len(res.acked) == 0 {
		t.Fatalf("no event acknowledged before SIGTERM")
	}
	logs := s.Logs()
	for _, want := range []string{`msg="shutting down" signal=terminated`, `msg=stopped`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	s.Restart()
	verifyAcked(t, s.Public, key, res.acked, len(res.acked), 1500, rng)
}

func TestRateLimitWindowsSurviveRestart(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		wait time.Duration // before the stop: windows are persisted at least every 10 s
		stop func(t *testing.T, s *Server)
	}{
		{"sigterm", 0, func(t *testing.T, s *Server) {
			if err := s.Stop(); err != nil {
				t.Fatalf("SIGTERM exit: %v", err)
			}
		}},
		{"sigkill", 11 * time.Second, func(t *testing.T, s *Server) { s.Kill() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := Start(t)
			p := s.Project(t, "windows "+tc.name, "", map[string]int64{"minute": 5, "hour": 1000, "day": 10000})
			key := s.Key(t, p, "secret", "live")
			post := func() *Response {
				t.Helper()
				return Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "counted"})
			}
			for i := 0; i < 3; i++ {
				wantStatus(t, post(), 201)
			}
			time.Sleep(tc.wait)
			tc.stop(t, s)
			s.Restart()
			rl := Do(t, "GET", s.Public+"/rate-limit", key, nil)
			wantStatus(t, rl, 200)
			if rem := rl.JSON(t)["limits"].(map[string]any)["minute"].(map[string]any)["remaining"]; rem != 2.0 {
				t.Errorf("after restart minute remaining %v, want 2; %s", rem, rl.Body)
			}
			for i := 0; i < 2; i++ {
				r := post()
				wantStatus(t, r, 201)
				if got := r.Header.Get("X-RateLimit-Remaining"); got != fmt.Sprint(1-i) {
					t.Errorf("request %d after restart: X-RateLimit-Remaining %q, want %d", i+4, got, 1-i)
				}
			}
			r := wantError(t, post(), 429, "rate_limit_exceeded", "Rate limit exceeded")
			if ra, _ := r["retry_after"].(float64); ra < 1 {
				t.Errorf("retry_after %v, want >= 1", r["retry_after"])
			}
		})
	}
}

// logLines returns up to n log lines that contain substr.
func logLines(logs, substr string, n int) string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, substr) && len(out) < n {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
