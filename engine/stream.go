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

// RecordsAfter is EventsAfter without decoding (storage.RecordsAfter): the
// record is valid only until fn returns; storage.DecodeEvent reads it.
func (e *Engine) RecordsAfter(p *Principal, after storage.ID, limit int, fn func(id storage.ID, record []byte) bool) error {
	return e.db.RecordsAfter(p.dataset, after, limit, fn)
}

// OnDrained registers fn to run at Close after the last commit has reached
// the broadcaster and before the store closes: live streams flush and close there.
func (e *Engine) OnDrained(fn func()) {
	e.hooksMu.Lock()
	e.drained = append(e.drained, fn)
	e.hooksMu.Unlock()
}

// Close reasons of a stream whose key stopped being valid (contract section 11).
const (
	ReasonKeyRevoked     = "key revoked"
	ReasonProjectDeleted = "project deleted"
)

// Revocation says which keys stopped being valid: one key (KeyID set), or
// every key of a project and the dashboard's readers of it (KeyID empty).
type Revocation struct {
	ProjectID string
	KeyID     string
	Reason    string // ReasonKeyRevoked or ReasonProjectDeleted
}

// Matches reports whether p is one of the principals r ends.
func (r Revocation) Matches(p *Principal) bool {
	if r.KeyID != "" {
		return p.rec.ID == r.KeyID
	}
	return p.rec.ProjectID == r.ProjectID
}

// OnRevoked registers fn to run after a key is revoked or a project is
// deleted, once the keys answer 401: the HTTP layer closes their open
// streams there. fn runs on the admin request's goroutine and must not block.
func (e *Engine) OnRevoked(fn func(Revocation)) {
	e.hooksMu.Lock()
	e.revoked = append(e.revoked, fn)
	e.hooksMu.Unlock()
}

func (e *Engine) notifyRevoked(r Revocation) {
	e.hooksMu.Lock()
	hooks := e.revoked
	e.hooksMu.Unlock()
	for _, fn := range hooks {
		fn(r)
	}
}

// Revoked is why p can no longer be used: ReasonProjectDeleted,
// ReasonKeyRevoked, or "" while it is valid. A stream checks it once it is
// registered, so a revocation racing with its upgrade still closes it.
func (p *Principal) Revoked() string {
	switch {
	case p.project.deleted.Load():
		return ReasonProjectDeleted
	case p.revoked.Load():
		return ReasonKeyRevoked
	}
	return ""
}
