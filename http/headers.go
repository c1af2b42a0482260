package http

import (
	"errors"

	"github.com/valyala/fasthttp"
)

// Request header limits (contract section 11: headers over 16 KiB are 431).
const (
	// maxHeaderBytes is the most request header bytes (the lines after the
	// request line) a request may carry; browsers with many cookies stay well
	// under it.
	maxHeaderBytes = 16 << 10
	// maxRequestLine is the room left in the read buffer for the request line
	// (method, URL, version) next to a full 16 KiB of headers.
	maxRequestLine = 8 << 10
	// readBufferSize is fasthttp's per-connection read buffer: a request head
	// that does not fit fails with ErrSmallBuffer, answered 431 as well.
	readBufferSize = maxHeaderBytes + maxRequestLine
)

func headersTooLargeError() *apiError {
	return newError(fasthttp.StatusRequestHeaderFieldsTooLarge, codeHeadersTooLarge, "Request headers are larger than 16 KiB")
}

// isHeadersTooLarge reports whether fasthttp refused a request because its
// head did not fit the read buffer.
func isHeadersTooLarge(err error) bool {
	var small *fasthttp.ErrSmallBuffer
	return errors.As(err, &small)
}

// limitHeaders answers 431 to a request whose headers fit the read buffer
// but are over 16 KiB, so the limit is the same whatever the request line.
func (s *Server) limitHeaders(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if len(ctx.Request.Header.RawHeaders()) > maxHeaderBytes {
			s.setRequestID(ctx)
			writeError(ctx, headersTooLargeError())
			return
		}
		h(ctx)
	}
}
