package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
)

// Named cursors of /stream (contract section 14, docs/stream.md).

func cursorURL(s *Server, name, extra string) string {
	return wsURL(s, "?cursor="+name+extra)
}

// readCursorEvent reads the next message, which must be an event, and
// returns it with its redelivered flag.
func readCursorEvent(t *testing.T, w *wsClient) (streamEvent, bool) {
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
	return e, m.Redelivered
}

func sendAck(t *testing.T, w *wsClient, id string) {
	t.Helper()
	if err := w.WriteMessage(websocket.TextMessage, []byte(`{"type":"ack","id":"`+id+`"}`)); err != nil {
		t.Fatal(err)
	}
}

// wantEvents reads len(ids) events: those ids in order, with the flag.
func wantEvents(t *testing.T, w *wsClient, ids []string, redelivered bool) {
	t.Helper()
	for _, id := range ids {
		e, re := readCursorEvent(t, w)
		if e.ID != id || re != redelivered {
			t.Fatalf("got %s redelivered=%v, want %s redelivered=%v", e.ID, re, id, redelivered)
		}
	}
}

// cursorInfo is one entry of GET /admin/v1/projects/{id}/cursors.
type cursorInfo struct {
	Name       string  `json:"name"`
	Position   string  `json:"position"`
	LagEvents  int     `json:"lag_events"`
	LagSeconds float64 `json:"lag_seconds"`
	Connected  bool    `json:"connected"`
	Expired    bool    `json:"expired"`
}

func listCursors(t *testing.T, s *Server, p string) map[string]cursorInfo {
	t.Helper()
	r := s.AdminDo(t, "GET", "/admin/v1/projects/"+p+"/cursors?environment=live", nil)
	wantStatus(t, r, 200)
	var out struct{ Data []cursorInfo }
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatal(err)
	}
	m := map[string]cursorInfo{}
	for _, c := range out.Data {
		m[c.Name] = c
	}
	return m
}

// waitCursor polls the listing (bounded) until ok holds for the cursor.
func waitCursor(t *testing.T, s *Server, p, name string, ok func(cursorInfo) bool) cursorInfo {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := listCursors(t, s, p)[name]
		if ok(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("cursor %s: %+v never reached the expected state", name, c)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCursorQueryValidation(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	for _, tc := range []struct{ name, query, field string }{
		{"cursor with since", "?cursor=c&since=evt_01M7ZXYKBC0YQVV787K3YZYKF1", "since"},
		{"bad name", "?cursor=no%20spaces", "cursor"},
		{"long name", "?cursor=" + strings.Repeat("a", 65), "cursor"},
		{"window too large", "?cursor=c&ack_window=10001", "ack_window"},
		{"window zero", "?cursor=c&ack_window=0", "ack_window"},
		{"window without cursor", "?ack_window=10", "ack_window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, resp, err := websocket.DefaultDialer.Dial(wsURL(s, tc.query), bearer(key))
			if err == nil || resp == nil {
				t.Fatalf("dial succeeded: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			var e struct {
				Error   string
				Details map[string]string
			}
			if resp.StatusCode != 400 || json.Unmarshal(b, &e) != nil || e.Error != "bad_request" || e.Details[tc.field] == "" {
				t.Fatalf("%d %s, want 400 naming %s", resp.StatusCode, b, tc.field)
			}
		})
	}
}

// A cursor resumes after its last acknowledged id with no client state;
// what was sent and not acknowledged comes again, flagged redelivered.
func TestCursorResumeAndRedelivery(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", streamLimits)
	key := s.Key(t, p, "secret", "live")

	post(t, s, key, "before", "v_0") // before the cursor exists: not delivered
	w := dial(t, cursorURL(s, "sink", ""), bearer(key))
	// Opened before the 101: the cursor exists, connected at the head, as
	// soon as the dial returns, so whatever the client stores next is its
	// to deliver (no waiting).
	if c := listCursors(t, s, p)["sink"]; !c.Connected {
		t.Fatalf("cursor right after the dial: %+v, want connected", c)
	}
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, post(t, s, key, "tick", fmt.Sprint("v_", i)))
	}
	wantEvents(t, w, ids, false)

	// Refused acks answer an error and the connection stays open.
	for _, bad := range []string{`{"type":"ack","id":"nope"}`, `{"type":"ack","id":7}`, `{"type":"ack","id":"evt_7ZZZZZZZZZZZZZZZZZZZZZZZZZ"}`} {
		if err := w.WriteMessage(websocket.TextMessage, []byte(bad)); err != nil {
			t.Fatal(err)
		}
		m, err := readMsg(t, w, 10*time.Second)
		if err != nil || m.Type != "error" || m.Error != "bad_request" || m.Details["id"] == "" {
			t.Fatalf("%s: %+v %v", bad, m, err)
		}
	}
	sendAck(t, w, ids[1]) // cumulative: ids[0] and ids[1]
	waitCursor(t, s, p, "sink", func(c cursorInfo) bool { return c.Position == ids[1] })
	_ = w.Close()

	later := []string{post(t, s, key, "tick", "v_8"), post(t, s, key, "tick", "v_9")}
	w2 := dial(t, cursorURL(s, "sink", ""), bearer(key))
	wantEvents(t, w2, ids[2:], true) // sent before, not acknowledged
	wantEvents(t, w2, later, false)  // never sent
	sendAck(t, w2, later[1])
	waitCursor(t, s, p, "sink", func(c cursorInfo) bool { return c.Position == later[1] && c.LagEvents == 0 })
	_ = w2.Close()
	// Not connected any more: the disconnect saved the position with fsync
	// (Restart kills -9; acks saved without fsync could be lost, and redelivered).
	waitCursor(t, s, p, "sink", func(c cursorInfo) bool { return !c.Connected })

	// Acknowledged everything: a reconnect after a restart sends only new events.
	s.Restart()
	w3 := dial(t, cursorURL(s, "sink", ""), bearer(key))
	last := post(t, s, key, "tick", "v_10")
	wantEvents(t, w3, []string{last}, false)
}

