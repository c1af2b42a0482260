package http

import (
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/storage"
)

// The answer of every write route while the data volume is short of space
// (contract section 11): the client should retry later, the data it has is
// not the problem.
const (
	codeInsufficientStorage = "insufficient_storage"
	msgInsufficientStorage  = "Not enough free disk space to store events"
	retryAfterDisk          = "30"
)

// healthDegradedDisk is /healthz while writes are refused: still 200, since
// the process serves reads and should not be restarted for it.
var healthDegradedDisk = []byte(`{"status":"degraded","reason":"disk"}`)

// writeInsufficientStorage answers 507 with Retry-After: 30.
func writeInsufficientStorage(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Retry-After", retryAfterDisk)
	writeError(ctx, newError(fasthttp.StatusInsufficientStorage, codeInsufficientStorage, msgInsufficientStorage))
}

// isInsufficientStorage reports the engine's refusal for lack of space. A
// store open read-only is one too: serve opens it so only on a volume too
// full to open it for writing, so admin changes get 507 there as well.
func isInsufficientStorage(err error) bool {
	return errors.Is(err, engine.ErrInsufficientStorage) || errors.Is(err, storage.ErrReadOnly)
}

// writeSubmitError answers a failed write; a write refused for space was
// checked against the rate limit first, so its answer carries the headers.
func (s *Server) writeSubmitError(ctx *fasthttp.RequestCtx, rep *actors.Reply, err error) {
	if rep != nil && len(rep.Windows) > 0 {
		setRateHeaders(ctx, rep.Windows, time.Now())
	}
	s.writeEngineError(ctx, err)
}
