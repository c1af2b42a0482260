package http

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/engine/enrich"
	"github.com/eventd/eventd/engine/metrics"
)

// Body limits of the contract, checked by the handlers. Bodies are streamed
// (body.go): a handler must read one through readBody, readBodyLimited or
// bufferBody, never ctx.PostBody() or ctx.Request.Body() on a streamed body,
// which would read it whole without any limit. A body declared over
// maxReadBody is refused unread; an authenticated one over its route's limit
// but within maxReadBody is read and dropped, for a readable JSON 413.
const (
	maxSingleBody = 1 << 20
	maxBatchBody  = 5 << 20
	maxReadBody   = 16 << 20
)

// Config configures a Server.
type Config struct {
	Engine     *engine.Engine
	Logger     *slog.Logger
	AdminToken string
	// StreamPing, StreamPong and StreamQueue tune /stream; zero means the contract's 30 s, 60 s and 4096.
	StreamPing  time.Duration
	StreamPong  time.Duration
	StreamQueue int
	// StreamLinger is how long a subscriber's writer waits for more commits
	// before a write; zero writes at once (serve's default is DefaultStreamLinger).
	StreamLinger time.Duration
	// SessionIdle ends a dashboard session after this long without a request; zero means DefaultSessionIdle.
	SessionIdle time.Duration
	// AdminHosts, if not empty, are the host names the admin listener answers
	// for (--admin-host); other Host headers get 421 (IP literals always pass).
	AdminHosts []string
	// MaxInflightBody bounds the request-body bytes each listener holds at
	// once (503 over it); zero means DefaultMaxInflightBody, negative none.
	MaxInflightBody int64
	// AdminHeaderTimeout and AdminBodyTimeout bound the admin listener's
	// header and body reads; zero means the defaults (10 s, 30 s).
	AdminHeaderTimeout, AdminBodyTimeout time.Duration
	// AccessLog, if not nil, receives one JSON line per sampled request
	// (accesslog.go); nil, the default, logs nothing and costs one branch.
	AccessLog io.Writer
	// AccessLogSample is the fraction of requests logged, up to 1; zero,
	// the field's default, logs every request (serve passes no AccessLog
	// for --access-log-sample 0).
	AccessLogSample float64
	// Enricher sets the web-analytics properties at ingest (enrich.go);
	// nil sets none (serve always passes one).
	Enricher *enrich.Enricher
}

// Server holds the public and the admin fasthttp servers.
type Server struct {
	eng        *engine.Engine
	log        *slog.Logger
	adminToken []byte
	metrics    *metrics.Registry

	public *fasthttp.Server
	admin  *fasthttp.Server
	// The routers, kept for tests that compare them with docs/openapi.yaml.
	publicRouter, adminRouter *router.Router

	reqPrefix string
	reqSeq    atomic.Uint64
	inflight  *metrics.Gauge
	panics    *metrics.Counter

	streams     *streams
	streamPing  time.Duration
	streamPong  time.Duration
	streamQueue int
	// streamLinger: see Config.StreamLinger.
	streamLinger time.Duration

	dash *dashboard

	auth       *authGuard // failed admin-token attempts (authguard.go)
	adminHosts []string   // --admin-host, normalised
	// Request bodies held at once, per listener (body.go).
	bodies, adminBodies *bodyBudget
	adminBodyTimeout    time.Duration
	access              *accessLog // nil when off
	enricher            *enrich.Enricher
}

