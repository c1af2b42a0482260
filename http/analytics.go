package http

import (
	"errors"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/engine/analytics"
	"github.com/eventd/eventd/engine/ratelimit"
)

// handleAnalytics serves GET /analytics (contract section 7): secret keys
// only, counted in the analytics bucket, every bad parameter a 400 naming it.
func (s *Server) handleAnalytics(ctx *fasthttp.RequestCtx) {
	p, fail := s.authenticateRead(ctx)
	if p == nil {
		return
	}
	var q analytics.Query
	if fail == nil {
		q, fail = parseAnalytics(ctx)
	}
	if !s.admit(ctx, p, ratelimit.AnalyticsKind) {
		return
	}
	if fail != nil {
		writeError(ctx, fail)
		return
	}
	s.answerAnalytics(ctx, p, q)
}

// parseAnalytics reads the query parameters; every bad one is named in
// details. extra are further parameters the caller reads (the dashboard's
// environment).
func parseAnalytics(ctx *fasthttp.RequestCtx, extra ...string) (analytics.Query, *apiError) {
	args := ctx.QueryArgs()
	q, details := analytics.Parse(func(name string) (string, bool) {
		v := args.Peek(name)
		return string(v), v != nil
	}, time.Now().UnixMilli())
	if details == nil {
		details = map[string]string{}
	}
	if _, used := details["where"]; !used {
		if f := parseWhere(args, details); len(f) > 0 {
			q.Match = f.Match
		}
	}
	addUnknownParams(details, args, func(name string) bool { return analytics.IsParam(name) || slices.Contains(extra, name) })
	if len(details) > 0 {
		return q, &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, message: "Invalid query parameters", details: details}
	}
	return q, nil
}

// answerAnalytics runs a parsed query over p's dataset and writes the answer or its error.
func (s *Server) answerAnalytics(ctx *fasthttp.RequestCtx, p *engine.Principal, q analytics.Query) {
	res, err := s.eng.Analytics(p, q)
	if err != nil {
		s.writeQueryError(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, res)
}

// writeQueryError answers a read's failure: 400 for a parameter that
// refers to nothing, 422 for a query past its scan bound, else as
// writeEngineError.
func (s *Server) writeQueryError(ctx *fasthttp.RequestCtx, err error) {
	var pe *engine.ParamError
	var se *engine.ScanLimitError
	switch {
	case errors.As(err, &pe):
		writeError(ctx, &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, message: "Invalid query parameters", details: pe.Details})
	case errors.As(err, &se):
		writeError(ctx, &apiError{status: fasthttp.StatusUnprocessableEntity, code: codeValidation, message: se.Message,
			details: map[string]string{se.Param: "too many raw events to scan"}})
	default:
		s.writeEngineError(ctx, err)
	}
}
