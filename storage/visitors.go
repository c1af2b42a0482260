package storage

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// The visitor index is partitioned by the day of the event's timestamp:
//
//	W ds day len2 visitor ts id -> name
//
// Without the day, new entries land next to every returning visitor's whole
// history, so each compaction of new data rewrote the visitor index of the
// entire store: on a store loaded with 30 days of 5 M events it made the
// single-event write cost 71 µs of CPU instead of 36 µs without the index
// (docs/benchmarks.md, session 7). With it, live ingest only touches
// today's partition. A visitor's entries stay in timestamp order when the
// days are read one after the other, which visitorIter does.
const (
	prefixVisitor   = 'W'
	prefixVisitorV1 = 'V' // V ds len2 visitor ts id: before the day; migrated at Open
)

// minVisitorKeyLen is the length of a visitor index key with an empty visitor id.
const minVisitorKeyLen = datasetPrefLen + 4 + 2 + 24

// visitorDay is the partition of a timestamp: its UTC day counted the way
// the key orders timestamps (as uint64), capped so it fits four bytes; the
// cap keeps it monotonic.
func visitorDay(ts int64) uint32 {
	return uint32(min(uint64(ts)/uint64(dayMs), math.MaxUint32))
}

// visitorDayPrefix is W ds day len2 visitor: one visitor's entries of one
// day. The length comes first so that one visitor id is never a prefix of
// another's keys.
func visitorDayPrefix[S string | []byte](dst []byte, ds, day uint32, visitor S) []byte {
	dst = appendDataset(dst, prefixVisitor, ds)
	dst = binary.BigEndian.AppendUint32(dst, day)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(visitor)))
	return append(dst, visitor...)
}

// visitorKey is the visitor index key of one event.
func visitorKey(dst []byte, ds uint32, visitor string, ts int64, id ID) []byte {
	dst = visitorDayPrefix(dst, ds, visitorDay(ts), visitor)
	return append(appendTS(dst, ts), id[:]...)
}

// visitorValue is a visitor index value: the event name after a bot mark.
func visitorValue(dst []byte, bot bool, name string) []byte {
	return append(appendBotMark(dst, bot), name...)
}

// visitorDayBound is W ds day: the start of one day's partition.
func visitorDayBound(ds, day uint32) []byte {
	return binary.BigEndian.AppendUint32(appendDataset(nil, prefixVisitor, ds), day)
}

// indexIter is what the index readers use of an iterator: a
// *pebble.Iterator over the time or name index, or a visitorIter.
type indexIter interface {
	First() bool
	Last() bool
	Next() bool
	Prev() bool
	Valid() bool
	Key() []byte
	Value() []byte
	Error() error
	Close() error
}

// visitorIter walks one visitor's index entries with timestamps in [from,
// to] in timestamp order, one day after the other, each day from Pebble or
// from memory (visitormem.go). Within a Pebble day the entries are
// adjacent; between days a seek skips to the next day that holds any entry
// of the dataset, and one more to this visitor's entries in it, so days
// without events cost nothing. A memory day is a slice copied when the
// iterator opened.
type visitorIter struct {
	it          *pebble.Iterator
	ds          uint32
	visitor     string
	from, to    uint64 // as the keys order timestamps
	first, last uint32 // the days of from and to
	day         uint32 // the day the iterator is in
	prefix      []byte // visitorDayPrefix of day
	seek        []byte
	valid       bool
	err         error // a key that is no visitor index key

	mem    memView
	onMem  bool // on mem.days[mi].entries[ei], not on it
	mi, ei int
	key    []byte // Key and Value of a memory entry
	val    []byte
}

// openVisitor opens a visitor's index over [from, to] on r (the store or a
// snapshot of it) and m. A store opened read-only before its migration
// (serve starts read-only when the disk is full) still has the index
// without days: one contiguous range per visitor.
func openVisitor(r pebble.Reader, m *visitorMem, legacy bool, ds uint32, visitor string, from, to int64) (indexIter, error) {
	if !legacy {
		return newVisitorIter(r, m, ds, visitor, from, to)
	}
	p := appendDataset(nil, prefixVisitorV1, ds)
	p = binary.BigEndian.AppendUint16(p, uint16(len(visitor)))
	lower, upper := rangeBounds(append(p, visitor...), from, to)
	return r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
}

