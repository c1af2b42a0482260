package storage

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// The visitor index of recent days is held in memory instead of being
// written key by key in every commit. Within a day its keys are random
// (visitor first), so each memtable flush overlapped the whole day's
// partition and compaction rewrote it again and again: on a fresh store
// the W keys were 40% of the storage CPU per event. A day in memory is
// written once, when it is over, as one sorted sstable per dataset
// ingested straight into the bottom level (visitorseal.go): eventd-keycost
// measured 25-36% less storage CPU per event, the seal included
// (docs/benchmarks.md, session 8).
//
// Which days are in memory: every day from first on. A day whose memory
// passed its bound is split, not sealed: what it holds is frozen and
// written as tables like a day that is over, while the day goes on in
// memory with a new part, from a timestamp on (since: when the part was
// frozen, less visitorSplitSlack). Until the tables are in, readers take
// both parts (frozen). Its entries from since on go to the memory part;
// the few committed later with an earlier timestamp (sent late, or queued
// across the split) are written to Pebble as W keys, as every entry of a
// day before first is. A reader of a split day merges its Pebble entries
// into its memory view (memView). first and the split days are stored in the
// visitorDaysKey and visitorSplitsKey records and change only when a day
// is sealed or split. Nothing else about the memory is stored: the name
// index holds the visitor of each event (N ds name ts id -> visitor), so
// Open rebuilds the memory days from it, each split day from its since on,
// and a kill -9 loses nothing.
//
// Before days were split, a day past the bound was sealed early and all
// its later entries were W keys, written in every commit: on a loaded
// store, today's (docs/benchmarks.md, session 10). A store written so
// reads such a day as split from its end on.
type visitorMem struct {
	commitMu sync.RWMutex
	// sealMu runs one seal at a time and keeps erasure, retention and
	// dataset deletion out while a day is being written.
	sealMu sync.Mutex

	mu    sync.Mutex
	first uint32           // days before first are in Pebble
	since map[uint32]int64 // split days: the memory part holds the entries from this timestamp on
	days  map[uint32]*memDay
	// frozen holds the part of a day being split that its tables are
	// being written from: commits go on into the day's new part in days,
	// readers take both until the split's switch (visitorseal.go).
	frozen  map[uint32]*memDay
	entries int // held in all days and frozen parts, removed ones included (they take memory until their day is sealed or split)
	// nameTable interns event names: an entry holds an index.
	nameTable

	max  int           // entries before the fullest day is split
	kick chan struct{} // wakes the sealer when max is passed
	seed maphash.Seed  // of the visitor hashes (memDay.heads)
	// sealChunks is the arena size, in chunks, at which a day is split: a
	// place holds 12 bits of chunk number (arenaSealChunks).
	sealChunks int
	// commits are the commits whose entries may not be added yet; a
	// reader takes those its Pebble view sees from there (inflight.go).
	commits *inflight
}

// visitorDaysKey records first (and, written by builds before days were
// split, the days sealed early); visitorSplitsKey records since.
var (
	visitorDaysKey   = configKey("visitor-days", "")
	visitorSplitsKey = configKey("visitor-splits", "")
)

// visitorSplitSlack is how far before the split the memory part of a split
// day starts: commits in flight across the split (their ids, and so their
// timestamps, were taken a few milliseconds before) still go to memory.
// Open may load an entry of the slack twice, from Pebble and memory; the
// readers drop the repeat.
const visitorSplitSlack = time.Second

// DefaultVisitorMemory is Options.VisitorMemory when 0: 170-660 MiB (an
// entry takes 42 bytes when its visitor has 100 in the day, 165 when one).
const DefaultVisitorMemory = 4_000_000

// memVisitor is one visitor of one dataset.
type memVisitor struct {
	ds      uint32
	visitor string
}

// memEntry is one visitor index entry held in memory. It holds no
// pointer, so a day of millions of entries costs the garbage collector
// nothing to scan.
type memEntry struct {
	ts    int64
	id    ID
	name  uint32 // index into visitorMem.names
	vis   uint32 // the visitor's number in its day (memDay.vis)
	prev  uint32 // 1 + index of the previous entry of the same visitor hash; 0: none
	flags uint8
}

