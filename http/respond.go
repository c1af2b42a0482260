package http

import (
	"encoding/json"
	"sort"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine/event"
)

// Error codes of the JSON error body.
const (
	codeBadRequest       = "bad_request"
	codeUnauthorized     = "unauthorized"
	codeForbidden        = "forbidden"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeConflict         = "idempotency_conflict"
	codeTooLarge         = "payload_too_large"
	codeUnsupported      = "unsupported_media_type"
	codeValidation       = "validation_error"
	codeRateLimited      = "rate_limit_exceeded"
	codeInternal         = "internal_error"
	codeUnavailable      = "unavailable"
	codeHeadersTooLarge  = "headers_too_large"
)

// Messages fixed by the spec.
const (
	msgUnauthorized = "Invalid or missing API key"
	msgForbidden    = "API key does not have permission for this resource"
	msgEventMissing = "Event not found"
)

var contentTypeJSON = []byte("application/json")

// apiError is a JSON error body not yet written.
type apiError struct {
	status  int
	code    string
	message string
	details map[string]string
}

func newError(status int, code, message string) *apiError {
	return &apiError{status: status, code: code, message: message}
}

func problemError(p *event.Problem) *apiError {
	return &apiError{status: p.Status, code: p.Code, message: p.Message, details: p.Details}
}

// writeError writes the JSON error body {error, message, details?}.
func writeError(ctx *fasthttp.RequestCtx, e *apiError) {
	ctx.SetStatusCode(e.status)
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(appendErrorBody(nil, e, -1))
}

// appendErrorBody renders an error object; retryAfter >= 0 adds retry_after.
func appendErrorBody(dst []byte, e *apiError, retryAfter int64) []byte {
	dst = append(dst, `{"error":`...)
	dst = event.AppendString(dst, e.code)
	dst = append(dst, `,"message":`...)
	dst = event.AppendString(dst, e.message)
	if len(e.details) > 0 {
		dst = append(dst, `,"details":`...)
		dst = appendDetails(dst, e.details)
	}
	if retryAfter >= 0 {
		dst = append(dst, `,"retry_after":`...)
		dst = strconv.AppendInt(dst, retryAfter, 10)
	}
	return append(dst, '}')
}

// appendDetails writes details with sorted keys so bodies are deterministic.
func appendDetails(dst []byte, d map[string]string) []byte {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = event.AppendString(dst, k)
		dst = append(dst, ':')
		dst = event.AppendString(dst, d[k])
	}
	return append(dst, '}')
}

// writeJSON encodes v with encoding/json: for admin and cold paths.
func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(ctx, newError(fasthttp.StatusInternalServerError, codeInternal, "Internal server error"))
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(b)
}

// writeSecretJSON is writeJSON for an answer that carries a secret shown
// once (a new API key, a webhook signing secret): no cache, shared or
// private, may keep it (RFC 9111 no-store).
func writeSecretJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, status, v)
}

// writeRaw sends an already encoded JSON body.
func writeRaw(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(body)
}