// newVisitorIter opens a visitorIter on r (the store or a snapshot) and
// m. A negative from counts as 0 and a negative to as an empty range, as
// rangeBounds has them for the other indexes.
func newVisitorIter(r pebble.Reader, m *visitorMem, ds uint32, visitor string, from, to int64) (*visitorIter, error) {
	from = max(from, 0)
	v := &visitorIter{ds: ds, visitor: visitor, from: uint64(from), to: uint64(to),
		first: visitorDay(from), last: visitorDay(to)}
	if to < from {
		v.first, v.last = 1, 0 // empty: every positioning fails
	}
	// Under mu, so that a day moving from memory to Pebble is in exactly
	// one of the two (visitorseal.go).
	m.mu.Lock()
	// The visitor's entries of commits r sees that memory may not hold yet,
	// also under mu: a commit still in flight holds commitMu, so erasure,
	// retention and dataset deletion cannot have removed its entries from
	// memory yet (a copy taken before mu could bring them back).
	var extra []pendingVisitor
	m.commits.seen(r, func(c *inflightCommit) {
		for _, p := range c.mem {
			if p.v.ds == ds && p.v.visitor == visitor {
				extra = append(extra, p)
			}
		}
	})
	it, err := r.NewIter(&pebble.IterOptions{
		LowerBound: visitorDayBound(ds, v.first),
		UpperBound: prefixEnd(visitorDayBound(ds, v.last)),
	})
	if err != nil {
		m.mu.Unlock()
		return nil, err
	}
	v.it = it
	if v.first > v.last {
		m.mu.Unlock()
		v.mem.first = math.MaxUint32
		return v, nil
	}
	v.mem = m.view(ds, visitor, v.first, v.last, extra)
	m.mu.Unlock()
	if err := v.mem.addSplitDays(it, m, ds, visitor); err != nil {
		_ = it.Close()
		return nil, err
	}
	return v, nil
}

func (v *visitorIter) setDay(day uint32) {
	v.day = day
	v.prefix = visitorDayPrefix(v.prefix[:0], v.ds, day, v.visitor)
}

// keyDay reads the day of the key the iterator is on; a key too short to be
// a visitor index key stops the iteration with errCorrupt.
func (v *visitorIter) keyDay() (uint32, bool) {
	k := v.it.Key()
	if len(k) < minVisitorKeyLen {
		v.err = errCorrupt
		return 0, false
	}
	return binary.BigEndian.Uint32(k[datasetPrefLen:]), true
}

// First moves to the oldest entry.
func (v *visitorIter) First() bool {
	if v.first > v.last {
		return v.invalid()
	}
	v.setDay(v.first)
	return v.forward()
}

// Last moves to the newest entry.
func (v *visitorIter) Last() bool {
	if v.first > v.last {
		return v.invalid()
	}
	v.setDay(v.last)
	return v.backward()
}

// Next moves to the next newer entry.
func (v *visitorIter) Next() bool {
	if !v.valid {
		return false
	}
	if v.onMem {
		if s := v.mem.days[v.mi].entries; v.ei+1 < len(s) {
			v.ei++
			v.valid = uint64(s[v.ei].ts) <= v.to
			return v.valid
		}
	} else if v.it.Next() && bytes.HasPrefix(v.it.Key(), v.prefix) {
		return v.settle(true)
	}
	if v.day == v.last {
		return v.invalid()
	}
	v.setDay(v.day + 1)
	return v.forward()
}

// Prev moves to the next older entry.
func (v *visitorIter) Prev() bool {
	if !v.valid {
		return false
	}
	if v.onMem {
		if s := v.mem.days[v.mi].entries; v.ei > 0 {
			v.ei--
			v.valid = uint64(s[v.ei].ts) >= v.from
			return v.valid
		}
	} else if v.it.Prev() && bytes.HasPrefix(v.it.Key(), v.prefix) {
		return v.settle(false)
	}
	if v.day == v.first {
		return v.invalid()
	}
	v.setDay(v.day - 1)
	return v.backward()
}

// forward finds the first entry at or after the start of v.day (at from
// on the first day), in Pebble up to the next memory day that holds the
// visitor's entries, then in that day, and so on.
func (v *visitorIter) forward() bool {
	for {
		mi, _ := slices.BinarySearchFunc(v.mem.days, v.day, func(d memDayView, day uint32) int { return cmp.Compare(d.day, day) })
		limit := uint64(v.last) + 1
		if mi < len(v.mem.days) {
			limit = uint64(v.mem.days[mi].day)
		}
		if v.pebbleForward(limit) || v.err != nil || v.valid {
			return v.valid
		}
		if uint64(limit) > uint64(v.last) {
			return v.invalid()
		}
		md := v.mem.days[mi]
		i := 0
		if md.day == v.first {
			i = searchEntries(md.entries, func(e *memEntry) bool { return uint64(e.ts) >= v.from })
		}
		if i < len(md.entries) {
			v.setDay(md.day)
			v.onMem, v.mi, v.ei = true, mi, i
			v.valid = uint64(md.entries[i].ts) <= v.to
			return v.valid
		}
		if md.day == v.last {
			return v.invalid()
		}
		v.setDay(md.day + 1)
	}
}

