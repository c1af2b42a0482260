package http

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/filter"
	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/engine/metrics"
	"github.com/eventd/eventd/engine/ratelimit"
	"github.com/eventd/eventd/storage"
)

// Stream settings of the contract (section 6); tests shorten the timers.
const (
	DefaultStreamPing  = 30 * time.Second
	DefaultStreamPong  = 60 * time.Second
	DefaultStreamQueue = 4096
	// DefaultStreamLinger is serve's --stream-linger: how long a subscriber's
	// writer waits after the first queued commit for more before its write,
	// so that at high rates one write(2) carries several commits. With 100
	// subscribers it cut server CPU per ingested event from 102-107 to
	// 62-66 µs and left delivery p99 at 5,000 events/s at 16-17 ms (docs/benchmarks.md).
	DefaultStreamLinger = 5 * time.Millisecond
	maxClientMessage    = 4096
	closeSlowConsumer   = 4008
	closeRevoked        = 4001 // the key was revoked or its project deleted (contract section 11)
	replayChunk         = 1000
	// replaySlack covers ids made before a subscription but committed after
	// it: such an event can arrive both from the replay and live.
	replaySlack = time.Minute
	writeWait   = 30 * time.Second
)

// streams tracks live subscribers so shutdown can flush and close them.
type streams struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
	wg   sync.WaitGroup
	// pending are the upgrades whose 101 is not written yet.
	pending pendingUpgrades
	// events are the events cursor connections read lately, decoded and
	// encoded once for all of them.
	events *eventCache

	subscribers *metrics.Gauge
	sent        *metrics.Counter
	drops       *metrics.Counter
	slowCloses  *metrics.Counter
	revokes     *metrics.Counter
	// cursor counts acknowledgements and redeliveries (stream_cursor.go);
	// cursorExpired the connections closed with 4010.
	cursor        *cursorMetrics
	cursorExpired *metrics.Counter
	// sse counts the SSE responses being written: Server.Shutdown stops
	// waiting for the public listener's connections once only they remain
	// (they end with the others at closeAll, after the last commit).
	sse atomic.Int64
	// noticeDrops counts goal.completed and usage.alert messages a cursor
	// connection had no room for (they are live only; docs/stream.md).
	noticeDrops *metrics.Counter
}

func newStreams(reg *metrics.Registry) *streams {
	st := &streams{
		subs:        make(map[*subscriber]struct{}),
		events:      newEventCache(eventCacheSize),
		subscribers: reg.Gauge("eventd_stream_subscribers", "Open /stream connections.", ""),
		sent:        reg.Counter("eventd_stream_messages_sent_total", "Event messages written to /stream clients.", ""),
		drops:       reg.Counter("eventd_stream_drops_total", "Events not queued because a subscriber's queue was full.", ""),
		slowCloses:  reg.Counter("eventd_stream_slow_consumer_closes_total", "Subscribers closed with 4008 slow_consumer.", ""),
		revokes:     reg.Counter("eventd_stream_revoked_closes_total", "Subscribers closed with 4001 because their key was revoked or their project deleted.", ""),
		cursor:      newCursorMetrics(reg),
		cursorExpired: reg.Counter("eventd_cursor_expired_closes_total",
			"Cursor connections closed with 4010 because a retention sweep passed their position.", ""),
		noticeDrops: reg.Counter("eventd_stream_notices_dropped_total",
			"goal.completed and usage.alert messages not queued for a cursor connection that had no room for them.", ""),
	}
	// The broadcaster's fan-out backlog: events offered and not yet written,
	// summed over subscribers at scrape time (Offer pays nothing more).
	reg.GaugeFunc("eventd_stream_queued_events", "Events queued for /stream subscribers and not yet written, over all subscribers.", "", st.queuedEvents)
	return st
}

// queuedEvents sums the subscribers' queues.
func (st *streams) queuedEvents() float64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	var n int64
	for sub := range st.subs {
		n += sub.queued.Load()
	}
	return float64(n)
}

