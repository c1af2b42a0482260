package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"
)

// The stream scenario (issue 3): WebSocket subscribers on one dataset while
// ingest runs. Each ingested event carries its send time in
// properties.sent_ns (a string, so no JSON number rounding can touch it), and
// each subscriber records receive time minus send time. Client and server
// share the machine's clock, so no clock skew enters. The figure is an upper
// bound of commit -> receipt: it also holds the ingest request's own way to
// the commit (its latency is reported beside it). created_at, stamped by the
// server at receipt, gives a second, millisecond-grained reading.

// StreamEventTemplate is the ingest body of the stream scenario, about the
// size of EventTemplate; {t} is the send time in Unix nanoseconds.
const StreamEventTemplate = `{"event":"stream_bench","visitor_id":"v_{n}","properties":{"sent_ns":"{t}","seq":{n},"amount":12.5,"currency":"EUR","page":"/checkout/confirm","referrer":"https://www.example.com/products/sku_{n}"}}`

// StreamEventRequest posts one event per request carrying its send time.
func StreamEventRequest(path, key string) RequestFunc {
	auth := "Bearer " + key
	tmpl := splitPlaceholders(StreamEventTemplate)
	return func(seq uint64, req *fasthttp.Request) {
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI(path)
		req.Header.SetContentType("application/json")
		req.Header.Set(fasthttp.HeaderAuthorization, auth)
		var num [20]byte
		now := uint64(time.Now().UnixNano())
		for _, p := range tmpl {
			switch p.hole {
			case 'n':
				req.AppendBody(strconv.AppendUint(num[:0], seq, 10))
			case 't':
				req.AppendBody(strconv.AppendUint(num[:0], now, 10))
			default:
				req.AppendBody(p.text)
			}
		}
	}
}

type tmplPart struct {
	text []byte
	hole byte // 'n', 't' or 0 for literal text
}

// splitPlaceholders cuts a template at "{n}" and "{t}".
func splitPlaceholders(s string) []tmplPart {
	var out []tmplPart
	lit := 0
	for i := 0; i+2 < len(s); i++ {
		if s[i] != '{' || s[i+2] != '}' || (s[i+1] != 'n' && s[i+1] != 't') {
			continue
		}
		if i > lit {
			out = append(out, tmplPart{text: []byte(s[lit:i])})
		}
		out = append(out, tmplPart{hole: s[i+1]})
		lit = i + 3
		i += 2
	}
	if lit < len(s) {
		out = append(out, tmplPart{text: []byte(s[lit:])})
	}
	return out
}

// StreamOptions configures a set of /stream subscribers.
type StreamOptions struct {
	// Target is eventd's base URL (http or https); the stream is ws(s)://.../stream.
	Target string
	Key    string
	// Subscribers is the number of WebSocket connections.
	Subscribers int
	// Query adds filters (e.g. "event=purchase"); empty: every event.
	Query string
	// Reconnect makes a subscriber that was closed (slow_consumer, 4008)
	// come back with since=<last id>, as the documentation tells clients to
	// (a cursor subscriber comes back on its cursor, which is the resume point).
	Reconnect bool
	// Cursor makes every subscriber a named-cursor consumer (issue 16):
	// subscriber i reads /stream?cursor=<Cursor>-<i> and acknowledges as
	// client.Tail does (see AckDue); empty: plain subscribers.
	Cursor string
	// AckWindow is the cursors' ack_window; 0: the server's default.
	AckWindow int
	// KeepStart makes Mark start only the CPU clock, not PerSecond and
	// Elapsed, which then run from the first dial: a cursor that reconnects
	// to a backlog is sent events as soon as it is connected, before the
	// parent's Mark could arrive.
	KeepStart bool
}

// CursorName is the cursor of subscriber i of a set with prefix.
func CursorName(prefix string, i int) string { return prefix + "-" + strconv.Itoa(i) }

// cursorAckDelay is client.Tail's longest wait before it acknowledges what
// it handled, copied so a bench consumer acks as the Go client does.
const cursorAckDelay = 100 * time.Millisecond