// A newer connection on a cursor takes it over: the older closes with 4009.
func TestCursorTakeover(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	old := dial(t, cursorURL(s, "one", ""), bearer(key))
	first := post(t, s, key, "tick", "v_1")
	wantEvents(t, old, []string{first}, false)
	sendAck(t, old, first)
	// The ack travels on the old connection: wait until it is applied.
	waitCursor(t, s, p, "one", func(c cursorInfo) bool { return c.Position == first })

	newer := dial(t, cursorURL(s, "one", ""), bearer(key))
	wantClose(t, old, 4009, "cursor taken over")
	// The old connection's ack carried over: nothing is redelivered.
	second := post(t, s, key, "tick", "v_2")
	wantEvents(t, newer, []string{second}, false)

	// Another cursor, or the same name in the test environment, is separate.
	other := dial(t, cursorURL(s, "two", ""), bearer(key))
	testEnv := dial(t, cursorURL(s, "one", ""), bearer(s.Key(t, p, "secret", "test")))
	third := post(t, s, key, "tick", "v_3")
	wantEvents(t, newer, []string{third}, false)
	wantEvents(t, other, []string{third}, false)
	expectSilence(t, testEnv, 200*time.Millisecond)
}

// A consumer that stops acknowledging stops receiving at its window and is
// never closed for it; acknowledging resumes delivery from storage.
func TestCursorAckWindow(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	w := dial(t, cursorURL(s, "win", "&ack_window=3"), bearer(key))
	waitCursor(t, s, p, "win", func(c cursorInfo) bool { return c.Connected })
	var ids []string
	for i := 0; i < 8; i++ {
		ids = append(ids, post(t, s, key, "tick", fmt.Sprint("v_", i)))
	}
	wantEvents(t, w, ids[:3], false)
	expectSilence(t, w, 300*time.Millisecond) // the window is full
	if c := listCursors(t, s, p)["win"]; !c.Connected || c.LagEvents != 8 {
		t.Fatalf("cursor at a full window: %+v", c)
	}
	sendAck(t, w, ids[0]) // one slot
	wantEvents(t, w, ids[3:4], false)
	expectSilence(t, w, 200*time.Millisecond)
	sendAck(t, w, ids[3]) // four slots (cumulative), three events left
	wantEvents(t, w, ids[4:7], false)
	sendAck(t, w, ids[6])
	wantEvents(t, w, ids[7:], false)
	sendAck(t, w, ids[7])

	// Far more than any queue, never acknowledged: no 4008, just a pause.
	var batch []map[string]any
	for i := 0; i < 100; i++ {
		batch = append(batch, map[string]any{"event": "bulk", "visitor_id": "v_b"})
	}
	for i := 0; i < 50; i++ {
		wantStatus(t, Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": batch}), 201)
	}
	for i := 0; i < 3; i++ {
		if e, _ := readCursorEvent(t, w); e.Event != "bulk" {
			t.Fatalf("got %+v", e)
		}
	}
	expectSilence(t, w, 300*time.Millisecond)
	if c := listCursors(t, s, p)["win"]; !c.Connected || c.LagEvents != 5000 {
		t.Fatalf("stalled cursor: %+v", c)
	}
	// The same lag on /metrics, and the pause counted; never a 4008.
	m := metricsText(t, s)
	want := `eventd_cursor_lag_events{cursor="win",environment="live",project="` + p + `"} 5000`
	for _, line := range []string{want, "eventd_cursors_connected 1", "eventd_stream_slow_consumer_closes_total 0"} {
		if !strings.Contains(m, line+"\n") {
			t.Fatalf("metrics lack %q", line)
		}
	}
	if strings.Contains(m, "eventd_cursor_window_full_total 0\n") {
		t.Fatal("eventd_cursor_window_full_total did not count the pauses")
	}
}

// Admin listing with lag, reset to head / an id / a time, and delete.
func TestCursorAdmin(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	base := "/admin/v1/projects/" + p + "/cursors"
	start := time.Now().UTC().Add(-time.Second)
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, post(t, s, key, "tick", fmt.Sprint("v_", i)))
	}
	r := s.AdminDo(t, "POST", base+"/etl/reset?environment=live", map[string]any{"to": "head"})
	wantStatus(t, r, 200)
	if c := r.JSON(t); c["name"] != "etl" || c["lag_events"] != float64(0) {
		t.Fatalf("reset to head: %v", c)
	}
	wantStatus(t, s.AdminDo(t, "POST", base+"/etl/reset", map[string]any{"to": ids[2]}), 200)
	if c := listCursors(t, s, p)["etl"]; c.Position != ids[2] || c.LagEvents != 2 || c.LagSeconds < 0 || c.Connected || c.Expired {
		t.Fatalf("after reset to an id: %+v", c)
	}
	wantStatus(t, s.AdminDo(t, "POST", base+"/etl/reset", map[string]any{"to": start.Format(time.RFC3339Nano)}), 200)
	if c := listCursors(t, s, p)["etl"]; c.LagEvents != 5 {
		t.Fatalf("after reset to a time: %+v", c)
	}
	w := dial(t, cursorURL(s, "etl", ""), bearer(key))
	wantEvents(t, w, ids, false) // a reset is not a redelivery
	waitCursor(t, s, p, "etl", func(c cursorInfo) bool { return c.Connected })
	sendAck(t, w, ids[4])
	waitCursor(t, s, p, "etl", func(c cursorInfo) bool { return c.LagEvents == 0 && c.LagSeconds == 0 })

	// A reset of a connected cursor closes it; the reconnect starts there.
	wantStatus(t, s.AdminDo(t, "POST", base+"/etl/reset", map[string]any{"to": ids[3]}), 200)
	wantClose(t, w, 1012, "cursor reset")
	w = dial(t, cursorURL(s, "etl", ""), bearer(key))
	wantEvents(t, w, ids[4:], false)

	for _, bad := range []any{map[string]any{"to": "yesterday"}, map[string]any{"to": "evt_x"}, map[string]any{}} {
		wantStatus(t, s.AdminDo(t, "POST", base+"/etl/reset", bad), 400)
	}
	wantStatus(t, s.AdminDo(t, "POST", base+"/bad%20name/reset", map[string]any{"to": "head"}), 400)
	wantStatus(t, s.AdminDo(t, "GET", base+"?environment=staging", nil), 400)
	wantStatus(t, s.AdminDo(t, "GET", "/admin/v1/projects/prj_nope/cursors", nil), 404)

	wantStatus(t, s.AdminDo(t, "DELETE", base+"/etl", nil), 204)
	wantClose(t, w, 1012, "cursor deleted")
	if _, ok := listCursors(t, s, p)["etl"]; ok {
		t.Fatal("deleted cursor still listed")
	}
	wantStatus(t, s.AdminDo(t, "DELETE", base+"/etl", nil), 404)
}

