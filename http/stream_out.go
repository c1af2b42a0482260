package http

import (
	"bufio"
	"bytes"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/storage"
)

// streamOut frames a stream's messages for its transport: WebSocket frames
// (wsOut) or Server-Sent Events (sseOut). The delivery loops (runStream,
// runCursor) only add messages and flush, so filters, cursors, the queue
// bound, shutdown and revocation are one code path for both transports.
// Only the loop's goroutine calls these methods.
type streamOut interface {
	// opened marks the subscription as in place; SSE sends its first
	// bytes (and so the response headers) only then, so a client that has
	// seen the response cannot miss an event committed after it.
	opened()
	// event adds an event message; id is the event's id (SSE's id: line).
	event(id storage.ID, payload []byte)
	// message adds another message of type typ (goal.completed, usage.alert).
	message(typ string, payload []byte)
	// ping adds a keep-alive: a ping frame, or an SSE comment.
	ping()
	// control adds a frame the WebSocket reader handed over (pong, close
	// reply, an answer to a client message); SSE has no reader.
	control(f wsFrame)
	// goodbye adds the last words before the stream ends: msg (if any)
	// and a close frame with code and reason; on SSE one final
	// "event: error" whose JSON names the code.
	goodbye(code int, reason string, msg []byte)
	// flush writes what was added, with one write and a fresh deadline.
	flush() error
}

// wsOut frames messages as WebSocket frames.
type wsOut struct{ fw *frameWriter }

func newWSOut(conn net.Conn) *wsOut { return &wsOut{fw: newFrameWriter(conn)} }

func (o *wsOut) opened()                            {}
func (o *wsOut) event(_ storage.ID, payload []byte) { o.fw.frame(websocket.TextMessage, payload) }
func (o *wsOut) message(_ string, payload []byte)   { o.fw.frame(websocket.TextMessage, payload) }
func (o *wsOut) ping()                              { o.fw.frame(websocket.PingMessage, nil) }
func (o *wsOut) control(f wsFrame)                  { o.fw.frame(f.op, f.payload) }
func (o *wsOut) flush() error                       { return o.fw.flush() }
func (o *wsOut) goodbye(code int, reason string, msg []byte) {
	if msg != nil {
		o.fw.frame(websocket.TextMessage, msg)
	}
	o.fw.frame(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason))
}

// sseOut frames messages as Server-Sent Events into the response body
// that fasthttp streams (SetBodyStreamWriter). w writes into fasthttp's
// pipe, which holds a few chunks at most: when the client stops reading,
// the server's write to conn blocks, then w's flush blocks, exactly as a
// WebSocket writer blocks on its socket, and the subscriber's queue bound
// (slow_consumer) applies the same way.
type sseOut struct {
	w *bufio.Writer
	// conn is the client's connection: each flush moves its write
	// deadline, as a WebSocket flush does, because the server's own
	// deadline (WriteTimeout, set once before the response) would end a
	// healthy stream after 30 s and a stuck one never later.
	conn net.Conn
	buf  []byte
}

func newSSEOut(w *bufio.Writer, conn net.Conn) *sseOut {
	return &sseOut{w: w, conn: conn, buf: make([]byte, 0, 64<<10)}
}

// sseRetryMs is the reconnection delay the server suggests to EventSource.
const sseRetryMs = 1000

func (o *sseOut) opened() {
	o.buf = append(o.buf, "retry: "+strconv.Itoa(sseRetryMs)+"\n\n"...)
}

func (o *sseOut) event(id storage.ID, payload []byte) {
	o.buf = append(o.buf, "id: "...)
	o.buf = ids.AppendEvent(o.buf, id)
	o.buf = append(o.buf, "\nevent: event\n"...)
	o.data(payload)
}

// message has no id: line, so EventSource keeps the last event's id as
// Last-Event-ID (typed messages are not a resume point).
func (o *sseOut) message(typ string, payload []byte) {
	o.buf = append(o.buf, "event: "...)
	o.buf = append(o.buf, typ...)
	o.buf = append(o.buf, '\n')
	o.data(payload)
}

// data adds a data: line and the blank line that ends the event. A JSON
// message has no line break except as whitespace between tokens (inside
// strings they are escaped), so one becomes a space: same JSON, one line.
func (o *sseOut) data(payload []byte) {
	o.buf = append(o.buf, "data: "...)
	start := len(o.buf)
	o.buf = append(o.buf, payload...)
	if bytes.ContainsAny(payload, "\r\n") {
		for i := start; i < len(o.buf); i++ {
			if o.buf[i] == '\r' || o.buf[i] == '\n' {
				o.buf[i] = ' '
			}
		}
	}
	o.buf = append(o.buf, "\n\n"...)
}

func (o *sseOut) ping()           { o.buf = append(o.buf, ": ping\n\n"...) }
func (o *sseOut) control(wsFrame) {}

// goodbye sends {"type":"error","error":...,"code":N,"message":...} as the
// last event: the code is the WebSocket close code the same end would have.
func (o *sseOut) goodbye(code int, reason string, msg []byte) {
	var b []byte
	if len(msg) > 1 && msg[len(msg)-1] == '}' {
		b = append(append(b, msg[:len(msg)-1]...), `,"code":`...)
		b = append(strconv.AppendInt(b, int64(code), 10), '}')
	} else {
		b = append(b, `{"type":"error","error":`...)
		b = strconv.AppendQuote(b, closeErrorName(reason))
		b = append(b, `,"code":`...)
		b = strconv.AppendInt(b, int64(code), 10)
		b = append(b, `,"message":`...)
		b = strconv.AppendQuote(b, reason)
		b = append(b, '}')
	}
	o.message("error", b)
}

// closeErrorName is the error code of an SSE goodbye: the close reason in
// snake case ("cursor taken over" -> cursor_taken_over).
func closeErrorName(reason string) string {
	if reason == "" {
		return "closed"
	}
	return strings.ReplaceAll(reason, " ", "_")
}

func (o *sseOut) flush() error {
	if len(o.buf) == 0 {
		return nil
	}
	_ = o.conn.SetWriteDeadline(time.Now().Add(writeWait))
	// In pieces no larger than w's buffer: w hands fasthttp's pipe one
	// chunk per buffer, and the pipe holds a few chunks, so a client that
	// stops reading holds a few buffers here, not a few whole flushes
	// (up to maxFramesPerWrite messages each).
	var err error
	for b := o.buf; len(b) > 0 && err == nil; {
		n := min(len(b), o.w.Size())
		_, err = o.w.Write(b[:n])
		b = b[n:]
	}
	if err == nil {
		err = o.w.Flush()
	}
	if cap(o.buf) > 1<<20 {
		o.buf = make([]byte, 0, 64<<10) // do not keep a burst's buffer forever
	} else {
		o.buf = o.buf[:0]
	}
	return err
}