const (
	entryBot     = 1 << iota // the event is a bot's (bots.go)
	entryRemoved             // erased or expired
)

func (e *memEntry) bot() bool { return e.flags&entryBot != 0 }

// compare orders entries as their keys: timestamp (as uint64), then id.
func (e *memEntry) compare(o *memEntry) int {
	if e.ts != o.ts {
		return cmp.Compare(uint64(e.ts), uint64(o.ts))
	}
	return bytes.Compare(e.id[:], o.id[:])
}

// entryChunk is how many entries one block of a day holds: blocks are
// never moved, so a day grows without copying what it holds.
const entryChunk = 1 << 15

// memDay is one day's entries, in the order they were added. heads maps a
// hash of dataset and visitor to the visitor's newest entry, and each entry
// links to the previous one of the same hash, so a visitor's entries are
// found without a map entry, a slice and a string per visitor (a day of
// one-event visitors, the bench's shape, cost three allocations per event
// that way). Visitors whose hashes collide share a chain and are told
// apart by their arena bytes.
type memDay struct {
	heads  headTable // 1 + index of the newest entry (visitorheads.go)
	blocks [][]memEntry
	n      uint32 // entries added, removed ones included
	// arena holds each visitor once as ds (4 bytes), len (2), visitor:
	// its key order is the index's (visitorDayPrefix). Its chunks are
	// never moved (a single slice copied the whole arena each time it
	// grew: 2% of an import's CPU). vis is each visitor number's place in
	// it, in the order added: chunk << arenaChunkBits | offset.
	arena [][]byte
	vis   []uint32
}

// arenaChunkBits sizes the arena's largest chunk (1 MiB); the first are
// smaller, so that a day of a few visitors stays small. A place holds 12
// bits of chunk number, 4 GiB of visitors a day: a day whose arena reaches
// arenaSealChunks (3 GiB, reachable only with --visitor-memory raised and
// visitor ids near their 1 KiB limit) is split like the fullest day past
// the entry bound, with a gigabyte left for what arrives meanwhile.
const (
	arenaChunkBits  = 20
	arenaChunkFirst = 4 << 10
	arenaSealChunks = 3 << 10
)

func newMemDay() *memDay { return &memDay{} }

func (md *memDay) entry(i uint32) *memEntry { return &md.blocks[i/entryChunk][i%entryChunk] }

// visitorBytes is visitor number num as its arena bytes.
func visitorBytes(arena [][]byte, vis []uint32, num uint32) []byte {
	ref := vis[num]
	a := arena[ref>>arenaChunkBits][ref&(1<<arenaChunkBits-1):]
	return a[:6+binary.BigEndian.Uint16(a[4:])]
}

// addVisitor appends v to the arena and returns its place.
func (md *memDay) addVisitor(v memVisitor) uint32 {
	need := 6 + len(v.visitor)
	c := len(md.arena) - 1
	if c < 0 || len(md.arena[c])+need > cap(md.arena[c]) {
		size := arenaChunkFirst << min(len(md.arena), arenaChunkBits-12) // 4 KiB, doubling to 1 MiB
		md.arena = append(md.arena, make([]byte, 0, max(size, need)))
		c++
	}
	a := md.arena[c]
	ref := uint32(c)<<arenaChunkBits | uint32(len(a))
	a = binary.BigEndian.AppendUint32(a, v.ds)
	a = binary.BigEndian.AppendUint16(a, uint16(len(v.visitor)))
	md.arena[c] = append(a, v.visitor...)
	return ref
}

// visitor is the dataset and visitor id of visitor number num.
func (md *memDay) visitor(num uint32) (uint32, []byte) {
	a := visitorBytes(md.arena, md.vis, num)
	return binary.BigEndian.Uint32(a), a[6:]
}

// is reports whether visitor number num is v.
func (md *memDay) is(num uint32, v memVisitor) bool {
	ds, vis := md.visitor(num)
	return ds == v.ds && string(vis) == v.visitor
}

