package storage

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math"
	"slices"
)

// The readers' side of the late memory (latemem.go): what a timeIter walks
// of it, a cell at a time, and the keys of commits in flight.

// inflightLate copies the M or J keys of lo's dataset (and name) of the
// commits in flight that the store shows; the memSource keeps those in range.
func (d *DB) inflightLate(lo []byte) []memKV {
	if d.inflight.late.Load() == 0 {
		return nil
	}
	named, ds, name := lateRange(lo)
	var out []memKV
	d.inflight.seen(d.db, func(c *inflightCommit) {
		for i := range c.late {
			p := &c.late[i]
			if p.ds == ds && (!named || p.name == name) {
				out = append(out, pendingKV(p, named))
			}
		}
	})
	return out
}

// lateRange is what the lower bound of a range of M or J keys selects: a
// dataset, and a name under J.
func lateRange(lo []byte) (named bool, ds uint32, name string) {
	named = lo[0] == prefixDisplacedName
	ds = binary.BigEndian.Uint32(lo[1:datasetPrefLen])
	if named {
		name = string(lo[datasetPrefLen+1 : datasetPrefLen+1+int(lo[datasetPrefLen])])
	}
	return named, ds, name
}

// memKV is a key and value of a reader's copy of memory.
type memKV struct{ k, v []byte }

// cellKeys appends the M keys (!named) or the J keys of name of dataset
// ds in v, as Pebble would hold them. Callers hold mu (erasure marks
// entries removed under it).
func (l *lateMem) cellKeys(out []memKV, v cellView, ds uint32, name string, named bool) []memKV {
	want, ok := l.index[name]
	if named && !ok {
		return out
	}
	for i := range v.entries {
		e := &v.entries[i]
		if e.ds != ds || e.flags&lateRemoved != 0 || (named && e.name != want) {
			continue
		}
		out = append(out, entryKV(e, l.names[e.name], v.visitor(e), named))
	}
	return out
}

// entryKV is an entry's M key and value (bot mark), or its J key and value
// (bot mark, visitor id).
func entryKV(e *lateEntry, name string, visitor []byte, named bool) memKV {
	bot := e.flags&lateBot != 0
	if !named {
		k := displacedMarkKey(nil, e.ds, e.ts, e.id)
		return memKV{k, appendBotMark(nil, bot)}
	}
	k := displacedNameKey(nil, e.ds, name, e.ts, e.id)
	v := appendBotMark(nil, bot)
	if e.flags&lateVisitor != 0 {
		v = append(v, visitor...)
	}
	return memKV{k, v}
}

// pendingKV is entryKV for a commit in flight's pending entry.
func pendingKV(p *pendingLate, named bool) memKV {
	e := lateEntry{ts: p.ts, id: p.id, ds: p.ds}
	if p.bot {
		e.flags |= lateBot
	}
	if p.hasVisitor {
		e.flags |= lateVisitor
	}
	return entryKV(&e, p.name, []byte(p.visitor), named)
}

// memSource walks the keys of a range that memory holds, a cell at a
// time. At its opening it takes a view of each cell in range (cellView),
// under the memory's lock with the reader's Pebble view; it copies a
// cell's keys, under the lock again, and sorts them only when the walk
// reaches it. A list of the newest events reads the newest
// cells, not the million entries memory may hold. A cell the writer drops
// meanwhile keeps its entries for the walk: the view predates its write.
type memSource struct {
	l      *lateMem
	lo, hi []byte // the range, under M or J
	named  bool
	ds     uint32
	name   string
	cells  []memCell // in time order
	ci     int       // the cell of kvs
	kvs    []memKV   // its keys, sorted
	pos    int
}

// memCell is a cell a memSource may walk: its entries at the opening and
// the keys of commits in flight of its time.
type memCell struct {
	key     int64
	cell    cellView // empty when only commits in flight have keys there
	pending []memKV
}

// source opens a memSource over [lo, hi) (keys under M or J) with the
// keys of commits in flight, nil when memory holds none. Callers hold mu.
func (l *lateMem) source(pending []memKV, lo, hi []byte) *memSource {
	if l.n == 0 && len(pending) == 0 {
		return nil
	}
	m := &memSource{l: l, lo: lo, hi: hi, ci: -1, pos: -1}
	m.named, m.ds, m.name = lateRange(lo)
	// The cells of the bounds' times, where they have one.
	plen := datasetPrefLen
	if m.named {
		plen += 1 + len(m.name)
	}
	at := func(k []byte, none int64) int64 {
		if len(k) < plen+8 || !bytes.Equal(k[:plen], lo[:plen]) {
			return none
		}
		return int64(binary.BigEndian.Uint64(k[plen:])) / lateCellMs
	}
	first, last := at(lo, 0), at(hi, math.MaxInt64)
	byKey := map[int64]*memCell{}
	cell := func(k int64) *memCell {
		mc := byKey[k]
		if mc == nil {
			mc = &memCell{key: k}
			byKey[k] = mc
		}
		return mc
	}
	for k, c := range l.cells {
		if k >= first && k <= last {
			mc := cell(k)
			mc.cell = c.view()
		}
	}
	for _, kv := range pending {
		ts, _, _ := tsIDSuffix(kv.k)
		if k := ts / lateCellMs; k >= first && k <= last {
			mc := cell(k)
			mc.pending = append(mc.pending, kv)
		}
	}
	if len(byKey) == 0 {
		return nil
	}
	for _, mc := range byKey {
		m.cells = append(m.cells, *mc)
	}
	slices.SortFunc(m.cells, func(a, b memCell) int { return cmp.Compare(a.key, b.key) })
	return m
}

