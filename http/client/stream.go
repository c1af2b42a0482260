package client

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// StreamParams selects what Stream delivers.
type StreamParams struct {
	Events    []string // only these event names; empty means all
	VisitorID string   // only this visitor; empty means all
	// Since replays every event recorded after this id before going live.
	Since string
	// Buffer is the channel's capacity (default 256). A consumer that falls
	// behind the server's queue is disconnected by the server and resumed
	// from its last event, so a small buffer costs reconnects, never events.
	Buffer int
	// IdleTimeout closes and reconnects a connection silent for this long
	// (default 75 s; the server pings every 30 s).
	IdleTimeout time.Duration
}

// Stream is a live feed of events from /stream that reconnects by itself.
type Stream struct {
	c    *Client
	out  chan StoredEvent
	ctx  context.Context
	stop context.CancelFunc
	done chan struct{}

	mu      sync.Mutex
	params  StreamParams
	conn    *websocket.Conn
	lastID  string // the last event handed to the consumer
	anchor  string // where to resume before any event arrived
	err     error
	writeMu sync.Mutex
}

// Stream connects to /stream (a secret key is needed) and delivers events on
// Events until ctx ends, Close is called, or a reconnect is refused for good
// (an invalid or revoked key: see Err). After a dropped connection it
// reconnects with backoff and since=<last delivered id>, so the server
// replays what was missed: no gap and no repeat.
//
// The first connection is made before Stream returns, so a bad key or filter
// is reported here as an *Error.
func (c *Client) Stream(ctx context.Context, p StreamParams) (*Stream, error) {
	if p.Buffer <= 0 {
		p.Buffer = 256
	}
	if p.IdleTimeout <= 0 {
		p.IdleTimeout = 75 * time.Second
	}
	s := &Stream{c: c, out: make(chan StoredEvent, p.Buffer), params: p, done: make(chan struct{})}
	s.ctx, s.stop = context.WithCancel(ctx)
	conn, err := s.dial()
	if err != nil {
		s.stop()
		return nil, err
	}
	go s.run(conn)
	return s, nil
}

// Events is the channel of events, closed when the stream ends.
func (s *Stream) Events() <-chan StoredEvent { return s.out }

// Err is why the stream ended: nil after Close or the end of ctx, else the refusal (an *Error).
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// LastID is the id of the last event delivered, to resume later with
// StreamParams.Since. It is exact once Close returned; while the stream
// runs it may not yet name the event just received from Events (it never
// names one not yet received, so a resume from it repeats, never skips).
func (s *Stream) LastID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastID
}

// Close ends the stream and waits until Events is closed.
func (s *Stream) Close() error {
	s.stop()
	<-s.done
	return nil
}

// Subscribe changes the filters of the live connection and of every later
// reconnect; it refuses event names and visitor ids the server would refuse.
func (s *Stream) Subscribe(events []string, visitorID string) error {
	for _, e := range events {
		if !validName(e) {
			return &Error{Status: http.StatusBadRequest, Code: "bad_request",
				Message: "Invalid event filter", Details: map[string]string{"event": "event name must be alphanumeric with underscores only (1-128 characters)"}}
		}
	}
	if visitorID != "" && !validVisitorID(visitorID) {
		return &Error{Status: http.StatusBadRequest, Code: "bad_request",
			Message: "Invalid visitor filter", Details: map[string]string{"visitor_id": msgVisitorID}}
	}
	msg := map[string]any{"type": "subscribe", "event": events, "visitor_id": nil}
	if visitorID != "" {
		msg["visitor_id"] = visitorID
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.params.Events, s.params.VisitorID = events, visitorID
	conn := s.conn
	s.mu.Unlock()
	if conn == nil {
		return nil // reconnecting: the new filters go in the query
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	// A failed write means a broken connection: the reader notices and
	// reconnects, with the new filters in the query.
	_ = conn.WriteMessage(websocket.TextMessage, b)
	return nil
}

// msgVisitorID is the server's detail for a visitor id outside the rule, so
// a filter refused here reads as the server's refusal would.
const msgVisitorID = "must be a string of 1-256 characters"

// validVisitorID is the contract's visitor id rule (valid UTF-8, 1 to 256
// characters), repeated here so the client needs none of the server's packages.
func validVisitorID(v string) bool {
	return v != "" && utf8.ValidString(v) && utf8.RuneCountInString(v) <= 256
}

func validName(n string) bool {
	if n == "" || len(n) > 128 {
		return false
	}
	for _, c := range []byte(n) {
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

func (s *Stream) streamURL() string {
	s.mu.Lock()
	p, since := s.params, s.lastID
	if since == "" {
		since = p.Since
	}
	if since == "" {
		since = s.anchor
	}
	s.mu.Unlock()
	q := url.Values{}
	for _, e := range p.Events {
		q.Add("event", e)
	}
	if p.VisitorID != "" {
		q.Set("visitor_id", p.VisitorID)
	}
	if since != "" {
		q.Set("since", since)
	}
	return s.c.wsURL("/stream", q)
}

// wsURL is the WebSocket URL of path on the client's base URL.
func (c *Client) wsURL(path string, q url.Values) string {
	u := c.url(path, q)
	if rest, ok := strings.CutPrefix(u, "https://"); ok {
		return "wss://" + rest
	}
	return "ws://" + strings.TrimPrefix(u, "http://")
}

// dialWS opens a WebSocket to u with the client's key; a refused upgrade
// is an *Error.
func (c *Client) dialWS(ctx context.Context, u string) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: 15 * time.Second,
	}
	if t, ok := c.hc.Transport.(*http.Transport); ok && t.TLSClientConfig != nil {
		d.TLSClientConfig = t.TLSClientConfig
	}
	h := http.Header{"Authorization": {"Bearer " + c.key}, "User-Agent": {c.userAgent}}
	conn, resp, err := d.DialContext(ctx, u, h)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			body, _ := io.ReadAll(resp.Body)
			return nil, resp, newErrorFrom(resp.StatusCode, resp.Header, body)
		}
		return nil, resp, err
	}
	return conn, resp, nil
}