// number finds v's visitor number on the chain that starts at head, its
// hash's (usually at its head: a chain holds more than one visitor only
// when hashes collide).
func (md *memDay) number(head uint32, v memVisitor) (uint32, bool) {
	for i := head; i != 0; {
		e := md.entry(i - 1)
		if md.is(e.vis, v) {
			return e.vis, true
		}
		i = e.prev
	}
	return 0, false
}

// each calls fn with the index of every entry of v that is not removed,
// newest first.
func (md *memDay) each(h uint64, v memVisitor, fn func(i uint32, e *memEntry)) {
	head := md.heads.get(h)
	num, ok := md.number(head, v)
	if !ok {
		return
	}
	for i := head; i != 0; {
		e := md.entry(i - 1)
		if e.vis == num && e.flags&entryRemoved == 0 {
			fn(i-1, e)
		}
		i = e.prev
	}
}

// add appends one entry of v.
func (md *memDay) add(h uint64, v memVisitor, e memEntry) {
	head := md.heads.get(h)
	num, ok := md.number(head, v)
	if !ok { // a new visitor
		num = uint32(len(md.vis))
		md.vis = append(md.vis, md.addVisitor(v))
	}
	if md.n%entryChunk == 0 {
		md.blocks = append(md.blocks, make([]memEntry, entryChunk))
	}
	e.vis, e.prev = num, head
	*md.entry(md.n) = e
	md.n++
	md.heads.set(h, md.n)
}

// collect is v's entries in key order.
func (md *memDay) collect(h uint64, v memVisitor) []memEntry {
	var s []memEntry
	md.each(h, v, func(_ uint32, e *memEntry) { s = append(s, *e) })
	slices.Reverse(s)
	return sortEntries(s)
}

// sortEntries puts entries in key order and drops repeats: an event
// committed twice (two imports of one id racing) is one key in Pebble.
func sortEntries(s []memEntry) []memEntry {
	if !slices.IsSortedFunc(s, func(a, b memEntry) int { return a.compare(&b) }) {
		slices.SortFunc(s, func(a, b memEntry) int { return a.compare(&b) })
	}
	return slices.CompactFunc(s, func(a, b memEntry) bool { return a.compare(&b) == 0 })
}

// pendingVisitor is an entry of a batch that is not committed yet.
type pendingVisitor struct {
	v memVisitor
	e memEntry
	n string // event name
}

func newVisitorMem(max int, commits *inflight) *visitorMem {
	if max <= 0 {
		max = DefaultVisitorMemory
	}
	return &visitorMem{first: math.MaxUint32, since: map[uint32]int64{}, days: map[uint32]*memDay{}, frozen: map[uint32]*memDay{},
		nameTable: nameTable{index: map[string]uint32{}}, max: max, sealChunks: arenaSealChunks, kick: make(chan struct{}, 1),
		seed: maphash.MakeSeed(), commits: commits}
}

// hash is the chain of v's entries.
func (m *visitorMem) hash(v memVisitor) uint64 {
	var h maphash.Hash
	h.SetSeed(m.seed)
	var ds [4]byte
	binary.BigEndian.PutUint32(ds[:], v.ds)
	_, _ = h.Write(ds[:])
	_, _ = h.WriteString(v.visitor)
	return h.Sum64()
}

// hashVisitor is visitorMem.hash of a visitor given as bytes.
func hashVisitor(seed maphash.Seed, ds uint32, visitor []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], ds)
	_, _ = h.Write(b[:])
	_, _ = h.Write(visitor)
	return h.Sum64()
}

// inMemory reports whether day's entries are read from memory (merged
// with Pebble's when it is split); callers hold mu or commitMu.
func (m *visitorMem) inMemory(day uint32) bool { return day >= m.first }

// takes reports whether a committed entry at ts goes to memory: its day is
// in memory and, when split, ts is in the memory part. Callers hold
// commitMu.
func (m *visitorMem) takes(ts int64) bool {
	day := visitorDay(ts)
	if day < m.first {
		return false
	}
	since, split := m.since[day]
	return !split || ts >= since
}

// nameTable interns event names for the memories of the indexes
// (visitormem.go, latemem.go): an entry holds an index into names, which
// only grows, so a reader may share the slice it took under the lock.
type nameTable struct {
	names []string
	index map[string]uint32
}

