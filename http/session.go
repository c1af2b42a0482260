package http

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// Dashboard sessions (docs/dashboard.md). A login with the admin token makes
// a random session id, sent to the browser only as an HttpOnly,
// SameSite=Strict cookie; the server keeps its SHA-256, never the id itself,
// so a heap dump or a debug log of the map cannot be replayed. Each session
// has its own CSRF token, which the dashboard reads from GET /session and
// sends as X-CSRF-Token on every state-changing request.
//
// Sessions live in memory: a restart logs everybody out, which is the safe
// direction, and spares a Pebble write per dashboard click.

// DefaultSessionIdle is how long a dashboard session lives without a request.
const DefaultSessionIdle = 12 * time.Hour

const (
	// sessionMaxAge caps a session however active it is, so a stolen cookie
	// does not stay useful forever.
	sessionMaxAge = 24 * time.Hour
	// maxSessions bounds the store: logins need the admin token, but a
	// script that logs in in a loop must not grow memory without end.
	maxSessions      = 1000
	sessionCookie    = "eventd_session"
	sessionCookieTLS = "__Host-eventd_session" // the prefix makes browsers insist on Secure, Path=/ and no Domain
	csrfHeader       = "X-CSRF-Token"
	sessionUserValue = "eventd.session"
)

// session is one logged-in browser.
type session struct {
	key      [32]byte // SHA-256 of the cookie value
	csrf     string
	created  time.Time
	lastSeen time.Time
	ended    chan struct{} // closed when the session is removed (logout, eviction, expiry found)
}

// sessionStore holds the live sessions; now is replaceable for tests.
type sessionStore struct {
	mu   sync.Mutex
	byID map[[32]byte]*session
	idle time.Duration
	now  func() time.Time
}

func newSessionStore(idle time.Duration) *sessionStore {
	if idle <= 0 {
		idle = DefaultSessionIdle
	}
	return &sessionStore{byID: make(map[[32]byte]*session), idle: idle, now: time.Now}
}

// maxAge is the absolute lifetime: at least a day, and never shorter than the idle timeout.
func (st *sessionStore) maxAge() time.Duration { return max(sessionMaxAge, st.idle) }

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// create makes a session and returns the cookie value that names it.
func (st *sessionStore) create() (string, *session) {
	id := randomToken()
	now := st.now()
	s := &session{key: sha256.Sum256([]byte(id)), csrf: randomToken(), created: now, lastSeen: now, ended: make(chan struct{})}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sweepLocked(now)
	if len(st.byID) >= maxSessions {
		var oldest *session
		for _, o := range st.byID {
			if oldest == nil || o.lastSeen.Before(oldest.lastSeen) {
				oldest = o
			}
		}
		st.endLocked(oldest)
	}
	st.byID[s.key] = s
	return id, s
}

// expiredLocked reports whether s is past its idle or absolute limit.
func (st *sessionStore) expiredLocked(s *session, now time.Time) bool {
	return now.Sub(s.lastSeen) >= st.idle || now.Sub(s.created) >= st.maxAge()
}

func (st *sessionStore) sweepLocked(now time.Time) {
	for _, s := range st.byID {
		if st.expiredLocked(s, now) {
			st.endLocked(s)
		}
	}
}

// endLocked removes s and tells whoever waits on it (its live feeds).
func (st *sessionStore) endLocked(s *session) {
	if st.byID[s.key] == s {
		delete(st.byID, s.key)
		close(s.ended)
	}
}

// lookup finds the live session named by a cookie value and, when touch is
// set, counts the request as activity. Expired sessions are removed.
func (st *sessionStore) lookup(id []byte, touch bool) *session {
	if len(id) == 0 || len(id) > 128 {
		return nil
	}
	key := sha256.Sum256(id)
	now := st.now()
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.byID[key]
	if s == nil {
		return nil
	}
	if st.expiredLocked(s, now) {
		st.endLocked(s)
		return nil
	}
	if touch {
		s.lastSeen = now
	}
	return s
}

// alive reports whether s is still a live session, without counting activity.
func (st *sessionStore) alive(s *session) bool {
	now := st.now()
	st.mu.Lock()
	defer st.mu.Unlock()
	cur := st.byID[s.key]
	return cur == s && !st.expiredLocked(s, now)
}

// expiresAt is when s ends if no request comes before.
func (st *sessionStore) expiresAt(s *session) time.Time {
	st.mu.Lock()
	defer st.mu.Unlock()
	idle := s.lastSeen.Add(st.idle)
	if abs := s.created.Add(st.maxAge()); abs.Before(idle) {
		return abs
	}
	return idle
}