// backward finds the last entry before the end of v.day (at to on the
// last day), in Pebble down to the previous memory day that holds the
// visitor's entries, then in that day, and so on.
func (v *visitorIter) backward() bool {
	for {
		mi, found := slices.BinarySearchFunc(v.mem.days, v.day, func(d memDayView, day uint32) int { return cmp.Compare(d.day, day) })
		if !found {
			mi-- // the last memory day before v.day
		}
		limit := int64(v.first) - 1
		if mi >= 0 {
			limit = int64(v.mem.days[mi].day)
		}
		if v.pebbleBackward(limit) || v.err != nil || v.valid {
			return v.valid
		}
		if limit < int64(v.first) {
			return v.invalid()
		}
		md := v.mem.days[mi]
		i := len(md.entries)
		if md.day == v.last {
			i = searchEntries(md.entries, func(e *memEntry) bool { return uint64(e.ts) > v.to })
		}
		if i > 0 {
			v.setDay(md.day)
			v.onMem, v.mi, v.ei = true, mi, i-1
			v.valid = uint64(md.entries[i-1].ts) >= v.from
			return v.valid
		}
		if md.day == v.first {
			return v.invalid()
		}
		v.setDay(md.day - 1)
	}
}

// searchEntries is sort.Search over entries: the first index whose entry has f.
func searchEntries(s []memEntry, f func(*memEntry) bool) int {
	i, _ := slices.BinarySearchFunc(s, true, func(e memEntry, _ bool) int {
		if f(&e) {
			return 1
		}
		return -1
	})
	return i
}

// pebbleForward finds the first Pebble entry at or after the start of
// v.day on a day before limit, skipping the days in memory; false when
// there is none, or when the first one found is past to.
func (v *visitorIter) pebbleForward(limit uint64) bool {
	v.onMem, v.valid = false, false
	for {
		d, ok := v.mem.nextPebbleDay(v.day)
		if !ok || uint64(d) >= limit {
			return false
		}
		if d != v.day {
			v.setDay(d)
		}
		seek := v.prefix
		if v.day == v.first {
			v.seek = binary.BigEndian.AppendUint64(append(v.seek[:0], v.prefix...), v.from)
			seek = v.seek
		}
		if !v.it.SeekGE(seek) {
			return false
		}
		kd, ok := v.keyDay()
		if !ok || kd < v.day {
			return false
		}
		if kd > v.day {
			if uint64(kd) >= limit {
				return false
			}
			v.setDay(kd) // a later day holds entries: look for the visitor's there
			continue
		}
		if bytes.HasPrefix(v.it.Key(), v.prefix) {
			return v.settle(true)
		}
		if v.day == v.last {
			return false
		}
		v.setDay(v.day + 1)
	}
}

// pebbleBackward is pebbleForward backward: the last Pebble entry before
// the end of v.day on a day after limit.
func (v *visitorIter) pebbleBackward(limit int64) bool {
	v.onMem, v.valid = false, false
	for {
		d, ok := v.mem.prevPebbleDay(v.day)
		if !ok || int64(d) <= limit {
			return false
		}
		if d != v.day {
			v.setDay(d)
		}
		seek := prefixEnd(v.prefix)
		if v.day == v.last && v.to < math.MaxUint64 {
			v.seek = binary.BigEndian.AppendUint64(append(v.seek[:0], v.prefix...), v.to+1)
			seek = v.seek
		}
		if !v.it.SeekLT(seek) {
			return false
		}
		kd, ok := v.keyDay()
		if !ok || kd > v.day {
			return false
		}
		if kd < v.day {
			if int64(kd) <= limit {
				return false
			}
			v.setDay(kd) // an earlier day holds entries
			continue
		}
		if bytes.HasPrefix(v.it.Key(), v.prefix) {
			return v.settle(false)
		}
		if v.day == v.first {
			return false
		}
		v.setDay(v.day - 1)
	}
}

// settle checks the entry the iterator is on against the far end of the
// range: to when moving forward, from when moving backward.
func (v *visitorIter) settle(forward bool) bool {
	ts, _, ok := tsIDSuffix(v.it.Key())
	if !ok {
		v.err = errCorrupt
		return v.invalid()
	}
	if forward {
		v.valid = uint64(ts) <= v.to
	} else {
		v.valid = uint64(ts) >= v.from
	}
	return v.valid
}

