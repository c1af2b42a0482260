package http

import (
	"strconv"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/ratelimit"
	"github.com/eventd/eventd/storage"
)

// The Segment-compatible tracking API (contract section 12): Segment's
// HTTP Tracking API shapes on the public listener, so analytics.js,
// analytics-node, analytics-go, the mobile SDKs and RudderStack's and
// Jitsu's SDKs can send to eventd by changing their host. The messages are
// decoded by engine/event and stored as native events through the same
// key actor and shard as POST /events, so limits, idempotency, durability
// and the stream are the native ones.

// segmentRoutes are the single-message routes and the type each stores.
// The one-letter paths are the ones analytics.js (analytics-next) posts to
// under its apiHost: the type's first letter.
var segmentRoutes = []struct {
	path string
	typ  event.SegmentType
}{
	{"/v1/track", event.SegmentTrack},
	{"/v1/page", event.SegmentPage},
	{"/v1/screen", event.SegmentScreen},
	{"/v1/identify", event.SegmentIdentify},
	{"/v1/group", event.SegmentGroup},
	{"/v1/alias", event.SegmentAlias},
	{"/v1/t", event.SegmentTrack},
	{"/v1/p", event.SegmentPage},
	{"/v1/s", event.SegmentScreen},
	{"/v1/i", event.SegmentIdentify},
	{"/v1/g", event.SegmentGroup},
	{"/v1/a", event.SegmentAlias},
}

// segmentBatchPaths take a batch of messages: /v1/import is Segment's
// alias of /v1/batch, /v1/b the path analytics.js batches to.
var segmentBatchPaths = []string{"/v1/batch", "/v1/import", "/v1/b"}

// segmentKind is the rate-limit bucket of a Segment route, ok false for a
// path that is not one: the header hook uses it to admit /v1 bodies.
func segmentKind(path []byte) (kind ratelimit.Kind, ok bool) {
	for _, p := range segmentBatchPaths {
		if string(path) == p {
			return ratelimit.Batch, true
		}
	}
	for _, r := range segmentRoutes {
		if string(path) == r.path {
			return ratelimit.Standard, true
		}
	}
	return ratelimit.Standard, false
}

var segmentSuccess = []byte(`{"success":true}`)

// handleSegment serves one single-message route. A message that fails
// validation is the request's 400 (Segment answers 400 too); a messageId
// reused with another message is 409, as the native Idempotency-Key.
func (s *Server) handleSegment(typ event.SegmentType) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		var w writeReq
		defer w.held.release()
		if !s.startWrite(ctx, ratelimit.Standard, event.MaxSegmentMessage, &w) {
			return
		}
		var pending actors.Pending
		var prob *event.Problem
		if w.fail == nil {
			var m event.SegmentMessage
			m, prob = event.DecodeSegmentMessage(w.body, typ, w.receivedAt)
			if prob == nil {
				prob = m.Problem
			}
			if prob == nil {
				pending, prob = prepareSegment(w.p, &m, w.receivedAt)
			}
		}
		if _, ok := s.storeOne(ctx, &w, pending, prob, errMessageIDConflict); !ok {
			return
		}
		writeRaw(ctx, fasthttp.StatusOK, segmentSuccess)
	}
}

// handleSegmentBatch serves /v1/batch and /v1/import: every valid message
// is stored (one atomic write, as a native batch), the others are listed in
// "rejected" with their index; the answer is 200 either way.
func (s *Server) handleSegmentBatch(ctx *fasthttp.RequestCtx) {
	var w writeReq
	defer w.held.release()
	if !s.startWrite(ctx, ratelimit.Batch, event.MaxSegmentBatch, &w) {
		return
	}
	fail := w.fail
	if fail == nil {
		buf := segmentMsgsPool.Get().(*[]event.SegmentMessage)
		defer func() {
			clear((*buf)[:cap(*buf)]) // drop the messages' strings
			segmentMsgsPool.Put(buf)
		}()
		msgs, prob := event.DecodeSegmentBatchInto(*buf, w.body, w.receivedAt)
		if cap(msgs) > cap(*buf) {
			*buf = msgs // grown past a batch the pool held: keep the larger
		}
		if prob == nil {
			s.commitSegmentBatch(ctx, w.p, msgs, w.receivedAt, w.admitted)
			return
		}
		fail = problemError(prob)
	}
	s.refuse(ctx, w.p, ratelimit.Batch, fail, w.admitted)
}

// segmentMsgsPool holds the slices Segment batches are decoded into: a
// batch of 100 messages is 23 KB, made and then grown for every request
// before (a sixth of a Segment batch's allocated bytes). Nothing keeps a
// message once its request is answered: prepareSegment copies what it
// stores.
var segmentMsgsPool = sync.Pool{New: func() any { return new([]event.SegmentMessage) }}