// A retention sweep that deletes events after a cursor's position expires
// it: 4010 until an admin reset.
func TestCursorExpiredByRetention(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "ret", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	base := "/admin/v1/projects/" + p + "/cursors"
	wantStatus(t, s.AdminDo(t, "POST", base+"/lagging/reset", map[string]any{"to": "head"}), 200)
	wantStatus(t, s.AdminDo(t, "POST", base+"/ahead/reset", map[string]any{"to": "head"}), 200)
	old := time.Now().UTC().Add(-10 * 24 * time.Hour).Format(time.RFC3339)
	r := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "late", "visitor_id": "v_1", "timestamp": old})
	wantStatus(t, r, 201)
	oldID := r.JSON(t)["id"].(string)
	kept := post(t, s, key, "tick", "v_2")
	// "ahead" acknowledged past the old event: the sweep does not touch it.
	wantStatus(t, s.AdminDo(t, "POST", base+"/ahead/reset", map[string]any{"to": oldID}), 200)

	wantStatus(t, s.AdminDo(t, "PATCH", "/admin/v1/projects/"+p, map[string]any{"retention_days": map[string]int{"live": 5}}), 200)
	s.Restart() // retention runs at start
	wantStatus(t, Do(t, "GET", s.Public+"/events/"+oldID, key, nil), 404)

	cs := listCursors(t, s, p)
	if !cs["lagging"].Expired || cs["ahead"].Expired {
		t.Fatalf("after the sweep: %+v", cs)
	}
	wantClose(t, dial(t, cursorURL(s, "lagging", ""), bearer(key)), 4010, "cursor expired")
	// Over SSE the same end is the last error event, with the code.
	wantSSEEnd(t, dialSSE(t, sseURL(s, "?cursor=lagging"), key, nil), 4010, "cursor_expired")
	ahead := dial(t, cursorURL(s, "ahead", ""), bearer(key))
	wantEvents(t, ahead, []string{kept}, false)

	aheadSSE := dialSSE(t, sseURL(s, "?cursor=ahead"), key, nil) // takes "ahead" over
	wantClose(t, ahead, 4009, "cursor taken over")
	if e, re := readSSEEvent(t, aheadSSE); e.ID != kept || !re {
		t.Fatalf("SSE takeover: %s redelivered=%v, want %s redelivered", e.ID, re, kept)
	}
	wantStatus(t, s.AdminDo(t, "POST", base+"/ahead/reset", map[string]any{"to": "head"}), 200)
	wantSSEEnd(t, aheadSSE, 1012, "cursor_reset")

	wantStatus(t, s.AdminDo(t, "POST", base+"/lagging/reset", map[string]any{"to": "head"}), 200)
	w := dial(t, cursorURL(s, "lagging", ""), bearer(key))
	next := post(t, s, key, "tick", "v_3")
	wantEvents(t, w, []string{next}, false)
}

