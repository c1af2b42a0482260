// Package slotfilter remembers, for each of many keys, the slot it was
// stored in: a cuckoo hash table of 40-bit key tags, each with the slot.
//
// eventd keeps idempotency records by the 128th of a second they arrived
// in, a group of them to a key, so that random keys (UUID messageIds) are
// written at the end of the key space instead of all over their day
// (docs/benchmarks.md, proposal 20 and item 24). A look-up then asks the
// filter which slots may hold its key: usually none (a new key, answered
// from memory) or one (a retry: that slot's groups). A new key has the
// tag of one of the n keys held with odds of about n in 2^40 per look-up
// (the buckets are bits of the tag, so the tag is all there is to tell
// two keys apart): one in 65,000 look-ups at the bound of 16 million keys,
// which costs a read of one slot's groups that finds nothing.
//
// Slots are any uint64; an entry holds a slot's low 24 bits, and Find
// reads them back relative to the latest slot (slotOf), so the filter
// holds keys of 2^24 consecutive slots at most (36 hours of 128ths of a
// second).
//
// A key is in one of two buckets of eight entries, a cache line each, so
// a look-up reads two cache lines. The table doubles from a few thousand
// entries up to its bound; past that Insert says no, and the caller keeps
// the key elsewhere.
// An insert that fails leaves every entry it moved where it was: the
// filter never forgets a key it said yes to.
package slotfilter

import (
	"slices"
	"sync"
)

// bucketLen entries share a bucket, a 64-byte cache line. With eight, an
// insert into a table up to 85% full (growAt) nearly always finds room in
// one of its two buckets, and the table takes keys up to 98% of its bound;
// with four, inserts moved entries to their other buckets, a cache miss
// each: a keyed batch's look-ups and inserts at 80% full took 138-191 ns
// a key against 83-134 now, 61-91 against 88-100 at half full
// (BenchmarkBatch), and the bound took 94-96% of its keys.
const bucketLen = 8

// An entry is tag<<slotBits | slot&slotMask; 0 is an empty entry.
const (
	slotBits = 24 // a slot's low bits: 36 hours of 128ths of a second
	slotMask = 1<<slotBits - 1
	tagBits  = 64 - slotBits
)

// maxBucketBits bounds the table: the two bucket indexes are bits 0-20 and
// 19-39 of the tag.
const maxBucketBits = 21

// minBuckets is the table's first size: 32 KiB.
const minBuckets = 1 << 9

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
	ins        placer // Insert's
	// While a table twice the size is built from a copy of this one, on a
	// goroutine of its own (growing), the entries inserted meanwhile are
	// logged, to be placed in it too before it replaces this one.
	// Doubling a large table holding the lock would stop every look-up
	// and insert for as long: 7.6 ns an entry (BenchmarkDoubled), some
	// 60 ms for the last doubling, about three times the copy.
	growing bool
	log     []uint64
	// floor is the lowest slot Insert takes (Save).
	floor uint64
	// resizing is held while a larger table is built, and by Expire, whose
	// removals the copy being rehashed would not see.
	resizing sync.Mutex
	// touched keeps Touch's reads from being compiled away.
	touched uint64
}

// placer is what placing an entry needs besides the table.
type placer struct {
	kicks []kick // an insert's moves, to undo them if it fails
	rnd   uint64 // picks the entry an insert moves
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
	return &Filter{buckets: make([][bucketLen]uint64, minBuckets), maxBuckets: mb, ins: placer{rnd: 0x9e3779b97f4a7c15}}
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

// full says a table of buckets is past the share at which it doubles.
func full(n, buckets int) bool {
	return float64(n) > growAt*float64(buckets*bucketLen)
}

// Insert records that the key hashed to h is in slot. It returns false
// when the filter is full or slot is below the floor (Save), and changes
// nothing then.
func (f *Filter) Insert(h uint64, slot uint64) bool {
	e := tag(h)<<slotBits | slot&slotMask
	// A table that fills up while a larger one is built (or while Expire
	// holds up its building) is not full: the insert waits for the larger
	// one. Rehashing fails only by extreme bad luck; a few tries bound it.
	for range 4 {
		ok, wait := f.insert(e, slot)
		if ok || !wait {
			return ok
		}
		f.resizing.Lock()
		f.resizing.Unlock()
	}
	return false
}

// insert places e, of slot, in the current table, and starts building a
// larger one once the current one is past growAt. If it cannot, wait says
// whether a larger table may take it.
func (f *Filter) insert(e uint64, slot uint64) (ok, wait bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if slot < f.floor {
		return false, false
	}
	if full(f.n+1, len(f.buckets)) && len(f.buckets) < f.maxBuckets && !f.growing && f.resizing.TryLock() {
		// The copy is the only pause: 61 ms for the largest table
		// (BenchmarkSaveAtBound copies it the same way).
		f.growing = true
		go f.grow(slices.Clone(f.buckets))
	}
	if !f.ins.place(f.buckets, e) {
		return false, len(f.buckets) < f.maxBuckets || f.growing
	}
	f.n++
	if f.growing {
		f.log = append(f.log, e)
	}
	return true, false
}

// Save raises the lowest slot Insert takes to floor and returns a copy of
// the table, which Restore takes: every key inserted after it is in a slot
// at or above floor, so the copy and the keys of those slots are the
// filter. The copy is the only pause.
func (f *Filter) Save(floor uint64) []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.floor = max(f.floor, floor)
	out := make([]uint64, 0, len(f.buckets)*bucketLen)
	for _, bk := range f.buckets {
		out = append(out, bk[:]...)
	}
	return out
}