// New builds both servers; call Serve with listeners to start them.
func New(cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var seed [4]byte
	_, _ = rand.Read(seed[:])
	s := &Server{
		eng:        cfg.Engine,
		log:        log,
		adminToken: []byte(cfg.AdminToken),
		metrics:    cfg.Engine.Metrics(),
		reqPrefix:  "req_" + hex.EncodeToString(seed[:]),
		enricher:   cfg.Enricher,
	}
	s.streamPing, s.streamPong, s.streamQueue, s.streamLinger = cfg.StreamPing, cfg.StreamPong, cfg.StreamQueue, cfg.StreamLinger
	if s.streamPing <= 0 {
		s.streamPing = DefaultStreamPing
	}
	if s.streamPong <= 0 {
		s.streamPong = DefaultStreamPong
	}
	if s.streamQueue <= 0 {
		s.streamQueue = DefaultStreamQueue
	}
	s.streams = newStreams(s.metrics)
	// Live streams close after the last commit reached the broadcaster.
	cfg.Engine.OnDrained(func() { s.streams.closeAll(10 * time.Second) })
	// A revoked key's (or deleted project's) streams close with 4001.
	cfg.Engine.OnRevoked(s.streams.revoke)
	s.inflight = s.metrics.Gauge("eventd_http_inflight_requests", "HTTP requests being served.", "")
	s.panics = s.metrics.Counter("eventd_http_panics_total", "Handler panics recovered.", "")
	s.access = newAccessLog(cfg.AccessLog, cfg.AccessLogSample)
	s.dash = newDashboard(cfg.SessionIdle)
	s.auth = newAuthGuard(s.metrics)
	s.adminHosts = parseAdminHosts(cfg.AdminHosts)
	s.publicRouter, s.adminRouter = s.publicRoutes(), s.adminRoutes()
	s.public = s.newServer("eventd-public", s.publicRouter.Handler)
	s.admin = s.newServer("eventd-admin", s.adminHostGuard(s.adminRouter.Handler))
	// Exports may take much longer than a request should (imports get their
	// read time in adminHeaderReceived).
	s.admin.WriteTimeout = adminImportTimeout
	s.configureBodies(cfg)
	return s
}

// writeBufferSize is fasthttp's per-connection write buffer. With its 4
// KiB default, an answer longer than the buffer went out in two write(2)s
// (the buffer filled and flushed, then the rest): a batch's answer of 100
// accepted events is 5.7 KiB, a page of 20 events about as much. 8 KiB
// sends those in one, for 2-6% less of a batch's CPU (docs/benchmarks.md,
// session 35); a connection holds it from its first answer on, 4 KiB more
// than before (decisions.md, hardening).
const writeBufferSize = 8 << 10

func (s *Server) newServer(name string, h fasthttp.RequestHandler) *fasthttp.Server {
	return &fasthttp.Server{
		Name:                          name,
		Handler:                       s.limitHeaders(h),
		ErrorHandler:                  s.errorHandler,
		ReadBufferSize:                readBufferSize,
		WriteBufferSize:               writeBufferSize,
		MaxRequestBodySize:            fasthttpPrefetch, // body.go: streamed, read by the handlers
		ReadTimeout:                   30 * time.Second,
		WriteTimeout:                  30 * time.Second,
		IdleTimeout:                   2 * time.Minute,
		NoDefaultServerHeader:         true,
		NoDefaultDate:                 false,
		DisablePreParseMultipartForm:  true,
		StreamRequestBody:             true,
		Logger:                        slogAdapter{s.log},
		ConnState:                     s.connState,
		DisableHeaderNamesNormalizing: false,
	}
}

// ServePublic serves the public API on ln until Shutdown.
func (s *Server) ServePublic(ln net.Listener) error { return s.public.Serve(ln) }

// ServeAdmin serves the admin API on ln until Shutdown.
func (s *Server) ServeAdmin(ln net.Listener) error { return s.admin.Serve(ln) }

// Shutdown stops accepting and waits for in-flight requests to finish.
// SSE streams are responses that never finish by themselves, and they end
// only at the engine's close, after the last commit (closeAll, as the
// WebSocket streams): so the wait for the public listener stops once the
// only connections left are those of SSE streams.
func (s *Server) Shutdown() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// GetOpenConnectionsCount counts every connection not hijacked (and
		// one more while Serve has not returned), so it cannot reach the
		// number of SSE streams while another request is still served.
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if int64(s.public.GetOpenConnectionsCount()) <= s.streams.sse.Load() {
				cancel()
				return
			}
		}
	}()
	err := s.public.ShutdownWithContext(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return errors.Join(err, s.admin.Shutdown())
}