// revoke closes, with 4001 and the reason, the streams of the keys (or the
// project) that r ends. The engine calls it once they answer 401, so a
// stream registered after this scan sees Revoked itself (runStream).
func (st *streams) revoke(r engine.Revocation) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for sub := range st.subs {
		if r.Matches(sub.p) {
			sub.end(closeFrame{code: closeRevoked, reason: r.Reason})
		}
	}
}

// closeAll tells every subscriber to send what it holds and close with 1001,
// then waits (bounded) for them. It runs after the last commit reached the broadcaster.
func (st *streams) closeAll(timeout time.Duration) {
	st.mu.Lock()
	for sub := range st.subs {
		sub.end(closeGoingAway)
	}
	st.mu.Unlock()
	done := make(chan struct{})
	go func() { st.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
	}
}

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

// subscriber is one /stream connection: a bounded queue filled by the
// broadcaster (never blocking it) and drained by its own writer.
type subscriber struct {
	st     *streams
	p      *engine.Principal
	filter atomic.Pointer[streamFilter]
	// queue holds whole runs (one commit's events of the dataset): one
	// channel send per commit instead of one per event. Its bound is in
	// events, as the contract counts them: queued is the number of matching
	// events in it, limit the --stream-queue size. The channel has room
	// for limit items, so a send never fails before queued reaches limit.
	queue    chan streamItem
	queued   atomic.Int64
	limit    int64
	control  chan wsFrame
	overflow chan struct{}
	shutdown chan struct{}
	once     sync.Once
	closing  closeFrame // set once, before shutdown is closed
	overOnce sync.Once
	// cur is set on a named cursor's connection (stream_cursor.go): its
	// events come from storage, a commit only wakes it.
	cur *cursorConn
	// kinds are the message kinds the client asked for (kinds=), fixed
	// for the connection.
	kinds streamKinds
	// subscribedAt is set when the subscriber was registered with the
	// broadcaster before its WebSocket upgrade (zero: runStream does it).
	subscribedAt time.Time
	// notices holds a cursor connection's typed messages (a plain stream
	// queues them with its events, in queue). They are live only, not in
	// the window, so a full channel drops them rather than block the
	// broadcaster or close a consumer that cursors promise never to cut off.
	notices chan *actors.Notice
}

// closeFrame is how a subscriber told to end says goodbye.
type closeFrame struct {
	code   int
	reason string
	drain  bool // send the queued events first
}

// closeGoingAway is the goodbye of a server shutdown or an ended dashboard
// session: whatever is already queued is still sent.
var closeGoingAway = closeFrame{code: websocket.CloseGoingAway, reason: "server shutting down", drain: true}

// streamItem is one run queued for a subscriber, with the filter it was
// offered under (the one in force at commit time, as when events were queued
// one by one); f is nil when that filter lets every event through. An item
// with a notice instead carries one typed message (counted as one event).
type streamItem struct {
	run    *actors.Run
	f      *streamFilter
	notice *actors.Notice
}

// Offer queues the run's matching events without blocking; when they do not
// all fit in the queue, none is queued, the subscriber is marked slow and is
// closed with 4008. Only the broadcaster calls Offer, so queued cannot grow
// between the check and the Add.
func (sub *subscriber) Offer(run *actors.Run) {
	if sub.kinds&kindEvent == 0 {
		return
	}
	if sub.cur != nil {
		sub.cur.poke()
		return
	}
	f := sub.filter.Load()
	n := int64(len(run.Events))
	if f.all() {
		f = nil
	} else {
		n = 0
		for i := range run.Events {
			if f.match(run.Events[i].Event) {
				n++
			}
		}
	}
	if n == 0 {
		return
	}
	if sub.queued.Load()+n > sub.limit {
		sub.overflowed(n)
		return
	}
	sub.queued.Add(n)
	select {
	case sub.queue <- streamItem{run: run, f: f}:
	default: // cannot happen (room for limit items of at least one event each); be safe anyway
		sub.queued.Add(-n)
		sub.overflowed(n)
	}
}

