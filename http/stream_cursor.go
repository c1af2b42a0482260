package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/engine/metrics"
	"github.com/eventd/eventd/storage"
)

// Named cursors of /stream (contract section 14, docs/stream.md). A cursor
// connection does not take events from the broadcaster's runs: a commit
// only wakes it, and it reads from storage after the last id it scanned,
// up to the settled horizon and the room left in its ack window. So
// resume, catch-up after a full window and live delivery are one path,
// memory stays bounded by the window, and a consumer that stops
// acknowledging is never cut off: it is simply not sent more.
const (
	// DefaultAckWindow and MaxAckWindow bound the unacknowledged events sent ahead.
	DefaultAckWindow = 1000
	MaxAckWindow     = 10000
	// cursorSaveEvery coalesces acknowledgements: a connection writes its
	// position at most this often (without fsync), and with fsync when it
	// ends. A crash loses at most this much, which is redelivered.
	cursorSaveEvery = 100 * time.Millisecond
	// cursorHeldRetry is how soon a connection looks again when committed
	// events exist above the settled horizon (another writer's batch is
	// still open; its commit may not wake this dataset's subscribers).
	cursorHeldRetry = 2 * time.Millisecond
)

// cursorMetrics are the /stream cursor counters.
type cursorMetrics struct {
	acks        *metrics.Counter
	redelivered *metrics.Counter
	badAcks     *metrics.Counter
	windowFull  *metrics.Counter
}

func newCursorMetrics(reg *metrics.Registry) *cursorMetrics {
	return &cursorMetrics{
		acks:        reg.Counter("eventd_cursor_acks_total", "Acknowledgements accepted from /stream cursor consumers.", ""),
		redelivered: reg.Counter("eventd_cursor_redelivered_total", "Events sent to cursor consumers with redelivered:true.", ""),
		badAcks:     reg.Counter("eventd_cursor_bad_acks_total", "Acknowledgements refused (malformed, or after the last event sent).", ""),
		windowFull:  reg.Counter("eventd_cursor_window_full_total", "Times a cursor consumer's ack window filled and sending paused.", ""),
	}
}

// parseCursorQuery reads cursor and ack_window; since is refused beside
// cursor (the cursor is the resume point).
func parseCursorQuery(args *fasthttp.Args) (name string, window int, fail *apiError) {
	d := map[string]string{}
	v := args.Peek("cursor")
	if v == nil {
		if args.Has("ack_window") {
			d["ack_window"] = "needs cursor"
		}
	} else {
		name = string(v)
		if !engine.ValidCursorName(name) {
			d["cursor"] = "must be 1-64 characters of A-Z, a-z, 0-9, _, . and -"
		}
		if args.Has("since") {
			d["since"] = "cannot be combined with cursor: the cursor is the resume point"
		}
	}
	window = DefaultAckWindow
	if w := args.Peek("ack_window"); w != nil {
		n, err := strconv.Atoi(string(w))
		if err != nil || n < 1 || n > MaxAckWindow {
			d["ack_window"] = "must be an integer from 1 to 10000"
		} else {
			window = n
		}
	}
	if len(d) > 0 {
		return "", 0, &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, message: "Invalid query parameters", details: d}
	}
	return name, window, nil
}

// cursorConn is one connection's hold on a named cursor.
type cursorConn struct {
	name   string
	window int
	// opened and openErr: whether and how the cursor was opened, before
	// the WebSocket's 101 or, for SSE, by runCursor.
	opened  bool
	openErr error

	mu        sync.Mutex
	position  storage.ID   // last acknowledged id
	scanned   storage.ID   // every id up to here was read (sent or filtered out)
	delivered storage.ID   // highest id sent, saved as the redelivery mark
	unacked   []storage.ID // ids sent, ascending; those from head on are not acknowledged
	head      int          // unacked[head:] is the window in use (at most window ids)
	dirty     bool         // position changed since the last save
	// redeliverTo is the delivered mark the cursor had when this
	// connection opened: events up to it were sent before, to an earlier
	// connection, and carry "redelivered":true.
	redeliverTo storage.ID

	wake chan struct{} // a commit or an ack: look again (capacity 1)
	sub  *subscriber
}