// AckEvery is how many handled events client.Tail acknowledges at once:
// half the window, so the server never waits on an ack with a full window
// while the consumer keeps up.
func AckEvery(window int) int {
	if window <= 0 {
		window = 1000 // the server's default window
	}
	return max(window/2, 1)
}

// AckDue says whether a consumer holding pending unacknowledged events,
// the last ack sent since ago, acknowledges now: every AckEvery events, or
// once the oldest pending one waited maxDelay (checked as messages arrive).
func AckDue(pending, every int, since, maxDelay time.Duration) bool {
	return pending > 0 && (pending >= every || since >= maxDelay)
}

// AppendAck appends the cumulative ack of id, {"type":"ack","id":"evt_..."}.
func AppendAck(dst, id []byte) []byte {
	dst = append(dst, `{"type":"ack","id":"`...)
	dst = append(dst, id...)
	return append(dst, `"}`...)
}

// StreamResult is what the subscribers of one run saw.
type StreamResult struct {
	Subscribers int
	// Delivered counts event messages received, over all subscribers.
	Delivered uint64
	// Expected is events ingested × subscribers, set by the caller.
	Expected uint64
	// Elapsed runs from Mark to the last message received.
	Elapsed time.Duration
	// Latency is receive time minus the send time embedded in the event.
	Latency Histogram
	// CreatedLatency is receive time minus the server's created_at (ms grain).
	CreatedLatency Histogram
	// Closes counts connections the server closed, by close code.
	Closes       map[string]uint64
	SlowConsumer uint64 // slow_consumer error messages received
	Reconnects   uint64
	DialErrors   uint64
	// Acks counts acknowledgements sent by cursor subscribers, AckErrors
	// the error messages the server answered some with.
	Acks      uint64
	AckErrors uint64
	// PerSecond is messages received per second since Mark.
	PerSecond []uint64
	// ClientCPU is the CPU the subscribers used from Mark until the run
	// drained, when they ran in their own process (HasClientCPU).
	ClientCPU    time.Duration
	HasClientCPU bool
}

// MessagesPerSec is the delivery rate over the run.
func (r *StreamResult) MessagesPerSec() float64 { return perSec(r.Delivered, r.Elapsed) }

// Merge adds another run's figures (rounds of one series).
func (r *StreamResult) Merge(o *StreamResult) {
	if o == nil {
		return
	}
	r.Subscribers = max(r.Subscribers, o.Subscribers)
	r.Delivered += o.Delivered
	r.Expected += o.Expected
	r.Elapsed += o.Elapsed
	r.Latency.Merge(&o.Latency)
	r.CreatedLatency.Merge(&o.CreatedLatency)
	if r.Closes == nil {
		r.Closes = map[string]uint64{}
	}
	for k, v := range o.Closes {
		r.Closes[k] += v
	}
	r.SlowConsumer += o.SlowConsumer
	r.Reconnects += o.Reconnects
	r.DialErrors += o.DialErrors
	r.Acks += o.Acks
	r.AckErrors += o.AckErrors
	r.ClientCPU += o.ClientCPU
	r.HasClientCPU = r.HasClientCPU || o.HasClientCPU
	for len(r.PerSecond) < len(o.PerSecond) {
		r.PerSecond = append(r.PerSecond, 0)
	}
	for i, v := range o.PerSecond {
		r.PerSecond[i] += v
	}
}

// Subscribers is a running set of /stream connections.
type Subscribers struct {
	opts     StreamOptions
	url      string
	header   http.Header
	dialer   *websocket.Dialer
	subs     []*streamSub
	start    atomic.Int64 // Mark, Unix ns
	stopping atomic.Bool
	wg       sync.WaitGroup
}

type streamSub struct {
	s         *Subscribers
	mu        sync.Mutex // guards conn against Stop
	conn      *websocket.Conn
	delivered atomic.Uint64
	_         [56]byte // keep the hot counters of neighbours apart
	lastID    []byte
	last      time.Time
	lat       Histogram
	created   Histogram
	perSec    []uint64
	closes    map[string]uint64
	slow      uint64
	reconnect uint64
	dialErrs  uint64
	buf       []byte
	// Cursor consumers: the cursor's query, the newest event not yet
	// acknowledged, how many are pending, when the last ack went out.
	cursorQuery string
	pendingID   []byte
	pending     int
	lastAck     time.Time
	acks        uint64
	ackErrs     uint64
	ackBuf      []byte
}