// cursorConsumer reads a cursor, acknowledging every 50 events and when
// idle, and records every event id it received in order.
type cursorConsumer struct {
	mu   sync.Mutex
	got  []string
	runs [][]string // the ids of each connection, in order
	err  error
}

// consume reads one connection until it ends or stop is closed.
func (c *cursorConsumer) consume(url, key string, stop <-chan struct{}) {
	conn, _, err := websocket.DefaultDialer.Dial(url, bearer(key))
	if err != nil {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		time.Sleep(10 * time.Millisecond) // the server is down: do not spin
		return
	}
	defer conn.Close()
	go func() { <-stop; _ = conn.Close() }()
	var run []string
	defer func() {
		c.mu.Lock()
		c.runs = append(c.runs, run)
		c.mu.Unlock()
	}()
	unacked := 0
	for {
		_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, b, err := conn.ReadMessage()
		if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
			// gorilla's read errors are permanent: reconnect instead of acknowledging late.
			if unacked > 0 {
				_ = conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"ack","id":"`+run[len(run)-1]+`"}`))
			}
			return
		}
		if err != nil {
			return
		}
		var m streamMsg
		if json.Unmarshal(b, &m) != nil || m.Type != "event" {
			continue
		}
		var e streamEvent
		_ = json.Unmarshal(m.Data, &e)
		run = append(run, e.ID)
		c.mu.Lock()
		c.got = append(c.got, e.ID)
		c.mu.Unlock()
		if unacked++; unacked >= 50 {
			_ = conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"ack","id":"`+e.ID+`"}`))
			unacked = 0
		}
	}
}