// name is n's index, n added if new.
func (t *nameTable) name(n string) uint32 {
	if i, ok := t.index[n]; ok {
		return i
	}
	n = strings.Clone(n) // the event's name may point into a request body
	i := uint32(len(t.names))
	t.names = append(t.names, n)
	t.index[n] = i
	return i
}

// add puts committed entries into their days; callers hold commitMu shared
// and decided under it that these days are in memory.
func (m *visitorMem) add(pending []pendingVisitor) {
	// The hashes before the lock: the seed never changes.
	var buf [128]uint64
	hs := buf[:0]
	for i := range pending {
		hs = append(hs, m.hash(pending[i].v))
	}
	m.mu.Lock()
	// Load every entry's slot first: independent loads, so the cache
	// misses of a batch's new visitors overlap instead of coming one
	// after the other in the adds below (docs/benchmarks.md, session 13).
	var peeked uint32
	for i := range pending {
		if md := m.days[visitorDay(pending[i].e.ts)]; md != nil {
			peeked += md.heads.peek(hs[i])
		}
	}
	keepLoads(peeked)
	for i := range pending {
		// pending is read by readers meanwhile (inflight.go): not written.
		p := &pending[i]
		e := p.e
		e.name = m.name(p.n)
		m.insertHashed(hs[i], p.v, e)
	}
	_, full := m.overBound()
	m.mu.Unlock()
	if full {
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
}

// overBound reports the day to split, if any: the fullest past the entry
// bound, else one whose arena is near its limit. Callers hold mu.
func (m *visitorMem) overBound() (uint32, bool) {
	if m.entries > m.max {
		return m.fullestDay(), true
	}
	for day, md := range m.days {
		if len(md.arena) >= m.sealChunks {
			return day, true
		}
	}
	return 0, false
}

// insert adds one entry; callers hold mu.
func (m *visitorMem) insert(v memVisitor, e memEntry) { m.insertHashed(m.hash(v), v, e) }

// insertHashed is insert with v's hash.
func (m *visitorMem) insertHashed(h uint64, v memVisitor, e memEntry) {
	day := visitorDay(e.ts)
	md := m.days[day]
	if md == nil {
		md = newMemDay()
		m.days[day] = md
	}
	md.add(h, v, e)
	m.entries++
}

// view copies what a reader needs of visitor's memory days in [first,
// last]; callers hold mu, and open their Pebble iterator under it too, so
// that a day moving from memory to Pebble is in exactly one of the two.
// Entries of commits not added yet (extra, the visitor's) are added to
// their days; one already added is dropped as a repeat. A split day's
// Pebble entries are not in the view yet: the reader merges them with
// addSplitDays once it has released mu.
func (m *visitorMem) view(ds uint32, visitor string, first, last uint32, extra []pendingVisitor) memView {
	mv := memView{first: m.first}
	v := memVisitor{ds, visitor}
	h := m.hash(v)
	for day, md := range m.days {
		if day < first || day > last || !m.inMemory(day) {
			continue
		}
		if s := md.collect(h, v); len(s) > 0 {
			mv.days = append(mv.days, memDayView{day: day, entries: s})
		}
	}
	touched := map[int]bool{}
	for day, md := range m.frozen { // a split's part whose tables are not in yet
		if day >= first && day <= last {
			for _, e := range md.collect(h, v) {
				touched[mv.add(day, e)] = true
			}
		}
	}
	for day := range m.since {
		if day >= first && day <= last {
			mv.split = append(mv.split, day)
		}
	}
	for _, p := range extra {
		if day := visitorDay(p.e.ts); day >= first && day <= last && m.inMemory(day) {
			e := p.e
			e.name = m.name(p.n)
			touched[mv.add(day, e)] = true
		}
	}
	mv.sort(touched)
	mv.names = m.names // append-only: the prefix a reader sees never changes
	return mv
}

// addSplitDays merges the visitor's Pebble entries of the view's split
// days into it, read through it, the iterator opened under mu with the
// view. It reads without mu, which every commit takes to add its entries,
// so that a reader's seeks (a query over many visitors makes one per
// visitor and split day) never hold commits up; mu is taken only to
// intern the names read.
func (mv *memView) addSplitDays(it *pebble.Iterator, m *visitorMem, ds uint32, visitor string) error {
	type read struct {
		day  uint32
		e    memEntry
		name string
	}
	var got []read
	var pfx []byte
	for _, day := range mv.split {
		pfx = visitorDayPrefix(pfx[:0], ds, day, visitor)
		for valid := it.SeekGE(pfx); valid && bytes.HasPrefix(it.Key(), pfx); valid = it.Next() {
			ts, id, ok := tsIDSuffix(it.Key())
			if !ok {
				return errCorrupt
			}
			name, bot := splitBot(it.Value())
			r := read{day: day, e: memEntry{ts: ts, id: id}, name: string(name)}
			if bot {
				r.e.flags = entryBot
			}
			got = append(got, r)
		}
		if err := it.Error(); err != nil {
			return err
		}
	}
	if len(got) == 0 {
		return nil
	}
	touched := map[int]bool{}
	m.mu.Lock()
	for _, r := range got {
		r.e.name = m.name(r.name)
		touched[mv.add(r.day, r.e)] = true
	}
	mv.names = m.names
	m.mu.Unlock()
	mv.sort(touched)
	return nil
}

// memView is a reader's copy of one visitor's entries in memory days, and
// which days of its range are in memory.
type memView struct {
	first uint32 // days from first on are read from days alone
	days  []memDayView
	names []string
	split []uint32 // split days in range, whose Pebble entries addSplitDays merges in
}

// sort puts the entries of the touched days (indexes into days) in key
// order, a repeat dropped, and the days in order.
func (mv *memView) sort(touched map[int]bool) {
	for i := range touched {
		mv.days[i].entries = sortEntries(mv.days[i].entries)
	}
	slices.SortFunc(mv.days, func(a, b memDayView) int { return cmp.Compare(a.day, b.day) })
}

type memDayView struct {
	day     uint32
	entries []memEntry
}

// add appends e to its day (not sorted) and reports the day's index.
func (mv *memView) add(day uint32, e memEntry) int {
	i := slices.IndexFunc(mv.days, func(d memDayView) bool { return d.day == day })
	if i < 0 {
		i = len(mv.days)
		mv.days = append(mv.days, memDayView{day: day})
	}
	mv.days[i].entries = append(mv.days[i].entries, e)
	return i
}

// inMemory is visitorMem.inMemory as it was when the view was taken.
func (mv *memView) inMemory(day uint32) bool { return day >= mv.first }

// nextPebbleDay is the first day at or after day that the reader's
// iterator reads (one before first; a split day's Pebble entries are in
// the view), false if there is none.
func (mv *memView) nextPebbleDay(day uint32) (uint32, bool) { return day, day < mv.first }

// prevPebbleDay is the last day at or before day that the reader's
// iterator reads, false if there is none.
func (mv *memView) prevPebbleDay(day uint32) (uint32, bool) {
	if day < mv.first {
		return day, true
	}
	return mv.first - 1, mv.first > 0
}

// remove marks entries of one visitor (all of them when ids is nil)
// removed in the memory days; callers hold mu and sealMu.
func (m *visitorMem) remove(v memVisitor, ids map[ID]bool) {
	h := m.hash(v)
	for _, md := range m.days {
		md.each(h, v, func(_ uint32, e *memEntry) {
			if ids == nil || ids[e.id] {
				e.flags |= entryRemoved
			}
		})
	}
}

// dropDatasets marks every entry of the datasets removed; callers hold mu
// and sealMu.
func (m *visitorMem) dropDatasets(ds []uint32) {
	for _, md := range m.days {
		for i := range md.n {
			e := md.entry(i)
			if d, _ := md.visitor(e.vis); slices.Contains(ds, d) {
				e.flags |= entryRemoved
			}
		}
	}
}

// encodeDays is the visitorDaysKey value: first, and splitMark while a
// day is split. A build before days were split reads the value as first
// and the days it sealed early: it would put the entries it commits to a
// split day before since in its memory only, where this build, which reads
// them from Pebble, would never find them. The mark's odd length makes such
// a build refuse the store instead, only while a day is split.
func (m *visitorMem) encodeDays() []byte {
	v := binary.BigEndian.AppendUint32(nil, m.first)
	if len(m.since) > 0 {
		v = append(v, splitMark)
	}
	return v
}

// splitMark ends the visitorDaysKey value while a day is split.
const splitMark = 's'

// encodeSplits is the visitorSplitsKey value: each split day and its
// since, by day.
func (m *visitorMem) encodeSplits() []byte {
	v := []byte{}
	for _, day := range slices.Sorted(maps.Keys(m.since)) {
		v = binary.BigEndian.AppendUint32(v, day)
		v = binary.BigEndian.AppendUint64(v, uint64(m.since[day]))
	}
	return v
}

// decodeDays reads the visitorDaysKey and visitorSplitsKey values (splits
// nil when there is none). A day the visitorDaysKey value lists after
// first was sealed early by a build before days were split: every entry of
// it is in Pebble, as in a day split at its end.
func (m *visitorMem) decodeDays(days, splits []byte) error {
	if len(days)%4 == 1 && days[len(days)-1] == splitMark {
		days = days[:len(days)-1]
	}
	if len(days) < 4 || len(days)%4 != 0 || len(splits)%12 != 0 {
		return errCorrupt
	}
	m.first = binary.BigEndian.Uint32(days)
	for days = days[4:]; len(days) > 0; days = days[4:] {
		day := binary.BigEndian.Uint32(days)
		m.since[day] = int64(day+1) * dayMs
	}
	for ; len(splits) > 0; splits = splits[12:] {
		m.since[binary.BigEndian.Uint32(splits)] = int64(binary.BigEndian.Uint64(splits[4:]))
	}
	for day := range m.since {
		if day < m.first { // never written so: a day leaves since when it leaves memory
			delete(m.since, day)
		}
	}
	return nil
}

// VisitorMemory is how many visitor index entries, of how many days, are
// held in memory (for the metrics).
func (d *DB) VisitorMemory() (entries, days int) {
	m := d.vmem
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.entries, len(m.days)
}

// VisitorSplitDays is how many days in memory were split past the bound
// (for the metrics: more than none says --visitor-memory is short of a
// day's events).
func (d *DB) VisitorSplitDays() int {
	m := d.vmem
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.since)
}