// StartSubscribers connects every subscriber and returns once all are
// subscribed (the 101 answers arrived), so ingest can start right after.
func StartSubscribers(ctx context.Context, o StreamOptions) (*Subscribers, error) {
	u, err := url.Parse(o.Target)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return nil, fmt.Errorf("bench: stream target %q: scheme must be http or https", o.Target)
	}
	u.Path, u.RawQuery = "/stream", o.Query
	s := &Subscribers{
		opts:   o,
		url:    u.String(),
		header: http.Header{"Authorization": {"Bearer " + o.Key}},
		dialer: &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 64 << 10, WriteBufferSize: 1024},
	}
	s.start.Store(time.Now().UnixNano())
	errs := make(chan error, o.Subscribers)
	sem := make(chan struct{}, 16)
	var dialWG sync.WaitGroup
	for i := range o.Subscribers {
		sub := &streamSub{s: s, closes: map[string]uint64{}, buf: make([]byte, 0, 4096), lastAck: time.Now()}
		if o.Cursor != "" {
			q := url.Values{"cursor": {CursorName(o.Cursor, i)}}
			if o.AckWindow > 0 {
				q.Set("ack_window", strconv.Itoa(o.AckWindow))
			}
			sub.cursorQuery = q.Encode()
		}
		s.subs = append(s.subs, sub)
		dialWG.Add(1)
		go func() {
			defer dialWG.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			conn, err := s.dial(ctx, sub.cursorQuery)
			if err != nil {
				errs <- err
				return
			}
			sub.conn = conn
		}()
	}
	dialWG.Wait()
	close(errs)
	if err := <-errs; err != nil {
		for _, sub := range s.subs {
			if sub.conn != nil {
				sub.conn.Close()
			}
		}
		return nil, fmt.Errorf("bench: connecting /stream subscribers: %w", err)
	}
	for _, sub := range s.subs {
		s.wg.Add(1)
		go sub.run(ctx)
	}
	return s, nil
}

// dial connects one subscriber; query is added to the set's (since= on a
// reconnect, a cursor's own parameters).
func (s *Subscribers) dial(ctx context.Context, query string) (*websocket.Conn, error) {
	u := s.url
	if query != "" {
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		u += sep + query
	}
	conn, resp, err := s.dialer.DialContext(ctx, u, s.header)
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			return nil, fmt.Errorf("%w: %s %s", err, resp.Status, bytes.TrimSpace(body))
		}
		return nil, err
	}
	return conn, nil
}

// Mark starts the clock of PerSecond and Elapsed; call it as ingest starts.
// With KeepStart it does nothing: the clock runs from the first dial.
func (s *Subscribers) Mark() {
	if !s.opts.KeepStart {
		s.start.Store(time.Now().UnixNano())
	}
}

// Delivered is the number of event messages received so far (progress).
func (s *Subscribers) Delivered() uint64 {
	var n uint64
	for _, sub := range s.subs {
		n += sub.delivered.Load()
	}
	return n
}

// WaitDrained returns once Delivered reaches want, or nothing arrived for
// idle, or after at most max: what is still in flight after ingest stopped.
func (s *Subscribers) WaitDrained(ctx context.Context, want uint64, idle, max time.Duration) {
	deadline := time.Now().Add(max)
	last, lastChange := s.Delivered(), time.Now()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := s.Delivered()
		now := time.Now()
		if n >= want || now.After(deadline) {
			return
		}
		if n != last {
			last, lastChange = n, now
		} else if now.Sub(lastChange) >= idle {
			return
		}
	}
}

