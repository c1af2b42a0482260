package ratelimit

import (
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"time"
)

const (
	ipShards      = 32   // a power of two well above the core count, so shards rarely contend
	ipMaxPerShard = 8192 // per generation: caps memory at ~2*32*8192 entries under a flood of distinct IPs
	ipSlots       = 60   // one-second slots, the same resolution as the per-key minute window
)

// IPGuard is a concurrency-safe per-client-IP sliding one-minute limit (600 per minute for public-key pageviews).
//
// Entries live in two generations per shard, rotated once a minute: an entry
// not touched during a whole generation has an empty window and is dropped
// with it, so memory follows the number of IPs active in the last two minutes.
// A shard whose current generation reaches ipMaxPerShard rotates early; under
// such a flood some live IPs lose their counts, the price of a hard memory
// bound. Callers wanting IPv6 clients grouped by prefix should pass the prefix.
type IPGuard struct {
	limit       int64
	maxPerShard int // ipMaxPerShard; a field so tests can reach the cap cheaply
	seed        maphash.Seed
	shards      [ipShards]ipShard
}

type ipShard struct {
	mu       sync.Mutex
	cur, old map[string]*ipWindow
	rotated  int64 // Unix second the current generation started
	_        [96]byte
}

// ipWindow is a minute window with uint16 slots to keep flood memory small;
// a slot saturates at 65535 admitted requests per second per IP.
type ipWindow struct {
	key   string // owned copy of the map key, so moving generations needs no new copy
	last  int64
	total int64
	slots [ipSlots]uint16
}

// NewIPGuard returns a guard admitting perMinute requests per IP per sliding minute; perMinute <= 0 disables it.
func NewIPGuard(perMinute int64) *IPGuard {
	g := &IPGuard{limit: perMinute, maxPerShard: ipMaxPerShard, seed: maphash.MakeSeed()}
	for i := range g.shards {
		g.shards[i].cur = make(map[string]*ipWindow)
	}
	return g
}

// Allow counts one request from ip at now if its minute has room; otherwise it counts
// nothing and retryAfter is the whole seconds (>= 1) until it has.
//
// ip may alias a reusable buffer: the guard stores its own copy.
func (g *IPGuard) Allow(ip string, now time.Time) (allowed bool, retryAfter int64) {
	if g.limit <= 0 {
		return true, 0
	}
	sec := now.Unix()
	s := &g.shards[maphash.String(g.seed, ip)&(ipShards-1)]
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec < s.rotated {
		s.rotated = sec // clock stepped back: restart the generation rather than stall rotation
	} else if sec-s.rotated >= ipSlots {
		s.rotate(sec)
	}
	e := s.cur[ip]
	if e == nil {
		if e = s.old[ip]; e != nil {
			delete(s.old, ip)
		} else {
			e = &ipWindow{key: strings.Clone(ip), last: sec}
		}
		if len(s.cur) >= g.maxPerShard {
			s.rotate(sec)
		}
		s.cur[e.key] = e
	}
	return e.allow(sec, g.limit)
}

// rotate drops the old generation; a fresh map (not clear) lets memory shrink after a flood.
func (s *ipShard) rotate(sec int64) {
	s.old = s.cur
	s.cur = make(map[string]*ipWindow)
	s.rotated = sec
}

func (e *ipWindow) allow(sec, limit int64) (bool, int64) {
	if sec < e.last {
		if e.last-sec <= maxClockStep {
			sec = e.last
		} else {
			// A large step back: an abuse guard may simply start over.
			clear(e.slots[:])
			e.total = 0
			e.last = sec
		}
	}
	if from, to := e.last, sec; to != from {
		if to-from >= ipSlots {
			clear(e.slots[:])
			e.total = 0
		} else {
			for a := from + 1; a <= to; a++ {
				j := floorMod(a, ipSlots)
				e.total -= int64(e.slots[j])
				e.slots[j] = 0
			}
		}
		e.last = sec
	}
	if e.total >= limit {
		need := e.total - limit + 1
		var freed int64
		for a := sec - ipSlots + 1; a <= sec; a++ {
			freed += int64(e.slots[floorMod(a, ipSlots)])
			if freed >= need {
				return false, max(a+ipSlots-sec, 1)
			}
		}
		return false, ipSlots
	}
	if j := floorMod(sec, ipSlots); e.slots[j] < math.MaxUint16 {
		e.slots[j]++
		e.total++
	}
	return true, 0
}

// entries reports how many IPs are tracked; for tests.
func (g *IPGuard) entries() int {
	n := 0
	for i := range g.shards {
		s := &g.shards[i]
		s.mu.Lock()
		n += len(s.cur) + len(s.old)
		s.mu.Unlock()
	}
	return n
}
