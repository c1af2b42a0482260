package http

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/valyala/fasthttp"
)

// keyIDValue is the user value under which principal stores the request's
// key id for the access log, set only while the log is on.
const keyIDValue = "eventd.key_id"

// accessLog writes one slog JSON line per sampled request: request id, key
// id (never the key), route, method, status, bytes out and duration. It is
// its own logger, not the service's, so it can go to its own file and be
// shipped or rotated apart from the operational log.
type accessLog struct {
	log    *slog.Logger
	sample float64 // 1 logs every request
}

// newAccessLog returns nil (off) for a nil writer.
func newAccessLog(w io.Writer, sample float64) *accessLog {
	if w == nil {
		return nil
	}
	if sample <= 0 || sample > 1 {
		sample = 1
	}
	return &accessLog{log: slog.New(slog.NewJSONHandler(w, nil)), sample: sample}
}

// record logs a finished request if it falls in the sample.
func (a *accessLog) record(ctx *fasthttp.RequestCtx, route string, elapsed time.Duration) {
	if a.sample < 1 && rand.Float64() >= a.sample {
		return
	}
	keyID, _ := ctx.UserValue(keyIDValue).(string)
	a.log.LogAttrs(context.Background(), slog.LevelInfo, "access",
		slog.String("request_id", string(ctx.Response.Header.Peek("X-Request-Id"))),
		slog.String("key_id", keyID),
		slog.String("route", route),
		slog.String("method", string(ctx.Method())),
		slog.Int("status", ctx.Response.StatusCode()),
		slog.Int("bytes_out", bodyBytes(&ctx.Response)),
		slog.Float64("duration_ms", float64(elapsed.Nanoseconds())/1e6),
	)
}

// bodyBytes is the response body's size as the handler set it: a streamed
// body (exports) is not read to count it, its declared length is used
// (-1 when unknown); a hijacked connection (/stream) reports what was
// written before the upgrade, i.e. 0.
func bodyBytes(r *fasthttp.Response) int {
	if r.IsBodyStream() {
		return r.Header.ContentLength()
	}
	return len(r.Body())
}
