package ratelimit

import (
	"container/list"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Failed admin-token attempts (contract section 11): per client address,
// the 6th failure within 10 minutes and every one after it is refused with
// a lockout that doubles from 1 s to at most 15 min; a success forgets the
// address.
const (
	AuthFreeFailures = 5                // failures answered 401 within AuthWindow
	AuthWindow       = 10 * time.Minute // how far back failures count
	AuthFirstLockout = time.Second      // the lockout of the 6th failure
	AuthMaxLockout   = 15 * time.Minute // the doubling stops here
	// AuthMaxTracked caps the addresses tracked; the one whose last failure
	// is oldest makes room. About 150 bytes each, so at most ~2 MB.
	AuthMaxTracked = 10_000
)

// AuthThrottle counts failed admin-token attempts per client address. It is
// safe for concurrent use; time is passed in, so tests drive the clock.
//
// IPv6 clients are grouped by /64, the block one host usually controls, so
// that walking through a prefix does not reset the count. During a lockout
// the caller refuses every attempt without checking the token (Locked), so
// a lockout cannot be used as an oracle; once it ends, the next failure
// doubles it. An address that has been quiet for AuthWindow after its last
// failure or lockout starts over.
type AuthThrottle struct {
	mu      sync.Mutex
	max     int
	entries map[netip.Addr]*list.Element // of *authEntry
	order   list.List                    // least recently failed first
	n       atomic.Int64                 // len(entries), read without the lock
}

type authEntry struct {
	key   netip.Addr
	fails [AuthFreeFailures]time.Time // the latest failures before a lockout, a ring
	next  int                         // ring position of the next failure
	level int                         // lockouts so far in this episode; 0 = none
	until time.Time                   // end of the current lockout
	last  time.Time                   // latest failure
}

// NewAuthThrottle returns a throttle tracking at most maxTracked addresses
// (AuthMaxTracked when maxTracked <= 0).
func NewAuthThrottle(maxTracked int) *AuthThrottle {
	if maxTracked <= 0 {
		maxTracked = AuthMaxTracked
	}
	return &AuthThrottle{max: maxTracked, entries: make(map[netip.Addr]*list.Element)}
}

// authKey is the address an attempt is counted under: IPv4 (also when
// IPv4-mapped) as is, IPv6 by its /64.
func authKey(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// Locked returns how long the address is still locked out at now, or 0.
// Every attempt from it during that time is refused without looking at the
// token, and is not counted.
func (t *AuthThrottle) Locked(a netip.Addr, now time.Time) time.Duration {
	if t.n.Load() == 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	el, ok := t.entries[authKey(a)]
	if !ok {
		return 0
	}
	if d := el.Value.(*authEntry).until.Sub(now); d > 0 {
		return d
	}
	return 0
}

// Fail records a failed attempt at now. It returns 0 when the failure is
// one of the AuthFreeFailures allowed in AuthWindow (answer 401), otherwise
// the lockout it starts (answer 429 with that Retry-After).
func (t *AuthThrottle) Fail(a netip.Addr, now time.Time) time.Duration {
	key := authKey(a)
	t.mu.Lock()
	defer t.mu.Unlock()
	var e *authEntry
	if el, ok := t.entries[key]; ok {
		e = el.Value.(*authEntry)
		t.order.MoveToBack(el)
	} else {
		for len(t.entries) >= t.max {
			oldest := t.order.Front()
			delete(t.entries, oldest.Value.(*authEntry).key)
			t.order.Remove(oldest)
		}
		e = &authEntry{key: key}
		t.entries[key] = t.order.PushBack(e)
		t.n.Store(int64(len(t.entries)))
	}
	if e.level > 0 && now.Sub(later(e.last, e.until)) >= AuthWindow {
		*e = authEntry{key: key} // quiet long enough: a new episode
	}
	e.last = now
	if e.level == 0 {
		// The ring holds the latest AuthFreeFailures failures; if the oldest
		// of them is still inside the window, this one is one too many.
		oldest := e.fails[e.next]
		e.fails[e.next] = now
		e.next = (e.next + 1) % AuthFreeFailures
		if oldest.IsZero() || now.Sub(oldest) >= AuthWindow {
			return 0
		}
		e.fails = [AuthFreeFailures]time.Time{}
	}
	e.level++
	d := AuthMaxLockout
	if e.level <= 11 { // 1 s << 10 = 1024 s is already past the cap
		d = min(AuthFirstLockout<<(e.level-1), AuthMaxLockout)
	}
	e.until = now.Add(d)
	return d
}

// Succeed forgets the address: a correct token resets its count.
func (t *AuthThrottle) Succeed(a netip.Addr) {
	if t.n.Load() == 0 {
		return
	}
	key := authKey(a)
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.entries[key]; ok {
		delete(t.entries, key)
		t.order.Remove(el)
		t.n.Store(int64(len(t.entries)))
	}
}

// Tracked is the number of addresses with failures on record.
func (t *AuthThrottle) Tracked() int { return int(t.n.Load()) }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