// Stop closes every connection and returns what the subscribers saw.
func (s *Subscribers) Stop() *StreamResult {
	s.stopping.Store(true)
	for _, sub := range s.subs {
		sub.mu.Lock()
		if sub.conn != nil {
			_ = sub.conn.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			sub.conn.Close()
		}
		sub.mu.Unlock()
	}
	s.wg.Wait()
	r := &StreamResult{Subscribers: len(s.subs), Closes: map[string]uint64{}}
	start := time.Unix(0, s.start.Load())
	var lastMsg time.Time
	for _, sub := range s.subs {
		r.Delivered += sub.delivered.Load()
		r.Latency.Merge(&sub.lat)
		r.CreatedLatency.Merge(&sub.created)
		for k, v := range sub.closes {
			r.Closes[k] += v
		}
		r.SlowConsumer += sub.slow
		r.Reconnects += sub.reconnect
		r.DialErrors += sub.dialErrs
		r.Acks += sub.acks
		r.AckErrors += sub.ackErrs
		for len(r.PerSecond) < len(sub.perSec) {
			r.PerSecond = append(r.PerSecond, 0)
		}
		for i, v := range sub.perSec {
			r.PerSecond[i] += v
		}
		if sub.last.After(lastMsg) {
			lastMsg = sub.last
		}
	}
	if lastMsg.After(start) {
		r.Elapsed = lastMsg.Sub(start)
	}
	return r
}

func (sub *streamSub) run(ctx context.Context) {
	s := sub.s
	defer s.wg.Done()
	for {
		sub.mu.Lock()
		conn := sub.conn
		sub.mu.Unlock()
		if conn == nil {
			return
		}
		err := sub.read(conn)
		if s.stopping.Load() || ctx.Err() != nil {
			return
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			sub.closes[strconv.Itoa(ce.Code)]++
		} else {
			sub.closes["error"]++
		}
		conn.Close()
		if !s.opts.Reconnect {
			return
		}
		// A cursor is its own resume point; a plain subscriber resumes
		// after the last event it saw.
		query := sub.cursorQuery
		if query == "" && len(sub.lastID) > 0 {
			query = "since=" + url.QueryEscape(string(sub.lastID))
		}
		sub.pending, sub.pendingID = 0, sub.pendingID[:0] // the new connection redelivers them
		next, derr := s.dial(ctx, query)
		sub.mu.Lock()
		if derr != nil || s.stopping.Load() {
			if derr != nil {
				sub.dialErrs++
			}
			if next != nil {
				next.Close()
			}
			sub.conn = nil
			sub.mu.Unlock()
			return
		}
		sub.reconnect++
		sub.conn = next
		sub.mu.Unlock()
	}
}