// load makes cell i's keys current: its entries of the range, with the
// commits in flight's, sorted without repeats.
func (m *memSource) load(i int) {
	m.ci, m.kvs = i, m.kvs[:0]
	mc := &m.cells[i]
	if len(mc.cell.entries) > 0 {
		m.l.mu.Lock()
		m.kvs = m.l.cellKeys(m.kvs, mc.cell, m.ds, m.name, m.named)
		m.l.mu.Unlock()
	}
	m.kvs = append(m.kvs, mc.pending...)
	m.kvs = slices.DeleteFunc(m.kvs, func(kv memKV) bool {
		return bytes.Compare(kv.k, m.lo) < 0 || (len(m.hi) > 0 && bytes.Compare(kv.k, m.hi) >= 0)
	})
	slices.SortFunc(m.kvs, func(a, b memKV) int { return bytes.Compare(a.k, b.k) })
	m.kvs = slices.CompactFunc(m.kvs, func(a, b memKV) bool { return bytes.Equal(a.k, b.k) })
}

// seek loads cells from i on (step 1) or back (step -1) until one has
// keys, and positions on its first or last; false past the ends.
func (m *memSource) seek(i, step int) bool {
	for ; i >= 0 && i < len(m.cells); i += step {
		m.load(i)
		if len(m.kvs) > 0 {
			m.pos = 0
			if step < 0 {
				m.pos = len(m.kvs) - 1
			}
			return true
		}
	}
	m.ci, m.kvs, m.pos = -1, m.kvs[:0], -1
	return false
}

// First moves to the oldest key.
func (m *memSource) First() bool { return m.seek(0, 1) }

// Last moves to the newest key.
func (m *memSource) Last() bool { return m.seek(len(m.cells)-1, -1) }

// Next moves to the next key, into the next cell past this one's last.
func (m *memSource) Next() bool {
	if m.ci < 0 {
		return false
	}
	if m.pos++; m.pos < len(m.kvs) {
		return true
	}
	return m.seek(m.ci+1, 1)
}

// Prev moves to the key before, into the cell before past this one's first.
func (m *memSource) Prev() bool {
	if m.ci < 0 {
		return false
	}
	if m.pos--; m.pos >= 0 {
		return true
	}
	return m.seek(m.ci-1, -1)
}

// SeekGE moves to the first key at or after key (a full M or J key).
func (m *memSource) SeekGE(key []byte) bool {
	ts, _, _ := tsIDSuffix(key)
	i, _ := slices.BinarySearchFunc(m.cells, ts/lateCellMs, func(c memCell, k int64) int { return cmp.Compare(c.key, k) })
	if i == len(m.cells) {
		return m.seek(i, 1)
	}
	m.load(i)
	m.pos, _ = slices.BinarySearchFunc(m.kvs, key, func(kv memKV, k []byte) int { return bytes.Compare(kv.k, k) })
	if m.pos < len(m.kvs) {
		return true
	}
	return m.seek(i+1, 1)
}

// SeekLT moves to the last key before key (a full M or J key).
func (m *memSource) SeekLT(key []byte) bool {
	ts, _, _ := tsIDSuffix(key)
	i, found := slices.BinarySearchFunc(m.cells, ts/lateCellMs, func(c memCell, k int64) int { return cmp.Compare(c.key, k) })
	if !found {
		return m.seek(i-1, -1)
	}
	m.load(i)
	j, _ := slices.BinarySearchFunc(m.kvs, key, func(kv memKV, k []byte) int { return bytes.Compare(kv.k, k) })
	if m.pos = j - 1; m.pos >= 0 {
		return true
	}
	return m.seek(i-1, -1)
}

// Key is the current key.
func (m *memSource) Key() []byte { return m.kvs[m.pos].k }

// Value is the current key's value.
func (m *memSource) Value() []byte { return m.kvs[m.pos].v }

// Close does nothing: the source holds no lock or iterator.
func (m *memSource) Close() error { return nil }