// Notify queues a typed message the client asked for, without blocking:
// on a plain stream in the event queue, under the same bound (a full queue
// is a slow consumer, as for events); on a cursor connection in its own
// channel, dropped when full. Only the broadcaster calls Notify.
func (sub *subscriber) Notify(n *actors.Notice) {
	if sub.kinds&kindOf(n.Kind) == 0 || !sub.filter.Load().matchNotice(n) {
		return
	}
	if sub.cur != nil {
		select {
		case sub.notices <- n:
		default:
			sub.st.noticeDrops.Inc()
		}
		return
	}
	if sub.queued.Load()+1 > sub.limit {
		sub.overflowed(1)
		return
	}
	sub.queued.Add(1)
	select {
	case sub.queue <- streamItem{notice: n}:
	default:
		sub.queued.Add(-1)
		sub.overflowed(1)
	}
}

// overflowed books n events that did not fit and tells the writer to close.
func (sub *subscriber) overflowed(n int64) {
	sub.st.drops.Add(uint64(n))
	sub.overOnce.Do(func() { close(sub.overflow) })
}

// end tells the writer to close the connection with c; the first call wins.
func (sub *subscriber) end(c closeFrame) {
	sub.once.Do(func() {
		sub.closing = c
		close(sub.shutdown)
	})
}

// ended reports whether end was called.
func (sub *subscriber) ended() bool {
	select {
	case <-sub.shutdown:
		return true
	default:
		return false
	}
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
		if q.kinds != 0 && q.kinds&kindEvent == 0 {
			d["since"] = "needs kinds to include event.created: only events are replayed"
		}
	}
	if args.Has("cursor") && q.kinds != 0 && q.kinds&kindEvent == 0 {
		d["cursor"] = "needs kinds to include event.created: a cursor tracks events"
	}
	if len(d) > 0 {
		return nil, &apiError{status: fasthttp.StatusBadRequest, code: codeBadRequest, message: "Invalid query parameters", details: d}
	}
	return q, nil
}

