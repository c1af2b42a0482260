package http

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// The contract promises "under 3 KB gzipped"; both the file as written and
// the bytes as served must fit, so the budget holds even if minifying is dropped.
func TestTJSSize(t *testing.T) {
	gz := func(b []byte) int {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(b)
		_ = zw.Close()
		return buf.Len()
	}
	const budget = 3072
	if n := gz(tjsSource); n >= budget {
		t.Fatalf("http/tjs/t.js is %d bytes gzipped, budget %d", n, budget)
	}
	if n := len(tjs.gz); n >= budget {
		t.Fatalf("served t.js is %d bytes gzipped, budget %d", n, budget)
	}
	zr, err := gzip.NewReader(bytes.NewReader(tjs.gz))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if !bytes.Equal(plain, tjs.body) {
		t.Fatal("gzip representation differs from the plain one")
	}
	t.Logf("t.js: %d bytes source, %d served, %d gzipped", len(tjsSource), len(tjs.body), len(tjs.gz))
}

// The served script must still parse after minifyScript; node checks that
// when it is installed (the browser e2e test runs the script for real).
func TestTJSSyntax(t *testing.T) {
	for _, line := range strings.Split(string(tjs.body), "\n") {
		if strings.Contains(line, "//") && !strings.Contains(line, "://") && !strings.Contains(line, `/\/+$/`) {
			t.Fatalf("served line keeps a // comment, which would swallow the rest of the line: %q", line)
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed: syntax check of the served t.js skipped")
	}
	f := filepath.Join(t.TempDir(), "t.js")
	if err := os.WriteFile(f, tjs.body, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(node, "--check", f).CombinedOutput(); err != nil {
		t.Fatalf("node --check on the served t.js: %v\n%s", err, out)
	}
}

func TestHandleTJS(t *testing.T) {
	s := &Server{}
	get := func(hdr ...string) *fasthttp.Response {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI("/t.js")
		for i := 0; i+1 < len(hdr); i += 2 {
			ctx.Request.Header.Set(hdr[i], hdr[i+1])
		}
		s.handleTJS(&ctx)
		var r fasthttp.Response
		ctx.Response.CopyTo(&r)
		return &r
	}
	r := get()
	if r.StatusCode() != 200 || !bytes.Equal(r.Body(), tjs.body) {
		t.Fatalf("plain GET: %d, %d bytes", r.StatusCode(), len(r.Body()))
	}
	if ct := string(r.Header.ContentType()); !strings.HasPrefix(ct, "application/javascript") {
		t.Fatalf("Content-Type %q", ct)
	}
	if cc := string(r.Header.Peek("Cache-Control")); !strings.Contains(cc, "max-age=") {
		t.Fatalf("Cache-Control %q", cc)
	}
	etag := string(r.Header.Peek("ETag"))
	if etag == "" || len(r.Header.Peek("Content-Encoding")) != 0 {
		t.Fatalf("ETag %q, Content-Encoding %q", etag, r.Header.Peek("Content-Encoding"))
	}

	rg := get("Accept-Encoding", "gzip, br")
	if string(rg.Header.Peek("Content-Encoding")) != "gzip" || !bytes.Equal(rg.Body(), tjs.gz) {
		t.Fatalf("gzip GET: Content-Encoding %q", rg.Header.Peek("Content-Encoding"))
	}
	gzTag := string(rg.Header.Peek("ETag"))
	if gzTag == etag {
		t.Fatal("gzip and identity representations share a strong ETag")
	}

	for _, inm := range []string{etag, gzTag, "W/" + etag, `"other", ` + etag, "*"} {
		if r := get("If-None-Match", inm); r.StatusCode() != 304 || len(r.Body()) != 0 || len(r.Header.Peek("ETag")) == 0 {
			t.Fatalf("If-None-Match %s: %d, %d bytes", inm, r.StatusCode(), len(r.Body()))
		}
	}
	if r := get("If-None-Match", `"t-stale"`); r.StatusCode() != 200 {
		t.Fatalf("stale If-None-Match: %d", r.StatusCode())
	}
}

func TestMinifyScript(t *testing.T) {
	in := "// head\n  var a = 1;\n\n\t// note\n  a++;  \n"
	if got := string(minifyScript([]byte(in))); got != "var a = 1;\na++;\n" {
		t.Fatalf("minify: %q", got)
	}
}