// Restore makes an empty filter the table Save returned, with its floor:
// its n entries, entry i being at(i) (read from where they were saved,
// without a copy of all of them). It returns false, changing nothing, if
// the table does not fit the filter's bound.
func (f *Filter) Restore(n int, at func(i int) uint64, floor uint64) bool {
	nb := n / bucketLen
	if nb < minBuckets || nb > f.maxBuckets || nb&(nb-1) != 0 || n%bucketLen != 0 {
		return false
	}
	table := make([][bucketLen]uint64, nb)
	used := 0
	for i := range n {
		if e := at(i); e != 0 {
			table[i/bucketLen][i%bucketLen] = e
			used++
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n != 0 {
		return false
	}
	f.buckets, f.n, f.floor = table, used, floor
	return true
}

// grow builds a table twice the size of old, a copy of the filter's
// table, and replaces the filter's with it once it holds the entries
// inserted meanwhile too. If one of those finds no place in it, the
// filter keeps its table.
func (f *Filter) grow(old [][bucketLen]uint64) {
	defer f.resizing.Unlock()
	p := placer{rnd: 0x2545f4914f6cdd1d}
	next := doubled(old)
	f.mu.Lock()
	defer f.mu.Unlock()
	ok := true
	for _, e := range f.log {
		if ok = p.place(next, e); !ok {
			break
		}
	}
	if ok {
		f.buckets = next
	}
	f.growing, f.log = false, nil
}

// Reserve makes room for n keys in all (up to the bound) at once, so that
// filling the filter with them does not rehash it at every doubling. It
// doubles the table in place: call it before the filter is shared.
func (f *Filter) Reserve(n int) {
	f.resizing.Lock()
	defer f.resizing.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	for full(n, len(f.buckets)) && len(f.buckets) < f.maxBuckets {
		f.buckets = doubled(f.buckets)
	}
}

// doubled is a table twice the size of old holding its entries. A bucket
// index is a tag's low bits (index), so an entry's bucket in the larger
// table is its bucket in old or that plus len(old): each bucket splits in
// two, in one pass over the table, and no entry moves elsewhere or fails
// to find room. Placing each entry afresh cost a cache miss or two an
// entry and, at 85% full, chains of kicks: a quarter of a keyed batch's
// server CPU while the table grew.
func doubled(old [][bucketLen]uint64) [][bucketLen]uint64 {
	n := len(old)
	next := make([][bucketLen]uint64, 2*n)
	for b, bk := range old {
		var used [2]int // in next[b] and next[b+n]
		for _, e := range bk {
			if e == 0 {
				continue
			}
			t := e >> slotBits
			o1, _ := index(t, n-1)
			n1, n2 := index(t, 2*n-1)
			nb := n2 // it is in its second bucket
			if b == o1 {
				nb = n1
			}
			half := nb / n
			next[nb][used[half]] = e
			used[half]++
		}
	}
	return next
}

// place puts e in one of its buckets of table, moving other entries to
// their other bucket to make room; it undoes the moves if it cannot.
func (p *placer) place(table [][bucketLen]uint64, e uint64) bool {
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
	p.kicks = p.kicks[:0]
	b := b1
	for range maxKicks {
		p.rnd ^= p.rnd << 13
		p.rnd ^= p.rnd >> 7
		p.rnd ^= p.rnd << 17
		i := int(p.rnd % bucketLen)
		p.kicks = append(p.kicks, kick{b, i, table[b][i]})
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
	for i := len(p.kicks) - 1; i >= 0; i-- {
		k := p.kicks[i]
		table[k.b][k.i] = k.old
	}
	return false
}

// Find appends to dst the slots the key hashed to h may be in, newest
// first. Slots are read back relative to hi, the latest slot inserted or
// now if later: the one at or before hi with the stored low bits.
func (f *Filter) Find(h uint64, hi uint64, dst []uint64) []uint64 {
	t := tag(h)
	f.mu.Lock()
	defer f.mu.Unlock()
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

// Touch reads the buckets of every hash of hs, so that Find and Insert of
// them soon after find the buckets in the CPU's cache. Each Find and
// Insert takes the lock, an atomic instruction that waits for the memory
// reads before it: one after the other, a large table's look-ups wait for
// a cache miss or two each (some 200 ns in a keyed batch). Here the reads
// of all the buckets go out together.
func (f *Filter) Touch(hs []uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mask := len(f.buckets) - 1
	var sum uint64
	for _, h := range hs {
		b1, b2 := index(tag(h), mask)
		sum += f.buckets[b1][0] + f.buckets[b2][0]
	}
	f.touched += sum
}

// slotOf is e's slot: the latest at or before hi with e's low bits.
func slotOf(e uint64, hi uint64) uint64 {
	return hi - (hi-e)&slotMask
}

// Expire removes the entries of slots before before, read relative to hi
// as in Find; it returns how many it removed. It waits for a larger table
// being built, and holds the lock for its pass over the table (38 ms at
// the bound, BenchmarkSaveAtBound): in chunks, an insert could move an entry from a
// chunk not yet read to one already read.
func (f *Filter) Expire(before, hi uint64) int {
	f.resizing.Lock()
	defer f.resizing.Unlock()
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
