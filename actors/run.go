package actors

import (
	"sync"

	"github.com/eventd/eventd/storage"
)

// Run is the events of one dataset from one commit, in record order, as the
// broadcaster hands them to every subscriber of that dataset. It is shared:
// subscribers must not change it. Its wire encoding is made once, by the
// first subscriber that asks (Payloads), and then read by all of them, so the
// cost of encoding an event does not grow with the number of subscribers.
type Run struct {
	Events []CommittedEvent

	once     sync.Once
	payloads [][]byte
}

// NewRun wraps committed events of one dataset into a Run.
func NewRun(events []CommittedEvent) *Run { return &Run{Events: events} }

// Encoder appends one event's wire payload to dst and returns the result.
type Encoder func(dst []byte, e *storage.Event) []byte

// Payloads returns each event's payload, encoded with enc into one slab on
// the first call; later calls (any goroutine) return the same read-only
// slices and ignore their enc. All subscribers of a broadcaster must
// therefore pass the same encoder.
func (r *Run) Payloads(enc Encoder) [][]byte {
	r.once.Do(func() {
		// One slab for the whole run: one allocation (plus growth) instead
		// of one per event, and the slices below point into it.
		slab := make([]byte, 0, len(r.Events)*512)
		ends := make([]int, len(r.Events))
		for i := range r.Events {
			slab = enc(slab, r.Events[i].Event)
			ends[i] = len(slab)
		}
		out := make([][]byte, len(r.Events))
		start := 0
		for i, end := range ends {
			out[i] = slab[start:end:end] // full slice expression: an append by a reader cannot reach the next payload
			start = end
		}
		r.payloads = out
	})
	return r.payloads
}
