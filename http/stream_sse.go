package http

import (
	"bufio"
	"encoding/json"
	"errors"

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
	st.wg.Add(1)
	st.sse.Add(1)
	// fasthttp runs the writer at once on its own goroutine, writing into a
	// pipe the server copies to the connection (chunked) after this
	// handler returns; its first bytes wait for the subscription (opened).
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer st.wg.Done()
		defer st.sse.Add(-1)
		defer release()
		sc := &streamConn{
			out:   newSSEOut(w, conn),
			read:  func(*subscriber) (<-chan struct{}, func()) { return nil, func() {} },
			close: func() {}, // returning ends the body; fasthttp closes the connection
		}
		s.serve(sc, p, sub, q.since)
	})
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
