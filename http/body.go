package http

import (
	"bytes"
	"cmp"
	"crypto/subtle"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine/metrics"
)

// Request bodies are read by the handlers, never by fasthttp ahead of them:
// both servers run with StreamRequestBody and a fasthttp body limit of one
// byte, so fasthttp prefetches at most one body byte (none of a chunked
// body) before the handler sees the headers. A handler authenticates,
// checks permission and rate limit from the headers, and only then reads
// the body through readBodyLimited. A body left unread closes the
// connection after the answer (closeIfBodyUnread), as draining it would
// cost what refusing it saved, and parsing it as the next request would
// let a client smuggle one.

// Defaults of the hardening limits (contract section 11).
const (
	// DefaultMaxInflightBody bounds the request-body bytes a listener holds at once.
	DefaultMaxInflightBody = 256 << 20
	// DefaultAdminHeaderTimeout is the admin listener's time to receive a request's headers.
	DefaultAdminHeaderTimeout = 10 * time.Second
	// DefaultAdminBodyTimeout is the admin listener's time to receive a body, import excepted.
	DefaultAdminBodyTimeout = 30 * time.Second
	// adminImportTimeout is the read (and write) time of an authenticated import or export.
	adminImportTimeout = time.Hour
	// fasthttpPrefetch is the servers' MaxRequestBodySize: in streaming mode
	// it only bounds what fasthttp reads before calling the handler.
	fasthttpPrefetch = 1
	// maxPooledBody keeps buffers of unusually large bodies out of the pool.
	maxPooledBody = 64 << 10
)

// configureBodies makes both servers hand request bodies to the handlers
// unread, and sets the body budgets and the admin read timeouts.
func (s *Server) configureBodies(cfg Config) {
	limit := cfg.MaxInflightBody
	if limit == 0 {
		limit = DefaultMaxInflightBody
	}
	s.bodies, s.adminBodies = &bodyBudget{max: limit}, &bodyBudget{max: limit}
	for name, b := range map[string]*bodyBudget{"public": s.bodies, "admin": s.adminBodies} {
		s.metrics.GaugeFunc("eventd_http_inflight_body_bytes", "Request-body bytes held by handlers, by listener.",
			`listener="`+name+`"`, func() float64 { return float64(b.inUse.Load()) })
		b.refused = s.metrics.Counter("eventd_http_body_refused_total",
			"Requests answered 503 because the listener's body budget was full.", `listener="`+name+`"`)
	}
	for _, srv := range []*fasthttp.Server{s.public, s.admin} {
		srv.StreamRequestBody = true
		srv.MaxRequestBodySize = fasthttpPrefetch
	}
	s.public.ExpectHandler = s.publicExpect
	// fasthttp applies ReadTimeout from a request's first byte to the end of
	// its headers; HeaderReceived then sets the body's own deadline.
	s.admin.ReadTimeout = cmp.Or(cfg.AdminHeaderTimeout, DefaultAdminHeaderTimeout)
	s.adminBodyTimeout = cmp.Or(cfg.AdminBodyTimeout, DefaultAdminBodyTimeout)
	s.admin.HeaderReceived = s.adminHeaderReceived
}

// bodyBudget bounds the bytes of request bodies a listener holds at once, so
// many large bodies cannot exhaust memory however they are authenticated.
type bodyBudget struct {
	max     int64
	inUse   atomic.Int64
	refused *metrics.Counter
}

// reserve takes n bytes of the budget; false when that would exceed it.
func (b *bodyBudget) reserve(n int64) bool {
	if n <= 0 {
		return true
	}
	if b.max <= 0 {
		b.inUse.Add(n) // unbounded, still reported
		return true
	}
	if b.inUse.Add(n) > b.max {
		b.inUse.Add(-n)
		if b.refused != nil {
			b.refused.Inc()
		}
		return false
	}
	return true
}

// heldBody is a body read by readBodyLimited; release gives back its budget
// and buffer once the handler is done with the bytes.
type heldBody struct {
	budget *bodyBudget
	n      int64
	buf    *[]byte
}

var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func (h *heldBody) release() {
	if h.budget != nil && h.n > 0 {
		h.budget.inUse.Add(-h.n)
	}
	if h.buf != nil && cap(*h.buf) <= maxPooledBody {
		*h.buf = (*h.buf)[:0]
		bodyPool.Put(h.buf)
	}
	*h = heldBody{}
}

func tooLargeError(limit int) *apiError {
	var text string
	if limit >= 1<<20 && limit%(1<<20) == 0 {
		text = strconv.Itoa(limit>>20) + " MiB"
	} else {
		text = strconv.Itoa(limit>>10) + " KiB"
	}
	return newError(fasthttp.StatusRequestEntityTooLarge, codeTooLarge, "Request body is larger than "+text)
}

// errBodyBudget is the 503 of a full body budget; it carries Retry-After.
var errBodyBudget = &apiError{status: fasthttp.StatusServiceUnavailable, code: codeUnavailable,
	message: "The server is receiving too many request bodies; retry shortly"}

