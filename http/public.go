package http

import (
	"bytes"
	"strconv"
	"sync"
	"time"

	"github.com/fasthttp/router"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/eventjson"
	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/engine/ratelimit"
	"github.com/eventd/eventd/storage"
)

func (s *Server) publicRoutes() *router.Router {
	r := s.newRouter("Not found")
	r.GlobalOPTIONS = s.route("preflight", handlePreflight)
	r.POST("/events", s.route("create_event", s.handleCreate))
	r.POST("/events/batch", s.route("create_batch", s.handleBatch))
	r.GET("/events", s.route("list_events", s.handleList))
	r.GET("/events/{id}", s.route("get_event", s.handleGet))
	r.GET("/profiles/{id:*}", s.route("get_profile", s.handleProfile))
	r.GET("/verify", s.route("verify", s.handleVerify))
	r.GET("/rate-limit", s.route("rate_limit", s.handleRateLimit))
	r.GET("/analytics", s.route("analytics", s.handleAnalytics))
	r.GET("/healthz", s.route("healthz", s.handleHealth))
	r.HEAD("/healthz", s.route("healthz", s.handleHealth))
	// Without this, GET /events/batch would be read as the event id "batch".
	r.GET("/events/batch", s.route("method_not_allowed", func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set("Allow", "POST, OPTIONS")
		writeError(ctx, newError(fasthttp.StatusMethodNotAllowed, codeMethodNotAllowed, "Method GET is not allowed here; allowed: POST, OPTIONS"))
	}))
	r.GET("/stream", s.route("stream", s.handleStream))
	r.POST("/stream/cursors/{name}/ack", s.route("stream_cursor_ack", s.handleCursorAck))
	r.GET("/t.js", s.route("tjs", s.handleTJS))
	for _, sr := range segmentRoutes {
		r.POST(sr.path, s.route("segment_"+segmentTypeName(sr.typ), s.handleSegment(sr.typ)))
	}
	for _, path := range segmentBatchPaths {
		r.POST(path, s.route("segment_batch", s.handleSegmentBatch))
	}
	r.POST("/v1/m", s.route("segment_metrics", handleSegmentMetrics))
	return r
}

// admit counts a request that stores nothing and answers 429 when over the
// limit. On success it sets the rate-limit headers and returns true; the
// caller then writes its answer (or pre-computed error).
func (s *Server) admit(ctx *fasthttp.RequestCtx, p *engine.Principal, kind ratelimit.Kind) bool {
	rep, ok := s.admitReply(ctx, p, kind, false)
	s.eng.Release(rep)
	return ok
}

// admitReply is admit for a caller that reads the reply (a snapshot's
// buckets); on success the caller releases it (engine.Release).
func (s *Server) admitReply(ctx *fasthttp.RequestCtx, p *engine.Principal, kind ratelimit.Kind, snapshot bool) (*actors.Reply, bool) {
	rep, err := s.eng.Submit(p, kind, nil, snapshot)
	if err != nil {
		s.eng.Release(rep)
		s.writeEngineError(ctx, err)
		return nil, false
	}
	setRateHeaders(ctx, rep.Windows, time.Now())
	if !rep.Allowed {
		writeRateLimited(ctx, rep)
		s.eng.Release(rep)
		return nil, false
	}
	return rep, true
}

