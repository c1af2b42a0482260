package http

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"math"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/storage"
)

// parseListQuery reads GET /events parameters: every bad one is named in details.
func parseListQuery(args *fasthttp.Args) (storage.ListQuery, *apiError) {
	q := storage.ListQuery{Limit: 20, To: math.MaxInt64}
	d := map[string]string{}
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
