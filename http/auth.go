package http

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/engine/ratelimit"
)

// apiKey extracts the key from "Authorization: Bearer <key>", from HTTP
// Basic with the key as the user name (how Segment's SDKs send their write
// key; the password is ignored) or, for testing only, the api_key query
// parameter.
func apiKey(ctx *fasthttp.RequestCtx) []byte {
	if t := bearerToken(ctx); t != nil {
		return bytes.TrimSpace(t)
	}
	if k, ok := basicUser(ctx.Request.Header.Peek("Authorization")); ok {
		return k
	}
	return ctx.QueryArgs().Peek("api_key")
}

// basicUser is the user name of "Authorization: Basic base64(user:password)"
// (scheme case-insensitive); ok is false without one or when it does not decode.
func basicUser(v []byte) (user []byte, ok bool) {
	if len(v) <= 6 || !bytes.EqualFold(v[:6], []byte("Basic ")) {
		return nil, false
	}
	enc := bytes.TrimSpace(v[6:])
	dec := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
	n, err := base64.StdEncoding.Decode(dec, enc)
	if err != nil {
		return nil, false
	}
	dec = dec[:n]
	if i := bytes.IndexByte(dec, ':'); i >= 0 {
		dec = dec[:i]
	}
	return dec, true
}

// bearerToken reads "Authorization: Bearer <token>" (scheme case-insensitive,
// as RFC 9110 has it), nil without one; the admin API takes the token as is.
func bearerToken(ctx *fasthttp.RequestCtx) []byte {
	return headerBearer(&ctx.Request.Header)
}

// headerBearer is bearerToken for a bare request header (HeaderReceived).
func headerBearer(h *fasthttp.RequestHeader) []byte {
	if v := h.Peek("Authorization"); len(v) > 7 && bytes.EqualFold(v[:7], []byte("Bearer ")) {
		return v[7:]
	}
	return nil
}

// principal resolves the request's key, nil for an unknown or revoked one.
// A request whose body the header hook accepted names its principal
// already (principalHeader): looking its id up spares hashing the key a
// second time. A key revoked since the hook is not found either way.
func (s *Server) principal(ctx *fasthttp.RequestCtx) *engine.Principal {
	var p *engine.Principal
	if id := ctx.Request.Header.Peek(principalHeader); len(id) > 0 {
		p = s.eng.PrincipalByID(string(id))
	} else {
		p = s.eng.Authenticate(apiKey(ctx))
	}
	if s.access != nil && p != nil {
		ctx.SetUserValue(keyIDValue, p.KeyID())
	}
	return p
}

// authenticate resolves the request's key or answers 401.
func (s *Server) authenticate(ctx *fasthttp.RequestCtx) *engine.Principal {
	p := s.principal(ctx)
	if p == nil {
		// Let browser code read the 401 instead of seeing a CORS failure;
		// with no project known, there are no allowed origins to apply.
		if origin := ctx.Request.Header.Peek("Origin"); len(origin) > 0 {
			setCORS(ctx, origin)
		}
		writeError(ctx, newError(fasthttp.StatusUnauthorized, codeUnauthorized, msgUnauthorized))
	}
	return p
}

// authenticateRead authenticates a route that needs the read permission. It
// returns nil when it answered 401; otherwise fail is the 403 (origin or
// permission) to answer once the request has been counted, or nil.
func (s *Server) authenticateRead(ctx *fasthttp.RequestCtx) (*engine.Principal, *apiError) {
	p := s.authenticate(ctx)
	if p == nil {
		return nil, nil
	}
	fail := checkOrigin(ctx, p)
	if fail == nil && !p.CanRead() {
		fail = newError(fasthttp.StatusForbidden, codeForbidden, msgForbidden)
	}
	return p, fail
}

// checkOrigin enforces the project's allowed origins on browser requests and
// sets the CORS response headers; it returns a 403 error for a refused origin.
func checkOrigin(ctx *fasthttp.RequestCtx, p *engine.Principal) *apiError {
	origin := ctx.Request.Header.Peek("Origin")
	if len(origin) == 0 {
		return nil
	}
	if !originAllowed(p, origin) {
		return newError(fasthttp.StatusForbidden, codeForbidden,
			"Origin "+string(origin)+" is not in this project's allowed origins")
	}
	setCORS(ctx, origin)
	return nil
}

