package http

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine/metrics"
	"github.com/eventd/eventd/engine/ratelimit"
)

// Admin-token attempt throttling and the admin Host allowlist (contract
// section 11). The counting itself is ratelimit.AuthThrottle; this file
// connects it to the two places an admin token is checked (bearer auth in
// adminAuth, dashboard login in handleLogin, and the bearer on GET /).

const (
	codeMisdirected = "misdirected_request"
	msgAuthThrottle = "Too many failed admin token attempts from this address; retry later"
)

// authGuard holds the throttle and its metrics.
type authGuard struct {
	throttle  *ratelimit.AuthThrottle
	now       func() time.Time // time.Now; tests replace it
	failures  *metrics.Counter
	throttled *metrics.Counter
}

func newAuthGuard(m *metrics.Registry) *authGuard {
	return &authGuard{
		throttle:  ratelimit.NewAuthThrottle(0),
		now:       time.Now,
		failures:  m.Counter("eventd_admin_auth_failures_total", "Failed admin-token attempts (bearer or dashboard login).", ""),
		throttled: m.Counter("eventd_admin_auth_throttled_total", "Admin-token attempts answered 429 by the failed-attempt throttle.", ""),
	}
}

func clientAddr(ctx *fasthttp.RequestCtx) netip.Addr {
	a, _ := netip.AddrFromSlice(ctx.RemoteIP())
	return a
}

// authLocked reports the lockout left for the client (0: none). During a
// lockout every admin-token attempt is refused unseen, the correct token
// too: answering it differently would tell a guesser when it hit.
func (s *Server) authLocked(ctx *fasthttp.RequestCtx) time.Duration {
	return s.auth.throttle.Locked(clientAddr(ctx), s.auth.now())
}

// authFailed records a wrong admin token and returns the lockout it starts
// (0: answer 401 as usual).
func (s *Server) authFailed(ctx *fasthttp.RequestCtx) time.Duration {
	s.auth.failures.Inc()
	d := s.auth.throttle.Fail(clientAddr(ctx), s.auth.now())
	if d > 0 {
		s.log.Warn("admin token attempts throttled", "remote", ctx.RemoteIP().String(), "retry_after", retrySeconds(d))
	}
	return d
}

// authSucceeded forgets the client's failures.
func (s *Server) authSucceeded(ctx *fasthttp.RequestCtx) {
	s.auth.throttle.Succeed(clientAddr(ctx))
}

// refuseAdminToken answers a wrong or missing admin token: 401, or 429 when
// this failure starts a lockout. Only a request that presented credentials
// (an Authorization header) counts as an attempt.
func (s *Server) refuseAdminToken(ctx *fasthttp.RequestCtx) {
	if len(ctx.Request.Header.Peek("Authorization")) > 0 {
		if d := s.authFailed(ctx); d > 0 {
			s.writeAuthThrottled(ctx, d, nil)
			return
		}
	}
	writeError(ctx, newError(fasthttp.StatusUnauthorized, codeUnauthorized, "Invalid or missing admin token"))
}

// loginThrottled answers a throttled dashboard login: JSON for a JSON post,
// the login page with a message for the form.
func (s *Server) loginThrottled(ctx *fasthttp.RequestCtx, d time.Duration, asJSON bool) {
	var page []byte
	if !asJSON {
		page = loginWith(msgThrottled)
	}
	s.writeAuthThrottled(ctx, d, page)
}

// retrySeconds rounds a lockout up to whole seconds for Retry-After.
func retrySeconds(d time.Duration) int64 {
	return max(int64((d+time.Second-1)/time.Second), 1)
}

// writeAuthThrottled answers 429 with Retry-After (JSON); html is the page
// body for the login form instead, or nil.
func (s *Server) writeAuthThrottled(ctx *fasthttp.RequestCtx, d time.Duration, html []byte) {
	s.auth.throttled.Inc()
	secs := retrySeconds(d)
	ctx.Response.Header.Set("Retry-After", strconv.FormatInt(secs, 10))
	if html != nil {
		writePage(ctx, fasthttp.StatusTooManyRequests, html)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusTooManyRequests)
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(appendErrorBody(nil, newError(fasthttp.StatusTooManyRequests, codeRateLimited, msgAuthThrottle), secs))
}

// parseAdminHosts normalises the --admin-host list: lower case, no port, no
// trailing dot, empty entries dropped.
func parseAdminHosts(list []string) []string {
	var out []string
	for _, h := range list {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		out = append(out, normalHost([]byte(h)))
	}
	return out
}

// normalHost is a Host header's name: without port or IPv6 brackets, lower
// case, without a trailing dot.
func normalHost(h []byte) string {
	host := string(h)
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i > 0 {
			host = host[1:i]
		}
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.IndexByte(host, ':') == i {
		host = host[:i]
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// adminHostAllowed checks the Host header against --admin-host. IP literals
// always pass: DNS rebinding needs a name, and a browser that addressed the
// server by IP treats that IP as the page's origin, so same-origin rules
// already hold. Probes and scrapers that use the address keep working.
func (s *Server) adminHostAllowed(host []byte) bool {
	h := normalHost(host)
	if h == "" {
		return false
	}
	if net.ParseIP(h) != nil {
		return true
	}
	for _, want := range s.adminHosts {
		if h == want {
			return true
		}
	}
	return false
}

// adminHostGuard wraps the admin listener's handler with the --admin-host
// check, the DNS-rebinding defence: a page on evil.example that rebinds its
// name to 127.0.0.1 still sends Host: evil.example. The answer is 421
// Misdirected Request: this server is not configured to answer for that
// authority (RFC 9110 15.5.20).
func (s *Server) adminHostGuard(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	if len(s.adminHosts) == 0 {
		return h
	}
	refused := s.metrics.Counter("eventd_admin_host_refused_total", "Admin listener requests refused by --admin-host (421).", "")
	return func(ctx *fasthttp.RequestCtx) {
		if s.adminHostAllowed(ctx.Host()) {
			h(ctx)
			return
		}
		refused.Inc()
		ctx.Response.Header.DisableNormalizing()
		s.setRequestID(ctx)
		writeError(ctx, &apiError{status: fasthttp.StatusMisdirectedRequest, code: codeMisdirected,
			message: "This server does not answer for that host name on the admin listener",
			details: map[string]string{"host": "must be one of --admin-host or an IP address"}})
	}
}
