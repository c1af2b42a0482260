package http

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/engine/ratelimit"
)

// Server-Sent Events at GET /stream (contract section 14): the stream for
// clients and proxies without WebSockets. Same authentication, query,
// filters, kinds and cursors; the messages are the WebSocket's JSON as
// data: lines (id: the event id, event: the message type). The delivery
// loop is the WebSocket's (runStream, runCursor) with another framing
// (sseOut); a cursor is acknowledged with POST /stream/cursors/{name}/ack,
// since an SSE client cannot send on its stream.

// serveSSE answers with a text/event-stream body that the stream writes
// until it ends; release runs once it has ended.
func (s *Server) serveSSE(ctx *fasthttp.RequestCtx, p *engine.Principal, q *streamQuery, cur *cursorConn, release func()) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("text/event-stream")
	h := &ctx.Response.Header
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	// The response never ends by itself; its connection is not reused.
	ctx.SetConnectionClose()
	// Captured here: the stream writer runs on its own goroutine and may
	// outlive the RequestCtx's hold on the connection (fasthttp releases
	// the ctx once a failed write ended the response).
	conn := ctx.Conn()
	sub := s.newSubscriber(p, q, cur)
	st := s.streams
	// Tracked before the response: a shutdown or revocation from here on
	// finds the stream (its writer sees the end when it starts).
	untrack := s.trackStream(p, sub)
	// Two for the wait group: the writer, and the connection's close. What
	// the writer wrote last (the end of a drain and its goodbye) is still
	// in fasthttp's pipe when it returns, and reaches the client only
	// before the close: shutdown waits for that too.
	st.wg.Add(2)
	st.pending.add(conn, st.wg.Done)
	st.sse.Add(1)
	// fasthttp runs the writer at once on its own goroutine, writing into a
	// pipe the server copies to the connection (chunked) after this
	// handler returns; its first bytes wait for the subscription (opened).
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer st.wg.Done()
		defer st.sse.Add(-1)
		defer release()
		defer untrack(func() {}) // returning ends the body; fasthttp closes the connection
		sc := &streamConn{
			out:  newSSEOut(w, conn),
			read: func(*subscriber) (<-chan struct{}, func()) { return watchGone(conn) },
		}
		s.serve(sc, p, sub, q.since)
	})
}

// watchGone reads the client's side of an SSE connection, where nothing
// more is to come (the response closes the connection), to learn at once
// that the client went away: otherwise only the next write (a ping, 30 s
// later) would tell, and a gone consumer would hold its cursor, and one of
// its key's streams, until then. done is closed when the client closed or
// reset the connection; stop ends the goroutine and waits for it. Reading
// the net.Conn itself (not fasthttp's pooled reader) is safe here: fasthttp
// reads nothing more from a connection whose response closes it.
func watchGone(conn net.Conn) (done <-chan struct{}, stop func()) {
	gone := make(chan struct{})
	exited := make(chan struct{})
	var stopped atomic.Bool
	// The request's read deadline (ReadTimeout) would end the read as if
	// the client had gone.
	_ = conn.SetReadDeadline(time.Time{})
	go func() {
		defer close(exited)
		buf := make([]byte, 512)
		for {
			if _, err := conn.Read(buf); err != nil { // bytes sent anyway are dropped
				if !stopped.Load() {
					close(gone)
				}
				return
			}
		}
	}()
	return gone, func() {
		stopped.Store(true)
		_ = conn.SetReadDeadline(time.Unix(1, 0))
		<-exited
	}
}

// cursorAckBody is the body of POST /stream/cursors/{name}/ack.
type cursorAckBody struct {
	ID json.RawMessage `json:"id"`
}

// handleCursorAck acknowledges events of a cursor's connected consumer
// (an SSE client's way to send {"type":"ack"}; a WebSocket consumer may use
// it too): 204 when accepted (or at or before the position), 400 as the
// ack message would be refused, 409 when no connection holds the cursor,
// 404 when the cursor does not exist.
func (s *Server) handleCursorAck(ctx *fasthttp.RequestCtx) {
	p, fail := s.authenticateRead(ctx)
	if p == nil {
		return
	}
	if !s.admit(ctx, p, ratelimit.Standard) {
		return
	}
	if fail != nil {
		writeError(ctx, fail)
		return
	}
	name, _ := ctx.UserValue("name").(string)
	if !engine.ValidCursorName(name) {
		writeError(ctx, newError(fasthttp.StatusNotFound, codeNotFound, "Cursor not found"))
		return
	}
	var held heldBody
	defer held.release()
	body, fail := s.readBody(ctx, maxClientMessage, &held)
	if fail != nil {
		writeError(ctx, fail)
		return
	}
	var m cursorAckBody
	var id string
	if err := json.Unmarshal(body, &m); err != nil {
		writeError(ctx, newError(fasthttp.StatusBadRequest, codeBadRequest, "Body must be a JSON object {\"id\":\"evt_...\"}"))
		return
	}
	if json.Unmarshal(m.ID, &id) != nil {
		s.streams.cursor.badAcks.Inc()
		writeError(ctx, &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, message: "Invalid acknowledgement",
			details: map[string]string{"id": "must be an event id (evt_...)"}})
		return
	}
	cc, err := s.eng.ConnectedCursor(p, name)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		writeError(ctx, newError(fasthttp.StatusNotFound, codeNotFound, "Cursor not found"))
		return
	case err != nil:
		s.writeEngineError(ctx, err)
		return
	}
	c, ok := cc.(*cursorConn)
	if !ok {
		writeError(ctx, newError(fasthttp.StatusConflict, codeCursorNotConnected,
			"No connection holds this cursor: acknowledge while its consumer is connected (what it was not sent cannot be acknowledged)"))
		return
	}
	if msg := c.ackError(id); msg != "" {
		s.streams.cursor.badAcks.Inc()
		writeError(ctx, &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, message: "Invalid acknowledgement",
			details: map[string]string{"id": msg}})
		return
	}
	s.streams.cursor.acks.Inc()
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// codeCursorNotConnected is the 409 of an ack for a cursor without a consumer.
const codeCursorNotConnected = "conflict"
