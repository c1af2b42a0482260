package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Close codes of a named cursor's stream (docs/stream.md).
const (
	closeRevoked      = 4001
	closeTakenOver    = 4009
	closeExpired      = 4010
	defaultAckWindow  = 1000
	ackFlushInterval  = 100 * time.Millisecond
	tailWriteDeadline = 10 * time.Second
)

// ErrCursorTakenOver ends a Tail whose cursor a newer connection took over
// (close code 4009): two consumers must not fight over one cursor.
var ErrCursorTakenOver = errors.New("eventd: cursor taken over by a newer connection")

// ErrCursorExpired ends a Tail whose cursor fell behind retention (close
// code 4010); reset it through the admin API to go on.
var ErrCursorExpired = errors.New("eventd: cursor expired (behind retention); reset it")

// TailParams selects what Tail delivers.
type TailParams struct {
	Events    []string // only these event names; empty means all
	VisitorID string   // only this visitor; empty means all
	// AckWindow is how many unacknowledged events the server sends ahead
	// (default 1,000, at most 10,000).
	AckWindow int
	// IdleTimeout reconnects a connection silent for this long (default 75 s).
	IdleTimeout time.Duration
}

// TailEvent is one event of a tail. Redelivered is true when the server
// sent it before, to a connection that did not acknowledge it.
type TailEvent struct {
	StoredEvent
	Redelivered bool
}

// TailHandler handles one event. Returning nil acknowledges it (and every
// event before it); an error ends Tail with that error, and the events not
// acknowledged are delivered again to the next consumer of the cursor.
type TailHandler func(ctx context.Context, e TailEvent) error

// Tail consumes the named cursor of the key's dataset (a secret key is
// needed) until ctx ends, the handler fails, or the server ends the cursor
// for good: at-least-once, in order. The server keeps the position: after a
// dropped connection Tail reconnects with backoff and the server resumes
// after the last acknowledged event, redelivering what was not. Acks are
// sent in runs (every half window, and at most 100 ms after a handler
// returned), so a redelivery after a crash may repeat up to that many.
//
// It returns nil when ctx ends, the handler's error, ErrCursorTakenOver,
// ErrCursorExpired, or an *Error when a reconnect is refused for good
// (a revoked key, a bad filter).
func (c *Client) Tail(ctx context.Context, cursor string, p TailParams, h TailHandler) error {
	if p.AckWindow <= 0 {
		p.AckWindow = defaultAckWindow
	}
	if p.IdleTimeout <= 0 {
		p.IdleTimeout = 75 * time.Second
	}
	q := url.Values{"cursor": {cursor}, "ack_window": {strconv.Itoa(p.AckWindow)}}
	for _, e := range p.Events {
		q.Add("event", e)
	}
	if p.VisitorID != "" {
		q.Set("visitor_id", p.VisitorID)
	}
	u := c.wsURL("/stream", q)
	attempt := 0
	for {
		conn, _, err := c.dialWS(ctx, u)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var apiErr *Error
			if errors.As(err, &apiErr) && !retryable(apiErr.Status) {
				return apiErr
			}
			wait := backoff(c.minWait, c.maxWait, attempt)
			if apiErr != nil && apiErr.RetryAfter > wait {
				wait = apiErr.RetryAfter
			}
			attempt++
			if sleep(ctx, wait) != nil {
				return nil
			}
			continue
		}
		t := &tailConn{conn: conn, every: max(p.AckWindow/2, 1)}
		delivered, err := t.run(ctx, p.IdleTimeout, h)
		_ = conn.Close()
		if err != nil || ctx.Err() != nil {
			return err
		}
		if delivered {
			attempt = 0
		}
		attempt++
		if sleep(ctx, backoff(c.minWait, c.maxWait, attempt-1)) != nil {
			return nil
		}
	}
}

// tailConn is one connection of a Tail and its acknowledgements.
type tailConn struct {
	conn    *websocket.Conn
	every   int
	mu      sync.Mutex // guards the fields below and writes to conn
	pending string     // the newest handled event not yet acknowledged
	count   int        // events handled since the last ack sent
}

// run reads and handles events until the connection ends. err is non-nil
// only when Tail must stop: the handler failed or the cursor is gone.
func (t *tailConn) run(ctx context.Context, idle time.Duration, h TailHandler) (delivered bool, err error) {
	// Closing the connection is the only way to interrupt a blocked read.
	unhook := context.AfterFunc(ctx, func() { _ = t.conn.Close() })
	defer unhook()
	done := make(chan struct{})
	defer close(done)
	go t.flushEvery(done)
	_ = t.conn.SetReadDeadline(time.Now().Add(idle))
	t.conn.SetPingHandler(func(data string) error {
		_ = t.conn.SetReadDeadline(time.Now().Add(idle))
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(tailWriteDeadline))
	})
	for {
		_, msg, rerr := t.conn.ReadMessage()
		if rerr != nil {
			var ce *websocket.CloseError
			if errors.As(rerr, &ce) {
				switch ce.Code {
				case closeTakenOver:
					return delivered, ErrCursorTakenOver
				case closeExpired:
					return delivered, ErrCursorExpired
				case closeRevoked:
					return delivered, &Error{Status: 401, Code: "unauthorized", Message: ce.Text}
				}
			}
			return delivered, nil
		}
		_ = t.conn.SetReadDeadline(time.Now().Add(idle))
		var m struct {
			Type        string          `json:"type"`
			Data        json.RawMessage `json:"data"`
			Redelivered bool            `json:"redelivered"`
		}
		if json.Unmarshal(msg, &m) != nil || m.Type != "event" {
			continue // subscribed, errors about an ack: nothing to do
		}
		var e TailEvent
		if json.Unmarshal(m.Data, &e.StoredEvent) != nil {
			continue
		}
		e.Redelivered = m.Redelivered
		if herr := h(ctx, e); herr != nil {
			t.flush() // what was handled before stays acknowledged
			return delivered, herr
		}
		delivered = true
		t.mu.Lock()
		t.pending, t.count = e.ID, t.count+1
		full := t.count >= t.every
		t.mu.Unlock()
		if full {
			t.flush()
		}
	}
}

// flushEvery sends the pending ack every ackFlushInterval until done.
func (t *tailConn) flushEvery(done <-chan struct{}) {
	tick := time.NewTicker(ackFlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			t.flush()
		}
	}
}

// flush acknowledges the newest handled event, if any is pending.
func (t *tailConn) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending == "" {
		return
	}
	b, _ := json.Marshal(map[string]string{"type": "ack", "id": t.pending})
	_ = t.conn.SetWriteDeadline(time.Now().Add(tailWriteDeadline))
	if t.conn.WriteMessage(websocket.TextMessage, b) == nil {
		t.pending, t.count = "", 0
	}
}