// read receives messages until the connection fails.
func (sub *streamSub) read(conn *websocket.Conn) error {
	for {
		_, r, err := conn.NextReader()
		if err != nil {
			return err
		}
		buf := sub.buf[:0]
		for {
			if len(buf) == cap(buf) {
				buf = append(buf, 0)[:len(buf)]
			}
			n, err := r.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		sub.buf = buf
		now := time.Now()
		sub.handle(buf, now)
		if sub.cursorQuery != "" && AckDue(sub.pending, AckEvery(sub.s.opts.AckWindow), now.Sub(sub.lastAck), cursorAckDelay) {
			sub.ackBuf = AppendAck(sub.ackBuf[:0], sub.pendingID)
			// The read goroutine is this connection's only writer of data
			// frames (Stop's close is a control frame, safe beside it).
			if err := conn.WriteMessage(websocket.TextMessage, sub.ackBuf); err != nil {
				return err
			}
			sub.acks++
			sub.pending, sub.lastAck = 0, now
		}
	}
}

var (
	streamEventPrefix = []byte(`{"type":"event"`)
	streamEventID     = []byte(`{"type":"event","data":{"id":"`)
	streamIDField     = []byte(`"id":"`)
	streamSentField   = []byte(`"sent_ns":"`)
	streamCreated     = []byte(`"created_at":"`)
	streamLastID      = []byte(`"last_id":"`)
	streamSlow        = []byte(`"slow_consumer"`)
	streamBadRequest  = []byte(`"bad_request"`)
)

// handle books one message; it only scans for the fields it needs, so a
// subscriber keeps up with far more messages than a full decode would. An
// event message is eventd's event JSON (eventjson.Append): the id first,
// the properties (the bench's sent_ns their first member) in the middle,
// created_at last. The id and created_at are read where eventd puts them
// and sent_ns looked for after the id: scanning the whole message for
// each was a third of the subscribers' CPU, which shares the machine with
// the server it measures.
func (sub *streamSub) handle(msg []byte, now time.Time) {
	if !bytes.HasPrefix(msg, streamEventPrefix) {
		if sub.cursorQuery != "" && bytes.Contains(msg, streamBadRequest) {
			sub.ackErrs++ // a cursor consumer sends nothing but acks
		}
		if bytes.Contains(msg, streamSlow) {
			sub.slow++
			if id, _, ok := quotedAfter(msg, streamLastID); ok {
				sub.lastID = append(sub.lastID[:0], id...)
			}
		}
		return
	}
	sub.delivered.Add(1)
	sub.last = now
	rest := msg
	if bytes.HasPrefix(rest, streamEventID) { // the id at once
		rest = rest[len(streamEventID)-len(streamIDField):]
	}
	if id, after, ok := quotedAfter(rest, streamIDField); ok {
		rest = after
		sub.lastID = append(sub.lastID[:0], id...)
		if sub.cursorQuery != "" {
			sub.pendingID = append(sub.pendingID[:0], id...)
			sub.pending++
		}
	}
	if v, _, ok := quotedAfter(rest, streamSentField); ok {
		if ns, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			sub.lat.Record(now.Sub(time.Unix(0, ns)))
		}
	}
	if v, ok := createdAt(msg); ok {
		if t, ok := ParseStamp(v); ok {
			sub.created.Record(now.Sub(t))
		}
	}
	sec := int(now.UnixNano()-sub.s.start.Load()) / int(time.Second)
	if sec >= 0 {
		for sec >= len(sub.perSec) {
			sub.perSec = append(sub.perSec, 0)
		}
		sub.perSec[sec]++
	}
}

// quotedAfter returns the string value that follows field (which ends with
// the opening quote), without unescaping: ids and numbers need none; and
// what follows the value's closing quote.
func quotedAfter(msg, field []byte) (value, rest []byte, ok bool) {
	i := bytes.Index(msg, field)
	if i < 0 {
		return nil, msg, false
	}
	rest = msg[i+len(field):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return nil, msg, false
	}
	return rest[:j], rest[j+1:], true
}

// createdAt returns an event message's created_at, its last field: at the
// end of the message when eventd wrote it (..."created_at":"<stamp>"}}),
// else wherever it is last.
func createdAt(msg []byte) ([]byte, bool) {
	end := len(msg) - len(`"}}`)
	start := end - len("2026-01-15T10:30:00.000Z")
	if start >= len(streamCreated) && bytes.HasSuffix(msg, []byte(`"}}`)) && bytes.Equal(msg[start-len(streamCreated):start], streamCreated) {
		return msg[start:end], true
	}
	i := bytes.LastIndex(msg, streamCreated)
	if i < 0 {
		return nil, false
	}
	v, _, ok := quotedAfter(msg[i:], streamCreated)
	return v, ok
}

// ParseStamp reads eventd's UTC timestamps, 2026-01-15T10:30:00.000Z, without
// time.Parse's generality (it runs per message).
func ParseStamp(b []byte) (time.Time, bool) {
	if len(b) != 24 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[19] != '.' || b[23] != 'Z' {
		return time.Time{}, false
	}
	num := func(s []byte) (int, bool) {
		n := 0
		for _, c := range s {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	var v [7]int
	for i, r := range [7][2]int{{0, 4}, {5, 7}, {8, 10}, {11, 13}, {14, 16}, {17, 19}, {20, 23}} {
		n, ok := num(b[r[0]:r[1]])
		if !ok {
			return time.Time{}, false
		}
		v[i] = n
	}
	return time.Date(v[0], time.Month(v[1]), v[2], v[3], v[4], v[5], v[6]*1e6, time.UTC), true
}