// Start implements engine.CursorConn: the connection begins at the
// cursor's position, and what earlier connections were sent up to its
// delivered mark is flagged as redelivered.
func (c *cursorConn) Start(cur storage.Cursor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.position, c.scanned, c.delivered, c.redeliverTo = cur.Position, cur.Position, cur.Position, cur.Delivered
	if bytes.Compare(cur.Delivered[:], cur.Position[:]) > 0 {
		// Keep the mark even if this connection ends before resending:
		// the next one must still flag those events.
		c.delivered = cur.Delivered
	}
}

// CursorState implements engine.CursorConn.
func (c *cursorConn) CursorState() (position, delivered storage.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.position, c.delivered
}

// CloseCursor implements engine.CursorConn.
func (c *cursorConn) CloseCursor(code int, reason string) {
	c.sub.end(closeFrame{code: code, reason: reason})
}

// poke wakes the writer without blocking.
func (c *cursorConn) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// ack applies a cumulative acknowledgement of id; it returns an error
// message for the client when the ack is refused.
func (c *cursorConn) ack(idText string) []byte {
	if msg := c.ackError(idText); msg != "" {
		return ackError(msg, idText)
	}
	return nil
}

// ackError applies a cumulative acknowledgement of id and returns why it
// was refused, or "" (the ack message and POST .../ack share it).
func (c *cursorConn) ackError(idText string) string {
	raw, err := ids.ParseEvent(idText)
	if err != nil {
		return "id must be an event id (evt_...)"
	}
	id := storage.ID(raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	if bytes.Compare(id[:], c.scanned[:]) > 0 {
		// Acknowledging what was never sent would skip it.
		return "id is after the last event sent on this connection"
	}
	if bytes.Compare(id[:], c.position[:]) <= 0 {
		return "" // an old or repeated ack: nothing to do
	}
	full := len(c.unacked)-c.head >= c.window
	i := c.head
	for i < len(c.unacked) && bytes.Compare(c.unacked[i][:], id[:]) <= 0 {
		i++
	}
	// Advance a head index rather than shift the slice on every ack (one
	// ack per event would otherwise cost the window's length each); compact
	// once half of it is dead, so memory stays at about twice the window.
	c.head = i
	if c.head == len(c.unacked) {
		c.unacked, c.head = c.unacked[:0], 0
	} else if c.head*2 > len(c.unacked) {
		c.unacked, c.head = c.unacked[:copy(c.unacked, c.unacked[c.head:])], 0
	}
	c.position, c.dirty = id, true
	if c.head == len(c.unacked) {
		// Everything sent is acknowledged: what was scanned after it was
		// filtered out and needs no ack (the pump's rule, docs/decisions.md).
		c.position = c.scanned
	}
	if full {
		c.poke() // the window has room again
	}
	return ""
}

func ackError(msg, id string) []byte {
	b := []byte(`{"type":"error","error":"bad_request","message":`)
	b = strconv.AppendQuote(b, msg)
	b = append(b, `,"details":{"id":`...)
	b = strconv.AppendQuote(b, id)
	return append(b, "}}"...)
}

// room is how many more events the window lets the writer send.
func (c *cursorConn) room() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.window - (len(c.unacked) - c.head)
}

// save writes the position if it changed (sync at the end).
func (s *Server) saveCursor(p *engine.Principal, c *cursorConn) {
	c.mu.Lock()
	if !c.dirty {
		c.mu.Unlock()
		return
	}
	pos, del := c.position, c.delivered
	c.dirty = false
	c.mu.Unlock()
	if err := s.eng.SaveCursor(p, c.name, c, pos, del, false); err != nil {
		s.log.Warn("saving a cursor", "cursor", c.name, "err", err)
	}
}