func (s *Server) handleStream(ctx *fasthttp.RequestCtx) {
	p, fail := s.authenticateRead(ctx)
	if p == nil {
		return
	}
	var q *streamQuery
	var cur *cursorConn
	sse := wantsSSE(ctx)
	if fail == nil {
		q, fail = parseStreamQuery(ctx.QueryArgs())
	}
	if fail == nil {
		var name string
		var window int
		if name, window, fail = parseCursorQuery(ctx.QueryArgs()); name != "" && fail == nil {
			cur = &cursorConn{name: name, window: window, wake: make(chan struct{}, 1)}
		}
	}
	if fail == nil && sse && cur == nil {
		// EventSource sends the id of the last event it got when it
		// reconnects, with the URL it was opened with: the header is the
		// newer resume point, so it wins over since=. A cursor ignores it:
		// the cursor's position is the resume point.
		fail = lastEventID(ctx, q)
	}
	if !s.admit(ctx, p, ratelimit.Standard) {
		return
	}
	if fail != nil {
		writeError(ctx, fail)
		return
	}
	if !p.AcquireStream() {
		writeTooManyStreams(ctx, "Too many open streams for this key on the "+p.Plan()+" plan")
		return
	}
	if sse {
		s.serveSSE(ctx, p, q, cur, p.ReleaseStream)
		return
	}
	s.upgradeStream(ctx, p, q, cur, p.ReleaseStream, nil)
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

// writeTooManyStreams answers a connection over a stream cap.
func writeTooManyStreams(ctx *fasthttp.RequestCtx, message string) {
	ctx.Response.Header.Set("Retry-After", "5")
	ctx.SetStatusCode(fasthttp.StatusTooManyRequests)
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(appendErrorBody(nil, newError(fasthttp.StatusTooManyRequests, codeRateLimited, message), 5))
}

// newSubscriber is the subscriber of an authorised stream request.
func (s *Server) newSubscriber(p *engine.Principal, q *streamQuery, cur *cursorConn) *subscriber {
	sub := &subscriber{
		st:       s.streams,
		p:        p,
		queue:    make(chan streamItem, s.streamQueue),
		limit:    int64(s.streamQueue),
		control:  make(chan wsFrame, 8),
		overflow: make(chan struct{}),
		shutdown: make(chan struct{}),
		cur:      cur,
		kinds:    q.kinds,
	}
	if cur != nil {
		cur.sub = sub
		sub.queue = nil // never used: a cursor reads from storage
		sub.notices = make(chan *actors.Notice, cursorNotices)
	}
	sub.filter.Store(q.filter)
	return sub
}

// cursorNotices bounds the typed messages waiting on a cursor connection.
const cursorNotices = 1024

// streamConn is one client connection of a stream, whatever carries it.
type streamConn struct {
	out streamOut
	// read starts the WebSocket's reader goroutine and returns the channel
	// closed when it has ended and the func that stops it and waits for it;
	// SSE has no client messages and no reader.
	read func(sub *subscriber) (done <-chan struct{}, stop func())
}

// serve runs a stream on sc until it ends.
func (s *Server) serve(sc *streamConn, p *engine.Principal, sub *subscriber, since *storage.ID) {
	if sub.cur != nil {
		s.runCursor(sc, p, sub)
		return
	}
	s.runStream(sc, p, sub, since)
}

// upgradeStream upgrades an authorised request and serves the stream until
// it closes; release runs once it has ended (or the upgrade failed). watch,
// if not nil, runs beside the stream and its returned func at the end.
func (s *Server) upgradeStream(ctx *fasthttp.RequestCtx, p *engine.Principal, q *streamQuery,
	cur *cursorConn, release func(), watch func(*subscriber) (stop func())) {
	up := websocket.FastHTTPUpgrader{
		ReadBufferSize:  1024,
		WriteBufferSize: 4096,
		// Callers check origins (the project's, or the admin listener's own)
		// before the upgrade.
		CheckOrigin: func(*fasthttp.RequestCtx) bool { return true },
		Error: func(ctx *fasthttp.RequestCtx, status int, reason error) {
			writeError(ctx, newError(status, codeBadRequest, "Expected a WebSocket upgrade (or Accept: text/event-stream): "+reason.Error()))
		},
	}
	sub := s.newSubscriber(p, q, cur)
	// Before the 101 goes out (the handler below runs only after the
	// response was written): a client that saw it and then wrote an event
	// gets that event, a cursor created by this connection starts before
	// anything the client sends next, and a shutdown in between finds the
	// stream and closes it with 1001.
	untrack := s.trackStream(p, sub)
	if cur == nil {
		sub.subscribedAt = time.Now()
		s.eng.Subscribe(p, sub)
	} else {
		s.openCursor(p, cur)
	}
	s.streams.wg.Add(1)
	// Everything taken above, for an upgrade that never reaches its handler.
	undo := func() {
		if cur != nil {
			s.closeCursor(p, cur)
		}
		untrack(func() {})
		s.streams.wg.Done()
		release()
	}
	netConn := ctx.Conn()
	err := up.Upgrade(ctx, func(conn *websocket.Conn) {
		if !s.streams.pending.claim(netConn) {
			return // released already: the connection closed first
		}
		defer s.streams.wg.Done()
		defer release()
		if watch != nil {
			defer watch(sub)()
		}
		defer untrack(func() { _ = conn.Close() })
		sc := &streamConn{
			out: newWSOut(conn.NetConn()),
			read: func(sub *subscriber) (<-chan struct{}, func()) {
				rd := &streamReader{conn: conn, done: make(chan struct{})}
				go s.readStream(rd, sub)
				// fasthttp hands the connection's buffered reader (and its
				// hijack wrapper) to the next connection as soon as this
				// handler returns, so the reader goroutine must be gone by
				// then, or it reads (and corrupts) another client's request.
				return rd.done, rd.stop
			},
		}
		s.serve(sc, p, sub, q.since)
	})
	if err != nil {
		undo()
		return
	}
	s.streams.pending.add(netConn, undo)
}

// trackStream counts a stream among the open ones (so shutdown and
// revocation find it) and returns what untracks it and closes its
// connection.
func (s *Server) trackStream(p *engine.Principal, sub *subscriber) (untrack func(closeConn func())) {
	st := s.streams
	st.mu.Lock()
	st.subs[sub] = struct{}{}
	st.mu.Unlock()
	st.subscribers.Add(1)
	// A revocation that ran between the authentication and the line above
	// did not see this stream; the principal remembers it.
	if reason := p.Revoked(); reason != "" {
		sub.end(closeFrame{code: closeRevoked, reason: reason})
	}
	return func(closeConn func()) {
		s.eng.Unsubscribe(p, sub)
		st.mu.Lock()
		delete(st.subs, sub)
		st.mu.Unlock()
		st.subscribers.Add(-1)
		closeConn()
	}
}

// runStream serves one stream (without a cursor) until it closes.
func (s *Server) runStream(sc *streamConn, p *engine.Principal, sub *subscriber, since *storage.ID) {
	st := s.streams
	subscribedAt := sub.subscribedAt
	if subscribedAt.IsZero() {
		subscribedAt = time.Now()
		s.eng.Subscribe(p, sub)
	}

	// Messages go through one buffer straight onto the connection: one
	// write(2) per drain of the queue instead of one per event, which is
	// what bounds fan-out to many subscribers. Only this goroutine writes;
	// the reader hands pongs and close replies over through sub.control.
	out := sc.out
	out.opened()
	if out.flush() != nil {
		return
	}
	var lastID storage.ID
	var replayed map[storage.ID]struct{}
	buf := make([]byte, 0, 512)
	add := func(e *storage.Event) { // replay: events read for this subscriber alone
		buf = appendStreamPayload(buf[:0], e)
		out.event(e.ID, buf)
		lastID = e.ID
		st.sent.Inc()
	}
	if since != nil {
		cutoff := subscribedAt.Add(-replaySlack).UnixMilli()
		replayed = make(map[storage.ID]struct{})
		cursor := *since
		for !sub.ended() { // a revocation must not wait for a long replay
			n := 0
			f := sub.filter.Load()
			err := s.eng.EventsAfter(p, cursor, replayChunk, func(e *storage.Event) bool {
				n++
				cursor = e.ID
				if ids.Time(e.ID) >= cutoff {
					replayed[e.ID] = struct{}{}
				}
				if f.match(e) {
					add(e)
				}
				return true
			})
			if err != nil || out.flush() != nil {
				return
			}
			if n < replayChunk {
				break
			}
		}
	}
	// addRun frames the run's events that match the filter it was offered
	// under, with the payloads shared by every subscriber of the dataset
	// (encoded by whichever writer gets there first), or the item's typed
	// message, and returns how many messages it added.
	addRun := func(it streamItem) int {
		if it.notice != nil {
			out.message(it.notice.Kind, it.notice.Payload)
			sub.queued.Add(-1)
			return 1
		}
		evs := it.run.Events
		payloads := it.run.Payloads(appendStreamPayload)
		var matched, framed int64
		for i := range evs {
			e := evs[i].Event
			if it.f != nil && !it.f.match(e) {
				continue
			}
			matched++
			if replayed != nil {
				if _, dup := replayed[e.ID]; dup {
					continue
				}
			}
			out.event(e.ID, payloads[i])
			lastID = e.ID
			framed++
		}
		sub.queued.Add(-matched)
		st.sent.Add(uint64(framed))
		return int(framed)
	}
	// drain adds what is queued now (whole runs, about maxFramesPerWrite
	// events at most, so pings and control frames are not starved) after it
	// and returns how many frames it added.
	drain := func(it streamItem) int {
		n := addRun(it)
		for n < maxFramesPerWrite {
			select {
			case it = <-sub.queue:
				n += addRun(it)
			default:
				return n
			}
		}
		return n
	}

	readerDone, stopReader := sc.read(sub)
	defer stopReader()
	ping := time.NewTicker(s.streamPing)
	defer ping.Stop()
	for {
		select {
		case it := <-sub.queue:
			if drain(it) < maxFramesPerWrite && s.streamLinger > 0 {
				// Let more commits queue up, then send them in the same
				// write; a write that is full already goes at once.
				time.Sleep(s.streamLinger)
				select {
				case it := <-sub.queue:
					drain(it)
				default:
				}
			}
		case f := <-sub.control:
			out.control(f)
		case <-ping.C:
			out.ping()
		case <-sub.overflow:
			st.slowCloses.Inc()
			msg := []byte(`{"type":"error","error":"slow_consumer","message":"The subscriber's queue overflowed; reconnect with since=last_id","last_id":`)
			if lastID == (storage.ID{}) {
				msg = append(msg, "null"...)
			} else {
				msg = append(append(append(msg, '"'), ids.AppendEvent(nil, lastID)...), '"')
			}
			msg = append(msg, '}')
			out.goodbye(closeSlowConsumer, "slow consumer", msg)
			_ = out.flush()
			return
		case <-sub.shutdown:
			// On shutdown everything committed before it is already queued:
			// send it, then say goodbye. A revoked key gets nothing more.
			c := sub.closing
			for c.drain {
				select {
				case it := <-sub.queue:
					drain(it)
					continue
				default:
				}
				break
			}
			if c.code == closeRevoked {
				st.revokes.Inc()
			}
			out.goodbye(c.code, c.reason, nil)
			_ = out.flush()
			return
		case <-readerDone:
			return
		}
		if out.flush() != nil {
			return
		}
	}
}

// maxFramesPerWrite bounds how many queued events one write carries; a run
// is never split, so one write may carry a whole large commit more.
const maxFramesPerWrite = 256

// appendStreamPayload appends the text of an event message,
// {"type":"event","data":{...}}: the live path encodes it once per commit
// for all subscribers (actors.Run.Payloads), the replay per subscriber.
func appendStreamPayload(dst []byte, e *storage.Event) []byte {
	dst = append(dst, `{"type":"event","data":`...)
	dst = appendEvent(dst, e, true)
	return append(dst, '}')
}

// wsFrame is a frame the reader asks the writer to send.
type wsFrame struct {
	op      int
	payload []byte
}

// frameWriter writes unmasked server frames (RFC 6455 section 5.2) into a
// buffer flushed with one write and one deadline.
type frameWriter struct {
	conn net.Conn
	buf  []byte
}

func newFrameWriter(conn net.Conn) *frameWriter {
	return &frameWriter{conn: conn, buf: make([]byte, 0, 64<<10)}
}

func (w *frameWriter) frame(op int, payload []byte) {
	w.buf = append(w.buf, 0x80|byte(op)) // FIN, no extensions
	switch n := len(payload); {
	case n < 126:
		w.buf = append(w.buf, byte(n))
	case n <= 0xffff:
		w.buf = append(w.buf, 126, byte(n>>8), byte(n))
	default:
		w.buf = append(w.buf, 127)
		w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(n))
	}
	w.buf = append(w.buf, payload...)
}