// readBody returns the decoded request body or the error that refuses it.
// It checks the headers first (415, 413 by Content-Length), then reads at
// most limit bytes (a little more when gzipped) under the listener's body
// budget; h holds the bytes until the handler releases it.
func (s *Server) readBody(ctx *fasthttp.RequestCtx, limit int, h *heldBody) ([]byte, *apiError) {
	if ct := ctx.Request.Header.ContentType(); len(ct) > 0 {
		mt := ct
		if i := bytes.IndexByte(mt, ';'); i >= 0 {
			mt = mt[:i]
		}
		mt = bytes.TrimSpace(mt)
		if !bytes.EqualFold(mt, []byte("application/json")) && !bytes.EqualFold(mt, []byte("text/plain")) {
			return nil, newError(fasthttp.StatusUnsupportedMediaType, codeUnsupported, "Content-Type must be application/json")
		}
	}
	gz := false
	switch enc := ctx.Request.Header.ContentEncoding(); {
	case len(enc) == 0 || bytes.EqualFold(enc, []byte("identity")):
	case bytes.EqualFold(enc, []byte("gzip")):
		gz = true
	default:
		return nil, newError(fasthttp.StatusUnsupportedMediaType, codeUnsupported, "Content-Encoding must be gzip or identity")
	}
	raw := limit
	if gz {
		// Deflate adds at most ~0.03 % to incompressible data plus a header:
		// a gzipped body that decodes to limit bytes stays under this.
		raw = limit + limit>>8 + 1024
	}
	body, fail := readBodyLimited(ctx, raw, maxReadBody, s.bodies, h)
	if fail != nil {
		if fail.status == fasthttp.StatusRequestEntityTooLarge {
			return nil, tooLargeError(limit)
		}
		return nil, fail
	}
	if gz {
		out, err := gunzipLimited(body, limit)
		if err == errTooLarge {
			return nil, tooLargeError(limit)
		}
		if err != nil {
			return nil, &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest,
				message: "Request body is not valid gzip", details: map[string]string{"body": "invalid gzip data"}}
		}
		body = out
	}
	if len(body) > limit {
		return nil, tooLargeError(limit)
	}
	return body, nil
}

// writeReq is a write request once its headers are judged and its body read.
type writeReq struct {
	p          *engine.Principal
	receivedAt int64     // Unix ms, becomes created_at
	admitted   bool      // counted already, by admitEarly
	body       []byte    // the decoded body; nil when fail is set
	fail       *apiError // the answer once the request is counted (refuse)
	held       heldBody  // the body's bytes; the handler releases it
}

// startWrite does what every write route does before decoding: the key
// (401), the Origin (a 403 to give once counted), a 429 from the headers
// when the bucket is full, then the body up to limit bytes. It returns
// false when it answered.
func (s *Server) startWrite(ctx *fasthttp.RequestCtx, kind ratelimit.Kind, limit int, w *writeReq) bool {
	if w.p = s.authenticate(ctx); w.p == nil {
		return false
	}
	now := ctx.Time() // the request's start, as the route's clock
	w.receivedAt = now.UnixMilli()
	w.fail = checkOrigin(ctx, w.p)
	if w.fail == nil {
		w.fail = noParams(ctx.QueryArgs())
	}
	var ok bool
	if w.admitted, ok = s.admitEarly(ctx, w.p, kind, now, w.fail); !ok {
		return false
	}
	if w.fail == nil {
		w.body, w.fail = s.readBody(ctx, limit, &w.held)
	}
	return true
}

// admitEarly answers 429 from the headers when p's bucket was already full:
// the body is then never read. It returns false when it answered. A public
// key is not refused here, as a pageview body counts in no plan bucket.
// When the actor finds room after all, the request is counted now and
// admitted reports true, so the write must not count it again. A request
// already failed (fail, e.g. a 403 origin) is left to refuse.
func (s *Server) admitEarly(ctx *fasthttp.RequestCtx, p *engine.Principal, kind ratelimit.Kind, now time.Time, fail *apiError) (admitted, ok bool) {
	if fail != nil || p.Type() == engine.Public || !p.Blocked(kind, now) {
		return false, true
	}
	if !s.admit(ctx, p, kind) {
		return false, false
	}
	return true, true
}

