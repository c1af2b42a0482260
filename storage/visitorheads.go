package storage

// headTable maps a visitor hash to 1 + the index of the visitor's newest
// entry in its day (memDay.heads). It replaced a Go map: in the batch
// scenario, where every event brings a new visitor, the map's look-up was
// a tenth of eventd's CPU, two cache misses in a map of millions (its
// group's control word, then the slot). Here a look-up loads one slot, and
// the store that follows it hits the same line.
//
// Open addressing with linear probing, in parts chosen by the hash's top
// byte, each of which grows alone: a growth moves a 256th of the day, not
// all of it at once under the visitor memory's lock (a Go map grows
// incrementally too). Nothing is ever deleted: a day's entries only go
// when the whole day does.
type headTable struct {
	parts [headParts]headPart
}

const headParts = 256

// headPart is one part: slots is empty or a power of two long, and at
// most three quarters full.
type headPart struct {
	slots []headSlot
	n     int
}

// headSlot is empty while head is 0 (heads count from 1).
type headSlot struct {
	h    uint64
	head uint32
}

// headPartFirst is a part's first size (128 bytes); a part is allocated
// when its first visitor comes, so a day of a few visitors costs the 8 KiB
// of the parts' headers and little more.
const headPartFirst = 8

func (t *headTable) part(h uint64) *headPart { return &t.parts[h>>56] }

// get is h's head, 0 if h was never set.
func (t *headTable) get(h uint64) uint32 {
	p := t.part(h)
	if len(p.slots) == 0 {
		return 0
	}
	mask := uint64(len(p.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &p.slots[i]
		if s.head == 0 || s.h == h {
			return s.head
		}
	}
}

// keepLoads takes the sum of values loaded only to bring their cache
// lines in early (peek, daySnapshot.touch), so that the loads are not
// compiled away.
//
//go:noinline
func keepLoads(uint32) {}

// peek loads h's home slot, so that a get or set of h soon after finds
// it in the cache.
func (t *headTable) peek(h uint64) uint32 {
	p := t.part(h)
	if len(p.slots) == 0 {
		return 0
	}
	return p.slots[h&uint64(len(p.slots)-1)].head
}

// set makes head (not 0) h's head.
func (t *headTable) set(h uint64, head uint32) {
	p := t.part(h)
	if (p.n+1)*4 > len(p.slots)*3 {
		p.grow()
	}
	p.put(h, head)
}

func (p *headPart) put(h uint64, head uint32) {
	mask := uint64(len(p.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &p.slots[i]
		if s.head == 0 {
			*s = headSlot{h, head}
			p.n++
			return
		}
		if s.h == h {
			s.head = head
			return
		}
	}
}

func (p *headPart) grow() {
	old := p.slots
	p.slots, p.n = make([]headSlot, max(2*len(old), headPartFirst)), 0
	for _, s := range old {
		if s.head != 0 {
			p.put(s.h, s.head)
		}
	}
}