func (w *frameWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_ = w.conn.SetWriteDeadline(time.Now().Add(writeWait))
	_, err := w.conn.Write(w.buf)
	if cap(w.buf) > 1<<20 {
		w.buf = make([]byte, 0, 64<<10) // do not keep a burst's buffer forever
	} else {
		w.buf = w.buf[:0]
	}
	return err
}

// readStream handles client messages (subscribe) and pongs; it ends the
// connection when nothing, not even a pong, arrives within the pong wait.
func (s *Server) readStream(rd *streamReader, sub *subscriber) {
	defer close(rd.done)
	conn := rd.conn
	conn.SetReadLimit(maxClientMessage)
	if rd.extend(s.streamPong) != nil {
		return
	}
	conn.SetPongHandler(func(string) error { return rd.extend(s.streamPong) })
	// The writer goroutine owns the connection's output: answer pings and
	// closes through it instead of gorilla's default handlers, which write
	// themselves.
	conn.SetPingHandler(func(data string) error {
		select {
		case sub.control <- wsFrame{websocket.PongMessage, []byte(data)}:
		default:
		}
		return nil
	})
	conn.SetCloseHandler(func(code int, _ string) error {
		select {
		case sub.control <- wsFrame{websocket.CloseMessage, websocket.FormatCloseMessage(code, "")}:
		default:
		}
		return nil
	})
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil || rd.extend(s.streamPong) != nil {
			return
		}
		var reply []byte
		if sub.cur != nil {
			var ack bool
			if reply, ack = handleCursorMessage(sub, msg); ack && reply == nil {
				continue // an accepted ack needs no answer
			}
		}
		if reply == nil {
			reply = handleClientMessage(sub, msg)
		}
		select {
		case sub.control <- wsFrame{websocket.TextMessage, reply}:
		default: // a client flooding messages without reading loses replies, not the server
		}
	}
}