// prepare turns a decoded input into a pending write, applying skew
// correction, the default timestamp and the 422 checks.
func prepare(p *engine.Principal, in *event.Input, receivedAt int64, sentAt int64, hasSentAt bool) (actors.Pending, *event.Problem) {
	if hasSentAt {
		event.ApplySkew(in, receivedAt, sentAt)
	}
	if prob := event.Validate(in, p.Definition(in.Name), receivedAt); prob != nil {
		return actors.Pending{}, prob
	}
	if in.HasVisitor && p.Suppressed(in.VisitorID) {
		return actors.Pending{}, &event.Problem{Status: fasthttp.StatusUnprocessableEntity, Code: codeValidation, Message: "Validation failed",
			Details: map[string]string{"visitor_id": "this visitor was erased and its events are refused"}}
	}
	ts := receivedAt
	if in.HasTimestamp {
		ts = in.Timestamp
	}
	pe := actors.Pending{
		Event: storage.Event{Name: in.Name, VisitorID: in.VisitorID, HasVisitor: in.HasVisitor,
			Timestamp: ts, Properties: in.Properties, Numbers: in.Numbers},
		IdemKey:   in.IdempotencyKey,
		Hash:      in.Hash,
		AtReceipt: !in.HasTimestamp,
	}
	if in.IdempotencyKey != "" {
		pe.Content = in.Content() // only a keyed write is ever compared (actors.SameContent)
	}
	return pe, nil
}

// pageviewKind decides the bucket of a write: public-key pageviews count in
// no plan bucket but pass the per-IP guard.
func (s *Server) pageviewGuard(ctx *fasthttp.RequestCtx, p *engine.Principal, allPageviews bool, kind ratelimit.Kind) (ratelimit.Kind, bool) {
	if p.Type() != engine.Public || !allPageviews {
		return kind, true
	}
	ok, retry := s.eng.AllowPageview(ctx.RemoteIP().String(), time.Now())
	if !ok {
		writeRateLimited(ctx, &actors.Reply{RetryAfter: retry})
		return kind, false
	}
	return ratelimit.None, true
}

func (s *Server) handleCreate(ctx *fasthttp.RequestCtx) {
	var w writeReq
	defer w.held.release()
	if !s.startWrite(ctx, ratelimit.Standard, maxSingleBody, &w) {
		return
	}
	p, receivedAt := w.p, w.receivedAt
	var pending actors.Pending
	var in event.Input
	var prob *event.Problem
	if w.fail == nil {
		var sentAt int64
		var hasSentAt bool
		in, sentAt, hasSentAt, prob = event.DecodeSingle(w.body)
		if prob == nil {
			in.IdempotencyKey = string(ctx.Request.Header.Peek("Idempotency-Key"))
			if len(in.IdempotencyKey) > event.MaxIdempotencyKeyLen {
				prob = &event.Problem{Status: 400, Code: codeBadRequest, Message: "Invalid request data",
					Details: map[string]string{"Idempotency-Key": "must be at most 255 characters"}}
			} else if in.IdempotencyKey != "" {
				in.SetHash()
			}
		}
		if prob == nil {
			pending, prob = prepare(p, &in, receivedAt, sentAt, hasSentAt)
		}
	}
	res, ok := s.storeOne(ctx, &w, pending, prob, errIdempotencyConflict)
	if !ok {
		return
	}
	buf := make([]byte, 0, 128)
	buf = append(buf, `{"id":"`...)
	buf = ids.AppendEvent(buf, res.ID)
	buf = append(buf, `","event":`...)
	buf = event.AppendString(buf, in.Name)
	buf = append(buf, `,"status":"accepted","timestamp":"`...)
	buf = event.AppendTime(buf, res.Timestamp)
	buf = append(buf, `"}`...)
	writeRaw(ctx, fasthttp.StatusCreated, buf)
}

// batchEntriesPool holds the slices native batches are decoded into, as
// segmentMsgsPool does for Segment batches: made for every request, a
// batch's entries were a sixth of its allocated bytes. Nothing keeps an
// entry once its request is answered: prepare copies what it stores.
var batchEntriesPool = sync.Pool{New: func() any { return new([]event.Entry) }}