// loadVisitorMem reads which days are in memory and rebuilds them from the
// name index. A store that has no record yet starts holding today in
// memory (a read-only open keeps every day in Pebble, where the build that
// wrote the store put them).
func (d *DB) loadVisitorMem(now time.Time) (int, error) {
	m := d.vmem
	v, err := d.get(visitorDaysKey)
	switch {
	case err == ErrNotFound && d.readOnly:
		return 0, nil
	case err == ErrNotFound:
		m.first = visitorDay(now.UnixMilli())
		if err := d.apply(func() error { return d.db.Set(visitorDaysKey, m.encodeDays(), pebble.Sync) }); err != nil {
			return 0, err
		}
	case err != nil:
		return 0, err
	default:
		splits, err := d.get(visitorSplitsKey)
		if err != nil && err != ErrNotFound {
			return 0, err
		}
		if err := m.decodeDays(v, splits); err != nil {
			return 0, err
		}
	}
	return d.rebuildVisitorMem()
}

// rebuildVisitorMem fills the memory days from the name index, N and J
// (the displaced events', timeindex.go).
func (d *DB) rebuildVisitorMem() (int, error) {
	n := 0
	for _, p := range [2]byte{prefixName, prefixDisplacedName} {
		k, err := d.rebuildVisitorMemFrom(p)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// rebuildVisitorMemFrom fills the memory days from the name index keys
// under p: for each dataset and name it seeks to the first memory day and
// reads on, on a split day from its since. Reading Pebble and adding to
// memory take about as long each, so a goroutine reads and hashes the
// entries in batches while this one adds them: the rebuild of 1.5 million
// entries after a kill -9 took 0.49-0.57 s instead of 0.61-0.66 s, and a
// start is healthy once it is done (docs/benchmarks.md, session 29).
func (d *DB) rebuildVisitorMemFrom(p byte) (int, error) {
	m := d.vmem
	m.mu.Lock()
	defer m.mu.Unlock()
	batches := make(chan *rebuildBatch, 2)
	free := make(chan *rebuildBatch, 3)
	for range cap(free) {
		free <- &rebuildBatch{}
	}
	readErr := make(chan error, 1)
	// The reader reads only what the rebuild does not change: the days
	// (first, since), the seed and Pebble.
	go func() {
		defer close(batches)
		readErr <- d.readVisitorEntries(p, m.first, m.since, m.seed, free, batches)
	}()
	n := 0
	for b := range batches {
		at, name := -1, uint32(0)
		for _, it := range b.items {
			if int(it.name) != at { // one name after the other: interned once
				at, name = int(it.name), m.name(b.names[it.name])
			}
			e := it.e
			e.name = name
			m.insertHashed(it.h, memVisitor{it.ds, b.visitors[it.off : it.off+it.len]}, e)
		}
		n += len(b.items)
		free <- b
	}
	return n, <-readErr
}

// rebuildBatch is entries the rebuild's reader hands its adder: their
// visitors are substrings of one string, so adding them allocates nothing
// (the memory copies a visitor it does not have).
type rebuildBatch struct {
	buf      []byte
	visitors string
	names    []string
	items    []rebuildItem
}

// rebuildItem is one entry of a rebuildBatch; e.name is not set yet, name
// is the index of its name in the batch.
type rebuildItem struct {
	h        uint64
	ds       uint32
	off, len uint32
	name     uint32
	e        memEntry
}

// rebuildBatchEntries is how many entries a rebuildBatch holds.
const rebuildBatchEntries = 4096

// readVisitorEntries reads the index entries under p that belong in memory
// (from the first day on, and on a split day from its since) into batches
// taken from free and sent to out.
func (d *DB) readVisitorEntries(p byte, first uint32, since map[uint32]int64, seed maphash.Seed,
	free <-chan *rebuildBatch, out chan<- *rebuildBatch) error {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{p}, UpperBound: []byte{p + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	start := int64(first) * dayMs
	var seek, lastPfx []byte
	var b *rebuildBatch
	send := func() {
		if b != nil && len(b.items) > 0 {
			b.visitors = string(b.buf)
			out <- b
			b = nil
		}
	}
	defer send()
	for valid := it.First(); valid; {
		k := it.Key()
		if len(k) < datasetPrefLen+1 || len(k) < datasetPrefLen+1+int(k[datasetPrefLen])+24 {
			return errCorrupt
		}
		pfx := k[:datasetPrefLen+1+int(k[datasetPrefLen])]
		ts, id, _ := tsIDSuffix(k)
		day := visitorDay(ts)
		switch {
		case uint64(ts) < uint64(start):
			seek = appendTS(append(seek[:0], pfx...), start)
			valid = it.SeekGE(seek)
			continue
		case ts < since[day]: // split: the entries before since are in Pebble
			seek = appendTS(append(seek[:0], pfx...), since[day])
			valid = it.SeekGE(seek)
			continue
		}
		visitor, bot := splitBot(it.Value())
		if len(visitor) > 0 {
			if b == nil {
				b = <-free
				b.buf, b.names, b.items = b.buf[:0], b.names[:0], b.items[:0]
				lastPfx = lastPfx[:0] // each batch names its own
			}
			if !bytes.Equal(pfx, lastPfx) { // one name after the other: once per batch
				lastPfx = append(lastPfx[:0], pfx...)
				b.names = append(b.names, string(pfx[datasetPrefLen+1:]))
			}
			ds := binary.BigEndian.Uint32(k[1:datasetPrefLen])
			e := memEntry{ts: ts, id: id}
			if bot {
				e.flags = entryBot
			}
			b.items = append(b.items, rebuildItem{h: hashVisitor(seed, ds, visitor), ds: ds,
				off: uint32(len(b.buf)), len: uint32(len(visitor)), name: uint32(len(b.names) - 1), e: e})
			b.buf = append(b.buf, visitor...)
			if len(b.items) == rebuildBatchEntries {
				send()
			}
		}
		valid = it.Next()
	}
	return it.Error()
}