// readBodyLimited reads the raw request body, at most limit bytes, into a
// pooled buffer that h holds until h.release. A declared length over limit,
// or a full budget, is refused without reading a byte.
func readBodyLimited(ctx *fasthttp.RequestCtx, limit int, budget *bodyBudget, h *heldBody) ([]byte, *apiError) {
	stream := ctx.RequestBodyStream()
	if stream == nil {
		// Not streamed (a server built without StreamRequestBody, or an
		// Expect: 100-continue request fasthttp has already read).
		body := ctx.Request.Body()
		if len(body) > limit {
			return nil, tooLargeError(limit)
		}
		return body, nil
	}
	cl := ctx.Request.Header.ContentLength()
	if cl == 0 {
		_ = ctx.Request.CloseBodyStream()
		return nil, nil
	}
	if cl > limit {
		return nil, tooLargeError(limit)
	}
	n := cl
	if cl < 0 {
		n = limit // chunked: hold what it may grow to
	}
	if !budget.reserve(int64(n)) {
		ctx.Response.Header.Set("Retry-After", "1")
		return nil, errBodyBudget
	}
	h.budget, h.n = budget, int64(n)
	h.buf = bodyPool.Get().(*[]byte)
	buf := (*h.buf)[:0]
	var err error
	if cl >= 0 {
		if cap(buf) < cl {
			buf = make([]byte, cl)
		}
		buf = buf[:cl]
		_, err = io.ReadFull(stream, buf)
	} else {
		buf, err = readChunked(stream, buf, limit)
	}
	*h.buf = buf
	if err == errTooLarge {
		return nil, tooLargeError(limit)
	}
	if err != nil {
		var te interface{ Timeout() bool }
		if errors.As(err, &te) && te.Timeout() {
			return nil, newError(fasthttp.StatusRequestTimeout, codeBadRequest, "Request timed out")
		}
		return nil, newError(fasthttp.StatusBadRequest, codeBadRequest, "Request body is malformed or ended early")
	}
	// Read to its end: the connection may carry the next request.
	_ = ctx.Request.CloseBodyStream()
	return buf, nil
}

// readChunked reads a body of unknown length to EOF; more than limit bytes is errTooLarge.
func readChunked(r io.Reader, buf []byte, limit int) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := min(cap(buf), limit+1)
		n, err := r.Read(buf[len(buf):room])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return buf, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if n == 0 && len(buf) == room {
			return buf, errTooLarge
		}
	}
}

// bufferBody reads a streamed body of at most limit bytes and makes it the
// request's body, so handlers keep using ctx.Request.Body(). For the admin
// listener, whose bodies are small and rare: the copy does not matter there.
func bufferBody(ctx *fasthttp.RequestCtx, limit int, budget *bodyBudget) *apiError {
	if ctx.RequestBodyStream() == nil {
		if len(ctx.Request.Body()) > limit {
			return tooLargeError(limit)
		}
		return nil
	}
	var h heldBody
	defer h.release()
	body, fail := readBodyLimited(ctx, limit, budget, &h)
	if fail != nil {
		return fail
	}
	ctx.Request.SetBody(body) // a copy: h's buffer goes back to the pool
	return nil
}

// closeIfBodyUnread asks for Connection: close when the handler left a
// request body (or part of it) unread.
func closeIfBodyUnread(ctx *fasthttp.RequestCtx) {
	if ctx.RequestBodyStream() != nil && ctx.Request.Header.ContentLength() != 0 {
		ctx.SetConnectionClose()
	}
}

// adminHeaderReceived sets the body read timeout of an admin request once its
// headers are in: the header timeout (Server.ReadTimeout) no longer applies.
// An import with a valid admin token may stream for as long as an import
// takes; everything else has the short body timeout.
func (s *Server) adminHeaderReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if h.IsPost() && isImportPath(h.RequestURI()) && s.validAdminToken(headerBearer(h)) {
		return fasthttp.RequestConfig{ReadTimeout: adminImportTimeout}
	}
	return fasthttp.RequestConfig{ReadTimeout: s.adminBodyTimeout}
}

// isImportPath matches /admin/v1/projects/{id}/import, query string aside.
func isImportPath(uri []byte) bool {
	if i := bytes.IndexByte(uri, '?'); i >= 0 {
		uri = uri[:i]
	}
	const prefix, suffix = "/admin/v1/projects/", "/import"
	return len(uri) > len(prefix)+len(suffix) && bytes.HasPrefix(uri, []byte(prefix)) && bytes.HasSuffix(uri, []byte(suffix)) &&
		bytes.IndexByte(uri[len(prefix):len(uri)-len(suffix)], '/') < 0
}

// validAdminToken compares tok with the admin token in constant time.
func (s *Server) validAdminToken(tok []byte) bool {
	return len(s.adminToken) > 0 && subtle.ConstantTimeCompare(tok, s.adminToken) == 1
}

// publicExpect answers an "Expect: 100-continue" request whose key does not
// authenticate at once, so its client never sends the body; fasthttp then
// closes the connection. Authenticated requests continue as usual.
func (s *Server) publicExpect(ctx *fasthttp.RequestCtx) int {
	if s.eng.Authenticate(apiKey(ctx)) != nil {
		return fasthttp.StatusContinue
	}
	s.public.Handler(ctx)
	return ctx.Response.StatusCode()
}

// headerBearer is bearerToken for a bare request header.
func headerBearer(h *fasthttp.RequestHeader) []byte {
	if v := h.Peek("Authorization"); len(v) > 7 && bytes.EqualFold(v[:7], []byte("Bearer ")) {
		return v[7:]
	}
	return nil
}
