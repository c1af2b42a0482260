package http

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine"
)

// The web dashboard (docs/dashboard.md): static HTML, CSS and JavaScript
// modules embedded in the binary and served on the admin listener, plus the
// login, logout and session routes and two admin reads made for it
// (analytics and the live feed of a project's environment), so the browser
// never holds an API key and talks to one origin only.

//go:embed dashboard
var dashboardFS embed.FS

// maxDashboardStreams bounds the live feeds open through the admin listener;
// they count against no key's plan, so something else has to bound them.
const maxDashboardStreams = 64

// dashboard is the dashboard's server-side state.
type dashboard struct {
	sessions *sessionStore
	streams  atomic.Int32
}

func newDashboard(idle time.Duration) *dashboard {
	return &dashboard{sessions: newSessionStore(idle)}
}

// staticFile is an embedded file ready to serve.
type staticFile struct {
	body, gz    []byte
	etag        string
	contentType string
}

var (
	dashboardAssets = loadDashboardAssets()
	indexPage       = mustRead("dashboard/index.html")
	loginPage       = mustRead("dashboard/login.html")
)

func mustRead(name string) []byte {
	b, err := dashboardFS.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return b
}

var contentTypes = map[string]string{
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".html": "text/html; charset=utf-8",
}

// loadDashboardAssets prepares every file under dashboard/assets once: body,
// gzip body and a content hash as ETag.
func loadDashboardAssets() map[string]*staticFile {
	out := map[string]*staticFile{}
	err := fs.WalkDir(dashboardFS, "dashboard/assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := dashboardFS.ReadFile(p)
		if err != nil {
			return err
		}
		ct := contentTypes[path.Ext(p)]
		if ct == "" {
			ct = "application/octet-stream"
		}
		sum := sha256.Sum256(body)
		f := &staticFile{body: body, contentType: ct, etag: `"d-` + hex.EncodeToString(sum[:8]) + `"`}
		if ct != "image/png" {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			_, _ = zw.Write(body)
			_ = zw.Close()
			if buf.Len() < len(body) {
				f.gz = buf.Bytes()
			}
		}
		out[strings.TrimPrefix(p, "dashboard/assets/")] = f
		return nil
	})
	if err != nil {
		panic(err)
	}
	return out
}