// originAllowed: the project lists no origins (any is allowed) or lists this one.
func originAllowed(p *engine.Principal, origin []byte) bool {
	allowed := p.AllowedOrigins()
	if len(allowed) == 0 {
		return true
	}
	for _, o := range allowed {
		if o == string(origin) {
			return true
		}
	}
	return false
}

func setCORS(ctx *fasthttp.RequestCtx, origin []byte) {
	h := &ctx.Response.Header
	h.SetBytesV("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", "X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, RateLimit-Policy, RateLimit, Retry-After, X-Request-Id, Idempotent-Replayed")
}

// handlePreflight answers CORS preflight requests. The preflight carries no
// key, so any origin is let through here; the real request is checked
// against the project's allowed origins.
func handlePreflight(ctx *fasthttp.RequestCtx) {
	origin := ctx.Request.Header.Peek("Origin")
	if len(origin) > 0 {
		setCORS(ctx, origin)
		h := &ctx.Response.Header
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Content-Encoding, Idempotency-Key, X-Request-Id, X-Retry-Count")
		h.Set("Access-Control-Max-Age", "86400")
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// setRateHeaders writes X-RateLimit-* for the tightest window and the IETF draft headers for all of them.
func setRateHeaders(ctx *fasthttp.RequestCtx, ws []ratelimit.WindowStatus, now time.Time) {
	if len(ws) == 0 {
		return
	}
	t := ratelimit.Tightest(ws)
	h := &ctx.Response.Header
	var buf [24]byte
	h.SetCanonical(headerRateLimitLimit, strconv.AppendInt(buf[:0], t.Limit, 10))
	h.SetCanonical(headerRateLimitRemaining, strconv.AppendInt(buf[:0], t.Remaining, 10))
	h.SetCanonical(headerRateLimitReset, strconv.AppendInt(buf[:0], t.Reset, 10))
	var hb [160]byte
	h.SetCanonical(headerRateLimitPolicy, ratelimit.PolicyHeader(hb[:0], ws))
	h.SetCanonical(headerRateLimit, ratelimit.RateLimitHeader(hb[:0], t, now))
}

// The rate-limit headers' names, canonical already: SetCanonical skips the
// copy and case normalization SetBytesV does on every call (a third of
// the headers' cost on each write).
var (
	headerRateLimitLimit     = []byte("X-RateLimit-Limit")
	headerRateLimitRemaining = []byte("X-RateLimit-Remaining")
	headerRateLimitReset     = []byte("X-RateLimit-Reset")
	headerRateLimitPolicy    = []byte("RateLimit-Policy")
	headerRateLimit          = []byte("RateLimit")
)

// writeRateLimited answers 429 with retry_after and Retry-After.
func writeRateLimited(ctx *fasthttp.RequestCtx, rep *actors.Reply) {
	ctx.Response.Header.Set("Retry-After", strconv.FormatInt(rep.RetryAfter, 10))
	ctx.SetStatusCode(fasthttp.StatusTooManyRequests)
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(appendErrorBody(nil, newError(fasthttp.StatusTooManyRequests, codeRateLimited, "Rate limit exceeded"), rep.RetryAfter))
}

// writeEngineError maps an engine failure to 503 or 500 without internals.
func (s *Server) writeEngineError(ctx *fasthttp.RequestCtx, err error) {
	if isInsufficientStorage(err) {
		writeInsufficientStorage(ctx)
		return
	}
	if err == engine.ErrOverloaded {
		ctx.Response.Header.Set("Retry-After", "1")
		writeError(ctx, newError(fasthttp.StatusServiceUnavailable, codeUnavailable, "The server is overloaded; retry shortly"))
		return
	}
	s.log.Error("request failed", "err", err, "request_id", string(ctx.Response.Header.Peek("X-Request-Id")))
	writeError(ctx, newError(fasthttp.StatusInternalServerError, codeInternal, "Internal server error"))
}
