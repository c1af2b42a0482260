package ids

import (
	"bytes"
	"encoding/binary"
	"sync"
)

// Floor returns an id that every id this generator makes from now on is
// greater than: its last id, or the millisecond before the clock's now
// with every low bit set, whichever is higher. After a restart the last id
// is zero, and the clock part is what stays above the ids already stored.
func (g *Generator) Floor() [16]byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.floorLocked()
}

func (g *Generator) floorLocked() [16]byte {
	var f [16]byte
	if now := g.now().UnixMilli(); now > g.lastMs {
		// Ids made from now on carry now or later (minMs holds that even
		// if the clock steps back), so the millisecond before, with every
		// low bit set, is above them all.
		g.minMs = max(g.minMs, now)
		putMs(f[:], now-1)
		for i := 6; i < 16; i++ {
			f[i] = 0xff
		}
		return f
	}
	putMs(f[:], g.lastMs)
	binary.BigEndian.PutUint16(f[6:], g.hi)
	binary.BigEndian.PutUint64(f[8:], g.lo)
	return f
}

// Horizon tells how far event ids are settled: ids are made before their
// batch commits, and writers (shards, imports) commit concurrently, so an
// id can become visible in storage after a greater one. A cursor that
// acknowledged the greater one must not skip the smaller, so cursors only
// deliver ids at or below Settled, below which nothing is still to come.
type Horizon struct {
	gen   *Generator
	mu    sync.Mutex
	holds map[*Hold]struct{}
}

// Hold marks a writer that may make ids it has not committed yet.
type Hold struct {
	h     *Horizon
	floor [16]byte
}

// NewHorizon returns a horizon over the ids of gen.
func NewHorizon(gen *Generator) *Horizon {
	return &Horizon{gen: gen, holds: make(map[*Hold]struct{})}
}

// Hold is taken before a writer makes its first id of a batch and
// released once the batch is committed (or failed): until then, Settled
// stays below every id the writer makes.
func (h *Horizon) Hold() *Hold {
	x := &Hold{h: h}
	h.mu.Lock()
	x.floor = h.gen.Floor()
	h.holds[x] = struct{}{}
	h.mu.Unlock()
	return x
}

// Release ends the hold; a nil hold is a no-op.
func (x *Hold) Release() {
	if x == nil {
		return
	}
	x.h.mu.Lock()
	delete(x.h.holds, x)
	x.h.mu.Unlock()
}

// Settled returns an id at or below which every event id is committed or
// failed for good: no event with a smaller or equal id can appear later.
func (h *Horizon) Settled() [16]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.gen.Floor()
	for x := range h.holds {
		if bytes.Compare(x.floor[:], s[:]) < 0 {
			s = x.floor
		}
	}
	return s
}
