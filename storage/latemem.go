package storage

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// lateMem holds the M and J keys of recent displaced events in memory and
// writes them to Pebble later, second after second in time order
// (proposal 19 in docs/benchmarks.md). Under their own key families
// (timeindex.go) such keys still arrived out of order, as far back as the
// clients' queueing delays, and every flush of them merged with the tables
// below. Written a cell (a second of timestamps) at a time once no commit
// can add to it any more, each flush of them lands after what is already
// stored, and Pebble moves it down instead of merging it.
//
// A commit gives a displaced event's keys to memory when its timestamp is
// at or past cut and its id's millisecond at or past floor; it writes them
// itself otherwise (an import of old events, a client clock far behind).
// The records are in Z from the commit on, so the memory is rebuilt at Open
// from the Z keys from floor on whose timestamps are at or past cut; the
// writer records cut and floor with each cell it writes (the watermark).
// Readers merge memory with Pebble (timeIter) and drop repeats: a key can
// be in both while a written cell is being dropped, and after a crash.
type lateMem struct {
	// commitMu: commits hold it shared from their decision (takes) to
	// their add; the writer moving cut and floor, and erasure, retention
	// and dataset deletion removing entries, hold it exclusively.
	commitMu sync.RWMutex
	// mu guards cells, n, names and recorded, and makes a reader's
	// snapshot one step with its Pebble view.
	mu    sync.Mutex
	cut   int64 // ms: earlier timestamps are written by their commits
	floor int64 // ms: earlier ids' events too
	cells map[int64]*lateCell
	n     int // entries held, removed ones included
	max   int
	// size is the bytes held: lateEntryBytes an entry and the visitor ids
	// in the cells' arenas; past maxSize memory writes early as past max,
	// so that long visitor ids cannot hold more than the bound implies.
	size, maxSize int
	batch         int // keys per writer batch (lateBatchKeys; tests set fewer)
	// recorded is the floor of the last watermark written.
	recorded int64
	nameTable
	kick chan struct{}
	// writing, when set (tests), is called by writeLate once it has taken
	// the cells it writes and let go of the locks, before it writes them.
	writing func()
}

// lateEntry is one displaced event held in memory: no pointer, so a
// million of them cost the collector nothing.
type lateEntry struct {
	ts    int64
	id    ID
	ds    uint32
	name  uint32 // index into lateMem.names
	off   uint32 // the visitor id in its cell's arena
	vlen  uint16
	flags uint8
}

const (
	lateBot     = 1 << iota // the event is a bot's (bots.go)
	lateVisitor             // it has a visitor id (maybe empty)
	lateRemoved             // erased or expired; dropped when its cell is written
)

// lateCell is one second of timestamps.
type lateCell struct {
	entries []lateEntry
	arena   []byte
	minID   int64 // the smallest id millisecond among its entries
}

// pendingLate is a displaced event's M and J keys before Batch.Commit
// decides where they go.
type pendingLate struct {
	ds            uint32
	ts            int64
	id            ID
	name, visitor string
	hasVisitor    bool
	bot           bool
}

const (
	// lateCellMs is the span of timestamps of one cell.
	lateCellMs = 1000
	// lateGrace is how far cut trails the id clock: the longest queueing
	// delay whose events are written in order. Segment's analytics-node
	// sends every 10 s, the mobile SDKs every 30 s.
	lateGrace = 30_000
	// lateFloorSlack is how far floor trails the id clock when memory is
	// empty: a commit of ids taken longer ago writes its keys itself.
	lateFloorSlack = 10_000
	// lateWriteEvery is how often the writer looks for cells to write.
	lateWriteEvery = time.Second
	// lateBatchKeys bounds the keys of one of the writer's batches.
	lateBatchKeys = 32 << 10
	// lateRecordEvery is how far the floor moves before the writer records
	// it with no cell to write.
	lateRecordEvery = 60_000
	// lateEntryBytes is the size of a lateEntry (TestLateEntrySize).
	lateEntryBytes = 40
	// lateBytesPerEntry sets the bound in bytes: --late-memory entries
	// with visitor ids of 24 bytes on average. Visitor ids may be up to
	// 1 KiB, which would otherwise hold 26 times as much.
	lateBytesPerEntry = 64
	// DefaultLateMemory bounds the displaced events held in memory (about
	// 40 bytes each and their visitor ids); past it the oldest cells are
	// written early. Memory holds what lateGrace brings, so this much is
	// used only from 140,000 displaced events a second on; 1 << 20 held 5 s
	// of the bench's Segment batches, and the keys of events queued longer
	// were written out of order (session 22: segJitter over 8 M events
	// 8.0 µs per event with 1 << 20, 6.9 with this).
	DefaultLateMemory = 4 << 20
)

