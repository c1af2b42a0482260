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

// maxBucketBits bounds a table: the two bucket indexes are bits 0-20 and
// 19-39 of the tag.
const maxBucketBits = 21

// maxTableKeys is the entries of the largest table: 16,777,216, 128 MiB.
const maxTableKeys = 1 << maxBucketBits * bucketLen

// minBuckets is the table's first size: 32 KiB.
const minBuckets = 1 << 9

// growAt is the share of entries in use past which the table doubles.
const growAt = 0.85

// maxKicks bounds the entries an insert moves before it gives up.
const maxKicks = 256

// table is one cuckoo table of the filter, with its own lock.
type table struct {
	mu         sync.Mutex
	buckets    [][bucketLen]uint64
	n          int // entries in use
	maxBuckets int
	ins        placer // put's
	// While a table twice the size is built from a copy of this one, on a
	// goroutine of its own (growing), the entries inserted meanwhile are
	// logged, to be placed in it too before it replaces this one.
	// Doubling a large table holding the lock would stop every look-up
	// and insert for as long: 7.6 ns an entry (BenchmarkDoubled), some
	// 60 ms for the last doubling, about three times the copy.
	growing bool
	log     []uint64
	// floor is the lowest slot put takes (save).
	floor uint64
	// refusing: an insert found no room in the table at its largest, so
	// the next ones are refused at once until expire frees entries. Each
	// would otherwise move up to maxKicks entries, a cache miss or two
	// each, before giving up (some 50 µs a key).
	refusing bool
	// resizing is held while a larger table is built, and by expire, whose
	// removals the copy being rehashed would not see.
	resizing sync.Mutex
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

// newTable is a table that grows up to the fewest buckets (a power of two,
// at least minBuckets) holding maxKeys entries, and at most maxBuckets.
func newTable(maxKeys, maxBuckets int) *table {
	mb := minBuckets
	for mb*bucketLen < maxKeys && mb < maxBuckets {
		mb *= 2
	}
	return &table{buckets: make([][bucketLen]uint64, minBuckets), maxBuckets: mb, ins: placer{rnd: 0x9e3779b97f4a7c15}}
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

// put records that the key hashed to h is in slot. It returns false when
// the table is full or slot is below the floor (save), and changes
// nothing then.
func (f *table) put(h uint64, slot uint64) bool {
	e := tag(h)<<slotBits | slot&slotMask
	// A table that fills up while a larger one is built (or while expire
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
func (f *table) insert(e uint64, slot uint64) (ok, wait bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if slot < f.floor || f.refusing {
		return false, false
	}
	if full(f.n+1, len(f.buckets)) && len(f.buckets) < f.maxBuckets && !f.growing && f.resizing.TryLock() {
		// The copy is the only pause: 61 ms for the largest table
		// (BenchmarkSaveAtBound copies it the same way).
		f.growing = true
		go f.grow(slices.Clone(f.buckets))
	}
	if !f.ins.place(f.buckets, e) {
		wait = len(f.buckets) < f.maxBuckets || f.growing
		f.refusing = !wait
		return false, wait
	}
	f.n++
	if f.growing {
		f.log = append(f.log, e)
	}
	return true, false
}

// save raises the lowest slot put takes to floor and returns a copy of
// the table, which build takes: every key inserted after it is in a slot
// at or above floor, so the copy and the keys of those slots are the
// table. The copy is the only pause.
func (f *table) save(floor uint64) []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.floor = max(f.floor, floor)
	out := make([]uint64, 0, len(f.buckets)*bucketLen)
	for _, bk := range f.buckets {
		out = append(out, bk[:]...)
	}
	return out
}

// fits says a table of n entries, as save returns them, fits f's bound.
func (f *table) fits(n int) bool {
	nb := n / bucketLen
	return nb >= minBuckets && nb <= f.maxBuckets && nb&(nb-1) == 0 && n%bucketLen == 0
}

// build is the buckets of a table save returned, of n entries, read in
// order by next (false: it could not read them), and the entries in use.
func build(n int, next func() (uint64, bool)) (buckets [][bucketLen]uint64, used int, ok bool) {
	buckets = make([][bucketLen]uint64, n/bucketLen)
	for i := range n {
		e, ok := next()
		if !ok {
			return nil, 0, false
		}
		if e != 0 {
			buckets[i/bucketLen][i%bucketLen] = e
			used++
		}
	}
	return buckets, used, true
}

// grow builds buckets twice as many as old, a copy of f's, and replaces
// f's with them once they hold the entries inserted meanwhile too. If one
// of those finds no place in them, f keeps its buckets.
func (f *table) grow(old [][bucketLen]uint64) {
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

// reserve makes room for n keys in all (up to the bound) at once, so that
// filling the table with them does not rehash it at every doubling. It
// doubles the table in place: call it before the table is shared.
func (f *table) reserve(n int) {
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

// find is Filter.Find in this table.
func (f *table) find(h uint64, hi uint64, dst []uint64) []uint64 {
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

// slotOf is e's slot: the latest at or before hi with e's low bits.
func slotOf(e uint64, hi uint64) uint64 {
	return hi - (hi-e)&slotMask
}

// expire is Filter.Expire in this table. It waits for a larger table
// being built, and holds the lock for its pass over the table (38 ms at
// the largest, BenchmarkSaveAtBound): in chunks, an insert could move an
// entry from a chunk not yet read to one already read.
func (f *table) expire(before, hi uint64) int {
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
	f.refusing = f.refusing && gone == 0
	return gone
}

// keys is the number of keys held.
func (f *table) keys() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// bytes is the table's size in memory.
func (f *table) bytes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.buckets) * bucketLen * 8
}
