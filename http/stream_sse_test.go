package http

import (
	"bufio"
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/storage"
)

// sseFrames runs add on an sseOut and returns what one flush wrote.
func sseFrames(t *testing.T, add func(o *sseOut)) string {
	t.Helper()
	var body bytes.Buffer
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	o := newSSEOut(bufio.NewWriter(&body), server)
	add(o)
	if err := o.flush(); err != nil {
		t.Fatal(err)
	}
	return body.String()
}

func TestSSEFraming(t *testing.T) {
	var id storage.ID
	id[0], id[15] = 1, 7
	evt := ids.FormatEvent(id)
	cases := []struct {
		name string
		add  func(o *sseOut)
		want string
	}{
		{"opened", func(o *sseOut) { o.opened() }, "retry: 1000\n\n"},
		{"event", func(o *sseOut) { o.event(id, []byte(`{"type":"event","data":{}}`)) },
			"id: " + evt + "\nevent: event\ndata: {\"type\":\"event\",\"data\":{}}\n\n"},
		{"typed message has no id", func(o *sseOut) { o.message("goal.completed", []byte(`{"type":"goal.completed"}`)) },
			"event: goal.completed\ndata: {\"type\":\"goal.completed\"}\n\n"},
		{"line breaks in JSON whitespace stay on one data line", func(o *sseOut) { o.message("x", []byte("{\"a\":\r\n1}")) },
			"event: x\ndata: {\"a\":  1}\n\n"},
		{"ping", func(o *sseOut) { o.ping() }, ": ping\n\n"},
		{"control frames are WebSocket only", func(o *sseOut) { o.control(wsFrame{op: 10}) }, ""},
		{"goodbye from a close code", func(o *sseOut) { o.goodbye(4009, "cursor taken over", nil) },
			"event: error\ndata: {\"type\":\"error\",\"error\":\"cursor_taken_over\",\"code\":4009,\"message\":\"cursor taken over\"}\n\n"},
		{"goodbye with its message", func(o *sseOut) {
			o.goodbye(4008, "slow consumer", []byte(`{"type":"error","error":"slow_consumer","last_id":null}`))
		}, "event: error\ndata: {\"type\":\"error\",\"error\":\"slow_consumer\",\"last_id\":null,\"code\":4008}\n\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := sseFrames(t, tc.add); got != tc.want {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestParseStreamQuery(t *testing.T) {
	cases := []struct {
		query      string
		kinds      streamKinds
		where      int
		bad        string // the details key of a refusal
		badContain string
	}{
		{"", kindEvent, 0, "", ""},
		{"kinds=event.created", kindEvent, 0, "", ""},
		{"kinds=goal.completed,usage.alert", kindGoal | kindAlert, 0, "", ""},
		{"kinds=goal.completed&kinds=event.created", kindGoal | kindEvent, 0, "", ""},
		{"kinds=event.created,bogus", 0, 0, "kinds", `"bogus"`},
		{"kinds=", 0, 0, "kinds", `""`},
		{"where=plan:eq:pro&where=n:gt:3", kindEvent, 2, "", ""},
		{"where=plan:like:pro", 0, 0, "where", "operator"},
		{"since=evt_01M7ZXYKBC0YQVV787K3YZYKF1&kinds=goal.completed", 0, 0, "since", "event.created"},
		{"cursor=c&kinds=usage.alert", 0, 0, "cursor", "event.created"},
		{"cursor=c&kinds=usage.alert,event.created", kindEvent | kindAlert, 0, "", ""},
		{"nope=1", 0, 0, "nope", ""},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			var args fasthttp.Args
			args.Parse(tc.query)
			q, fail := parseStreamQuery(&args)
			if tc.bad != "" {
				if fail == nil || !strings.Contains(fail.details[tc.bad], tc.badContain) || fail.details[tc.bad] == "" {
					t.Fatalf("got %+v, want a refusal naming %s (%q)", fail, tc.bad, tc.badContain)
				}
				return
			}
			if fail != nil {
				t.Fatalf("refused: %+v", fail)
			}
			if q.kinds != tc.kinds || len(q.filter.where) != tc.where || len(q.filter.whereText) != tc.where {
				t.Fatalf("kinds %b where %d, want %b %d", q.kinds, len(q.filter.where), tc.kinds, tc.where)
			}
		})
	}
}

