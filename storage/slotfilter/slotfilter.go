// Package slotfilter remembers, for each of many keys, the slot it was
// stored in: cuckoo hash tables of 40-bit key tags, each with the slot.
//
// eventd keeps idempotency records by the 128th of a second they arrived
// in, a group of them to a key, so that random keys (UUID messageIds) are
// written at the end of the key space instead of all over their day
// (docs/benchmarks.md, proposal 20 and item 24). A look-up then asks the
// filter which slots may hold its key: usually none (a new key, answered
// from memory) or one (a retry: that slot's groups). A new key has the
// tag of one of the n keys of its table with odds of about n in 2^40 per
// look-up (a table's buckets are bits of the tag, so the tag is all there
// is to tell two keys of a table apart): one in 65,000 look-ups at a full
// table of 16 million keys, which costs a read of one slot's groups that
// finds nothing.
//
// Slots are any uint64; an entry holds a slot's low 24 bits, and Find
// reads them back relative to the latest slot (slotOf), so the filter
// holds keys of 2^24 consecutive slots at most (36 hours of 128ths of a
// second).
//
// A key is in one of two buckets of eight entries, a cache line each, so
// a look-up reads two cache lines. A table doubles from a few thousand
// entries up to at most 2^21 buckets, since the two buckets are bits of
// the 40-bit tag; a filter of more keys is several tables, a key's chosen
// by its hash's low 24 bits, which the tag does not hold (the slot's
// bits take their place in an entry). Past its table's bound Insert says
// no, and the caller keeps the key elsewhere.
// An insert that fails leaves every entry it moved where it was: the
// filter never forgets a key it said yes to.
package slotfilter

// Filter maps 64-bit key hashes to slots. It is safe for concurrent use.
type Filter struct {
	// tables are chosen by a hash's low bits (pick); each has its lock,
	// so a save, an expiry or a doubling pauses one table's keys at a
	// time.
	tables []*table
	// touched keeps Touch's reads from being compiled away; written
	// holding every table's lock.
	touched uint64
}

// New is a filter that holds up to about maxKeys keys (at least 4,096):
// 8-16 bytes a key, in tables of at most 16,777,216 keys (128 MiB), which
// grow as keys come.
func New(maxKeys int) *Filter { return newFilter(maxKeys, maxTableKeys) }

// newFilter is New with tables of at most tableKeys keys (a power of two),
// so that tests fill several tables with few keys.
func newFilter(maxKeys, tableKeys int) *Filter {
	n := max(1, (maxKeys+tableKeys-1)/tableKeys)
	f := &Filter{tables: make([]*table, n)}
	for i := range f.tables {
		f.tables[i] = newTable((maxKeys+n-1)/n, tableKeys/bucketLen)
	}
	return f
}

// pick is the index of the table of the key hashed to h, of n: the hash's
// low bits, which the tag leaves out, scaled to n.
func pick(h uint64, n int) int { return int((h & slotMask) * uint64(n) >> slotBits) }

// of is the table of the key hashed to h.
func (f *Filter) of(h uint64) *table { return f.tables[pick(h, len(f.tables))] }

// Tables is the number of tables, which a saved filter must match.
func (f *Filter) Tables() int { return len(f.tables) }

// Insert records that the key hashed to h is in slot. It returns false
// when the key's table is full or slot is below the floor (Save), and
// changes nothing then.
func (f *Filter) Insert(h uint64, slot uint64) bool { return f.of(h).put(h, slot) }

// Find appends to dst the slots the key hashed to h may be in, newest
// first. Slots are read back relative to hi, the latest slot inserted or
// now if later: the one at or before hi with the stored low bits.
func (f *Filter) Find(h uint64, hi uint64, dst []uint64) []uint64 {
	return f.of(h).find(h, hi, dst)
}

// Touch reads the buckets of every hash of hs, so that Find and Insert of
// them soon after find the buckets in the CPU's cache. Each Find and
// Insert takes a table's lock, an atomic instruction that waits for the
// memory reads before it: one after the other, a large table's look-ups
// wait for a cache miss or two each (some 200 ns in a keyed batch). Here
// the reads of all the buckets go out together, every table's lock taken
// first (table by table, each lock waited for the reads before it: a
// keyed batch's look-ups and inserts at half load 105-132 ns a key
// against 77 for one table, BenchmarkBatch).
func (f *Filter) Touch(hs []uint64) {
	for _, t := range f.tables {
		t.mu.Lock()
	}
	n := len(f.tables)
	var sum uint64
	for _, h := range hs {
		t := f.tables[pick(h, n)]
		b1, b2 := index(tag(h), len(t.buckets)-1)
		sum += t.buckets[b1][0] + t.buckets[b2][0]
	}
	f.touched += sum
	for _, t := range f.tables {
		t.mu.Unlock()
	}
}

// Expire removes the entries of slots before before, read relative to hi
// as in Find; it returns how many it removed. Each table is locked for
// its own pass.
func (f *Filter) Expire(before, hi uint64) int {
	gone := 0
	for _, t := range f.tables {
		gone += t.expire(before, hi)
	}
	return gone
}

// Reserve makes room for n keys in all (up to the bound) at once, so that
// filling the filter with them does not rehash it at every doubling. It
// doubles the tables in place: call it before the filter is shared.
func (f *Filter) Reserve(n int) {
	for _, t := range f.tables {
		t.reserve((n + len(f.tables) - 1) / len(f.tables))
	}
}

// Save raises the lowest slot Insert takes to floor and passes a copy of
// each table in turn to w, whose error it returns: every key inserted
// after a table's copy is in a slot at or above floor, so the copies
// (Restore) and the keys of those slots are the filter. A table's copy is
// the only pause, for that table's keys (61 ms for the largest,
// BenchmarkSaveAtBound).
func (f *Filter) Save(floor uint64, w func(entries []uint64) error) error {
	for _, t := range f.tables {
		if err := w(t.save(floor)); err != nil {
			return err
		}
	}
	return nil
}

// Restore makes an empty filter the tables Save passed on, with its
// floor: table i of sizes[i] entries, read in order by next (from where
// they were saved, without a copy of them all; false: it could not). It
// returns false, changing nothing, if it could not read them or they do
// not fit the filter's tables and bound.
func (f *Filter) Restore(sizes []int, next func() (uint64, bool), floor uint64) bool {
	if len(sizes) != len(f.tables) {
		return false
	}
	for i, n := range sizes {
		if !f.tables[i].fits(n) {
			return false
		}
	}
	built := make([][][bucketLen]uint64, len(sizes))
	used := make([]int, len(sizes))
	for i, n := range sizes {
		var ok bool
		if built[i], used[i], ok = build(n, next); !ok {
			return false
		}
	}
	for _, t := range f.tables {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.n != 0 {
			return false
		}
	}
	for i, t := range f.tables {
		t.buckets, t.n, t.floor = built[i], used[i], floor
	}
	return true
}

// Len is the number of keys held.
func (f *Filter) Len() int {
	n := 0
	for _, t := range f.tables {
		n += t.keys()
	}
	return n
}

// Bytes is the tables' size in memory.
func (f *Filter) Bytes() int {
	n := 0
	for _, t := range f.tables {
		n += t.bytes()
	}
	return n
}