func (s *Server) commitSegmentBatch(ctx *fasthttp.RequestCtx, p *engine.Principal, msgs []event.SegmentMessage, receivedAt int64, admitted bool) {
	w := &actors.Write{Dataset: p.Dataset(), ReceivedAt: receivedAt, Admitted: admitted,
		Events: make([]actors.Pending, 0, len(msgs))}
	allPageviews := true
	var ec enrichCtx
	for i := range msgs {
		m := &msgs[i]
		if m.Problem != nil {
			continue
		}
		pe, prob := prepareSegment(p, m, receivedAt)
		if prob != nil {
			m.Problem = prob
			continue
		}
		allPageviews = allPageviews && pe.Event.Name == "pageview"
		s.enrichEvent(ctx, p, &pe, &ec)
		w.Events = append(w.Events, pe)
	}
	rep, ok := s.submitMany(ctx, p, w, allPageviews)
	defer s.eng.Release(rep) // results live in the reply
	if !ok {
		return
	}
	var results []actors.Result
	if rep != nil {
		results = rep.Results
	}
	buf := append(make([]byte, 0, 64), `{"success":true`...)
	rejected := 0
	next := 0
	for i := range msgs {
		e := (*apiError)(nil)
		if m := &msgs[i]; m.Problem != nil {
			e = problemError(m.Problem)
		} else {
			res := results[next]
			next++
			if res.Outcome == actors.Duplicate {
				res = results[res.Of]
			}
			if res.Outcome != actors.Conflict {
				continue
			}
			e = errMessageIDConflict
		}
		if rejected == 0 {
			buf = append(buf, `,"rejected":[`...)
		} else {
			buf = append(buf, ',')
		}
		rejected++
		buf = appendSegmentRejected(buf, i, e)
	}
	if rejected > 0 {
		buf = append(buf, ']')
	}
	buf = append(buf, '}')
	writeRaw(ctx, fasthttp.StatusOK, buf)
}

// appendSegmentRejected writes {"index":i,"error":code,"message":...,"details":{...}}.
func appendSegmentRejected(dst []byte, i int, e *apiError) []byte {
	dst = append(dst, `{"index":`...)
	dst = strconv.AppendInt(dst, int64(i), 10)
	dst = append(dst, ',')
	body := appendErrorBody(nil, e, -1)
	return append(dst, body[1:]...) // the error object without its opening brace
}

// errMessageIDConflict answers a messageId reused with another message;
// built once, as the writers only read it.
var errMessageIDConflict = &apiError{status: fasthttp.StatusConflict, code: codeConflict,
	message: "This messageId was already used with a different message",
	details: map[string]string{"messageId": "already used with a different message"}}

// prepareSegment is prepare for a Segment message, plus the profile change
// it carries: identify sets traits; identify, alias and any message that
// names two ids (userId and anonymousId, or alias's previousId) link them.
func prepareSegment(p *engine.Principal, m *event.SegmentMessage, receivedAt int64) (actors.Pending, *event.Problem) {
	pe, prob := prepare(p, &m.Input, receivedAt, 0, false)
	if prob != nil {
		return pe, prob
	}
	var links []string
	if m.UserID != "" && m.AnonymousID != "" && m.AnonymousID != m.UserID {
		links = append(links, m.AnonymousID)
	}
	if m.PreviousID != "" && m.PreviousID != pe.Event.VisitorID {
		links = append(links, m.PreviousID)
	}
	if m.Type == event.SegmentIdentify || len(links) > 0 {
		u := &storage.ProfileUpdate{ID: pe.Event.VisitorID, Links: links, Timestamp: pe.Event.Timestamp}
		if m.Type == event.SegmentIdentify {
			u.Traits = m.Traits
		}
		pe.Profile = u
	}
	return pe, nil
}

// segmentTypeName names a type for route metrics: one series per type, whichever path.
func segmentTypeName(t event.SegmentType) string {
	return [...]string{"", "track", "page", "screen", "identify", "group", "alias"}[t]
}

// handleSegmentMetrics accepts and drops the counters analytics.js posts to
// <apiHost>/m about its own delivery (no key, text/plain). Segment's API
// takes them; without this route the browser logs a CORS error every 30 s
// and the SDK turns its metrics off. The body is never read: an
// unauthenticated body is refused from its headers (body.go).
func handleSegmentMetrics(ctx *fasthttp.RequestCtx) {
	if origin := ctx.Request.Header.Peek("Origin"); len(origin) > 0 {
		setCORS(ctx, origin)
	}
	writeRaw(ctx, fasthttp.StatusOK, segmentSuccess)
}