// lateWatermarkKind is the config kind of the writer's watermark: cut and
// floor, 8 bytes each.
const lateWatermarkKind = "latemem"

func newLateMem(max int) *lateMem {
	if max <= 0 {
		max = DefaultLateMemory
	}
	return &lateMem{cells: map[int64]*lateCell{}, max: max, maxSize: max * lateBytesPerEntry, batch: lateBatchKeys, nameTable: nameTable{index: map[string]uint32{}}, kick: make(chan struct{}, 1)}
}

// takes reports whether a commit's displaced event goes to memory. Callers
// hold commitMu shared.
func (l *lateMem) takes(ts int64, id ID) bool { return ts >= l.cut && IDTime(id) >= l.floor }

// add puts committed entries into memory; callers hold commitMu shared and
// decided under it that memory takes them.
func (l *lateMem) add(pending []pendingLate) {
	l.mu.Lock()
	for i := range pending {
		l.insert(&pending[i])
	}
	over := l.over()
	l.mu.Unlock()
	if over {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

// insert adds one entry; callers hold mu.
func (l *lateMem) insert(p *pendingLate) {
	k := p.ts / lateCellMs
	c := l.cells[k]
	if c == nil {
		c = &lateCell{minID: math.MaxInt64}
		// Sized as the second before, and an eighth: grown by doubling
		// from nothing, a busy second's cell copied itself some 18 times
		// (a ninth of a Segment batch's allocated bytes).
		if prev := l.cells[k-1]; prev != nil {
			c.entries = make([]lateEntry, 0, len(prev.entries)+len(prev.entries)/8)
			c.arena = make([]byte, 0, len(prev.arena)+len(prev.arena)/8)
		}
		l.cells[k] = c
	}
	e := lateEntry{ts: p.ts, id: p.id, ds: p.ds, name: l.name(p.name), off: uint32(len(c.arena))}
	if p.bot {
		e.flags |= lateBot
	}
	l.size += lateEntryBytes
	if p.hasVisitor {
		e.flags |= lateVisitor
		e.vlen = uint16(len(p.visitor))
		c.arena = append(c.arena, p.visitor...)
		l.size += len(p.visitor)
	}
	c.entries = append(c.entries, e)
	c.minID = min(c.minID, IDTime(p.id))
	l.n++
}

// over reports whether memory holds more than its bound, in entries or in
// bytes; callers hold mu.
func (l *lateMem) over() bool { return l.n > l.max || l.size > l.maxSize }

// visitor is e's visitor id in c.
func (c *lateCell) visitor(e *lateEntry) []byte { return c.view().visitor(e) }

// cellView is a cell's entries and arena as they were when taken under mu:
// appends after it do not change what it holds, and the writer may replace
// the cell's entries (an all write of a cell ahead of the cut).
type cellView struct {
	entries []lateEntry
	arena   []byte
}

// view takes c's view; callers hold mu.
func (c *lateCell) view() cellView {
	return cellView{c.entries[:len(c.entries):len(c.entries)], c.arena[:len(c.arena):len(c.arena)]}
}

// visitor is e's visitor id.
func (v cellView) visitor(e *lateEntry) []byte { return v.arena[e.off : e.off+uint32(e.vlen)] }

// bytes is what the view's entries take in lateMem.size.
func (v cellView) bytes() int { return len(v.entries)*lateEntryBytes + len(v.arena) }

// remove marks the entries of ids (each at its timestamp) of ds removed;
// callers hold commitMu and mu.
func (l *lateMem) remove(ds uint32, ids map[ID]int64) {
	cells := map[int64]bool{}
	for _, ts := range ids {
		cells[ts/lateCellMs] = true
	}
	for k := range cells {
		c := l.cells[k]
		if c == nil {
			continue
		}
		for i := range c.entries {
			e := &c.entries[i]
			if _, ok := ids[e.id]; ok && e.ds == ds {
				e.flags |= lateRemoved
			}
		}
	}
}

// keepHeld drops from ids (at their timestamps) those memory cannot hold:
// behind the cut, a commit wrote the keys itself, or the writer did (an
// erasure or expiry of old events then need not stop the commits). Callers
// hold the visitor memory's sealMu, so no cell is being written.
func (l *lateMem) keepHeld(ids map[ID]int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, ts := range ids {
		if ts < l.cut {
			delete(ids, id)
		}
	}
}

// dropDatasets marks every entry of the datasets removed; callers hold
// commitMu and mu.
func (l *lateMem) dropDatasets(ds []uint32) {
	for _, c := range l.cells {
		for i := range c.entries {
			if slices.Contains(ds, c.entries[i].ds) {
				c.entries[i].flags |= lateRemoved
			}
		}
	}
}

// loadLateMem reads the watermark and rebuilds the memory from the Z keys
// after it. A store without one (new, or written before session 21) has
// nothing in memory: a read-write open records a watermark at the id
// clock before any commit.
func (d *DB) loadLateMem() (int, error) {
	l := d.late
	v, err := d.get(configKey(lateWatermarkKind, ""))
	if err == ErrNotFound {
		ceil := d.idCeil()
		l.cut, l.floor = floorTo(ceil-lateGrace, lateCellMs), ceil-lateFloorSlack
		l.recorded = l.floor
		if d.readOnly {
			return 0, nil
		}
		b := d.db.NewBatch()
		defer b.Close()
		_ = b.Set(configKey(lateWatermarkKind, ""), lateWatermark(l.cut, l.floor), nil)
		return 0, d.commit(b, pebble.Sync)
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 16 {
		return 0, errCorrupt
	}
	l.cut, l.floor = int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:]))
	l.recorded = l.floor
	base := []byte{prefixDisplaced}
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: base, UpperBound: prefixEnd(base)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	from := IDAt(l.floor)
	n := 0
	l.mu.Lock()
	defer l.mu.Unlock()
	for valid := it.First(); valid; {
		k := it.Key()
		if len(k) != datasetPrefLen+16 {
			return n, errCorrupt
		}
		ds := binary.BigEndian.Uint32(k[1:datasetPrefLen])
		if id := k[datasetPrefLen:]; bytes.Compare(id, from[:]) < 0 {
			valid = it.SeekGE(displacedKey(nil, ds, from))
			continue
		}
		ts, record, ok := displacedValue(it.Value())
		if !ok {
			return n, errCorrupt
		}
		if record != nil && ts >= l.cut {
			var id ID
			copy(id[:], k[datasetPrefLen:])
			e, err := DecodeEvent(id, record)
			if err != nil {
				return n, err
			}
			l.insert(&pendingLate{ds: ds, ts: ts, id: id, name: e.Name, visitor: e.VisitorID, hasVisitor: e.HasVisitor, bot: IsBot(e.Properties)})
			n++
		}
		valid = it.Next()
	}
	return n, it.Error()
}

// lateVisitors adds the visitor index entries of the events held in memory
// to the visitor memory's days, which Open rebuilt from the J keys in
// Pebble (where these have none yet).
func (d *DB) lateVisitors() {
	l, m := d.late, d.vmem
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range l.cells {
		for i := range c.entries {
			e := &c.entries[i]
			if e.flags&lateVisitor == 0 || len(c.visitor(e)) == 0 || !m.takes(e.ts) {
				continue
			}
			me := memEntry{ts: e.ts, id: e.id, name: m.name(l.names[e.name])}
			if e.flags&lateBot != 0 {
				me.flags = entryBot
			}
			m.insert(memVisitor{e.ds, string(c.visitor(e))}, me)
		}
	}
}

// LateMemory is the number of displaced events whose keys memory holds,
// and the bytes they take.
func (d *DB) LateMemory() (entries, bytes int) {
	l := d.late
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.size
}
