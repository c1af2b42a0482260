package http

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine"
)

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