// openCursor opens c's cursor (creating it at the head on first use) and
// keeps the outcome for runCursor, which answers a failure in the stream's
// own terms (4010, 1008).
func (s *Server) openCursor(p *engine.Principal, c *cursorConn) {
	_, c.openErr = s.eng.OpenCursor(p, c.name, c)
	c.opened = true
}

// closeCursor saves an opened cursor's position and releases it.
func (s *Server) closeCursor(p *engine.Principal, c *cursorConn) {
	if c.openErr != nil {
		return
	}
	pos, del := c.CursorState()
	if err := s.eng.CloseCursor(p, c.name, c, pos, del); err != nil {
		s.log.Warn("saving a cursor", "cursor", c.name, "err", err)
	}
}

// runCursor serves one stream on a named cursor until it closes.
func (s *Server) runCursor(sc *streamConn, p *engine.Principal, sub *subscriber) {
	st := s.streams
	c := sub.cur
	out := sc.out
	ds := p.Dataset()
	closeWith := func(code int, reason string) {
		out.goodbye(code, reason, nil)
		_ = out.flush()
	}
	if !c.opened {
		s.openCursor(p, c)
	}
	switch err := c.openErr; {
	case errors.Is(err, engine.ErrCursorExpired):
		st.cursorExpired.Inc()
		closeWith(engine.CloseCursorExpired, engine.ReasonCursorExpired)
		return
	case errors.Is(err, engine.ErrTooManyCursors):
		closeWith(websocket.ClosePolicyViolation, "too many cursors")
		return
	case err != nil:
		s.log.Error("opening a cursor", "cursor", c.name, "err", err)
		closeWith(websocket.CloseInternalServerErr, "internal error")
		return
	}
	defer s.closeCursor(p, c)

	// Subscribed before the first read: a commit after it wakes the writer.
	s.eng.Subscribe(p, sub)
	out.opened()
	if out.flush() != nil {
		return
	}

	readerDone, stopReader := sc.read(sub)
	defer stopReader() // see upgradeStream: the reader must be gone before the handler returns

	ping := time.NewTicker(s.streamPing)
	defer ping.Stop()
	saveTick := time.NewTicker(cursorSaveEvery)
	defer saveTick.Stop()
	held := time.NewTimer(time.Hour)
	held.Stop()
	defer held.Stop()
	buf := make([]byte, 0, 512)
	wasFull := false

	// pump sends what storage holds after the scan position, up to the
	// settled horizon and the window's room, and at most about
	// maxFramesPerWrite frames (one write); it reports whether it stopped
	// at the horizon with committed events above it, or with more to send
	// at once (a full write).
	// A connection told to end stops between reads (a revocation must not
	// wait for a long catch-up) unless draining for a server stop.
	pump := func(draining bool) (atHorizon, more bool, err error) {
		settled := s.eng.Settled()
		for frames := 0; draining || !sub.ended(); {
			if frames >= maxFramesPerWrite {
				return false, true, nil
			}
			room := c.room()
			if room <= 0 {
				if !wasFull {
					wasFull = true
					st.cursor.windowFull.Inc()
				}
				return false, false, nil
			}
			wasFull = false
			c.mu.Lock()
			after := c.scanned
			c.mu.Unlock()
			f := sub.filter.Load()
			n, stop := 0, false
			var loadErr error
			err := s.eng.RecordsAfter(p, after, replayChunk, func(id storage.ID, record []byte) bool {
				if bytes.Compare(id[:], settled[:]) > 0 {
					atHorizon, stop = true, true
					return false
				}
				se, err := st.events.load(ds, id, record)
				if err != nil {
					loadErr = err
					return false
				}
				e := &se.ev
				n++
				c.mu.Lock()
				c.scanned = e.ID
				if !f.match(e) {
					// Filtered out: it needs no ack. With nothing sent
					// and unacknowledged before it, the position passes
					// it at once, so a narrow filter does not hold the
					// cursor (and its lag) at events it never sees.
					if c.head == len(c.unacked) {
						c.position, c.dirty = e.ID, true
					}
					c.mu.Unlock()
					return true
				}
				c.unacked = append(c.unacked, e.ID)
				if bytes.Compare(e.ID[:], c.delivered[:]) > 0 {
					c.delivered = e.ID
				}
				redelivered := bytes.Compare(e.ID[:], c.redeliverTo[:]) <= 0
				c.mu.Unlock()
				payload := se.payload
				if redelivered {
					buf = append(append(buf[:0], payload[:len(payload)-1]...), `,"redelivered":true}`...)
					payload = buf
					st.cursor.redelivered.Inc()
				}
				out.event(e.ID, payload)
				st.sent.Inc()
				frames++
				room--
				return room > 0 && frames < maxFramesPerWrite
			})
			if err = errors.Join(loadErr, err); err != nil {
				return false, false, err
			}
			if stop || n == 0 {
				return atHorizon, false, nil
			}
		}
		return false, false, nil
	}

	for {
		atHorizon, more, err := pump(false)
		if err != nil {
			s.log.Error("cursor read", "cursor", c.name, "err", err)
			closeWith(websocket.CloseInternalServerErr, "internal error")
			return
		}
		if out.flush() != nil {
			return
		}
		if atHorizon {
			held.Reset(cursorHeldRetry)
		}
		if more {
			// Catching up: write on at once, but let pings, replies and a
			// close through between writes.
			select {
			case f := <-sub.control:
				out.control(f)
			case n := <-sub.notices:
				out.message(n.Kind, n.Payload)
			case <-ping.C:
				out.ping()
			case <-saveTick.C:
				s.saveCursor(p, c)
			case <-readerDone:
				return
			default:
			}
			if !sub.ended() {
				continue
			}
		}
		select {
		case <-c.wake:
			if s.streamLinger > 0 {
				time.Sleep(s.streamLinger) // let more commits land: one read and one write for several
			}
		case <-held.C:
		case f := <-sub.control:
			out.control(f)
		case n := <-sub.notices:
			// Typed messages are live only: sent as they come, beside
			// the window (they are never acknowledged nor redelivered).
			out.message(n.Kind, n.Payload)
		case <-ping.C:
			out.ping()
		case <-saveTick.C:
			s.saveCursor(p, c)
		case <-sub.shutdown:
			cl := sub.closing
			if cl.drain {
				// A server stop: everything committed is in storage; send
				// what the window allows, then say goodbye.
				for {
					_, more, err := pump(true)
					if err != nil || out.flush() != nil {
						return
					}
					if !more {
						break
					}
				}
			}
			if cl.code == closeRevoked {
				st.revokes.Inc()
			}
			closeWith(cl.code, cl.reason)
			return
		case <-readerDone:
			return
		}
	}
}

// cursorAckMessage is {"type":"ack","id":"evt_..."}.
type cursorAckMessage struct {
	Type string          `json:"type"`
	ID   json.RawMessage `json:"id"`
}

// handleCursorMessage answers an ack on a cursor connection; ok is false
// when msg is not an ack (the caller handles it as before).
func handleCursorMessage(sub *subscriber, msg []byte) (reply []byte, ok bool) {
	var m cursorAckMessage
	if json.Unmarshal(msg, &m) != nil || m.Type != "ack" {
		return nil, false
	}
	var id string
	if json.Unmarshal(m.ID, &id) != nil {
		sub.st.cursor.badAcks.Inc()
		return ackError("id must be an event id (evt_...)", string(m.ID)), true
	}
	reply = sub.cur.ack(id)
	if reply != nil {
		sub.st.cursor.badAcks.Inc()
	} else {
		sub.st.cursor.acks.Inc()
	}
	return reply, true
}