func (v *visitorIter) invalid() bool {
	v.valid = false
	return false
}

// Valid reports whether the iterator is on an entry.
func (v *visitorIter) Valid() bool { return v.valid }

// Key is the current entry's key.
func (v *visitorIter) Key() []byte {
	if !v.onMem {
		return v.it.Key()
	}
	e := &v.mem.days[v.mi].entries[v.ei]
	v.key = visitorKey(v.key[:0], v.ds, v.visitor, e.ts, e.id)
	return v.key
}

// Value is the current entry's value: the event name, after a bot mark.
func (v *visitorIter) Value() []byte {
	if !v.onMem {
		return v.it.Value()
	}
	e := &v.mem.days[v.mi].entries[v.ei]
	v.val = visitorValue(v.val[:0], e.bot(), v.mem.names[e.name])
	return v.val
}

// Error is the iterator's error, if any.
func (v *visitorIter) Error() error {
	if v.err != nil {
		return v.err
	}
	return v.it.Error()
}

// Close releases the iterator.
func (v *visitorIter) Close() error { return v.it.Close() }

// openVisitorIndex migrates the visitor index at Open, logging its
// progress; a read-only open cannot, so it reads the old layout if there is one.
func (d *DB) openVisitorIndex(o Options) error {
	legacy, err := d.hasLegacyVisitors()
	if err != nil || !legacy {
		return err
	}
	if o.ReadOnly {
		d.legacyVisitors = true
		return nil
	}
	var progress func(int)
	if o.Logger != nil {
		progress = func(n int) { o.Logger.Info("moving the visitor index to day partitions", "entries", n) }
	}
	n, err := d.migrateVisitorIndex(progress)
	if err == nil && o.Logger != nil {
		o.Logger.Info("visitor index moved to day partitions", "entries", n)
	}
	return err
}

// hasLegacyVisitors reports whether the store still holds V keys.
func (d *DB) hasLegacyVisitors() (bool, error) { return d.hasKeys(prefixVisitorV1) }

// migrateVisitorIndex rewrites the V keys of a store written before the day
// partitions as W keys (moveKeys), deleting the V keys only at the end: a
// read-only open reads the V keys while there are any, so they must stay
// whole. A key that is not an index key is dropped.
func (d *DB) migrateVisitorIndex(progress func(moved int)) (int, error) {
	var k []byte
	return d.moveKeys(prefixVisitorV1, false, func(b *pebble.Batch, old, v []byte) error {
		// V ds len2 visitor ts id
		if len(old) < datasetPrefLen+2+24 {
			return nil
		}
		ds := binary.BigEndian.Uint32(old[1:datasetPrefLen])
		vis := old[datasetPrefLen+2 : len(old)-24]
		ts, id, _ := tsIDSuffix(old)
		k = visitorKey(k[:0], ds, string(vis), ts, id)
		return b.Set(k, v, nil)
	}, nil, progress)
}

// VisitorsEvents is VisitorEvents for many visitors at once, as the paths
// analysis reads its anchors' histories: it returns each visitor's events
// in [from, to], oldest first; more than limit in all (0: no bound) returns
// ErrScanLimit. Within each day of the range that holds entries it visits
// the visitors in key order with one iterator, stepping to the next one's
// entries when they are a few keys on and seeking otherwise, so a day costs
// at most a seek per visitor asked for and often much less.
func (d *DB) VisitorsEvents(ds uint32, visitors []string, from, to int64, limit int) (map[string][]VisitorEvent, error) {
	out, err := d.visitorsEvents(ds, visitors, from, to, limit)
	for _, evs := range out {
		if !slices.IsSortedFunc(evs, compareVisitorEvents) {
			slices.SortFunc(evs, compareVisitorEvents) // memory days first, then Pebble's
		}
	}
	return out, err
}