func (s *Stream) dial() (*websocket.Conn, error) {
	conn, resp, err := s.c.dialWS(s.ctx, s.streamURL())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.lastID == "" && s.params.Since == "" && s.anchor == "" {
		s.anchor = anchorID(resp.Header.Get("Date"))
	}
	s.conn = conn
	s.mu.Unlock()
	return conn, nil
}

// anchorID makes an event id that sorts before every event recorded after
// the server said Date, because event ids begin with their recording
// millisecond. It lets a stream that dropped before its first event resume
// with since= and miss nothing; the price is that such a resume may also
// replay events of the two seconds before the first connection.
func anchorID(date string) string {
	t, err := http.ParseTime(date)
	if err != nil {
		t = time.Now()
	}
	var id [16]byte
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.Add(-2*time.Second).UnixMilli()))
	copy(id[:6], ms[2:])
	return formatEventID(id)
}

// crockford is the alphabet of event ids (Crockford's base32).
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// formatEventID writes a 128-bit id as the server does: "evt_" and 26
// Crockford base32 characters, the first carrying the top 3 bits. The
// client has its own copy so that it does not import the server's packages.
func formatEventID(id [16]byte) string {
	hi := binary.BigEndian.Uint64(id[:8])
	lo := binary.BigEndian.Uint64(id[8:])
	var out [26]byte
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return "evt_" + string(out[:])
}

func (s *Stream) run(conn *websocket.Conn) {
	defer close(s.done)
	defer close(s.out)
	defer s.stop()
	attempt := 0
	for {
		start := time.Now()
		delivered := s.read(conn)
		_ = conn.Close()
		s.mu.Lock()
		s.conn = nil
		s.mu.Unlock()
		if s.ctx.Err() != nil {
			return
		}
		// A connection that lived or delivered was healthy: start the backoff over.
		if delivered || time.Since(start) > 10*time.Second {
			attempt = 0
		}
		for {
			if sleep(s.ctx, backoff(s.c.minWait, s.c.maxWait, attempt)) != nil {
				return
			}
			attempt++
			var err error
			conn, err = s.dial()
			if err == nil {
				break
			}
			if s.ctx.Err() != nil {
				return
			}
			var apiErr *Error
			if errors.As(err, &apiErr) && !retryable(apiErr.Status) {
				s.mu.Lock()
				s.err = apiErr
				s.mu.Unlock()
				return
			}
			if apiErr != nil && apiErr.RetryAfter > 0 && sleep(s.ctx, apiErr.RetryAfter) != nil {
				return
			}
		}
	}
}

// streamMessage is any server message.
type streamMessage struct {
	Type  string          `json:"type"`
	Data  json.RawMessage `json:"data"`
	Error string          `json:"error"`
}

// read delivers the connection's events until it fails; it reports whether any arrived.
func (s *Stream) read(conn *websocket.Conn) (delivered bool) {
	// Closing the connection is the only way to interrupt a blocked read.
	unhook := context.AfterFunc(s.ctx, func() { _ = conn.Close() })
	defer unhook()
	idle := s.params.IdleTimeout
	_ = conn.SetReadDeadline(time.Now().Add(idle))
	conn.SetPingHandler(func(data string) error {
		_ = conn.SetReadDeadline(time.Now().Add(idle))
		_ = conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(10*time.Second))
		return nil
	})
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			return delivered
		}
		_ = conn.SetReadDeadline(time.Now().Add(idle))
		var m streamMessage
		if json.Unmarshal(msg, &m) != nil || m.Type != "event" {
			// "subscribed" needs nothing; "error" (slow_consumer) is followed by
			// a close, and the reconnect resumes from our own last id.
			continue
		}
		var e StoredEvent
		if json.Unmarshal(m.Data, &e) != nil {
			continue
		}
		select {
		case s.out <- e:
			delivered = true
			s.mu.Lock()
			s.lastID = e.ID
			s.mu.Unlock()
		case <-s.ctx.Done():
			return delivered
		}
	}
}
