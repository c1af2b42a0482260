package storage

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// The late memory's writer (latemem.go): it moves the cut as the id clock
// advances, or past the bound, and writes the cells behind it to Pebble in
// time order with the watermark that a start rebuilds memory from.

// advance moves cut and floor for a write at id clock ceil and returns
// the cells to write, oldest first: those behind the cut, and with all
// every cell. Callers hold commitMu and mu.
func (l *lateMem) advance(ceil int64, all bool) []int64 {
	cut := max(l.cut, floorTo(ceil-lateGrace, lateCellMs))
	if all {
		// Not past the clock: a cell of times ahead of it (a client's clock
		// ahead) would otherwise send every event behind it to Pebble at
		// once for as long as it leads. Such cells are written anyway and
		// rebuilt after a crash: a repeat, given once.
		cut = max(l.cut, floorTo(ceil, lateCellMs))
	}
	keys := make([]int64, 0, len(l.cells))
	for k := range l.cells {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// Past the bound, in entries or bytes, the oldest cells go early, down
	// to 7/8 of it: the cut stays as far back as the bound allows (writing
	// down to half held 3/4 of it on average), and each such write is an
	// eighth of memory, not half.
	if held, size := l.n, l.size; !all && l.over() {
		for _, k := range keys {
			if k*lateCellMs >= cut {
				if held <= l.max-l.max/8 && size <= l.maxSize-l.maxSize/8 {
					break
				}
				cut = (k + 1) * lateCellMs
			}
			v := l.cells[k].view()
			held -= len(v.entries)
			size -= v.bytes()
		}
	}
	floor := ceil - lateFloorSlack
	var out []int64
	for _, k := range keys {
		if k*lateCellMs < cut || all {
			out = append(out, k)
		} else {
			floor = min(floor, l.cells[k].minID)
		}
	}
	l.cut, l.floor = cut, max(l.floor, floor)
	return out
}

// writeLate writes the cells behind the new cut (with all, every cell) to
// Pebble in time order with the new watermark, then drops them. It holds
// the visitor memory's sealMu, which erasure, retention and dataset
// deletion hold too, so that no entry they remove is written after them.
func (d *DB) writeLate(all bool) error {
	l := d.late
	d.vmem.sealMu.Lock()
	defer d.vmem.sealMu.Unlock()
	l.commitMu.Lock()
	l.mu.Lock()
	keys := l.advance(d.idCeil(), all)
	cut, floor, recorded := l.cut, l.floor, l.recorded
	// The entries as they are now: a cell behind the cut takes no more
	// (commits write the keys of its times themselves from here), but one
	// that all writes ahead of it may, and only these are written and
	// dropped.
	cells := make([]dueCell, len(keys))
	for i, k := range keys {
		cells[i] = dueCell{key: k, c: l.cells[k], cellView: l.cells[k].view()}
	}
	names := l.names // append-only: the prefix is never changed
	l.mu.Unlock()
	l.commitMu.Unlock()
	// With nothing to write, the watermark is recorded only once a minute
	// (it bounds what a start reads of Z): no write a second on an idle
	// store. The cut and floor in memory move on meanwhile; a start from
	// the older ones reads more of Z and rebuilds keys written since, a
	// repeat given once.
	if len(keys) == 0 && floor-recorded < lateRecordEvery {
		return nil
	}
	if l.writing != nil {
		l.writing()
	}

	// The J keys' order of names (len, then bytes), as ranks.
	rank := make([]uint32, len(names))
	byKey := make([]uint32, len(names))
	for i := range byKey {
		byKey[i] = uint32(i)
	}
	slices.SortFunc(byKey, func(a, b uint32) int {
		if c := cmp.Compare(len(names[a]), len(names[b])); c != 0 {
			return c
		}
		return strings.Compare(names[a], names[b])
	})
	for r, i := range byKey {
		rank[i] = uint32(r)
	}
	// Sized for a whole batch and kept at that size from one to the next:
	// grown from nothing, and dropped by Reset past Pebble's 1 MiB, each
	// batch of 32k keys was copied a dozen times on its way up (25 MB
	// allocated a write of 100,000 events; BenchmarkWriteLateMemory).
	entries := 0
	for _, dc := range cells {
		entries += len(dc.entries)
	}
	size := min(2*entries, l.batch) * lateKeyBytes
	b := d.db.NewBatch(pebble.WithInitialSizeBytes(size), pebble.WithMaxRetainedSizeBytes(2*size))
	defer b.Close()
	// In batches of lateBatchKeys: one batch of a million keys held the
	// commits queued behind it for as long as its WAL write (p99.9 251 ms
	// in the bench's segment scenario, session 21). Only the last one
	// records the watermark, so a crash between them rebuilds every cell.
	var err error
	set := func(k, v []byte) {
		if _ = b.Set(k, v, nil); b.Count() >= uint32(l.batch) && err == nil {
			err = d.commit(b, pebble.NoSync)
			b.Reset()
		}
	}
	var k, v []byte
	var sorter lateSorter
	for _, dc := range cells {
		// A copy, sorted: readers read the cell meanwhile. The M keys in
		// their order, then the J keys in theirs: one family after the
		// other, each insert next to the last (keyFamily).
		sorter.load(dc.entries)
		es := sorter.sortByTime(dc.key * lateCellMs)
		for i := range es {
			e := &es[i]
			k = displacedMarkKey(k[:0], e.ds, e.ts, e.id)
			set(k, appendBotMark(k[len(k):], e.flags&lateBot != 0))
		}
		es = sorter.sortByName(rank)
		for i := range es {
			e := &es[i]
			k = displacedNameKey(k[:0], e.ds, names[e.name], e.ts, e.id)
			// A buffer of its own: after the key's, a value that outgrew
			// the key's spare room was allocated for every J key.
			v = appendBotMark(v[:0], e.flags&lateBot != 0)
			if e.flags&lateVisitor != 0 {
				v = append(v, dc.visitor(e)...)
			}
			set(k, v)
		}
	}
	if err != nil {
		return err
	}
	_ = b.Set(configKey(lateWatermarkKind, ""), lateWatermark(cut, floor), nil)
	// Not synced: the next synced commit syncs it, and until then the
	// watermark before it rebuilds these cells from Z after a crash.
	if err := d.commit(b, pebble.NoSync); err != nil {
		return err
	}
	l.mu.Lock()
	l.recorded = floor
	for _, dc := range cells {
		l.n -= len(dc.entries)
		l.size -= dc.bytes()
		if len(dc.c.entries) == len(dc.entries) {
			delete(l.cells, dc.key)
		} else { // a cell ahead of the cut, added to meanwhile: keep what was
			dc.c.keepFrom(len(dc.entries))
		}
	}
	l.mu.Unlock()
	return nil
}

// keepFrom drops c's entries before i, and their visitor ids from a new
// arena (readers' views keep the old one); callers hold mu.
func (c *lateCell) keepFrom(i int) {
	rest := slices.Clone(c.entries[i:])
	var arena []byte
	for j := range rest {
		e := &rest[j]
		v := c.visitor(e)
		e.off = uint32(len(arena))
		arena = append(arena, v...)
	}
	c.entries, c.arena = rest, arena
}

// lateKeyBytes is about what an M or J key takes in a batch with its value
// and the batch's own bytes: 33 for an M key, 50-90 for a J key by its name
// and visitor id.
const lateKeyBytes = 64

// dueCell is a cell being written, and what it held when the write began.
type dueCell struct {
	key int64
	c   *lateCell
	cellView
}

func lateWatermark(cut, floor int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(cut)), uint64(floor))
}

// runLateWriter writes the cells of memory as the cut passes them;
// failures are logged (d.log) and retried.
func (d *DB) runLateWriter() *worker {
	return startWorker(lateWriteEvery, d.late.kick, false, func() {
		if err := d.writeLate(false); err != nil && d.log != nil {
			d.log.Error("write the displaced events' time index", "err", err)
		}
	})
}

// WriteLateMemory writes every displaced event's keys held in memory to
// Pebble now: for measurements (eventd-keycost counts it in the events'
// cost) and tests.
func (d *DB) WriteLateMemory() error { return d.writeLate(true) }
