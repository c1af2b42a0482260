package http

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/filter"
	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/storage"
)

// streamFilter selects the events a subscriber wants.
type streamFilter struct {
	events     map[string]struct{} // nil: every name
	visitor    string
	hasVisitor bool
	// where are the property conditions of GET /events (contract section
	// 13), ANDed; nil: none. whereText keeps them as sent, for subscribed.
	where     filter.Filter
	whereText []string
}

func (f *streamFilter) match(e *storage.Event) bool {
	if f.events != nil {
		if _, ok := f.events[e.Name]; !ok {
			return false
		}
	}
	if f.hasVisitor && (!e.HasVisitor || e.VisitorID != f.visitor) {
		return false
	}
	return f.where == nil || f.where.Match(e.Properties)
}

// all reports whether f lets every event through, so callers can skip match.
func (f *streamFilter) all() bool { return f.events == nil && !f.hasVisitor && f.where == nil }

// matchNotice reports whether a typed message passes f: only a visitor
// filter applies (to a goal completion's visitor); event names and
// property conditions select events, and a usage alert is about a key.
func (f *streamFilter) matchNotice(n *actors.Notice) bool {
	if !f.hasVisitor || n.Kind != actors.KindGoalCompleted {
		return true
	}
	return n.HasVisitor && n.VisitorID == f.visitor
}

func (f *streamFilter) names() []string {
	out := make([]string, 0, len(f.events))
	for n := range f.events {
		out = append(out, n)
	}
	return out
}

// streamParams are the parameters of GET /stream (cursor and ack_window
// are read by parseCursorQuery).
var streamParams = []string{"event", "visitor_id", "since", "cursor", "ack_window", "where", "kinds"}

// streamKinds is a set of message kinds a stream delivers (kinds=).
type streamKinds uint8

// The kinds of kinds=, named as webhook kinds are.
const (
	kindEvent streamKinds = 1 << iota // event.created: {"type":"event",...}
	kindGoal                          // goal.completed
	kindAlert                         // usage.alert
)

// kindOf is the bit of a kind name, 0 for an unknown one.
func kindOf(name string) streamKinds {
	switch name {
	case actors.KindEventCreated:
		return kindEvent
	case actors.KindGoalCompleted:
		return kindGoal
	case actors.KindUsageAlert:
		return kindAlert
	}
	return 0
}

// parseKinds reads kinds= (comma-separated, repeatable); absent means
// event.created only, the stream as it was before kinds existed.
func parseKinds(args *fasthttp.Args, d map[string]string) streamKinds {
	vals := args.PeekMulti("kinds")
	if len(vals) == 0 {
		return kindEvent
	}
	var k streamKinds
	for _, v := range vals {
		for _, name := range strings.Split(string(v), ",") {
			bit := kindOf(name)
			if bit == 0 {
				d["kinds"] = "unknown kind " + strconv.Quote(name) + ": must be event.created, goal.completed or usage.alert"
				return 0
			}
			k |= bit
		}
	}
	return k
}

// streamQuery is what a stream's query (and headers) ask for.
type streamQuery struct {
	filter *streamFilter
	since  *storage.ID // since=, or the Last-Event-ID header of an SSE reconnect
	kinds  streamKinds
}

// events reports whether the stream delivers events (kinds= absent, the
// default, or naming event.created).
func (q *streamQuery) events() bool { return q.kinds == 0 || q.kinds&kindEvent != 0 }

// parseStreamQuery reads event (repeatable), visitor_id, where
// (repeatable), kinds and since, and refuses a parameter /stream does not
// take; extra are further ones the caller reads (the dashboard feed's
// environment).
func parseStreamQuery(args *fasthttp.Args, extra ...string) (*streamQuery, *apiError) {
	f := &streamFilter{}
	q := &streamQuery{filter: f}
	d := map[string]string{}
	addUnknownParams(d, args, func(name string) bool { return slices.Contains(streamParams, name) || slices.Contains(extra, name) })
	for _, v := range args.PeekMulti("event") {
		if !validName(v) {
			d["event"] = "event name must be alphanumeric with underscores only (1-128 characters)"
			continue
		}
		if f.events == nil {
			f.events = make(map[string]struct{})
		}
		f.events[string(v)] = struct{}{}
	}
	if v := args.Peek("visitor_id"); v != nil {
		if !event.ValidVisitorIDBytes(v) {
			d["visitor_id"] = event.MsgVisitorID
		}
		f.visitor, f.hasVisitor = string(v), true
	}
	if w := parseWhere(args, d); len(w) > 0 {
		f.where = w
		for _, v := range args.PeekMulti("where") {
			f.whereText = append(f.whereText, string(v))
		}
	}
	q.kinds = parseKinds(args, d)
	if v := args.Peek("since"); v != nil {
		id, err := ids.ParseEvent(string(v))
		if err != nil {
			d["since"] = "must be an event id (evt_...)"
		} else {
			sid := storage.ID(id)
			q.since = &sid
		}
		if !q.events() {
			d["since"] = "needs kinds to include event.created: only events are replayed"
		}
	}
	if args.Has("cursor") && !q.events() {
		d["cursor"] = "needs kinds to include event.created: a cursor tracks events"
	}
	if len(d) > 0 {
		return nil, &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, message: "Invalid query parameters", details: d}
	}
	return q, nil
}

// wantsSSE reports whether the request asks for Server-Sent Events rather
// than a WebSocket: Accept names text/event-stream and it is no upgrade.
func wantsSSE(ctx *fasthttp.RequestCtx) bool {
	if websocket.FastHTTPIsWebSocketUpgrade(ctx) {
		return false
	}
	return bytes.Contains(bytes.ToLower(ctx.Request.Header.Peek("Accept")), []byte("text/event-stream"))
}

// lastEventID reads the Last-Event-ID header into q.since.
func lastEventID(ctx *fasthttp.RequestCtx, q *streamQuery) *apiError {
	v := ctx.Request.Header.Peek("Last-Event-ID")
	if len(v) == 0 {
		return nil
	}
	id, err := ids.ParseEvent(string(v))
	if err != nil {
		return &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, message: "Invalid Last-Event-ID header",
			details: map[string]string{"Last-Event-ID": "must be an event id (evt_...)"}}
	}
	sid := storage.ID(id)
	q.since = &sid
	return nil
}
