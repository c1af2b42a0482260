// Package slotfilter remembers, for each of many keys, the slot it was
// stored in: a cuckoo hash table of 40-bit key tags, each with the slot.
//
// eventd keeps idempotency records by the second they arrived in, so that
// random keys (UUID messageIds) are written at the end of the key space
// instead of all over their day (docs/benchmarks.md, proposal 20). A
// look-up then asks the filter which seconds may hold its key: usually
// none (a new key, answered from memory) or one (a retry: one Get). Two
// keys share a tag with odds of about 8 in 2^40 per look-up, which costs a
// Get that finds nothing.
//
// A key is in one of two buckets of four entries, so a look-up reads two
// cache lines. The table doubles from a few thousand entries up to its
// bound; past that Insert says no, and the caller keeps the key elsewhere.
// An insert that fails leaves every entry it moved where it was: the
// filter never forgets a key it said yes to.
package slotfilter

import "sync"

// bucketLen entries share a bucket, a 32-byte line.
const bucketLen = 4

// An entry is tag<<slotBits | slot&slotMask; 0 is an empty entry.
const (
	slotBits = 24 // a slot's low bits: 194 days of seconds
	slotMask = 1<<slotBits - 1
	tagBits  = 64 - slotBits
)

// maxBucketBits bounds the table: the two bucket indexes are bits 0-21 and
// 18-39 of the tag.
const maxBucketBits = 22

// minBuckets is the table's first size: 32 KiB.
const minBuckets = 1 << 10

// growAt is the share of entries in use past which the table doubles.
const growAt = 0.85

// maxKicks bounds the entries an insert moves before it gives up.
const maxKicks = 256

// Filter maps 64-bit key hashes to slots. It is safe for concurrent use.
type Filter struct {
	mu         sync.Mutex
	buckets    [][bucketLen]uint64
	n          int // entries in use
	maxBuckets int
	kicks      []kick // an insert's moves, to undo them if it fails
	rnd        uint64 // picks the entry an insert moves
}

// kick is one move of an insert: bucket b's entry i held old.
type kick struct {
	b, i int
	old  uint64
}

// New is a filter that holds up to about maxKeys keys (at least 4,096,
// at most about 16 million): the table at most 16 bytes a key, 8 at full
// load.
func New(maxKeys int) *Filter {
	mb := minBuckets
	for mb*bucketLen < maxKeys && mb < 1<<maxBucketBits {
		mb *= 2
	}
	return &Filter{maxBuckets: mb, rnd: 0x9e3779b97f4a7c15}
}

// tag is h's top 40 bits, never 0.
func tag(h uint64) uint64 {
	if t := h >> slotBits; t != 0 {
		return t
	}
	return 1
}

// index is the two buckets a tag may be in, of a table of mask+1.
func index(t uint64, mask int) (int, int) {
	return int(t) & mask, int(t>>(tagBits-maxBucketBits)) & mask
}

// Insert records that the key hashed to h is in slot. It returns false
// when the filter is full, and changes nothing then.
func (f *Filter) Insert(h uint64, slot uint32) bool {
	e := tag(h)<<slotBits | uint64(slot)&slotMask
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.buckets == nil {
		f.buckets = make([][bucketLen]uint64, minBuckets)
	}
	if float64(f.n+1) > growAt*float64(len(f.buckets)*bucketLen) && len(f.buckets) < f.maxBuckets {
		f.grow()
	}
	if !f.place(f.buckets, e) {
		return false
	}
	f.n++
	return true
}

// place puts e in one of its buckets of table, moving other entries to
// their other bucket to make room; it undoes the moves if it cannot.
func (f *Filter) place(table [][bucketLen]uint64, e uint64) bool {
	mask := len(table) - 1
	b1, b2 := index(e>>slotBits, mask)
	for _, b := range [2]int{b1, b2} {
		for i, x := range table[b] {
			if x == 0 {
				table[b][i] = e
				return true
			}
		}
	}
	f.kicks = f.kicks[:0]
	b := b1
	for range maxKicks {
		f.rnd ^= f.rnd << 13
		f.rnd ^= f.rnd >> 7
		f.rnd ^= f.rnd << 17
		i := int(f.rnd % bucketLen)
		f.kicks = append(f.kicks, kick{b, i, table[b][i]})
		e, table[b][i] = table[b][i], e
		// e, moved out, goes to its other bucket.
		o1, o2 := index(e>>slotBits, mask)
		if b == o1 {
			b = o2
		} else {
			b = o1
		}
		for i, x := range table[b] {
			if x == 0 {
				table[b][i] = e
				return true
			}
		}
	}
	for i := len(f.kicks) - 1; i >= 0; i-- {
		k := f.kicks[i]
		table[k.b][k.i] = k.old
	}
	return false
}

// grow doubles the table, if every entry finds a place in the new one.
func (f *Filter) grow() {
	next := make([][bucketLen]uint64, 2*len(f.buckets))
	for _, bk := range f.buckets {
		for _, e := range bk {
			if e != 0 && !f.place(next, e) {
				return
			}
		}
	}
	f.buckets = next
}

// Find appends to dst the slots the key hashed to h may be in, newest
// first. Slots are read back relative to hi, the latest slot inserted or
// now if later: the one at or before hi with the stored low bits.
func (f *Filter) Find(h uint64, hi uint32, dst []uint32) []uint32 {
	t := tag(h)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.buckets == nil {
		return dst
	}
	n := len(dst)
	b1, b2 := index(t, len(f.buckets)-1)
	for j, b := range [2]int{b1, b2} {
		if j == 1 && b == b1 {
			break
		}
		for _, e := range f.buckets[b] {
			if e>>slotBits == t {
				dst = append(dst, slotOf(e, hi))
			}
		}
	}
	// Newest first (two keys rarely share a tag: a few entries at most).
	for i := n + 1; i < len(dst); i++ {
		for j := i; j > n && dst[j] > dst[j-1]; j-- {
			dst[j], dst[j-1] = dst[j-1], dst[j]
		}
	}
	return dst
}

// slotOf is e's slot: the latest at or before hi with e's low bits.
func slotOf(e uint64, hi uint32) uint32 {
	return hi - (hi-uint32(e))&slotMask
}

// Expire removes the entries of slots before before, read relative to hi
// as in Find; it returns how many it removed.
func (f *Filter) Expire(before, hi uint32) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	gone := 0
	for b := range f.buckets {
		for i, e := range f.buckets[b] {
			if e != 0 && slotOf(e, hi) < before {
				f.buckets[b][i] = 0
				gone++
			}
		}
	}
	f.n -= gone
	return gone
}

// Len is the number of keys held.
func (f *Filter) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// Bytes is the table's size in memory.
func (f *Filter) Bytes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.buckets) * bucketLen * 8
}