func TestStreamFilterWhereAndNotices(t *testing.T) {
	var args fasthttp.Args
	args.Parse("where=plan:eq:pro&visitor_id=v_1")
	q, fail := parseStreamQuery(&args)
	if fail != nil {
		t.Fatal(fail)
	}
	f := q.filter
	ev := func(visitor, props string) *storage.Event {
		return &storage.Event{Name: "e", VisitorID: visitor, HasVisitor: visitor != "", Properties: []byte(props)}
	}
	for _, tc := range []struct {
		e    *storage.Event
		want bool
	}{
		{ev("v_1", `{"plan":"pro"}`), true},
		{ev("v_1", `{"plan":"free"}`), false},
		{ev("v_2", `{"plan":"pro"}`), false},
		{ev("", `{"plan":"pro"}`), false},
	} {
		if got := f.match(tc.e); got != tc.want {
			t.Errorf("match(%s %s) = %v", tc.e.VisitorID, tc.e.Properties, got)
		}
	}
	if f.all() {
		t.Error("a where filter does not let everything through")
	}
	for _, tc := range []struct {
		n    actors.Notice
		want bool
	}{
		{actors.Notice{Kind: actors.KindGoalCompleted, VisitorID: "v_1", HasVisitor: true}, true},
		{actors.Notice{Kind: actors.KindGoalCompleted, VisitorID: "v_2", HasVisitor: true}, false},
		{actors.Notice{Kind: actors.KindGoalCompleted}, false},
		{actors.Notice{Kind: actors.KindUsageAlert}, true}, // about a key, not a visitor
	} {
		if got := f.matchNotice(&tc.n); got != tc.want {
			t.Errorf("matchNotice(%+v) = %v", tc.n, got)
		}
	}
}

// TestNotifyBounds: a plain stream queues typed messages under the event
// bound (overflow is a slow consumer); a cursor connection drops them when
// its channel is full; kinds not asked for are not queued.
func TestNotifyBounds(t *testing.T) {
	n := &actors.Notice{Kind: actors.KindGoalCompleted, Payload: []byte(`{}`)}
	sub := newTestSubscriber(2, &streamFilter{})
	sub.Notify(n) // kinds: events only
	if sub.queued.Load() != 0 {
		t.Fatal("a kind not asked for was queued")
	}
	sub.kinds |= kindGoal
	sub.Notify(n)
	sub.Notify(n)
	if sub.queued.Load() != 2 || overflowed(sub) {
		t.Fatalf("queued %d overflow %v, want 2 false", sub.queued.Load(), overflowed(sub))
	}
	sub.Notify(n)
	if !overflowed(sub) {
		t.Fatal("a typed message over the bound did not mark the subscriber slow")
	}

	cur := newTestSubscriber(2, &streamFilter{})
	cur.kinds |= kindGoal
	cur.cur = &cursorConn{}
	cur.notices = make(chan *actors.Notice, 1)
	cur.Notify(n)
	cur.Notify(n)
	if len(cur.notices) != 1 || overflowed(cur) || cur.st.noticeDrops.Value() != 1 {
		t.Fatalf("cursor: %d queued, overflow %v, drops %v; want 1, false, 1", len(cur.notices), overflowed(cur), cur.st.noticeDrops.Value())
	}
}

// TestCursorAckPassesFilteredEvents: once everything sent is acknowledged,
// the position moves to what was scanned (events filtered out need no ack);
// while something sent is unacknowledged, it stays at the ack.
func TestCursorAckPassesFilteredEvents(t *testing.T) {
	id := func(b byte) storage.ID { var x storage.ID; x[0], x[15] = 1, b; return x }
	c := &cursorConn{window: 10, wake: make(chan struct{}, 1)}
	c.unacked = []storage.ID{id(2), id(4)} // 3 and 5 were filtered out
	c.scanned = id(5)
	if msg := c.ackError(ids.FormatEvent(id(2))); msg != "" {
		t.Fatal(msg)
	}
	if c.position != id(2) {
		t.Fatalf("position %x, want the ack (4 is not acknowledged)", c.position)
	}
	if msg := c.ackError(ids.FormatEvent(id(4))); msg != "" {
		t.Fatal(msg)
	}
	if c.position != id(5) || !c.dirty {
		t.Fatalf("position %x, want the scan position 5", c.position)
	}
	if msg := c.ackError(ids.FormatEvent(id(6))); msg == "" {
		t.Fatal("an ack after the scan position was accepted")
	}
}