func (s *Server) handleBatch(ctx *fasthttp.RequestCtx) {
	var rq writeReq
	defer rq.held.release()
	if !s.startWrite(ctx, ratelimit.Batch, maxBatchBody, &rq) {
		return
	}
	p, receivedAt, fail := rq.p, rq.receivedAt, rq.fail
	if fail == nil {
		buf := batchEntriesPool.Get().(*[]event.Entry)
		defer func() {
			clear((*buf)[:cap(*buf)]) // drop the entries' strings
			batchEntriesPool.Put(buf)
		}()
		entries, sentAt, hasSentAt, prob := event.DecodeBatchInto(*buf, rq.body)
		if cap(entries) > cap(*buf) {
			*buf = entries // grown past a batch the pool held: keep the larger
		}
		if prob == nil {
			w := &actors.Write{Dataset: p.Dataset(), ReceivedAt: receivedAt, Admitted: rq.admitted,
				Events: make([]actors.Pending, 0, len(entries))}
			allPageviews := true
			var ec enrichCtx
			for i := range entries {
				en := &entries[i]
				if en.Problem != nil {
					continue
				}
				pe, prob := prepare(p, &en.Input, receivedAt, sentAt, hasSentAt)
				if prob != nil {
					en.Problem = prob
					continue
				}
				allPageviews = allPageviews && en.Input.Name == "pageview"
				s.enrichEvent(ctx, p, &pe, &ec)
				w.Events = append(w.Events, pe)
			}
			s.commitBatch(ctx, p, entries, w, allPageviews)
			return
		}
		fail = problemError(prob)
	}
	s.refuse(ctx, p, ratelimit.Batch, fail, rq.admitted)
}

// errIdempotencyConflict answers POST /events with a reused
// Idempotency-Key; built once, as writeError only reads it.
var errIdempotencyConflict = newError(fasthttp.StatusConflict, codeConflict,
	"This Idempotency-Key was already used with a different request body")

// storeOne finishes a single-event write once its body is decoded: the
// refusal (the request's own failure, else prob) after counting it, else
// enrichment and the store; a reused idempotency key is answered with
// conflict, a replay marked. It returns false when it answered; otherwise
// the caller writes the success body.
func (s *Server) storeOne(ctx *fasthttp.RequestCtx, w *writeReq, pending actors.Pending, prob *event.Problem, conflict *apiError) (actors.Result, bool) {
	fail := w.fail
	if fail == nil && prob != nil {
		fail = problemError(prob)
	}
	if fail != nil {
		s.refuse(ctx, w.p, ratelimit.Standard, fail, w.admitted)
		return actors.Result{}, false
	}
	s.enrichEvent(ctx, w.p, &pending, &enrichCtx{})
	res, ok := s.submitOne(ctx, w.p, pending, w.receivedAt, w.admitted)
	if !ok {
		return res, false
	}
	switch res.Outcome {
	case actors.Conflict:
		writeError(ctx, conflict)
		return res, false
	case actors.Replayed:
		ctx.Response.Header.Set("Idempotent-Replayed", "true")
	}
	return res, true
}

// submitOne stores one prepared event (POST /events, a Segment single
// route) and returns its result; false when it answered already (429, 503,
// 507, the per-IP pageview guard). A public key's pageview counts in no
// plan bucket.
func (s *Server) submitOne(ctx *fasthttp.RequestCtx, p *engine.Principal, pending actors.Pending, receivedAt int64, admitted bool) (actors.Result, bool) {
	kind, ok := s.pageviewGuard(ctx, p, pending.Event.Name == "pageview", ratelimit.Standard)
	if !ok {
		return actors.Result{}, false
	}
	w := actors.SingleWrite(p.Dataset(), receivedAt, pending, admitted)
	rep, err := s.eng.Submit(p, kind, w, kind == ratelimit.None)
	defer s.eng.Release(rep)
	if err != nil {
		s.writeSubmitError(ctx, rep, err) // disk.go
		return actors.Result{}, false
	}
	setRateHeaders(ctx, rep.Windows, time.Now())
	if !rep.Allowed {
		writeRateLimited(ctx, rep)
		return actors.Result{}, false
	}
	return rep.Results[0], true
}