func (st *sessionStore) remove(s *session) {
	st.mu.Lock()
	st.endLocked(s)
	st.mu.Unlock()
}

// secureRequest reports a request that reached the browser over TLS:
// served with TLS here, or by a TLS-terminating proxy that says so with
// X-Forwarded-Proto. A client that sends that header itself only makes its
// own cookie Secure.
func secureRequest(ctx *fasthttp.RequestCtx) bool {
	return ctx.IsTLS() || bytes.EqualFold(ctx.Request.Header.Peek("X-Forwarded-Proto"), []byte("https"))
}

// cookieName is the session cookie's name for this request: the __Host-
// prefix needs Secure, which only makes sense over TLS.
func cookieName(ctx *fasthttp.RequestCtx) string {
	if secureRequest(ctx) {
		return sessionCookieTLS
	}
	return sessionCookie
}

// setSessionCookie sends the session cookie, or with del a Max-Age=0 one that deletes it.
// Without del the cookie has no Max-Age: it ends with the browser session at
// the latest, and the server ends it earlier on idleness.
func setSessionCookie(ctx *fasthttp.RequestCtx, value string, del bool) {
	c := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(c)
	c.SetKey(cookieName(ctx))
	c.SetValue(value)
	c.SetPath("/")
	c.SetHTTPOnly(true)
	c.SetSameSite(fasthttp.CookieSameSiteStrictMode)
	c.SetSecure(secureRequest(ctx))
	if del {
		c.SetMaxAge(-1) // written as Max-Age=0
	}
	ctx.Response.Header.SetCookie(c)
}

// requestSession returns the live session of the request's cookie, if any.
func (s *Server) requestSession(ctx *fasthttp.RequestCtx, touch bool) *session {
	return s.dash.sessions.lookup(ctx.Request.Header.Cookie(cookieName(ctx)), touch)
}

// originHost is the host[:port] of an Origin header, nil for "null" or junk.
func originHost(o []byte) []byte {
	for _, scheme := range [][]byte{[]byte("https://"), []byte("http://")} {
		if bytes.HasPrefix(o, scheme) {
			return o[len(scheme):]
		}
	}
	return nil
}

// sameOriginRequest refuses requests a browser marks as coming from another
// origin: an Origin whose host[:port] is not the request's Host, or
// Sec-Fetch-Site other than same-origin or none (a page of the public
// listener is same-site but not same-origin, and is refused too). The Host
// is safe to compare with: a DNS-rebinding page with a foreign Host never
// carries this host's cookie. The scheme is left out so that a
// TLS-terminating proxy in front needs no configuration. Clients that send
// neither header pass; they still need the session cookie and, for
// changes, the CSRF token.
func sameOriginRequest(ctx *fasthttp.RequestCtx) bool {
	if o := ctx.Request.Header.Peek("Origin"); len(o) > 0 && !bytes.EqualFold(originHost(o), ctx.Host()) {
		return false
	}
	switch site := string(ctx.Request.Header.Peek("Sec-Fetch-Site")); site {
	case "", "same-origin", "none":
		return true
	}
	return false
}

// safeMethod reports methods that change nothing, which need no CSRF token.
func safeMethod(ctx *fasthttp.RequestCtx) bool {
	return ctx.IsGet() || ctx.IsHead() || ctx.IsOptions()
}

// sessionAuth authenticates an admin request by its session cookie: 401
// without a live session, 403 when the request comes from another origin or
// changes state without the session's CSRF token.
func (s *Server) sessionAuth(ctx *fasthttp.RequestCtx) *apiError {
	sess := s.requestSession(ctx, true)
	if sess == nil {
		return newError(fasthttp.StatusUnauthorized, codeUnauthorized, "Invalid or missing admin token")
	}
	if !sameOriginRequest(ctx) {
		return newError(fasthttp.StatusForbidden, codeForbidden, "Cross-origin request refused")
	}
	if !safeMethod(ctx) {
		tok := ctx.Request.Header.Peek(csrfHeader)
		if len(tok) == 0 || subtle.ConstantTimeCompare(tok, []byte(sess.csrf)) != 1 {
			return newError(fasthttp.StatusForbidden, codeForbidden, "Missing or invalid CSRF token (send the X-CSRF-Token of GET /session)")
		}
	}
	ctx.SetUserValue(sessionUserValue, sess)
	return nil
}

// ctxSession is the session that authenticated the request, nil for the bearer token.
func ctxSession(ctx *fasthttp.RequestCtx) *session {
	sess, _ := ctx.UserValue(sessionUserValue).(*session)
	return sess
}