// errorHandler answers what fasthttp rejects before routing; the default
// answers an oversized body with a plain-text 400.
func (s *Server) errorHandler(ctx *fasthttp.RequestCtx, err error) {
	s.setRequestID(ctx)
	if isHeadersTooLarge(err) {
		writeError(ctx, headersTooLargeError())
		return
	}
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		writeError(ctx, tooLargeError(maxReadBody))
		return
	}
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		writeError(ctx, newError(fasthttp.StatusRequestTimeout, codeBadRequest, "Request timed out"))
		return
	}
	writeError(ctx, newError(fasthttp.StatusBadRequest, codeBadRequest, "Malformed HTTP request"))
}

func (s *Server) setRequestID(ctx *fasthttp.RequestCtx) {
	if id := ctx.Request.Header.PeekBytes(headerRequestID); validRequestID(id) {
		ctx.Response.Header.SetCanonical(headerRequestID, id)
		return
	}
	var buf [32]byte
	b := append(buf[:0], s.reqPrefix...)
	b = append(b, '_')
	b = strconv.AppendUint(b, s.reqSeq.Add(1), 36)
	ctx.Response.Header.SetCanonical(headerRequestID, b)
}

// headerRequestID is X-Request-Id, canonical already (see headerRateLimit).
var headerRequestID = []byte("X-Request-Id")

// validRequestID accepts a caller's id only if it is short and printable, so
// it cannot inject into headers or logs.
func validRequestID(id []byte) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// route wraps a handler with the request id, panic recovery, metrics and
// the access log.
func (s *Server) route(name string, h fasthttp.RequestHandler) fasthttp.RequestHandler {
	rm := s.routeMetrics(name)
	return func(ctx *fasthttp.RequestCtx) {
		// fasthttp stamps the request just before its handler: a clock
		// read costs 77 ns on the VMs measured (docs/benchmarks.md).
		start := ctx.Time()
		s.inflight.Add(1)
		// Keep header names as the spec writes them (X-RateLimit-Limit, not X-Ratelimit-Limit).
		ctx.Response.Header.DisableNormalizing()
		s.setRequestID(ctx)
		defer func() {
			if r := recover(); r != nil {
				s.panics.Inc()
				s.log.Error("handler panic", "route", name, "panic", fmt.Sprint(r),
					"request_id", string(ctx.Response.Header.Peek("X-Request-Id")))
				ctx.Response.ResetBody()
				writeError(ctx, newError(fasthttp.StatusInternalServerError, codeInternal, "Internal server error"))
			}
			s.inflight.Add(-1)
			closeIfBodyUnread(ctx)
			elapsed := time.Since(start)
			rm.requests(ctx.Response.StatusCode()).Inc()
			rm.latency.Observe(elapsed.Seconds())
			if s.access != nil {
				s.access.record(ctx, name, elapsed)
			}
		}()
		h(ctx)
	}
}

func (s *Server) newRouter(notFound string) *router.Router {
	r := router.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	r.NotFound = s.route("not_found", func(ctx *fasthttp.RequestCtx) {
		writeError(ctx, newError(fasthttp.StatusNotFound, codeNotFound, notFound))
	})
	r.MethodNotAllowed = s.route("method_not_allowed", func(ctx *fasthttp.RequestCtx) {
		writeError(ctx, newError(fasthttp.StatusMethodNotAllowed, codeMethodNotAllowed,
			"Method "+string(ctx.Method())+" is not allowed here; allowed: "+string(ctx.Response.Header.Peek("Allow"))))
	})
	return r
}

func (s *Server) handleHealth(ctx *fasthttp.RequestCtx) {
	if s.eng.DiskRefusing() {
		writeRaw(ctx, fasthttp.StatusOK, healthDegradedDisk) // disk.go
		return
	}
	writeRaw(ctx, fasthttp.StatusOK, []byte(`{"status":"ok"}`))
}

func (s *Server) handleMetrics(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType(metrics.ContentType)
	if _, err := s.metrics.WriteTo(ctx); err != nil {
		// A failed collector leaves its families out; the rest is still worth serving.
		s.log.Warn("metrics collection", "err", err)
	}
}

type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Printf(format string, args ...any) {
	a.l.Debug(fmt.Sprintf(format, args...), "component", "fasthttp")
}
