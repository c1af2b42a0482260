package http

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"

	"github.com/valyala/fasthttp"
)

// tjsSource is the browser script as written, comments included.
//
//go:embed tjs/t.js
var tjsSource []byte

// clientScript is t.js as served: prepared once, because every page view of
// every site that embeds it asks for it (or revalidates it).
type clientScript struct {
	body, gz       []byte
	etag, etagGzip string
	cacheControl   string
	contentType    string
}

var tjs = newClientScript(tjsSource)

func newClientScript(src []byte) *clientScript {
	body := minifyScript(src)
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(body)
	_ = zw.Close()
	sum := sha256.Sum256(body)
	tag := "t-" + hex.EncodeToString(sum[:8])
	return &clientScript{
		body: body,
		gz:   buf.Bytes(),
		// Two representations need two strong validators (RFC 9110 8.8.3).
		etag:     `"` + tag + `"`,
		etagGzip: `"` + tag + `-gz"`,
		// The URL carries no version, so caches keep it an hour and then
		// revalidate with the ETag: a new release reaches every site within
		// the hour, at the cost of one 304 per browser per hour.
		cacheControl: "public, max-age=3600, stale-while-revalidate=86400",
		contentType:  "application/javascript; charset=utf-8",
	}
}

// minifyScript drops comment lines, indentation and blank lines. t.js keeps
// every comment on its own line and ends statements with semicolons, so no
// token changes meaning; a real minifier would need a build step and a dependency.
func minifyScript(src []byte) []byte {
	out := make([]byte, 0, len(src))
	for line := range bytes.SplitSeq(src, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || bytes.HasPrefix(line, []byte("//")) {
			continue
		}
		out = append(out, line...)
		out = append(out, '\n')
	}
	return out
}

// etagMatches applies the weak comparison of If-None-Match (RFC 9110 13.1.2)
// to both representations: a validator of either one is the same script version.
func (c *clientScript) etagMatches(inm []byte) bool {
	for part := range bytes.SplitSeq(inm, []byte(",")) {
		part = bytes.TrimSpace(part)
		if string(part) == "*" {
			return true
		}
		part = bytes.TrimPrefix(part, []byte("W/"))
		if string(part) == c.etag || string(part) == c.etagGzip {
			return true
		}
	}
	return false
}

// handleTJS serves the client script. It needs no key: the key is in the page.
func (s *Server) handleTJS(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	gz := ctx.Request.Header.HasAcceptEncoding("gzip")
	etag := tjs.etag
	if gz {
		etag = tjs.etagGzip
	}
	h.Set("Cache-Control", tjs.cacheControl)
	h.Set("ETag", etag)
	h.Set("Vary", "Accept-Encoding")
	// Any site may load it, also with crossorigin="anonymous" for Subresource Integrity.
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("X-Content-Type-Options", "nosniff")
	if inm := ctx.Request.Header.Peek("If-None-Match"); len(inm) > 0 && tjs.etagMatches(inm) {
		ctx.SetStatusCode(fasthttp.StatusNotModified)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(tjs.contentType)
	if gz {
		h.Set("Content-Encoding", "gzip")
		ctx.SetBody(tjs.gz)
		return
	}
	ctx.SetBody(tjs.body)
}