// dashboardCSP allows nothing but this origin: no inline script or style,
// no framing, forms post only here. 'self' covers ws:/wss: to the same host
// (CSP level 3), which the live feed uses.
const dashboardCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// securityHeaders are sent with every dashboard page and asset.
func securityHeaders(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// dashboardRoutes registers the dashboard on the admin router; a wraps
// handlers of the admin API (route metrics plus adminAuth).
func (s *Server) dashboardRoutes(r *router.Router, a func(string, fasthttp.RequestHandler) fasthttp.RequestHandler) {
	r.GET("/", s.route("dashboard", s.handleDashboard))
	r.GET("/login", s.route("dashboard_login_page", s.handleLoginPage))
	r.POST("/login", s.route("dashboard_login", s.handleLogin))
	r.POST("/logout", s.route("dashboard_logout", s.handleLogout))
	r.GET("/session", s.route("dashboard_session", s.handleSession))
	r.GET("/assets/{file:*}", s.route("dashboard_asset", handleAsset))
	r.GET("/admin/v1/projects/{id}/analytics", a("admin_analytics", s.adminAnalytics))
	r.GET("/admin/v1/projects/{id}/stream", a("admin_stream", s.adminStream))
}

func writePage(ctx *fasthttp.RequestCtx, status int, body []byte) {
	securityHeaders(ctx)
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetStatusCode(status)
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.SetBody(body)
}

func redirect(ctx *fasthttp.RequestCtx, to string) {
	ctx.Response.Header.Set("Location", to)
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetStatusCode(fasthttp.StatusSeeOther)
}

// validBearer reports a correct admin token in the Authorization header. It
// is an admin-token attempt like any other: counted by the throttle, and
// false for everybody while the client is locked out.
func (s *Server) validBearer(ctx *fasthttp.RequestCtx) bool {
	tok := bearerToken(ctx)
	if len(tok) == 0 || s.authLocked(ctx) > 0 {
		return false
	}
	if len(s.adminToken) == 0 || subtle.ConstantTimeCompare(tok, s.adminToken) != 1 {
		s.authFailed(ctx)
		return false
	}
	s.authSucceeded(ctx)
	return true
}

// handleDashboard serves the application page to a live session (or the
// admin token); anybody else is sent to the login page.
func (s *Server) handleDashboard(ctx *fasthttp.RequestCtx) {
	if !s.validBearer(ctx) && s.requestSession(ctx, true) == nil {
		redirect(ctx, "/login")
		return
	}
	writePage(ctx, fasthttp.StatusOK, indexPage)
}

// Messages of the login page. They are fixed texts chosen by the server,
// never an echo of the request, so the page needs no escaping.
const (
	loginMarker     = "<!--LOGIN_MESSAGE-->"
	msgWrongToken   = `<p class="login-message error" id="login-message" role="alert">That is not the admin token of this server.</p>`
	msgExpired      = `<p class="login-message" id="login-message" role="status">Your session ended. Sign in again to continue.</p>`
	msgLoggedOut    = `<p class="login-message" id="login-message" role="status">You are signed out.</p>`
	msgCrossOrigin  = `<p class="login-message error" id="login-message" role="alert">Sign-in refused: the form was sent from another site.</p>`
	msgThrottled    = `<p class="login-message error" id="login-message" role="alert">Too many wrong tokens from your address. Wait a moment, then try again.</p>`
	maxLoginBodyLen = 4096
)

func loginWith(msg string) []byte {
	return bytes.Replace(loginPage, []byte(loginMarker), []byte(msg), 1)
}

func (s *Server) handleLoginPage(ctx *fasthttp.RequestCtx) {
	if s.requestSession(ctx, false) != nil {
		redirect(ctx, "/")
		return
	}
	msg := ""
	switch {
	case ctx.QueryArgs().Has("expired"):
		msg = msgExpired
	case ctx.QueryArgs().Has("signed_out"):
		msg = msgLoggedOut
	}
	writePage(ctx, fasthttp.StatusOK, loginWith(msg))
}

func isJSONRequest(ctx *fasthttp.RequestCtx) bool {
	return bytes.HasPrefix(ctx.Request.Header.ContentType(), []byte("application/json"))
}

// handleLogin exchanges the admin token for a session: an HTML form post
// (the login page needs no script) gets a 303 to the dashboard, a JSON
// post {"token": ...} gets the session's CSRF token.
func (s *Server) handleLogin(ctx *fasthttp.RequestCtx) {
	asJSON := isJSONRequest(ctx)
	fail := func(status int, e *apiError, page string) {
		if asJSON {
			writeError(ctx, e)
			return
		}
		writePage(ctx, status, loginWith(page))
	}
	// Login CSRF: another site must not log this browser in, even with a token of its own.
	if !sameOriginRequest(ctx) {
		fail(fasthttp.StatusForbidden, newError(fasthttp.StatusForbidden, codeForbidden, "Cross-origin request refused"), msgCrossOrigin)
		return
	}
	if d := s.authLocked(ctx); d > 0 { // before the body is read
		s.loginThrottled(ctx, d, asJSON)
		return
	}
	if e := bufferBody(ctx, maxLoginBodyLen, 0, s.adminBodies); e != nil {
		if e.status == fasthttp.StatusRequestEntityTooLarge {
			e = newError(fasthttp.StatusRequestEntityTooLarge, codeTooLarge, "Login body too large")
		}
		fail(e.status, e, msgWrongToken)
		return
	}
	body := ctx.Request.Body()
	var token string
	if asJSON {
		var in struct {
			Token string `json:"token"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			writeError(ctx, &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, message: "Request body must be a JSON object of the documented shape",
				details: map[string]string{"body": `expected {"token": "<admin token>"}`}})
			return
		}
		token = in.Token
	} else if vals, err := url.ParseQuery(string(body)); err == nil {
		token = vals.Get("token")
	}
	token = strings.TrimSpace(token) // pasted tokens often carry a newline
	if len(s.adminToken) == 0 || subtle.ConstantTimeCompare([]byte(token), s.adminToken) != 1 {
		s.log.Warn("dashboard login refused", "remote", ctx.RemoteIP().String())
		if d := s.authFailed(ctx); d > 0 {
			s.loginThrottled(ctx, d, asJSON)
			return
		}
		fail(fasthttp.StatusUnauthorized, newError(fasthttp.StatusUnauthorized, codeUnauthorized, "Invalid or missing admin token"), msgWrongToken)
		return
	}
	s.authSucceeded(ctx)
	// A fresh id at every login (no session fixation); this browser's previous session ends.
	if old := s.requestSession(ctx, false); old != nil {
		s.dash.sessions.remove(old)
	}
	id, sess := s.dash.sessions.create()
	setSessionCookie(ctx, id, false)
	s.log.Info("dashboard login", "remote", ctx.RemoteIP().String())
	if asJSON {
		s.writeSession(ctx, sess)
		return
	}
	redirect(ctx, "/")
}

// sessionView is GET /session: what the dashboard script needs to know.
type sessionView struct {
	CSRFToken   string `json:"csrf_token"`
	CreatedAt   string `json:"created_at"`
	ExpiresAt   string `json:"expires_at"`
	IdleTimeout int64  `json:"idle_timeout"`
	MaxAge      int64  `json:"max_age"`
}

func (s *Server) writeSession(ctx *fasthttp.RequestCtx, sess *session) {
	st := s.dash.sessions
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, fasthttp.StatusOK, sessionView{
		CSRFToken:   sess.csrf,
		CreatedAt:   sess.created.UTC().Format("2006-01-02T15:04:05.000Z"),
		ExpiresAt:   st.expiresAt(sess).UTC().Format("2006-01-02T15:04:05.000Z"),
		IdleTimeout: int64(st.idle / time.Second),
		MaxAge:      int64(st.maxAge() / time.Second),
	})
}

// handleSession reports the caller's session with its CSRF token. Only a
// same-origin script can read the answer (no CORS on this listener).
func (s *Server) handleSession(ctx *fasthttp.RequestCtx) {
	if fail := s.sessionAuth(ctx); fail != nil {
		writeError(ctx, fail)
		return
	}
	s.writeSession(ctx, ctxSession(ctx))
}

// handleLogout ends the session. It is a state change like any other, so it
// needs the CSRF token: in X-CSRF-Token, or as the csrf_token field of a form.
func (s *Server) handleLogout(ctx *fasthttp.RequestCtx) {
	asForm := bytes.HasPrefix(ctx.Request.Header.ContentType(), []byte("application/x-www-form-urlencoded"))
	// Like /login's, a /logout body is read only up to 4 KiB.
	if fail := bufferBody(ctx, maxLoginBodyLen, 0, s.adminBodies); fail != nil {
		if fail.status == fasthttp.StatusRequestEntityTooLarge {
			fail = newError(fasthttp.StatusRequestEntityTooLarge, codeTooLarge, "Logout body too large")
		}
		writeError(ctx, fail)
		return
	}
	if asForm && len(ctx.Request.Header.Peek(csrfHeader)) == 0 {
		if vals, err := url.ParseQuery(string(ctx.Request.Body())); err == nil && vals.Get("csrf_token") != "" {
			ctx.Request.Header.Set(csrfHeader, vals.Get("csrf_token"))
		}
	}
	if fail := s.sessionAuth(ctx); fail != nil {
		writeError(ctx, fail)
		return
	}
	s.dash.sessions.remove(ctxSession(ctx))
	setSessionCookie(ctx, "", true)
	if asForm {
		redirect(ctx, "/login?signed_out")
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// handleAsset serves an embedded file. The assets are the dashboard's code,
// the same for every installation and holding no data, so they need no
// session: the login page uses the style sheet before there is one.
func handleAsset(ctx *fasthttp.RequestCtx) {
	f := dashboardAssets[param(ctx, "file")]
	if f == nil {
		writeError(ctx, newError(fasthttp.StatusNotFound, codeNotFound, "Not found"))
		return
	}
	securityHeaders(ctx)
	h := &ctx.Response.Header
	// Revalidated on every use: a new eventd version shows its new dashboard at once.
	h.Set("Cache-Control", "no-cache")
	h.Set("Vary", "Accept-Encoding")
	gz := f.gz != nil && bytes.Contains(ctx.Request.Header.Peek("Accept-Encoding"), []byte("gzip"))
	etag := f.etag
	if gz {
		etag = strings.TrimSuffix(etag, `"`) + `-gz"`
	}
	h.Set("ETag", etag)
	if inm := ctx.Request.Header.Peek("If-None-Match"); len(inm) > 0 && bytes.Contains(inm, []byte(etag)) {
		ctx.SetStatusCode(fasthttp.StatusNotModified)
		return
	}
	ctx.SetContentType(f.contentType)
	if gz {
		h.Set("Content-Encoding", "gzip")
		ctx.SetBody(f.gz)
		return
	}
	ctx.SetBody(f.body)
}

// adminEnvironment reads ?environment=live|test (default live).
func adminEnvironment(ctx *fasthttp.RequestCtx) (string, *apiError) {
	v := ctx.QueryArgs().Peek("environment")
	switch string(v) {
	case "", engine.Live:
		return engine.Live, nil
	case engine.Test:
		return engine.Test, nil
	}
	return "", &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, message: "Invalid request data",
		details: map[string]string{"environment": "must be live or test"}}
}

// datasetPrincipal is the engine's read-only principal for one environment
// of a project: the dashboard reads analytics and the live feed without any
// API key, so no key text reaches the browser and no customer limit is used.
func (s *Server) datasetPrincipal(projectID, env string) (*engine.Principal, *apiError) {
	p, err := s.eng.ReaderFor(projectID, env)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, newError(fasthttp.StatusNotFound, codeNotFound, "Project not found")
	}
	if err != nil {
		return nil, newError(fasthttp.StatusInternalServerError, codeInternal, "Internal server error")
	}
	return p, nil
}

// adminAnalytics is GET /analytics for one environment of a project, for
// the dashboard: same parameters and answers, no API key, no rate limit.
func (s *Server) adminAnalytics(ctx *fasthttp.RequestCtx) {
	env, fail := adminEnvironment(ctx)
	if fail != nil {
		writeError(ctx, fail)
		return
	}
	p, fail := s.datasetPrincipal(param(ctx, "id"), env)
	if fail != nil {
		writeError(ctx, fail)
		return
	}
	q, fail := parseAnalytics(ctx, "environment")
	if fail != nil {
		writeError(ctx, fail)
		return
	}
	s.answerAnalytics(ctx, p, q)
}

// adminStream is GET /stream for one environment of a project, for the
// dashboard's live feed: the same WebSocket messages, filters and since.
// A feed opened with a session closes when the session ends (logout or
// expiry); the browser then finds itself logged out when it reconnects.
func (s *Server) adminStream(ctx *fasthttp.RequestCtx) {
	env, fail := adminEnvironment(ctx)
	if fail != nil {
		writeError(ctx, fail)
		return
	}
	p, fail := s.datasetPrincipal(param(ctx, "id"), env)
	if fail != nil {
		writeError(ctx, fail)
		return
	}
	q, fail := parseStreamQuery(ctx.QueryArgs(), "environment")
	if fail != nil {
		writeError(ctx, fail)
		return
	}
	if s.dash.streams.Add(1) > maxDashboardStreams {
		s.dash.streams.Add(-1)
		writeTooManyStreams(ctx, "Too many live feeds open on the admin listener ("+strconv.Itoa(maxDashboardStreams)+")")
		return
	}
	// adminAuth already refused a session request from another origin; the
	// bearer token is not something a browser sends by itself.
	var watch func(*subscriber) func()
	if sess := ctxSession(ctx); sess != nil {
		watch = func(sub *subscriber) func() {
			done := make(chan struct{})
			go s.watchSession(sess, sub, done)
			return func() { close(done) }
		}
	}
	s.upgradeStream(ctx, p, q, nil, func() { s.dash.streams.Add(-1) }, watch)
}

// watchSession stops a live feed once its session has ended: at once on
// logout, and within a quarter of the idle timeout (30 s at most) when it
// expires, since expiry is only noticed by looking.
func (s *Server) watchSession(sess *session, sub *subscriber, done <-chan struct{}) {
	every := min(max(s.dash.sessions.idle/4, 100*time.Millisecond), 30*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-sess.ended:
			sub.end(closeGoingAway)
			return
		case <-t.C:
			if !s.dash.sessions.alive(sess) {
				sub.end(closeGoingAway)
				return
			}
		}
	}
}