// Kill -9 while a cursor consumer is mid-stream and events are written:
// after the restart, every event answered 201 reaches the cursor at least
// once, none is skipped, and each connection sees ids in order.
func TestCursorKill9AtLeastOnce(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	s := Start(t)
	p := s.Project(t, "durability", "", highLimits)
	key := s.Key(t, p, "secret", "live")
	wantStatus(t, s.AdminDo(t, "POST", "/admin/v1/projects/"+p+"/cursors/k9/reset", map[string]any{"to": "head"}), 200)
	c := &cursorConsumer{}
	var acked []ackedEvent
	for round := 1; round <= 2; round++ {
		stop := make(chan struct{})
		consumerDone := make(chan struct{})
		// A small window keeps the consumer behind the writers, so the kill
		// finds events sent and not acknowledged.
		url := cursorURL(s, "k9", "&ack_window=200")
		go func() {
			defer close(consumerDone)
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.consume(url, key, stop)
			}
		}()
		l := startLoad(s.Public, key, round, 4, rng.Int63())
		l.sleepAfterFirstAck(time.Duration(300+rng.Intn(900)) * time.Millisecond)
		s.Kill()
		res := l.stop()
		close(stop)
		<-consumerDone
		if len(res.unexpected) > 0 {
			t.Fatalf("round %d: unexpected answers:\n%s", round, strings.Join(res.unexpected, "\n"))
		}
		if len(res.acked) == 0 {
			t.Fatalf("round %d: no event acknowledged within a minute of the start", round)
		}
		acked = append(acked, res.acked...)
		t.Logf("round %d: %d events answered 201, %d received so far", round, len(res.acked), len(c.got))
		s.Restart()
	}
	// After the last restart: read until every 201 arrived (bounded).
	want := map[string]bool{}
	for _, a := range acked {
		want[a.id] = true
	}
	missing := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		seen := map[string]bool{}
		for _, id := range c.got {
			seen[id] = true
		}
		n := 0
		for id := range want {
			if !seen[id] {
				n++
			}
		}
		return n
	}
	stop := make(chan struct{})
	deadline := time.Now().Add(60 * time.Second)
	// At least one connection after the last restart, so the resume after
	// a kill is always exercised.
	for first := true; first || missing() > 0 && time.Now().Before(deadline); first = false {
		c.consume(cursorURL(s, "k9", ""), key, stop)
	}
	close(stop)
	if n := missing(); n > 0 {
		t.Fatalf("%d of %d events answered 201 never reached the cursor", n, len(want))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		t.Logf("a dial failed along the way (expected around a kill): %v", c.err)
	}
	// In order within every connection (ids sort as they were recorded).
	for i, run := range c.runs {
		if !sort.StringsAreSorted(run) {
			t.Fatalf("connection %d received ids out of order", i)
		}
		for j := 1; j < len(run); j++ {
			if run[j] == run[j-1] {
				t.Fatalf("connection %d received %s twice in a row", i, run[j])
			}
		}
	}
	t.Logf("%d events answered 201, %d deliveries (%.2f per event) over %d connections",
		len(want), len(c.got), float64(len(c.got))/float64(len(want)), len(c.runs))
}

