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

	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/engine/metrics"
	"github.com/eventd/eventd/engine/ratelimit"
)

// Request bodies are read by the handlers, never by fasthttp ahead of them.
// Both servers run with StreamRequestBody, so a handler sees the headers
// before the body. A HeaderReceived hook judges each request with a
// fixed-length body from its headers alone (key, permission, Origin, a full
// rate-limit bucket, size): a refused request's Content-Length is set to 0
// and its connection marked to close, so fasthttp reads none of its body and
// the handler answers from the headers (401, 403, 429, 413). An accepted
// request has up to 8 KiB prefetched, the rest is read by readBodyLimited
// under the listener's body budget. A chunked body is never prefetched. A
// body left unread closes the connection after the answer
// (closeIfBodyUnread): draining it would cost what refusing it saved, and
// parsing it as the next request would let a client smuggle one.

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
	// it only bounds what fasthttp reads before calling the handler. An
	// accepted request raises it to maxReadBody (fasthttp caps it at 8 KiB).
	fasthttpPrefetch = 1
	// unreadBodyHeader marks a request whose body HeaderReceived refused; its
	// value is the declared Content-Length. A client sending it only gets its
	// own request refused.
	unreadBodyHeader = "X-Eventd-Unread-Body"
	// principalHeader carries the id of the key publicHeaderReceived
	// authenticated to the handler, so a request hashes its key once. The
	// hook deletes whatever a client sent under this name before anything
	// else, so only the hook's own value reaches a handler.
	principalHeader = "X-Eventd-Principal"
	// maxDiscardBody is the largest unread body of an authenticated request
	// that is discarded (read into no buffer) to keep its connection open.
	maxDiscardBody = 64 << 10
	// maxPooledBody keeps buffers of unusually large bodies out of the pool.
	maxPooledBody = 64 << 10
)

// configureBodies sets the body budgets, the hooks that judge a request
// from its headers and the admin read timeouts (both servers stream bodies:
// newServer).
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
	s.public.ExpectHandler = s.publicExpect
	s.public.HeaderReceived = s.publicHeaderReceived
	// fasthttp applies ReadTimeout from a request's first byte to the end of
	// its headers; HeaderReceived then sets the body's own deadline.
	s.admin.ReadTimeout = cmp.Or(cfg.AdminHeaderTimeout, DefaultAdminHeaderTimeout)
	s.adminBodyTimeout = cmp.Or(cfg.AdminBodyTimeout, DefaultAdminBodyTimeout)
	s.admin.HeaderReceived = s.adminHeaderReceived
	s.admin.ExpectHandler = s.adminExpect
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
		return false
	}
	return true
}

// refuse counts a 503 of the budget and returns it, with Retry-After set.
func (b *bodyBudget) refuse(ctx *fasthttp.RequestCtx) *apiError {
	if b.refused != nil {
		b.refused.Inc()
	}
	ctx.Response.Header.Set("Retry-After", "1")
	return errBodyBudget
}

