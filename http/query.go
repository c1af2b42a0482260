package http

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/filter"
	"github.com/eventd/eventd/storage"
)

// msgUnknownParam answers a query parameter a route does not take: a
// misspelt filter must not silently return unfiltered data (contract
// section 13).
const msgUnknownParam = "is not a parameter of this route"

// listParams are the parameters of GET /events.
var listParams = []string{"limit", "offset", "event", "visitor_id", "from", "to"}

// addUnknownParams names in d every query parameter that is not in known;
// api_key (the key, for testing) is known everywhere.
func addUnknownParams(d map[string]string, args *fasthttp.Args, known func(name string) bool) {
	args.VisitAll(func(k, _ []byte) {
		if name := string(k); name != "api_key" && !known(name) {
			d[name] = msgUnknownParam
		}
	})
}

// noParams refuses any query parameter but api_key, on routes that take none.
func noParams(args *fasthttp.Args) *apiError {
	if args.Len() == 0 {
		return nil
	}
	d := map[string]string{}
	addUnknownParams(d, args, func(string) bool { return false })
	if len(d) == 0 {
		return nil
	}
	return &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, message: "Invalid query parameters", details: d}
}

// parseListQuery reads GET /events parameters: every bad one is named in
// details. extra are further parameters the caller takes: "where" (the
// property filters, which only GET /events applies) or the admin export's
// environment.
func parseListQuery(args *fasthttp.Args, extra ...string) (storage.ListQuery, *apiError) {
	q := storage.ListQuery{Limit: 20, To: math.MaxInt64}
	d := map[string]string{}
	addUnknownParams(d, args, func(name string) bool { return slices.Contains(listParams, name) || slices.Contains(extra, name) })
	if v := args.Peek("limit"); v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 1 || n > 100 {
			d["limit"] = "must be an integer from 1 to 100"
		}
		q.Limit = n
	}
	if v := args.Peek("offset"); v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 0 {
			d["offset"] = "must be an integer >= 0"
		}
		q.Offset = n
	}
	if v := args.Peek("event"); v != nil {
		if !validName(v) {
			d["event"] = "event name must be alphanumeric with underscores only (1-128 characters)"
		}
		q.Name = string(v)
	}
	if v := args.Peek("visitor_id"); v != nil {
		if !event.ValidVisitorIDBytes(v) {
			d["visitor_id"] = event.MsgVisitorID
		}
		q.VisitorID, q.HasVisitor = string(v), true
	}
	var fromSet bool
	if v := args.Peek("from"); v != nil {
		ms, _, err := event.ParseTime(string(v))
		if err != nil {
			d["from"] = "must be an ISO 8601 date or timestamp"
		}
		q.From, fromSet = ms, true
	}
	if v := args.Peek("to"); v != nil {
		ms, dateOnly, err := event.ParseTime(string(v))
		if err != nil {
			d["to"] = "must be an ISO 8601 date or timestamp"
		} else if dateOnly {
			ms += 86_400_000 - 1 // a date-only "to" means the end of that day
		}
		q.To = ms
	}
	if slices.Contains(extra, "where") {
		if f := parseWhere(args, d); len(f) > 0 {
			q.Match = f.Match
		}
	}
	if fromSet && d["from"] == "" && d["to"] == "" && q.From > q.To {
		d["from"] = "must not be after to"
	}
	if q.From < 0 {
		q.From = 0
	}
	if len(d) > 0 {
		return q, &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, message: "Invalid query parameters", details: d}
	}
	return q, nil
}

func validName(b []byte) bool {
	if len(b) == 0 || len(b) > event.MaxNameLen {
		return false
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

var errTooLarge = errors.New("decoded body too large")

// gunzipLimited inflates a gzip body, refusing more than limit decoded bytes
// so a small bomb cannot exhaust memory.
func gunzipLimited(body []byte, limit int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > limit {
		return nil, errTooLarge
	}
	return out, nil
}

// parseWhere reads the where= conditions (repeatable, ANDed); a bad one is
// named in d under "where".
func parseWhere(args *fasthttp.Args, d map[string]string) filter.Filter {
	vals := args.PeekMulti("where")
	if len(vals) > filter.MaxConditions {
		d["where"] = "at most 10 conditions"
		return nil
	}
	var f filter.Filter
	for _, v := range vals {
		c, err := filter.Parse(string(v))
		if err != nil {
			d["where"] = err.Error()
			return nil
		}
		f = append(f, c)
	}
	return f
}
