package http

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/engine/eventjson"
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
		events:      newEventCache(eventCacheBytes, eventCacheRecent),
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
	if fail == nil && sse && cur == nil && q.events() {
		// EventSource sends the id of the last event it got when it
		// reconnects, with the URL it was opened with: the header is the
		// newer resume point, so it wins over since=. A cursor ignores it
		// (the cursor's position is the resume point), and so does a
		// stream of typed messages only (nothing of theirs is replayed).
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
	var untrack func(closeConn func())
	s.streams.wg.Add(1)
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
	if err != nil { // not a WebSocket handshake: answered, nothing taken
		s.streams.wg.Done()
		release()
		return
	}
	// A valid handshake, before the 101 goes out (the handler above runs
	// only after the response was written): a client that saw it and then
	// wrote an event gets that event, a cursor created by this connection
	// starts before anything the client sends next, and a shutdown in
	// between finds the stream and closes it with 1001.
	untrack = s.trackStream(p, sub)
	if cur == nil {
		sub.subscribedAt = time.Now()
		s.eng.Subscribe(p, sub)
	} else {
		s.openCursor(p, cur)
	}
	// Everything taken above, for an upgrade that never reaches its handler.
	s.streams.pending.add(netConn, func() {
		if cur != nil {
			s.closeCursor(p, cur)
		}
		untrack(func() {})
		s.streams.wg.Done()
		release()
	})
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
	dst = eventjson.Append(dst, e, true)
	return append(dst, '}')
}
