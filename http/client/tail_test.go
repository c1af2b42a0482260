package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eventd/eventd/http/client"
)

var errStop = errors.New("stop")

// TestTail: a named cursor consumed with Tail resumes where it was
// acknowledged, redelivers what the handler did not finish (flagged), and a
// second consumer takes the cursor over.
func TestTail(t *testing.T) {
	t.Parallel()
	p := project(t, bigLimits)
	sk := key(t, p, "secret", "live")
	c := newClient(t, srv.public, sk, client.WithBackoff(20*time.Millisecond, 200*time.Millisecond))
	ctx := ctxT(t, 60*time.Second)
	var posted []string
	post := func(n int) {
		t.Helper()
		for range n {
			cr, err := c.Track(ctx, client.Event{Name: "tl"})
			if err != nil {
				t.Fatal(err)
			}
			posted = append(posted, cr.ID)
		}
	}
	// A new cursor starts at the head: place it before the events first.
	admin(t, "POST", "/admin/v1/projects/"+p+"/cursors/orders/reset?environment=live",
		map[string]any{"to": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)})
	post(30)

	// First run: handle 30 events; the 30th fails, so it stays unacknowledged.
	var got []client.TailEvent
	err := c.Tail(ctx, "orders", client.TailParams{Events: []string{"tl"}}, func(_ context.Context, e client.TailEvent) error {
		got = append(got, e)
		if len(got) == 30 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || len(got) != 30 {
		t.Fatalf("first run: %v after %d events", err, len(got))
	}
	for i, e := range got {
		if e.ID != posted[i] || e.Redelivered {
			t.Fatalf("first run, event %d: %s (redelivered %v), want %s", i, e.ID, e.Redelivered, posted[i])
		}
	}

	// Second run: the 30th again, flagged, then only what is new.
	post(5)
	got = got[:0]
	err = c.Tail(ctx, "orders", client.TailParams{Events: []string{"tl"}}, func(_ context.Context, e client.TailEvent) error {
		got = append(got, e)
		if len(got) == 6 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("second run: %v", err)
	}
	if got[0].ID != posted[29] || !got[0].Redelivered {
		t.Fatalf("second run starts with %s (redelivered %v), want %s redelivered", got[0].ID, got[0].Redelivered, posted[29])
	}
	for i, e := range got[1:] {
		if e.ID != posted[30+i] {
			t.Fatalf("second run, event %d: %s, want %s", i+1, e.ID, posted[30+i])
		}
	}

	// Takeover: a second consumer of the cursor ends the first with ErrCursorTakenOver.
	first := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		first <- c.Tail(ctx, "orders", client.TailParams{}, func(context.Context, client.TailEvent) error {
			select {
			case <-started:
			default:
				close(started)
			}
			return nil
		})
	}()
	post(1) // so the first consumer is surely connected and delivering
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the first consumer got nothing")
	}
	ctx2, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_ = c.Tail(ctx2, "orders", client.TailParams{}, func(context.Context, client.TailEvent) error { return nil })
	}()
	select {
	case err := <-first:
		if !errors.Is(err, client.ErrCursorTakenOver) {
			t.Fatalf("first consumer ended with %v, want ErrCursorTakenOver", err)
		}
	case <-ctx.Done():
		t.Fatal("the first consumer was not taken over")
	}
}