// submitMany stores the valid events of a batch (native or Segment) in one
// write, or only counts the request when none is valid. It returns the
// reply (nil without events), which the caller releases once its answer is
// built, and false when it answered already.
func (s *Server) submitMany(ctx *fasthttp.RequestCtx, p *engine.Principal, w *actors.Write, allPageviews bool) (*actors.Reply, bool) {
	kind, ok := s.pageviewGuard(ctx, p, allPageviews && len(w.Events) > 0, ratelimit.Batch)
	if !ok {
		return nil, false
	}
	if len(w.Events) == 0 {
		// An admitted request was counted before its body was read.
		return nil, w.Admitted || s.admit(ctx, p, kind)
	}
	rep, err := s.eng.Submit(p, kind, w, kind == ratelimit.None)
	if err != nil {
		s.writeSubmitError(ctx, rep, err) // disk.go
		return rep, false
	}
	setRateHeaders(ctx, rep.Windows, time.Now())
	if !rep.Allowed {
		writeRateLimited(ctx, rep)
		return rep, false
	}
	return rep, true
}

// refuse answers a write's error after counting the request (so a 429 wins
// over it), unless it was counted already or the server refused the body.
func (s *Server) refuse(ctx *fasthttp.RequestCtx, p *engine.Principal, kind ratelimit.Kind, fail *apiError, admitted bool) {
	if admitted || fail == errBodyBudget {
		writeError(ctx, fail)
		return
	}
	if s.admit(ctx, p, kind) {
		writeError(ctx, fail)
	}
}

func (s *Server) commitBatch(ctx *fasthttp.RequestCtx, p *engine.Principal, entries []event.Entry, w *actors.Write, allPageviews bool) {
	rep, ok := s.submitMany(ctx, p, w, allPageviews)
	defer s.eng.Release(rep) // after the answer is built: results live in the reply
	if !ok {
		return
	}
	var results []actors.Result
	if rep != nil {
		results = rep.Results
	}
	accepted := 0
	// 64 bytes an entry: an accepted one's {"id":"evt_…","status":"accepted"}
	// is 59 and a comma; 48 grew the buffer twice for every batch.
	buf := make([]byte, 0, 64+len(entries)*64)
	buf = append(buf, `{"results":[`...)
	next := 0
	for i := range entries {
		if i > 0 {
			buf = append(buf, ',')
		}
		en := &entries[i]
		if en.Problem != nil {
			buf = appendRejected(buf, problemError(en.Problem))
			continue
		}
		res := results[next]
		if res.Outcome == actors.Duplicate {
			res = results[res.Of]
		}
		next++
		if res.Outcome == actors.Conflict {
			buf = appendRejected(buf, &apiError{status: fasthttp.StatusConflict, code: codeConflict,
				message: "This idempotency_key was already used with a different event",
				details: map[string]string{"idempotency_key": "already used with a different event"}})
			continue
		}
		accepted++
		buf = append(buf, `{"id":"`...)
		buf = ids.AppendEvent(buf, res.ID)
		buf = append(buf, `","status":"accepted"}`...)
	}
	buf = append(buf, `],"accepted":`...)
	buf = strconv.AppendInt(buf, int64(accepted), 10)
	buf = append(buf, `,"rejected":`...)
	buf = strconv.AppendInt(buf, int64(len(entries)-accepted), 10)
	buf = append(buf, '}')
	writeRaw(ctx, fasthttp.StatusCreated, buf)
}

func appendRejected(dst []byte, e *apiError) []byte {
	dst = append(dst, `{"status":"rejected",`...)
	body := appendErrorBody(nil, e, -1)
	return append(dst, body[1:]...) // drop the error object's opening brace
}

// startRead authenticates a read route without parameters to check and
// counts it in the standard bucket; it returns nil when it answered (401,
// 429, then a refused origin's or a public key's 403).
func (s *Server) startRead(ctx *fasthttp.RequestCtx) *engine.Principal {
	p, fail := s.authenticateRead(ctx)
	if p != nil && fail == nil {
		fail = noParams(ctx.QueryArgs())
	}
	if p == nil || !s.admit(ctx, p, ratelimit.Standard) {
		return nil
	}
	if fail != nil {
		writeError(ctx, fail)
		return nil
	}
	return p
}