// fits reports whether n more bytes fit now, without taking them.
func (b *bodyBudget) fits(n int64) bool {
	return b.max <= 0 || b.inUse.Load()+n <= b.max
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
// pooled buffer that h holds until h.release. A full budget is refused
// without reading a byte, and so is a body refused from the headers.
//
// A body over limit but within drainTo bytes is read and dropped before the
// 413, so a client that sends it whole can read the answer; a larger one
// closes the connection instead.
func readBodyLimited(ctx *fasthttp.RequestCtx, limit, drainTo int, budget *bodyBudget, h *heldBody) ([]byte, *apiError) {
	stream := ctx.RequestBodyStream()
	if stream == nil {
		// Not streamed: a server built without StreamRequestBody (tests),
		// or a method whose body fasthttp ignores.
		body := ctx.Request.Body()
		if len(body) > limit {
			return nil, tooLargeError(limit)
		}
		return body, nil
	}
	cl := ctx.Request.Header.ContentLength()
	if cl == 0 {
		if v := ctx.Request.Header.Peek(unreadBodyHeader); v != nil {
			// Refused from the headers, yet the handler got this far: the
			// key, project or bucket changed in between. Ask for a retry.
			if n, err := strconv.Atoi(string(v)); err == nil && n > limit {
				return nil, tooLargeError(limit)
			}
			return nil, budget.refuse(ctx)
		}
		_ = ctx.Request.CloseBodyStream()
		return nil, nil
	}
	if cl > limit {
		// Read and drop a body the server would have read anyway, so a
		// client that sends it whole can read the 413.
		if cl <= drainTo && drain(stream, int64(cl)) {
			_ = ctx.Request.CloseBodyStream()
		}
		return nil, tooLargeError(limit)
	}
	n := cl
	if cl < 0 {
		n = limit // chunked: hold what it may grow to
	}
	if !budget.reserve(int64(n)) {
		return nil, budget.refuse(ctx)
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
		if drain(stream, int64(drainTo-len(buf))) {
			_ = ctx.Request.CloseBodyStream()
		}
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

// drain reads and drops at most n more body bytes; true when the body ended.
func drain(r io.Reader, n int64) bool {
	if n < 0 {
		return false
	}
	_, err := io.CopyN(io.Discard, r, n+1)
	return err == io.EOF
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
func bufferBody(ctx *fasthttp.RequestCtx, limit, drainTo int, budget *bodyBudget) *apiError {
	if ctx.RequestBodyStream() == nil {
		if len(ctx.Request.Body()) > limit {
			return tooLargeError(limit)
		}
		return nil
	}
	var h heldBody
	defer h.release()
	body, fail := readBodyLimited(ctx, limit, drainTo, budget, &h)
	if fail != nil {
		return fail
	}
	ctx.Request.SetBody(body) // a copy: h's buffer goes back to the pool
	return nil
}

// closeIfBodyUnread asks for Connection: close when the handler left a
// request body (or part of it) unread. A small body of an authenticated
// request (a 429, a 415) is discarded instead, so a client over its limit
// keeps its connection: closing every 429's connection made a client
// hammering past its limit reconnect per request (a third of the
// rate-limit scenario's throughput). Bodies refused from the headers
// (unauthenticated, forbidden, too large) still close.
func closeIfBodyUnread(ctx *fasthttp.RequestCtx) {
	stream := ctx.RequestBodyStream()
	cl := ctx.Request.Header.ContentLength()
	if stream == nil || cl == 0 {
		return
	}
	if cl > 0 && cl <= maxDiscardBody && ctx.Request.Header.Peek(unreadBodyHeader) == nil && drain(stream, int64(cl)) {
		_ = ctx.Request.CloseBodyStream()
		return
	}
	ctx.SetConnectionClose()
}

// publicHeaderReceived judges a public request with a fixed-length body from
// its headers (see the top of this file); it runs before any body byte is read.
func (s *Server) publicHeaderReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	// First, for every request: a client must not name its own principal.
	h.Del(principalHeader)
	cl := h.ContentLength()
	if cl <= 0 { // no body, or chunked, which fasthttp does not prefetch
		return fasthttp.RequestConfig{}
	}
	if cl <= maxReadBody && s.bodies.fits(int64(cl)) {
		if p := s.publicMayRead(h, cl); p != nil {
			h.Set(principalHeader, p.KeyID()) // for authenticate
			return fasthttp.RequestConfig{MaxRequestBodySize: maxReadBody}
		}
	}
	refuseBody(h, cl)
	return fasthttp.RequestConfig{}
}

// publicMayRead returns the request's principal when its key authenticates,
// may use the route, its Origin is allowed and (secret keys; a public key's
// pageviews count in no plan bucket) its bucket has room, or its body is
// small enough to discard after the 429 (closeIfBodyUnread); nil otherwise.
// The handler decides again, with answers.
func (s *Server) publicMayRead(h *fasthttp.RequestHeader, cl int) *engine.Principal {
	uri := h.RequestURI()
	p := s.eng.Authenticate(headerAPIKey(h, uri))
	if p == nil {
		return nil
	}
	path := uriPath(uri)
	kind, segment := segmentKind(path)
	batch := string(path) == "/events/batch"
	if batch {
		kind = ratelimit.Batch
	}
	write := h.IsPost() && (batch || segment || string(path) == "/events")
	if !write && !p.CanRead() {
		return nil
	}
	if origin := h.Peek("Origin"); len(origin) > 0 && !originAllowed(p, origin) {
		return nil
	}
	if p.Type() == engine.Public || cl <= maxDiscardBody || !p.Blocked(kind, time.Now()) {
		return p
	}
	return nil
}

// refuseBody makes fasthttp skip a request's body: the handler sees no body
// and the marker, and the connection closes after the answer.
func refuseBody(h *fasthttp.RequestHeader, cl int) {
	var buf [20]byte
	h.SetBytesV(unreadBodyHeader, strconv.AppendInt(buf[:0], int64(cl), 10))
	h.SetContentLength(0)
	h.SetConnectionClose()
}

// headerAPIKey is apiKey for a bare request header.
func headerAPIKey(h *fasthttp.RequestHeader, uri []byte) []byte {
	if t := headerBearer(h); t != nil {
		return bytes.TrimSpace(t)
	}
	if k, ok := basicUser(h.Peek("Authorization")); ok {
		return k
	}
	i := bytes.IndexByte(uri, '?')
	if i < 0 {
		return nil
	}
	args := fasthttp.AcquireArgs()
	defer fasthttp.ReleaseArgs(args)
	args.ParseBytes(uri[i+1:])
	if v := args.Peek("api_key"); v != nil {
		return append([]byte(nil), v...)
	}
	return nil
}

// uriPath is the path of a request target, absolute form included.
func uriPath(uri []byte) []byte {
	if i := bytes.Index(uri, []byte("://")); i >= 0 && bytes.IndexByte(uri[:i], '/') < 0 {
		uri = uri[i+3:]
		if j := bytes.IndexByte(uri, '/'); j >= 0 {
			uri = uri[j:]
		} else {
			uri = nil
		}
	}
	if i := bytes.IndexAny(uri, "?#"); i >= 0 {
		uri = uri[:i]
	}
	return uri
}

// adminHeaderReceived sets the body read timeout of an admin request once its
// headers are in: the header timeout (Server.ReadTimeout) no longer applies.
// An import with a valid admin token may stream for as long as an import
// takes; everything else has the short body timeout.
func (s *Server) adminHeaderReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	uri := h.RequestURI()
	token := s.validAdminToken(headerBearer(h))
	if token && h.IsPost() && isImportPath(uri) {
		return fasthttp.RequestConfig{ReadTimeout: adminImportTimeout, MaxRequestBodySize: maxReadBody}
	}
	cfg := fasthttp.RequestConfig{ReadTimeout: s.adminBodyTimeout}
	if cl := h.ContentLength(); cl > 0 {
		path := string(uriPath(uri))
		limit := maxReadBody
		if path == "/login" || path == "/logout" {
			limit = maxLoginBodyLen
		}
		// Without the token a body is read only by /login, /logout and a
		// dashboard session (its cookie is checked by the handler).
		session := len(h.Peek("Authorization")) == 0 && (len(h.Cookie(sessionCookie)) > 0 || len(h.Cookie(sessionCookieTLS)) > 0)
		if cl > limit || !s.adminBodies.fits(int64(cl)) || !(token || session || limit == maxLoginBodyLen) {
			refuseBody(h, cl)
			return cfg
		}
		cfg.MaxRequestBodySize = maxReadBody
	}
	return cfg
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

// publicExpect answers an "Expect: 100-continue" request that was refused
// from its headers (or whose key does not authenticate) at once, so its
// client never sends the body; fasthttp then closes the connection.
func (s *Server) publicExpect(ctx *fasthttp.RequestCtx) int {
	if ctx.Request.Header.Peek(unreadBodyHeader) == nil && s.principal(ctx) != nil {
		return fasthttp.StatusContinue
	}
	s.public.Handler(ctx)
	return ctx.Response.StatusCode()
}

// adminExpect is publicExpect for the admin listener, whose handlers check
// the token or session themselves.
func (s *Server) adminExpect(ctx *fasthttp.RequestCtx) int {
	if ctx.Request.Header.Peek(unreadBodyHeader) == nil {
		return fasthttp.StatusContinue
	}
	s.admin.Handler(ctx)
	return ctx.Response.StatusCode()
}
