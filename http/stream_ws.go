package http

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/filter"
)

// wsFrame is a frame the reader asks the writer to send.
type wsFrame struct {
	op      int
	payload []byte
}

// frameWriter writes unmasked server frames (RFC 6455 section 5.2) into a
// buffer flushed with one write and one deadline.
type frameWriter struct {
	conn net.Conn
	buf  []byte
}

func newFrameWriter(conn net.Conn) *frameWriter {
	return &frameWriter{conn: conn, buf: make([]byte, 0, 64<<10)}
}

func (w *frameWriter) frame(op int, payload []byte) {
	w.buf = append(w.buf, 0x80|byte(op)) // FIN, no extensions
	switch n := len(payload); {
	case n < 126:
		w.buf = append(w.buf, byte(n))
	case n <= 0xffff:
		w.buf = append(w.buf, 126, byte(n>>8), byte(n))
	default:
		w.buf = append(w.buf, 127)
		w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(n))
	}
	w.buf = append(w.buf, payload...)
}

func (w *frameWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_ = w.conn.SetWriteDeadline(time.Now().Add(writeWait))
	_, err := w.conn.Write(w.buf)
	if cap(w.buf) > 1<<20 {
		w.buf = make([]byte, 0, 64<<10) // do not keep a burst's buffer forever
	} else {
		w.buf = w.buf[:0]
	}
	return err
}

// readStream handles client messages (subscribe) and pongs; it ends the
// connection when nothing, not even a pong, arrives within the pong wait.
func (s *Server) readStream(rd *streamReader, sub *subscriber) {
	defer close(rd.done)
	conn := rd.conn
	conn.SetReadLimit(maxClientMessage)
	if rd.extend(s.streamPong) != nil {
		return
	}
	conn.SetPongHandler(func(string) error { return rd.extend(s.streamPong) })
	// The writer goroutine owns the connection's output: answer pings and
	// closes through it instead of gorilla's default handlers, which write
	// themselves.
	conn.SetPingHandler(func(data string) error {
		select {
		case sub.control <- wsFrame{websocket.PongMessage, []byte(data)}:
		default:
		}
		return nil
	})
	conn.SetCloseHandler(func(code int, _ string) error {
		select {
		case sub.control <- wsFrame{websocket.CloseMessage, websocket.FormatCloseMessage(code, "")}:
		default:
		}
		return nil
	})
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil || rd.extend(s.streamPong) != nil {
			return
		}
		var reply []byte
		if sub.cur != nil {
			var ack bool
			if reply, ack = handleCursorMessage(sub, msg); ack && reply == nil {
				continue // an accepted ack needs no answer
			}
		}
		if reply == nil {
			reply = handleClientMessage(sub, msg)
		}
		select {
		case sub.control <- wsFrame{websocket.TextMessage, reply}:
		default: // a client flooding messages without reading loses replies, not the server
		}
	}
}

// streamReader is the reader goroutine's side of a connection: its read
// deadline, which stop sets in the past for good to end the goroutine.
// Closing does not do it: a hijacked fasthttp connection's Close is a no-op
// until the handler has returned.
type streamReader struct {
	conn    *websocket.Conn
	done    chan struct{} // closed when the goroutine has returned
	mu      sync.Mutex
	stopped bool
}

var errStreamStopped = errors.New("stream stopped")

// extend moves the read deadline d ahead, unless stop has run.
func (rd *streamReader) extend(d time.Duration) error {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.stopped {
		return errStreamStopped
	}
	return rd.conn.SetReadDeadline(time.Now().Add(d))
}

// stop ends a blocked read at once and waits for the goroutine to return.
func (rd *streamReader) stop() {
	rd.mu.Lock()
	rd.stopped = true
	_ = rd.conn.SetReadDeadline(time.Unix(1, 0))
	rd.mu.Unlock()
	<-rd.done
}

// clientMessage is what a client may send.
type clientMessage struct {
	Type      string          `json:"type"`
	Event     json.RawMessage `json:"event"`
	VisitorID *string         `json:"visitor_id"`
	Where     []string        `json:"where"`
}

func handleClientMessage(sub *subscriber, msg []byte) []byte {
	var m clientMessage
	bad := func(text string) []byte {
		return []byte(`{"type":"error","error":"bad_request","message":` + strconv.Quote(text) + `}`)
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return bad("message must be a JSON object")
	}
	if m.Type != "subscribe" {
		return bad(`unknown message type; send {"type":"subscribe","event":[...],"visitor_id":"..."}`)
	}
	f := &streamFilter{}
	if len(m.Event) > 0 && string(m.Event) != "null" {
		var names []string
		if err := json.Unmarshal(m.Event, &names); err != nil {
			var one string
			if json.Unmarshal(m.Event, &one) != nil {
				return bad("event must be an array of event names")
			}
			names = []string{one}
		}
		f.events = make(map[string]struct{}, len(names))
		for _, n := range names {
			if !validName([]byte(n)) {
				return bad("event name must be alphanumeric with underscores only")
			}
			f.events[n] = struct{}{}
		}
	}
	if m.VisitorID != nil {
		if !event.ValidVisitorID(*m.VisitorID) {
			// The same rule and words as the query parameter; the filter stays as it was.
			return []byte(`{"type":"error","error":"bad_request","message":"visitor_id ` + event.MsgVisitorID +
				`","details":{"visitor_id":"` + event.MsgVisitorID + `"}}`)
		}
		f.visitor, f.hasVisitor = *m.VisitorID, true
	}
	if len(m.Where) > 0 {
		// The rules and words of the where= parameter (parseWhere).
		msg := ""
		if len(m.Where) > filter.MaxConditions {
			msg = "at most 10 conditions"
		}
		for _, w := range m.Where {
			if msg != "" {
				break
			}
			c, err := filter.Parse(w)
			if err != nil {
				msg = err.Error()
				break
			}
			f.where = append(f.where, c)
		}
		if msg != "" {
			b := []byte(`{"type":"error","error":"bad_request","message":`)
			b = strconv.AppendQuote(b, "where "+msg)
			b = append(b, `,"details":{"where":`...)
			b = strconv.AppendQuote(b, msg)
			return append(b, "}}"...)
		}
		f.whereText = m.Where
	}
	sub.filter.Store(f)
	out := map[string]any{"type": "subscribed", "event": f.names(), "visitor_id": nil, "where": f.whereText}
	if f.events == nil {
		out["event"] = nil
	}
	if f.hasVisitor {
		out["visitor_id"] = f.visitor
	}
	b, _ := json.Marshal(out)
	return b
}