// TestCursorCatchUpRate measures how fast a cursor that fell behind
// catches up from storage (informal; the make bench scenario is to come).
// It runs only with EVENTD_CATCHUP_EVENTS set, e.g. 200000.
func TestCursorCatchUpRate(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("EVENTD_CATCHUP_EVENTS"))
	if n <= 0 {
		t.Skip("set EVENTD_CATCHUP_EVENTS to measure")
	}
	s := Start(t)
	p := s.Project(t, "catchup", "", highLimits)
	key := s.Key(t, p, "secret", "live")
	wantStatus(t, s.AdminDo(t, "POST", "/admin/v1/projects/"+p+"/cursors/behind/reset", map[string]any{"to": "head"}), 200)
	body, _ := json.Marshal(map[string]any{"events": func() []map[string]any {
		var b []map[string]any
		for i := 0; i < 100; i++ {
			b = append(b, map[string]any{"event": "page_view", "visitor_id": fmt.Sprint("v_", i), "properties": map[string]any{"path": "/pricing", "i": i}})
		}
		return b
	}()})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 30 * time.Second}
			for i := w; i < n/100; i += 8 {
				req, _ := http.NewRequest("POST", s.Public+"/events/batch", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				if status, b, err := sendAndRead(c, req); err != nil || status != 201 {
					t.Errorf("batch: %d %s %v", status, b, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	conn, _, err := websocket.DefaultDialer.Dial(cursorURL(s, "behind", "&ack_window=10000"), bearer(key))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	for got := 0; got < n/100*100; {
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, b, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("after %d events: %v", got, err)
		}
		if got++; got%1000 == 0 {
			var m struct{ Data streamEvent }
			_ = json.Unmarshal(b, &m)
			_ = conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"ack","id":"`+m.Data.ID+`"}`))
		}
	}
	d := time.Since(start)
	t.Logf("caught up %d events in %v: %.0f events/s", n/100*100, d, float64(n/100*100)/d.Seconds())
}

// On SIGTERM a cursor connection sends what is committed and closes with
// 1001; its position and what it sent are saved, so the restart redelivers
// exactly the unacknowledged event.
func TestCursorShutdown(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	w := dial(t, cursorURL(s, "stop", ""), bearer(key))
	first := post(t, s, key, "tick", "v_1")
	wantEvents(t, w, []string{first}, false)
	sendAck(t, w, first)
	waitCursor(t, s, p, "stop", func(c cursorInfo) bool { return c.Position == first })
	last := post(t, s, key, "last_words", "v_1")
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	wantEvents(t, w, []string{last}, false)
	wantClose(t, w, websocket.CloseGoingAway, "server shutting down")
	s.Restart()
	w = dial(t, cursorURL(s, "stop", ""), bearer(key))
	wantEvents(t, w, []string{last}, true)
}

// A request on a cursor that is not a WebSocket handshake (nor SSE) is a
// 400 that changes nothing: the connected consumer keeps its cursor and no
// cursor is created.
func TestCursorNotAHandshake(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "a", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	w := dial(t, cursorURL(s, "sink", ""), bearer(key))
	for _, name := range []string{"sink", "other"} {
		r := DoUnchecked(t, "a plain GET is not a handshake", "GET", s.Public+"/stream?cursor="+name, key, nil)
		wantStatus(t, r, 400)
	}
	if cs := listCursors(t, s, p); len(cs) != 1 || !cs["sink"].Connected {
		t.Fatalf("cursors after the refused requests: %+v", cs)
	}
	id := post(t, s, key, "still_mine", "")
	wantEvents(t, w, []string{id}, false)
}