// streamReader is the reader goroutine's side of a connection: its read
// deadline, which stop sets in the past for good to end the goroutine.
// Closing does not do it: a hijacked fasthttp connection's Close is a no-op
// until the handler has returned.
type streamReader struct {
	conn    *websocket.Conn
	done    chan struct{} // closed when the goroutine has returned
	mu      sync.Mutex
	stopped bool
}

var errStreamStopped = errors.New("stream stopped")

// extend moves the read deadline d ahead, unless stop has run.
func (rd *streamReader) extend(d time.Duration) error {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.stopped {
		return errStreamStopped
	}
	return rd.conn.SetReadDeadline(time.Now().Add(d))
}

// stop ends a blocked read at once and waits for the goroutine to return.
func (rd *streamReader) stop() {
	rd.mu.Lock()
	rd.stopped = true
	_ = rd.conn.SetReadDeadline(time.Unix(1, 0))
	rd.mu.Unlock()
	<-rd.done
}

// clientMessage is what a client may send.
type clientMessage struct {
	Type      string          `json:"type"`
	Event     json.RawMessage `json:"event"`
	VisitorID *string         `json:"visitor_id"`
	Where     []string        `json:"where"`
}

func handleClientMessage(sub *subscriber, msg []byte) []byte {
	var m clientMessage
	bad := func(text string) []byte {
		return []byte(`{"type":"error","error":"bad_request","message":` + strconv.Quote(text) + `}`)
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return bad("message must be a JSON object")
	}
	if m.Type != "subscribe" {
		return bad(`unknown message type; send {"type":"subscribe","event":[...],"visitor_id":"..."}`)
	}
	f := &streamFilter{}
	if len(m.Event) > 0 && string(m.Event) != "null" {
		var names []string
		if err := json.Unmarshal(m.Event, &names); err != nil {
			var one string
			if json.Unmarshal(m.Event, &one) != nil {
				return bad("event must be an array of event names")
			}
			names = []string{one}
		}
		f.events = make(map[string]struct{}, len(names))
		for _, n := range names {
			if !validName([]byte(n)) {
				return bad("event name must be alphanumeric with underscores only")
			}
			f.events[n] = struct{}{}
		}
	}
	if m.VisitorID != nil {
		if !event.ValidVisitorID(*m.VisitorID) {
			// The same rule and words as the query parameter; the filter stays as it was.
			return []byte(`{"type":"error","error":"bad_request","message":"visitor_id ` + event.MsgVisitorID +
				`","details":{"visitor_id":"` + event.MsgVisitorID + `"}}`)
		}
		f.visitor, f.hasVisitor = *m.VisitorID, true
	}
	if len(m.Where) > 0 {
		// The rules and words of the where= parameter (parseWhere).
		msg := ""
		if len(m.Where) > filter.MaxConditions {
			msg = "at most 10 conditions"
		}
		for _, w := range m.Where {
			if msg != "" {
				break
			}
			c, err := filter.Parse(w)
			if err != nil {
				msg = err.Error()
				break
			}
			f.where = append(f.where, c)
		}
		if msg != "" {
			b := []byte(`{"type":"error","error":"bad_request","message":`)
			b = strconv.AppendQuote(b, "where "+msg)
			b = append(b, `,"details":{"where":`...)
			b = strconv.AppendQuote(b, msg)
			return append(b, "}}"...)
		}
		f.whereText = m.Where
	}
	sub.filter.Store(f)
	out := map[string]any{"type": "subscribed", "event": f.names(), "visitor_id": nil, "where": f.whereText}
	if f.events == nil {
		out["event"] = nil
	}
	if f.hasVisitor {
		out["visitor_id"] = f.visitor
	}
	b, _ := json.Marshal(out)
	return b
}