func (s *Server) handleGet(ctx *fasthttp.RequestCtx) {
	p := s.startRead(ctx)
	if p == nil {
		return
	}
	idText, _ := ctx.UserValue("id").(string)
	id, err := ids.ParseEvent(idText)
	if err != nil {
		writeError(ctx, newError(fasthttp.StatusNotFound, codeNotFound, msgEventMissing))
		return
	}
	ev, err := s.eng.GetEvent(p, id)
	if err == engine.ErrNotFound {
		writeError(ctx, newError(fasthttp.StatusNotFound, codeNotFound, msgEventMissing))
		return
	}
	if err != nil {
		s.writeEngineError(ctx, err)
		return
	}
	writeRaw(ctx, fasthttp.StatusOK, eventjson.Append(make([]byte, 0, 256+len(ev.Properties)), &ev, true))
}

func (s *Server) handleList(ctx *fasthttp.RequestCtx) {
	p, fail := s.authenticateRead(ctx)
	if p == nil {
		return
	}
	var q storage.ListQuery
	if fail == nil {
		q, fail = parseListQuery(ctx.QueryArgs(), "where")
	}
	if !s.admit(ctx, p, ratelimit.Standard) {
		return
	}
	if fail != nil {
		writeError(ctx, fail)
		return
	}
	events, total, err := s.eng.List(p, q)
	if err != nil {
		s.writeQueryError(ctx, err)
		return
	}
	buf := make([]byte, 0, 128+len(events)*128)
	buf = append(buf, `{"data":[`...)
	for i := range events {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = eventjson.Append(buf, &events[i], false)
	}
	buf = append(buf, `],"pagination":{"total":`...)
	buf = strconv.AppendInt(buf, total, 10)
	buf = append(buf, `,"limit":`...)
	buf = strconv.AppendInt(buf, int64(q.Limit), 10)
	buf = append(buf, `,"offset":`...)
	buf = strconv.AppendInt(buf, int64(q.Offset), 10)
	buf = append(buf, `,"has_more":`...)
	buf = strconv.AppendBool(buf, int64(q.Offset)+int64(len(events)) < total)
	buf = append(buf, `}}`...)
	writeRaw(ctx, fasthttp.StatusOK, buf)
}

func (s *Server) handleVerify(ctx *fasthttp.RequestCtx) {
	p := s.authenticate(ctx)
	if p == nil {
		return
	}
	fail := checkOrigin(ctx, p)
	if fail == nil {
		fail = noParams(ctx.QueryArgs())
	}
	if !s.admit(ctx, p, ratelimit.Standard) {
		return
	}
	if fail != nil {
		writeError(ctx, fail)
		return
	}
	proj := p.Project()
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{
		"valid": true, "key_type": p.Type(), "environment": p.Environment(), "permissions": p.Permissions(),
		"project": map[string]string{"id": proj.ID, "name": proj.Name},
	})
}

func (s *Server) handleRateLimit(ctx *fasthttp.RequestCtx) {
	p := s.authenticate(ctx)
	if p == nil {
		return
	}
	fail := checkOrigin(ctx, p)
	if fail == nil {
		fail = noParams(ctx.QueryArgs())
	}
	rep, ok := s.admitReply(ctx, p, ratelimit.None, true)
	if !ok {
		return
	}
	defer s.eng.Release(rep)
	if fail != nil {
		writeError(ctx, fail)
		return
	}
	windows := func(ws []ratelimit.WindowStatus) map[string]any {
		out := make(map[string]any, len(ws))
		for _, w := range ws {
			out[w.Name] = map[string]int64{"limit": w.Limit, "remaining": w.Remaining, "reset": w.Reset}
		}
		return out
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{
		"limits": windows(rep.Buckets[ratelimit.Standard]),
		"plan":   p.Plan(),
		"buckets": map[string]any{
			"batch":     windows(rep.Buckets[ratelimit.Batch]),
			"analytics": windows(rep.Buckets[ratelimit.AnalyticsKind]),
		},
	})
}
