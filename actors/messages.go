package actors

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/ratelimit"
	"github.com/eventd/eventd/storage"
)

// Request is what an HTTP handler sends to a key actor: count the request in
// its bucket and, when Write is set and the request is admitted, store events.
type Request struct {
	Kind     ratelimit.Kind
	Now      time.Time
	Write    *Write // nil: admission only
	Snapshot bool   // fill Reply.Buckets with every bucket's windows (GET /rate-limit)
	Reply    chan *Reply

	// rep and c are this request's reply and the commit its write becomes,
	// allocated with it: the key actor and the shard then allocate neither
	// for a single-event write, and the engine pools the three together
	// (Reply.Request leads back here). They belong to whoever holds the
	// request: the key actor, then the shard, then the receiver of rep.
	rep Reply
	c   commit
}

// Write is a set of events for one dataset, stored atomically.
type Write struct {
	Dataset    uint32
	ReceivedAt int64 // Unix ms, becomes created_at
	Events     []Pending
	// Admitted: an earlier admission-only request already counted this
	// request (its key was over the limit when the headers arrived), so the
	// actor stores it without counting it again.
	Admitted bool
}

// singleWrite is a one-event Write and its event, allocated together.
type singleWrite struct {
	w Write
	p [1]Pending
}

// SingleWrite is a Write of one event made with one allocation instead of
// two (the Write and its Events array): the common POST /events. The shard
// and the broadcaster keep pointers into it after the reply, so it is never
// reused.
func SingleWrite(dataset uint32, receivedAt int64, p Pending, admitted bool) *Write {
	s := &singleWrite{p: [1]Pending{p}}
	s.w = Write{Dataset: dataset, ReceivedAt: receivedAt, Events: s.p[:], Admitted: admitted}
	return &s.w
}

// Pending is one event to store and its idempotency key, if any.
type Pending struct {
	Event   storage.Event // ID and CreatedAt are assigned by the shard
	IdemKey string
	Hash    uint64 // content hash, compared when IdemKey repeats
	// IdemHash is the store's hash of IdemKey (storage.DB.IdempotencyHash),
	// set by the key actor, which looks the key up, for the shard, which
	// stores it: each key is hashed once.
	IdemHash uint64
	// IdemSlot is where the key actor filed IdemKey in the store's filter
	// (storage.DB.FileIdempotency) and IdemFiled whether the filter took
	// it: the shard writes the record there without asking the filter
	// again.
	IdemSlot  uint64
	IdemFiled bool
	// Content is what Hash covers (keyed events only), hashed again the
	// older way only when a stored record's hash differs (SameContent).
	Content event.Content
	// Profile is what the event changes in the dataset's profiles and
	// identity links (a Segment identify, alias or two-id message),
	// committed in the same batch; nil for native events. A replay never
	// reaches the shard, so it changes nothing.
	Profile *storage.ProfileUpdate
	// AtReceipt marks an event sent without a timestamp: the shard sets
	// Event.Timestamp (and the profile's) to its id's millisecond, a
	// moment after receipt, so its record needs no Z key (storage keys).
	AtReceipt bool
}

// SameContent reports whether a stored idempotency record's hash is that of
// content c, whose hash is h: a record stored before the content hash was
// xxhash holds the FNV hash (event.LegacyContentHash), which is taken only
// when h differs, i.e. for a conflict or a retry of such a record.
func SameContent(stored, h uint64, c *event.Content) bool {
	return stored == h || stored == event.LegacyContentHash(c)
}

// Outcome is what happened to one pending event.
type Outcome uint8

// Outcomes of a pending event.
const (
	Stored    Outcome = iota // newly written
	Replayed                 // the idempotency key was seen with the same content: the original event
	Conflict                 // the idempotency key was seen with other content
	Duplicate                // repeats the key of an earlier entry of the same write with the same content; Of names it
)

// Result is the outcome of one pending event, in the order of Write.Events.
type Result struct {
	Outcome   Outcome
	ID        storage.ID
	Timestamp int64
	Of        int
}

// Reply answers a Request.
type Reply struct {
	Allowed    bool
	RetryAfter int64
	Windows    []ratelimit.WindowStatus    // the request's bucket, for the response headers
	Buckets    [3][]ratelimit.WindowStatus // standard, batch, analytics (Snapshot only)
	Results    []Result
	Err        error

	// Backing arrays for the common cases, so a reply allocates nothing more.
	windowsBuf [3]ratelimit.WindowStatus
	resultsBuf [1]Result
	// spare is the results array of this request's last batch, kept by
	// Request.Reset for the next (results).
	spare []Result

	req *Request // the request this reply is part of
}

// Request is the request rep answers (rep lives inside it), so the
// receiver can reuse both once it is done with rep; nil for a reply made
// outside a key actor.
func (rep *Reply) Request() *Request { return rep.req }

// Reset clears a request that was answered and whose reply is no longer
// read, so it can be sent again with its channel (which must then be empty).
// It drops every reference the request held, so a pooled request keeps no
// events or results alive.
func (r *Request) Reset() {
	ch := r.Reply
	spare := r.rep.Results
	if cap(spare) <= len(r.rep.resultsBuf) || cap(spare) > maxSpareResults {
		spare = nil
	}
	*r = Request{Reply: ch}
	r.rep.spare = spare[:0]
}

// maxSpareResults bounds the results a reset request keeps for its next
// write: a batch's, up to 1,000 events (40 KB).
const maxSpareResults = 1000

// results is n zeroed results: in the array the reply's request kept from
// its last batch when it holds n (a batch of 100 allocated 4 KB for them).
func (rep *Reply) results(n int) []Result {
	if n <= len(rep.resultsBuf) {
		rep.resultsBuf = [len(rep.resultsBuf)]Result{}
		return rep.resultsBuf[:n]
	}
	if cap(rep.spare) >= n {
		rs := rep.spare[:n]
		clear(rs)
		return rs
	}
	return make([]Result, n)
}

// ErrStopped answers requests that reach an actor while the service stops.
var ErrStopped = errors.New("actors: stopping")

// commit is what a key actor forwards to a shard.
type commit struct {
	keyID   string
	write   *Write
	reply   *Reply
	replyTo chan *Reply
	slots   []int      // result index of each event in write.Events that is stored
	owner   *actor.PID // key actor to tell when idempotency keys are settled; zero if none
	hashes  []uint64   // hashes of the idempotency keys written, in the order of write.Events
}

// Committed tells the broadcaster which events just became durable, in record order.
type Committed struct {
	Events []CommittedEvent
}

// CommittedEvent is one durable event and its dataset.
type CommittedEvent struct {
	Dataset uint32
	Event   *storage.Event
}
