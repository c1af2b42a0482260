package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventd/eventd/http/client"
)

func newClient(t *testing.T, base, key string, opts ...client.Option) *client.Client {
	t.Helper()
	if base == "" && srv.missing != "" {
		t.Skip(srv.missing)
	}
	c, err := client.New(base, key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// count is the number of stored events named name.
func count(t *testing.T, c *client.Client, name string) int64 {
	t.Helper()
	p, err := c.List(ctxT(t, 10*time.Second), client.ListParams{Event: name, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	return p.Pagination.Total
}

func TestTrackGetList(t *testing.T) {
	t.Parallel()
	p := project(t, bigLimits)
	c := newClient(t, srv.public, key(t, p, "secret", "live"))
	ctx := ctxT(t, 30*time.Second)

	ts := time.Date(2026, 3, 1, 12, 0, 0, 123e6, time.UTC)
	cr, err := c.Track(ctx, client.Event{Name: "signup", VisitorID: "v_1", Properties: map[string]any{"plan": "pro", "seats": 3}, Timestamp: ts})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cr.ID, "evt_") || cr.Name != "signup" || cr.Status != "accepted" || !cr.Timestamp.Equal(ts) || cr.Replayed {
		t.Fatalf("created %+v", cr)
	}

	t.Run("idempotency key replays", func(t *testing.T) {
		e := client.Event{Name: "order", Properties: map[string]any{"amount": 5.5}, IdempotencyKey: "order-42"}
		a, err := c.Track(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Track(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if a.ID != b.ID || a.Replayed || !b.Replayed {
			t.Fatalf("first %+v, repeat %+v", a, b)
		}
		e.Properties = map[string]any{"amount": 6}
		if _, err := c.Track(ctx, e); !errors.Is(err, client.ErrConflict) {
			t.Fatalf("same key, other body: %v", err)
		}
		if n := count(t, c, "order"); n != 1 {
			t.Fatalf("%d order events stored", n)
		}
	})

	t.Run("get", func(t *testing.T) {
		e, err := c.Get(ctx, cr.ID)
		if err != nil {
			t.Fatal(err)
		}
		if e.ID != cr.ID || e.Name != "signup" || e.VisitorID != "v_1" || e.Properties["plan"] != "pro" ||
			e.Properties["seats"] != float64(3) || !e.Timestamp.Equal(ts) || e.CreatedAt.IsZero() {
			t.Fatalf("get %+v", e)
		}
		_, err = c.Get(ctx, "evt_01M7ZXYKBC0YQVV787K3YZYKF1")
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.Code != "not_found" || apiErr.Message != "Event not found" ||
			apiErr.RequestID == "" || !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("unknown id: %#v", err)
		}
	})

	t.Run("validation errors are typed", func(t *testing.T) {
		_, err := c.Track(ctx, client.Event{Name: "bad-name"})
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Details["event"] == "" || !errors.Is(err, client.ErrBadRequest) {
			t.Fatalf("bad name: %#v", err)
		}
		_, err = c.Track(ctx, client.Event{Name: "buy", Properties: map[string]any{"amount": -1}})
		if !errors.As(err, &apiErr) || apiErr.Status != 422 || apiErr.Details["properties.amount"] == "" {
			t.Fatalf("negative amount: %#v", err)
		}
		if !strings.Contains(err.Error(), "properties.amount") {
			t.Fatalf("Error() %q lacks the details", err)
		}
	})

	t.Run("list and all pages", func(t *testing.T) {
		base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		evs := make([]client.Event, 230)
		for i := range evs {
			evs[i] = client.Event{Name: "page", VisitorID: fmt.Sprintf("v%d", i%3), Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
		}
		res, err := c.TrackBatch(ctx, evs)
		if err != nil || res.Accepted != 230 || len(res.Results) != 230 {
			t.Fatalf("batch: %v %+v", err, res)
		}
		pg, err := c.List(ctx, client.ListParams{Event: "page", VisitorID: "v1", Limit: 5, Offset: 2})
		if err != nil {
			t.Fatal(err)
		}
		if pg.Pagination.Total != 77 || pg.Pagination.Limit != 5 || pg.Pagination.Offset != 2 || !pg.Pagination.HasMore || len(pg.Data) != 5 {
			t.Fatalf("page %+v", pg.Pagination)
		}
		for _, e := range pg.Data {
			if e.VisitorID != "v1" || e.Name != "page" {
				t.Fatalf("filtered list returned %+v", e)
			}
		}
		pg, err = c.List(ctx, client.ListParams{Event: "page", From: base.Add(10 * time.Millisecond), To: base.Add(19 * time.Millisecond)})
		if err != nil || pg.Pagination.Total != 10 {
			t.Fatalf("from/to: %v %+v", err, pg)
		}

		var got []string
		for e, err := range c.All(ctx, client.ListParams{Event: "page", Limit: 40}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, e.ID)
		}
		want := make([]string, 0, 230)
		for i := len(res.Results) - 1; i >= 0; i-- { // newest first
			want = append(want, res.Results[i].ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("All yielded %d events, want the 230 newest first", len(got))
		}
		// Breaking out of the loop stops fetching.
		n := 0
		for range c.All(ctx, client.ListParams{Event: "page"}) {
			if n++; n == 3 {
				break
			}
		}
	})
}

func TestTrackBatch(t *testing.T) {
	t.Parallel()
	p := project(t, bigLimits)
	c := newClient(t, srv.public, key(t, p, "secret", "live"))
	ctx := ctxT(t, 30*time.Second)

	res, err := c.TrackBatch(ctx, []client.Event{
		{Name: "b_ok", VisitorID: "v"},
		{Name: "bad name"},
		{Name: "b_ok", Properties: map[string]any{"amount": 0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 1 || res.Rejected != 2 || len(res.Results) != 3 || res.Results[0].Err() != nil {
		t.Fatalf("result %+v", res)
	}
	if err := res.Results[1].Err(); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("entry 1: %v", err)
	}
	var apiErr *client.Error
	if err := res.Results[2].Err(); !errors.As(err, &apiErr) || apiErr.Status != 422 || apiErr.Details["properties.amount"] == "" {
		t.Fatalf("entry 2: %v", err)
	}

	t.Run("over 100 is split, keys make a resend harmless", func(t *testing.T) {
		evs := make([]client.Event, 150)
		for i := range evs {
			evs[i] = client.Event{Name: "big", IdempotencyKey: fmt.Sprintf("big-%d", i)}
		}
		a, err := c.TrackBatch(ctx, evs)
		if err != nil || a.Accepted != 150 {
			t.Fatalf("%v %+v", err, a)
		}
		b, err := c.TrackBatch(ctx, evs)
		if err != nil || b.Accepted != 150 {
			t.Fatalf("%v %+v", err, b)
		}
		for i := range a.Results {
			if a.Results[i].ID != b.Results[i].ID {
				t.Fatalf("entry %d: %s then %s", i, a.Results[i].ID, b.Results[i].ID)
			}
		}
		if n := count(t, c, "big"); n != 150 {
			t.Fatalf("%d stored, want 150", n)
		}
	})
}

func TestVerifyRateLimitAuth(t *testing.T) {
	t.Parallel()
	p := project(t, nil)
	sk := key(t, p, "secret", "test")
	pk := key(t, p, "public", "live")
	ctx := ctxT(t, 30*time.Second)

	c := newClient(t, srv.public, sk)
	k, err := c.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !k.Valid || k.KeyType != "secret" || k.Environment != "test" || !slices.Equal(k.Permissions, []string{"read", "write"}) || k.Project.ID != p {
		t.Fatalf("verify %+v", k)
	}
	rl, err := c.RateLimit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rl.Plan != "enterprise" || rl.Limits.Minute == nil || rl.Limits.Minute.Limit != 2000 || rl.Limits.Day.Limit != 1000000 ||
		rl.Limits.Minute.Remaining > 1999 || rl.Buckets["batch"].Minute.Limit != 200 || rl.Buckets["analytics"].Minute.Limit != 50 {
		t.Fatalf("rate limit %+v", rl)
	}
	if rl.Limits.Minute.ResetTime().Before(time.Now().Add(-time.Second)) {
		t.Fatalf("reset %d in the past", rl.Limits.Minute.Reset)
	}

	pub := newClient(t, srv.public, pk)
	if k, err := pub.Verify(ctx); err != nil || k.KeyType != "public" || !slices.Equal(k.Permissions, []string{"write"}) {
		t.Fatalf("public verify %+v %v", k, err)
	}
	if _, err := pub.List(ctx, client.ListParams{}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("public list: %v", err)
	}
	bad := newClient(t, srv.public, "sk_live_00000000000000000000000000000000")
	var apiErr *client.Error
	if _, err := bad.Verify(ctx); !errors.As(err, &apiErr) || apiErr.Status != 401 || apiErr.Message != "Invalid or missing API key" {
		t.Fatalf("bad key: %#v", err)
	}
}

func TestAnalytics(t *testing.T) {
	t.Parallel()
	p := project(t, bigLimits)
	c := newClient(t, srv.public, key(t, p, "secret", "live"))
	ctx := ctxT(t, 30*time.Second)
	if _, err := c.Track(ctx, client.Event{Name: "an_event"}); err != nil {
		t.Fatal(err)
	}
	out, err := c.Analytics(ctx, url.Values{"type": {"timeseries"}, "event": {"an_event"}, "interval": {"day"}})
	var apiErr *client.Error
	if errors.As(err, &apiErr) && apiErr.Status == 404 && apiErr.Message != "Event not found" {
		t.Skip("GET /analytics is not served by this eventd build yet (404 " + apiErr.Message + "); the client call itself worked")
	}
	if err != nil {
		t.Fatal(err)
	}
	ts := out.Timeseries
	if out.Type != "timeseries" || ts == nil || out.Breakdown != nil || out.Funnel != nil || out.Goals != nil {
		t.Fatalf("analytics %+v", out)
	}
	if ts.Total != 1 || ts.Metric != "count" || ts.Interval != "day" || len(ts.Data) == 0 || ts.From.IsZero() || ts.To.Before(ts.From) {
		t.Fatalf("timeseries %+v, want a total of 1 count over daily buckets", ts)
	}
	sum := 0.0
	for _, p := range ts.Data {
		sum += p.Value
	}
	if sum != 1 {
		t.Fatalf("buckets sum to %v, want 1: %+v", sum, ts.Data)
	}

	// A breakdown by event name of the same range.
	out, err = c.Analytics(ctx, url.Values{"type": {"breakdown"}, "group_by": {"event"}})
	if err != nil {
		t.Fatal(err)
	}
	if b := out.Breakdown; b == nil || b.GroupBy != "event" || len(b.Data) != 1 || b.Data[0] != (client.BreakdownRow{Key: "an_event", Value: 1}) {
		t.Fatalf("breakdown %+v", out.Breakdown)
	}
}

// TestRetryAfter429 uses the real limiter: custom limits of 2 a minute (and
// so 1 batch a minute). The wait is the server's Retry-After, up to a minute,
// which is why this test runs in parallel with the rest.
func TestRetryAfter429(t *testing.T) {
	t.Parallel()
	p := project(t, map[string]int64{"minute": 2, "hour": 1000, "day": 10000})
	limited := key(t, p, "secret", "live")
	checker := newClient(t, srv.public, key(t, p, "secret", "live")) // limits are per key
	ctx := ctxT(t, 100*time.Second)

	ct := &countingTransport{rt: http.DefaultTransport}
	c := newClient(t, srv.public, limited, client.WithHTTPClient(&http.Client{Transport: ct, Timeout: 30 * time.Second}),
		client.WithFlushInterval(time.Hour))
	// Use up the minute: two standard requests and the one batch.
	for range 2 {
		if _, err := c.Verify(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.TrackBatch(ctx, []client.Event{{Name: "burn"}}); err != nil {
		t.Fatal(err)
	}
	ct.n.Store(0)

	// Without retries the 429 comes back typed, with the wait.
	noRetry := newClient(t, srv.public, limited, client.WithRetries(0))
	_, err := noRetry.Track(ctx, client.Event{Name: "after_429"})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 429 || !errors.Is(err, client.ErrRateLimited) || apiErr.RetryAfter < time.Second {
		t.Fatalf("expected a 429 with Retry-After, got %#v", err)
	}
	t.Logf("429 with Retry-After %v", apiErr.RetryAfter)

	start := time.Now()
	var wg sync.WaitGroup
	var trackErr, flushErr error
	wg.Go(func() { _, trackErr = c.Track(ctx, client.Event{Name: "after_429"}) })
	wg.Go(func() {
		if err := c.Enqueue(client.Event{Name: "queued_429"}); err != nil {
			flushErr = err
			return
		}
		flushErr = c.Flush(ctx)
	})
	wg.Wait()
	if trackErr != nil || flushErr != nil {
		t.Fatalf("track: %v; flush: %v", trackErr, flushErr)
	}
	if waited := time.Since(start); waited < apiErr.RetryAfter-2*time.Second {
		t.Fatalf("succeeded after %v, before the Retry-After of %v", waited, apiErr.RetryAfter)
	}
	// One refused attempt and one retry each: the client slept through Retry-After instead of hammering.
	if n := ct.n.Load(); n != 4 {
		t.Fatalf("%d attempts, want 4 (two 429s, two successes)", n)
	}
	if a, q := count(t, checker, "after_429"), count(t, checker, "queued_429"); a != 1 || q != 1 {
		t.Fatalf("stored after_429 %d, queued_429 %d; want 1 each", a, q)
	}
}

// TestRetryDroppedConnection cuts the connection after the server has
// answered, so the client cannot know the write was stored: the retry must
// be answered from the idempotency key, not stored again.
func TestRetryDroppedConnection(t *testing.T) {
	t.Parallel()
	p := project(t, bigLimits)
	sk := key(t, p, "secret", "live")
	checker := newClient(t, srv.public, sk)
	pr := newProxy(t, srv.public)
	c := newClient(t, pr.URL(), sk, client.WithBackoff(20*time.Millisecond, 200*time.Millisecond))
	ctx := ctxT(t, 30*time.Second)
	// dropNext makes the next request go over a new connection, and drops that one.
	dropNext := func() {
		pr.KillAll()
		time.Sleep(20 * time.Millisecond)
		pr.drop.Store(1)
	}

	dropNext()
	cr, err := c.Track(ctx, client.Event{Name: "dropped_single", Properties: map[string]any{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if pr.dropped.Load() != 1 || !cr.Replayed {
		t.Fatalf("dropped %d, replayed %v: the retry should have been answered from the idempotency key", pr.dropped.Load(), cr.Replayed)
	}

	dropNext()
	evs := make([]client.Event, 30)
	for i := range evs {
		evs[i] = client.Event{Name: "dropped_batch", VisitorID: fmt.Sprint(i)}
	}
	res, err := c.TrackBatch(ctx, evs)
	if err != nil || res.Accepted != 30 {
		t.Fatalf("batch %v %+v", err, res)
	}

	dropNext()
	for i := range 25 {
		if err := c.Enqueue(client.Event{Name: "dropped_queued", VisitorID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if pr.dropped.Load() != 3 {
		t.Fatalf("%d connections dropped, want 3", pr.dropped.Load())
	}
	for name, want := range map[string]int64{"dropped_single": 1, "dropped_batch": 30, "dropped_queued": 25} {
		if n := count(t, checker, name); n != want {
			t.Fatalf("%s: %d stored, want %d", name, n, want)
		}
	}
	if _, err := checker.Get(ctx, cr.ID); err != nil {
		t.Fatal(err)
	}
}

func TestEnqueueFlushClose(t *testing.T) {
	t.Parallel()
	p := project(t, bigLimits)
	sk := key(t, p, "secret", "live")
	ctx := ctxT(t, 30*time.Second)

	var mu sync.Mutex
	var failed []client.Event
	c := newClient(t, srv.public, sk, client.WithBatchSize(40), client.WithFlushInterval(time.Hour),
		client.WithErrorHandler(func(err error, evs []client.Event) {
			mu.Lock()
			failed = append(failed, evs...)
			mu.Unlock()
		}))
	for i := range 100 {
		if err := c.Enqueue(client.Event{Name: "queued", Properties: map[string]any{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Enqueue(client.Event{Name: "bad-name"}); err != nil {
		t.Fatal(err)
	}
	err := c.Flush(ctx)
	if !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("flush should report the rejected entry, got %v", err)
	}
	mu.Lock()
	if len(failed) != 1 || failed[0].Name != "bad-name" {
		t.Fatalf("error handler got %+v", failed)
	}
	mu.Unlock()
	if n := count(t, c, "queued"); n != 100 {
		t.Fatalf("%d stored after Flush, want 100", n)
	}
	for i := range 10 {
		if err := c.Enqueue(client.Event{Name: "at_close", VisitorID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Enqueue(client.Event{Name: "late"}); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("enqueue after close: %v", err)
	}
	checker := newClient(t, srv.public, sk)
	if n := count(t, checker, "at_close"); n != 10 {
		t.Fatalf("%d stored by Close, want 10", n)
	}

	// Below a batch, the interval sends.
	ticked := newClient(t, srv.public, sk, client.WithFlushInterval(50*time.Millisecond))
	if err := ticked.Enqueue(client.Event{Name: "ticked"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); count(t, checker, "ticked") != 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the flush interval never sent the queued event")
		}
	}
}

// TestQueueBounded points the batcher at a server that never answers, so the
// queue fills: Enqueue must refuse rather than block or grow, and Close with
// a deadline hands every unsent event to the error handler.
func TestQueueBounded(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // read nothing, answer nothing
		}
	}()
	var mu sync.Mutex
	var failed int
	c := newClient(t, "http://"+ln.Addr().String(), "sk_test_x", client.WithBatchSize(1), client.WithQueueSize(2),
		client.WithErrorHandler(func(err error, evs []client.Event) {
			mu.Lock()
			failed += len(evs)
			mu.Unlock()
		}))
	accepted := 0
	for i := 0; i < 10; i++ {
		err := c.Enqueue(client.Event{Name: "e"})
		if errors.Is(err, client.ErrQueueFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		accepted++
		time.Sleep(20 * time.Millisecond) // let the sender pick the first event up
	}
	if accepted == 10 || accepted < 2 {
		t.Fatalf("queue of 2 took %d events before ErrQueueFull", accepted)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := c.Close(ctx); err == nil {
		t.Fatal("Close succeeded against a server that never answers")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v past its deadline", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if failed != accepted {
		t.Fatalf("error handler got %d events, %d were queued", failed, accepted)
	}
}

// TestStreamReconnect cuts the stream's connection (once before any event,
// then twice mid-flow) while events keep being posted: every id must arrive
// exactly once, in order.
func TestStreamReconnect(t *testing.T) {
	t.Parallel()
	p := project(t, bigLimits)
	sk := key(t, p, "secret", "live")
	poster := newClient(t, srv.public, sk)
	pr := newProxy(t, srv.public)
	c := newClient(t, pr.URL(), sk, client.WithBackoff(20*time.Millisecond, 200*time.Millisecond))
	ctx := ctxT(t, 40*time.Second)

	st, err := c.Stream(ctx, client.StreamParams{Events: []string{"tick"}, Buffer: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pr.KillAll() // before the first event: the resume must still miss nothing

	const total = 150
	var posted []string
	postErr := make(chan error, 1)
	go func() {
		defer close(postErr)
		for i := range total {
			cr, err := poster.Track(ctx, client.Event{Name: "tick", Properties: map[string]any{"i": i}})
			if err != nil {
				postErr <- err
				return
			}
			posted = append(posted, cr.ID)
			if i%10 == 0 {
				_, _ = poster.Track(ctx, client.Event{Name: "other"}) // filtered out
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	var got []string
	for len(got) < total {
		select {
		case e, ok := <-st.Events():
			if !ok {
				t.Fatalf("stream ended after %d events: %v", len(got), st.Err())
			}
			if e.Name != "tick" {
				t.Fatalf("filtered stream delivered %q", e.Name)
			}
			got = append(got, e.ID)
			if len(got) == 40 || len(got) == 100 {
				pr.KillAll()
			}
		case <-ctx.Done():
			t.Fatalf("only %d of %d events arrived", len(got), total)
		}
	}
	if err := <-postErr; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, posted) {
		t.Fatalf("stream delivered %d ids that differ from the %d posted (gap, repeat or reorder)", len(got), len(posted))
	}
	if n := pr.accepted.Load(); n < 4 {
		t.Fatalf("%d connections through the proxy, want at least 4 (three cuts)", n)
	}
	select {
	case e := <-st.Events():
		t.Fatalf("extra event %+v", e)
	case <-time.After(200 * time.Millisecond):
	}
	_ = st.Close()
	if _, ok := <-st.Events(); ok {
		t.Fatal("Events not closed after Close")
	}
	// Read after Close: the reader records an event's id once the handoff
	// to Events returned, which can be just after the receiver has it.
	if st.LastID() != posted[total-1] {
		t.Fatalf("LastID %s", st.LastID())
	}
	if st.Err() != nil {
		t.Fatalf("Err after Close: %v", st.Err())
	}
}

func TestStreamSinceSubscribeAndRefusals(t *testing.T) {
	t.Parallel()
	p := project(t, bigLimits)
	sk := key(t, p, "secret", "live")
	c := newClient(t, srv.public, sk)
	ctx := ctxT(t, 30*time.Second)

	first, err := c.Track(ctx, client.Event{Name: "s_a"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Track(ctx, client.Event{Name: "s_a", VisitorID: "v9", Properties: map[string]any{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Stream(ctx, client.StreamParams{Since: first.ID, Events: []string{"s_a"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := <-st.Events()
	if e.ID != second.ID || e.VisitorID != "v9" || e.Properties["k"] != "v" || e.CreatedAt.IsZero() {
		t.Fatalf("replayed %+v, want %s", e, second.ID)
	}

	if err := st.Subscribe([]string{"bad-name"}, ""); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("bad filter: %v", err)
	}
	if err := st.Subscribe(nil, strings.Repeat("v", 257)); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("257-character visitor filter: %v", err)
	}
	if err := st.Subscribe([]string{"s_b"}, ""); err != nil {
		t.Fatal(err)
	}
	// The new filter is in place once an s_b arrives (s_a-only would never deliver it).
	for ok := false; !ok; {
		if _, err := c.Track(ctx, client.Event{Name: "s_b"}); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-st.Events():
			ok = e.Name == "s_b"
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("subscribe never took effect")
		}
	}
	if _, err := c.Track(ctx, client.Event{Name: "s_a"}); err != nil {
		t.Fatal(err)
	}
	last, err := c.Track(ctx, client.Event{Name: "s_b"})
	if err != nil {
		t.Fatal(err)
	}
	for e := range st.Events() {
		if e.Name != "s_b" {
			t.Fatalf("after subscribe got %q", e.Name)
		}
		if e.ID == last.ID {
			break
		}
	}

	pub := newClient(t, srv.public, key(t, p, "public", "live"))
	if _, err := pub.Stream(ctx, client.StreamParams{}); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("public key stream: %v", err)
	}
	if _, err := c.Stream(ctx, client.StreamParams{Events: []string{"no-dash"}}); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("bad filter stream: %v", err)
	}
}