func (d *DB) visitorsEvents(ds uint32, visitors []string, from, to int64, limit int) (map[string][]VisitorEvent, error) {
	out := make(map[string][]VisitorEvent, len(visitors))
	from = max(from, 0)
	if to < from || len(visitors) == 0 {
		return out, nil
	}
	if d.legacyVisitors { // read-only before the migration: one range per visitor
		n := 0
		for _, v := range visitors {
			if _, done := out[v]; done {
				continue
			}
			evs, err := d.VisitorEvents(ds, v, from, to, 0)
			if err != nil {
				return nil, err
			}
			if n += len(evs); limit > 0 && n > limit {
				return nil, ErrScanLimit
			}
			if len(evs) > 0 {
				out[v] = evs
			}
		}
		return out, nil
	}
	// Key order: the length first, then the bytes (visitorDayPrefix).
	sorted := slices.Clone(visitors)
	slices.SortFunc(sorted, visitorOrder)
	sorted = slices.Compact(sorted)
	first, last := visitorDay(from), visitorDay(to)
	// As newVisitorIter: under mu, the entries of commits Pebble shows that
	// memory may not hold yet, the iterator and the memory days.
	d.vmem.mu.Lock()
	extra := map[string][]pendingVisitor{}
	d.inflight.seen(d.db, func(c *inflightCommit) {
		for _, p := range c.mem {
			if _, ok := slices.BinarySearchFunc(sorted, p.v.visitor, visitorOrder); ok && p.v.ds == ds {
				extra[p.v.visitor] = append(extra[p.v.visitor], p)
			}
		}
	})
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: visitorDayBound(ds, first), UpperBound: prefixEnd(visitorDayBound(ds, last))})
	if err != nil {
		d.vmem.mu.Unlock()
		return nil, err
	}
	defer it.Close()
	views := make([]memView, len(sorted))
	for i, vis := range sorted {
		views[i] = d.vmem.view(ds, vis, first, last, extra[vis])
	}
	d.vmem.mu.Unlock()
	for i, vis := range sorted {
		if err := views[i].addSplitDays(it, d.vmem, ds, vis); err != nil {
			return nil, err
		}
	}
	n := 0
	var pfx []byte
	days := views[0] // which days are in memory is the same in every view
	if n, err = memVisitorsEvents(out, sorted, views, from, to, limit); err != nil {
		return nil, err
	}
	for day := first; it.SeekGE(visitorDayBound(ds, day)); day++ {
		k := it.Key()
		if len(k) < minVisitorKeyLen {
			return nil, errCorrupt
		}
		day = binary.BigEndian.Uint32(k[datasetPrefLen:]) // the next day holding entries
		if days.inMemory(day) {                           // read from the view (a split day's Pebble keys included)
			next, ok := days.nextPebbleDay(day)
			if !ok || next > last {
				break
			}
			day = next - 1
			continue
		}
		for _, vis := range sorted {
			pfx = visitorDayPrefix(pfx[:0], ds, day, vis)
			for step := 0; it.Valid() && bytes.Compare(it.Key(), pfx) < 0; step++ {
				if len(it.Key()) < minVisitorKeyLen {
					return nil, errCorrupt
				}
				if step == 16 {
					it.SeekGE(pfx)
					break
				}
				it.Next()
			}
			for ; it.Valid() && bytes.HasPrefix(it.Key(), pfx); it.Next() {
				ts, id, ok := tsIDSuffix(it.Key())
				if !ok {
					return nil, errCorrupt
				}
				if uint64(ts) < uint64(from) || uint64(ts) > uint64(to) {
					continue
				}
				if n++; limit > 0 && n > limit {
					return nil, ErrScanLimit
				}
				name, bot := splitBot(it.Value())
				out[vis] = append(out[vis], VisitorEvent{Timestamp: ts, ID: id, Name: string(name), Bot: bot})
			}
			if !it.Valid() {
				return out, it.Error() // past the range's last entry
			}
		}
		if day == last {
			break
		}
	}
	return out, it.Error()
}

func compareVisitorEvents(a, b VisitorEvent) int {
	return cmp.Or(cmp.Compare(uint64(a.Timestamp), uint64(b.Timestamp)), bytes.Compare(a.ID[:], b.ID[:]))
}

// memVisitorsEvents adds the entries in [from, to] of the visitors' memory
// views to out and returns how many; more than limit (0: no bound) is
// ErrScanLimit.
func memVisitorsEvents(out map[string][]VisitorEvent, visitors []string, views []memView, from, to int64, limit int) (int, error) {
	n := 0
	for i, vis := range visitors {
		for _, md := range views[i].days {
			for _, e := range md.entries {
				if uint64(e.ts) < uint64(from) || uint64(e.ts) > uint64(to) {
					continue
				}
				if n++; limit > 0 && n > limit {
					return n, ErrScanLimit
				}
				out[vis] = append(out[vis], VisitorEvent{Timestamp: e.ts, ID: e.id, Name: views[i].names[e.name], Bot: e.bot()})
			}
		}
	}
	return n, nil
}

// visitorOrder orders visitor ids as their keys do: length first, then the
// bytes (visitorDayPrefix).
func visitorOrder(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b)) }
