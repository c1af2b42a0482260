package http

import (
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
)

// TestPrincipalHeaderNotForgeable: the header hook hands the handler the
// key it authenticated under principalHeader; a client sending that header
// itself, in any case, with a wrong key or none, still gets 401, on routes
// with a body and without one. A valid key still gets its 201 and 200.
func TestPrincipalHeaderNotForgeable(t *testing.T) {
	eng, _, victim := testEngine(t)
	s := New(Config{Engine: eng, AdminToken: "t"})
	ln := fasthttputil.NewInmemoryListener()
	go func() { _ = s.ServePublic(ln) }()
	t.Cleanup(func() { _ = s.Shutdown() })
	c := &fasthttp.HostClient{Addr: "eventd", Dial: func(string) (net.Conn, error) { return ln.Dial() },
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	do := func(method, path, auth, header, body string) int {
		t.Helper()
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.Header.SetMethod(method)
		req.SetRequestURI("http://eventd" + path)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		if header != "" {
			req.Header.DisableNormalizing()
			req.Header.Set(header, victim.ID)
		}
		if body != "" {
			req.Header.SetContentType("application/json")
			req.SetBodyString(body)
		}
		if err := c.Do(req, resp); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode()
	}
	const ev = `{"event":"e"}`
	wrong := "sk_live_" + "0123456789abcdef0123456789abcdef"[:len(victim.Key)-len("sk_live_")]
	for _, header := range []string{principalHeader, "x-eventd-principal", "X-EVENTD-PRINCIPAL"} {
		for _, auth := range []string{"", wrong} {
			if got := do("POST", "/events", auth, header, ev); got != 401 {
				t.Errorf("POST /events, key %q, forged %s: %d, want 401", auth, header, got)
			}
			if got := do("GET", "/events", auth, header, ""); got != 401 {
				t.Errorf("GET /events, key %q, forged %s: %d, want 401", auth, header, got)
			}
		}
	}
	if got := do("POST", "/events", victim.Key, "", ev); got != 201 {
		t.Errorf("POST /events with the key: %d, want 201", got)
	}
	if got := do("GET", "/events", victim.Key, "", ""); got != 200 {
		t.Errorf("GET /events with the key: %d, want 200", got)
	}
}
