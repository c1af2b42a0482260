package http

import (
	"bytes"
	"sync"
	"time"

	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/storage"
)

// Bounds of the events cursor connections share.
const (
	eventCacheBytes = 16 << 20 // records, events and payloads together
	// eventCacheRecent: only events recorded this recently are shared. A
	// cursor at the head reads those; one catching up on older events (an
	// import, a backlog) decodes and encodes for itself, as before, and
	// does not push the head's events out.
	eventCacheRecent = time.Minute
)

// streamEvent is an event as cursor connections send it: decoded once for
// their filters and encoded once as the stream message. Immutable.
type streamEvent struct {
	record  []byte // the stored record it was made from
	ev      storage.Event
	payload []byte // appendStreamPayload of ev
}

func (se *streamEvent) size() int {
	return len(se.record) + len(se.ev.Properties) + len(se.ev.Name) + len(se.ev.VisitorID) + len(se.payload) + 128
}

type eventCacheKey struct {
	ds uint32
	id storage.ID
}

// eventCache keeps the events cursor connections read lately, for the
// cursors of every dataset. Each cursor reads its events from storage
// itself (so resume, the window and catch-up are one code path), and 100
// cursors at the head read the same events: without the cache each one
// decoded and encoded every event (a third of the server's CPU in the
// bench's cursors scenario).
type eventCache struct {
	mu       sync.RWMutex
	m        map[eventCacheKey]*streamEvent
	order    []eventCacheKey // insertion order; order[head:] are live
	head     int
	bytes    int
	maxBytes int
	recent   time.Duration
	now      func() time.Time
}

func newEventCache(maxBytes int, recent time.Duration) *eventCache {
	return &eventCache{m: make(map[eventCacheKey]*streamEvent), maxBytes: maxBytes, recent: recent, now: time.Now}
}

// load returns the event of dataset ds with id made from its stored
// record: the shared one when the cache holds it for this very record
// (an id can come back with other contents, after an erasure and a
// re-import of its export), else decoded here, and kept when recent.
func (c *eventCache) load(ds uint32, id storage.ID, record []byte) (*streamEvent, error) {
	k := eventCacheKey{ds, id}
	c.mu.RLock()
	se := c.m[k]
	c.mu.RUnlock()
	if se != nil && bytes.Equal(se.record, record) {
		return se, nil
	}
	ev, err := storage.DecodeEvent(id, record)
	if err != nil {
		return nil, err
	}
	se = &streamEvent{record: bytes.Clone(record), ev: ev, payload: appendStreamPayload(nil, &ev)}
	if c.now().Sub(time.UnixMilli(ids.Time(id))) > c.recent || se.size() > c.maxBytes/2 {
		return se, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[k]; old != nil {
		if bytes.Equal(old.record, record) {
			return old, nil // another cursor got there first
		}
		c.bytes -= old.size() // replaced below; its place in order stays
	} else {
		c.order = append(c.order, k)
	}
	c.m[k] = se
	c.bytes += se.size()
	for c.bytes > c.maxBytes && c.head < len(c.order) {
		old := c.order[c.head]
		c.head++
		if e := c.m[old]; e != nil {
			c.bytes -= e.size()
			delete(c.m, old)
		}
	}
	if c.head > len(c.order)/2 { // keep order from growing
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
	return se, nil
}
