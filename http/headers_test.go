package http

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/eventd/eventd/engine"
)

// TestHeaderLimit: headers up to 16 KiB are served, above it (whether they
// still fit fasthttp's read buffer or not) the answer is a JSON 431.
func TestHeaderLimit(t *testing.T) {
	eng, err := engine.Open(engine.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	s := New(Config{Engine: eng, AdminToken: "t"})
	ln := fasthttputil.NewInmemoryListener()
	go func() { _ = s.ServePublic(ln) }()
	t.Cleanup(func() { _ = s.Shutdown() })
	c := &fasthttp.HostClient{Addr: "eventd", Dial: func(string) (net.Conn, error) { return ln.Dial() },
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}

	for _, tc := range []struct {
		name      string
		path      string
		headerLen int // bytes of one X-Pad header value
		status    int
	}{
		{"browser cookies 12 KiB", "/healthz", 12 << 10, 200},
		{"just under 16 KiB with a long URL", "/healthz?" + strings.Repeat("a", 6<<10), 16<<10 - 100, 200},
		{"20 KiB, fits the read buffer", "/healthz", 20 << 10, 431},
		{"17 KiB", "/healthz", 17 << 10, 431},
		{"40 KiB, over the read buffer", "/healthz", 40 << 10, 431},
		{"unknown route too", "/nope", 20 << 10, 431},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI("http://eventd" + tc.path)
			req.Header.Set("Cookie", "c="+strings.Repeat("x", tc.headerLen))
			if err := c.Do(req, resp); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode() != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode(), tc.status, resp.Body())
			}
			if tc.status != 431 {
				return
			}
			var body struct{ Error, Message string }
			if err := json.Unmarshal(resp.Body(), &body); err != nil {
				t.Fatalf("431 body is not JSON: %v: %s", err, resp.Body())
			}
			if body.Error != "headers_too_large" || body.Message != "Request headers are larger than 16 KiB" {
				t.Fatalf("431 body %s", resp.Body())
			}
			if string(resp.Header.ContentType()) != "application/json" || len(resp.Header.Peek("X-Request-Id")) == 0 {
				t.Fatalf("431 headers:\n%s", resp.Header.String())
			}
		})
	}
}
