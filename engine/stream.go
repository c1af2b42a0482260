package engine

import (
	"github.com/eventd/eventd/storage"
)

// streamCaps is the number of concurrent /stream connections a key may hold, by plan.
var streamCaps = map[string]int32{"free": 5, "professional": 50, "enterprise": 500}

// AcquireStream reserves one of the key's stream connections; false when the
// plan's cap is reached. Every successful call needs one ReleaseStream.
func (p *Principal) AcquireStream() bool {
	limit := streamCaps[p.Plan()]
	if limit == 0 {
		limit = streamCaps["free"]
	}
	for {
		n := p.streams.Load()
		if n >= limit {
			return false
		}
		if p.streams.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// ReleaseStream gives back a stream connection.
func (p *Principal) ReleaseStream() { p.streams.Add(-1) }

// EventsAfter reads p's events recorded after id, in record order, at most limit.
func (e *Engine) EventsAfter(p *Principal, after storage.ID, limit int, fn func(*storage.Event) bool) error {
	return e.db.EventsAfter(p.dataset, after, limit, fn)
}

// OnDrained registers fn to run at Close after the last commit has reached
// the broadcaster and before the store closes: live streams flush and close there.
func (e *Engine) OnDrained(fn func()) {
	e.hooksMu.Lock()
	e.drained = append(e.drained, fn)
	e.hooksMu.Unlock()
}
