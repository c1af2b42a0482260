package http

import (
	"sync"

	"github.com/eventd/eventd/storage"
)

// eventCacheSize bounds the events cursor connections share: at 5,000
// events a second, the last 1.6 s. A cursor that is further behind (a
// catch-up) decodes and encodes for itself, as before.
const eventCacheSize = 8192

// streamEvent is an event as cursor connections send it: decoded once for
// their filters and encoded once as the stream message. Immutable.
type streamEvent struct {
	ev      storage.Event
	payload []byte // appendStreamPayload of ev
}

type eventCacheKey struct {
	ds uint32
	id storage.ID
}

// eventCache keeps the most recently read events for the cursor
// connections of every dataset. Each cursor reads its events from storage
// itself (so resume, the window and catch-up are one code path), and 100
// cursors at the head read the same events: without the cache each one
// decoded and encoded every event (a third of the server's CPU in the
// bench's cursors scenario).
type eventCache struct {
	mu   sync.RWMutex
	m    map[eventCacheKey]*streamEvent
	ring []eventCacheKey // insertion order, for eviction
	next int
}

func newEventCache(size int) *eventCache {
	return &eventCache{m: make(map[eventCacheKey]*streamEvent, size), ring: make([]eventCacheKey, 0, size)}
}

// load returns the event of dataset ds with id, from the cache or else
// decoded from its stored record and added. Records are immutable (an
// erased event's record is gone, so no reader reaches its entry).
func (c *eventCache) load(ds uint32, id storage.ID, record []byte) (*streamEvent, error) {
	k := eventCacheKey{ds, id}
	c.mu.RLock()
	se := c.m[k]
	c.mu.RUnlock()
	if se != nil {
		return se, nil
	}
	ev, err := storage.DecodeEvent(id, record)
	if err != nil {
		return nil, err
	}
	se = &streamEvent{ev: ev, payload: appendStreamPayload(nil, &ev)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[k]; old != nil {
		return old, nil // another cursor got there first
	}
	if len(c.ring) < cap(c.ring) {
		c.ring = append(c.ring, k)
	} else {
		delete(c.m, c.ring[c.next])
		c.ring[c.next] = k
		c.next = (c.next + 1) % len(c.ring)
	}
	c.m[k] = se
	return se, nil
}
