package storage

import (
	"encoding/binary"
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// eraseChunk is how many events one erase batch deletes.
const eraseChunk = 1000

// visitorEntry is one visitor index entry.
type visitorEntry struct {
	ts   int64
	id   ID
	name string
	bot  bool // the entry carries the bot mark (bots.go)
}

// EraseVisitor deletes every event of visitor in ds with its index entries,
// decrements the counters, deletes the visitor's goal completions, its
// profile and its identity links (both directions) and idempotency records, and rebuilds the property sums and visitor sketches
// of every day the visitor had events in (a sketch cannot forget one
// visitor, so those days are recomputed from the events that remain).
// progress, if not nil, is called with the number of events erased so far.
//
// Counts stay exact throughout. A day's rebuild checkpoints the derived
// overlay first and holds off other checkpoints until it commits, so events
// committed during the rebuild are added on top of it; only an event
// committed in the instant between that checkpoint and the start of the
// scan can have its property values summed twice (sketches cannot count a
// visitor twice). That matters only for erasures touching the current day.
func (d *DB) EraseVisitor(ds uint32, visitor string, progress func(erased int)) (int, error) {
	erased := map[ID]bool{}
	days := map[int64]map[string]bool{} // day start -> names whose rollups need rebuilding
	for {
		n, err := d.eraseChunk(ds, visitor, erased, days)
		if err != nil {
			return len(erased), err
		}
		if n == 0 {
			break
		}
		if progress != nil {
			progress(len(erased))
		}
	}
	if err := d.eraseVisitorGoals(ds, visitor); err != nil {
		return len(erased), err
	}
	if err := d.eraseProfile(ds, visitor); err != nil {
		return len(erased), err
	}
	if err := d.eraseIdempotency(erased); err != nil {
		return len(erased), err
	}
	for day, names := range days {
		if err := d.rebuildDay(ds, day, names); err != nil {
			return len(erased), err
		}
	}
	return len(erased), nil
}

// eraseChunk deletes the first eraseChunk events left of visitor with their
// index entries and counts, noting them in erased and their days in days;
// it reports how many. It holds the sealer off for its chunk only.
func (d *DB) eraseChunk(ds uint32, visitor string, erased map[ID]bool, days map[int64]map[string]bool) (int, error) {
	m := d.vmem
	m.sealMu.Lock() // no day moves from memory to Pebble meanwhile
	defer m.sealMu.Unlock()
	chunk, err := d.visitorChunk(ds, visitor)
	if err != nil || len(chunk) == 0 {
		return 0, err
	}
	b := d.NewBatch()
	defer b.Close()
	inMem := map[ID]bool{}
	late := map[ID]int64{}
	for _, en := range chunk {
		_ = b.b.Delete(recordKey(nil, ds, en.ts, en.id), nil)
		_ = b.b.Delete(nameKey(nil, ds, en.name, en.ts, en.id), nil)
		if displaced(en.ts, en.id) {
			// Its S and N keys above are those of a store written before
			// session 21, these its keys since (timeindex.go).
			_ = b.b.Delete(displacedKey(nil, ds, en.id), nil)
			_ = b.b.Delete(displacedMarkKey(nil, ds, en.ts, en.id), nil)
			_ = b.b.Delete(displacedNameKey(nil, ds, en.name, en.ts, en.id), nil)
			late[en.id] = en.ts // in memory, perhaps (latemem.go)
		}
		// Also for a memory day: a split day's earlier entries are keys,
		// and a stale key (a crashed seal's) must not come back when the
		// day is sealed.
		_ = b.b.Delete(visitorKey(nil, ds, visitor, en.ts, en.id), nil)
		if m.inMemory(visitorDay(en.ts)) {
			inMem[en.id] = true
		}
		b.addCount(ds, en.name, en.bot, en.ts, -1)
		day := floorTo(en.ts, dayMs)
		if days[day] == nil {
			days[day] = map[string]bool{}
		}
		days[day][seriesName(en.name, en.bot)] = true
		erased[en.id] = true
	}
	return len(chunk), d.commitRemoving(b, map[memVisitor]map[ID]bool{{ds, visitor}: inMem}, ds, late)
}

// commitRemoving commits b (synced) and takes the entries it erases out of
// the visitor memory's days (remove) and out of the displaced events' time
// index in memory (late: ids of ds at their timestamps), as one step for
// readers (they open under mu, so none sees the entries without their
// records) and for commits (none is between its write and its memory add).
// Callers hold the visitor memory's sealMu, which the late memory's writer
// holds too: no cell with these entries is being written.
func (d *DB) commitRemoving(b *Batch, remove map[memVisitor]map[ID]bool, ds uint32, late map[ID]int64) error {
	d.late.keepHeld(late)
	n := len(late)
	for _, ids := range remove {
		n += len(ids)
	}
	if n == 0 {
		return b.Commit(true) // nothing in memory: readers and commits need not wait
	}
	// commitMu too: a commit in flight may have written an event this
	// batch deletes and not yet added its entry to memory.
	m, l := d.vmem, d.late
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := b.Commit(true); err != nil {
		return err
	}
	for v, ids := range remove {
		if len(ids) > 0 {
			m.remove(v, ids)
		}
	}
	if len(late) > 0 {
		l.remove(ds, late)
	}
	return nil
}

// visitorChunk reads the first entries left in a visitor's index.
func (d *DB) visitorChunk(ds uint32, visitor string) ([]visitorEntry, error) {
	it, err := newVisitorIter(d.db, d.vmem, ds, visitor, 0, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []visitorEntry
	for it.First(); it.Valid() && len(out) < eraseChunk; it.Next() {
		ts, id, ok := tsIDSuffix(it.Key())
		if !ok {
			return nil, errCorrupt
		}
		name, bot := splitBot(it.Value())
		out = append(out, visitorEntry{ts, id, string(name), bot})
	}
	return out, it.Error()
}

// eraseVisitorGoals deletes the visitor's goal markers and completions.
func (d *DB) eraseVisitorGoals(ds uint32, visitor string) error {
	lo := appendDataset(nil, prefixGoal, ds)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: appendDataset(nil, prefixGoal, ds+1)})
	if err != nil {
		return err
	}
	b := d.db.NewBatch()
	defer b.Close()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) < datasetPrefLen+2 {
			continue
		}
		switch k[datasetPrefLen] {
		case goalMarker:
			// G ds 'm' len goal len2 visitor
			rest := k[datasetPrefLen+2+int(k[datasetPrefLen+1]):]
			if len(rest) >= 2 && int(binary.BigEndian.Uint16(rest)) == len(visitor) && string(rest[2:]) == visitor {
				_ = b.Delete(k, nil)
			}
		case goalTime:
			if string(it.Value()) == visitor {
				_ = b.Delete(k, nil)
			}
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	return d.commit(b, pebble.Sync)
}

// eraseIdempotency deletes idempotency records that point at erased events.
func (d *DB) eraseIdempotency(erased map[ID]bool) error {
	if len(erased) == 0 {
		return nil
	}
	if err := d.eraseIdemGroups(erased); err != nil {
		return err
	}
	// Every layout of a record to a key (F, then H and I): their values
	// are alike.
	points := func(_, v []byte) bool {
		return len(v) == idemRecordLen && erased[ID(idemRecordID(v))]
	}
	if _, err := d.deleteWhere([]byte{prefixIdemSlot}, []byte{prefixIdemSlot + 1}, true, points); err != nil {
		return err
	}
	_, err := d.deleteWhere([]byte{prefixIdemDay}, []byte{prefixIdem + 1}, true, points)
	return err
}

// rebuildDay recomputes the rollups (sums and sketches, every level) of one
// day for the every-event cells (humans' and bots') and the given series
// names, from the events left: the old values are deleted and the fresh
// ones merged in the same batch.
func (d *DB) rebuildDay(ds uint32, day int64, names map[string]bool) error {
	dv := d.derived
	dv.ckptMu.Lock()
	defer dv.ckptMu.Unlock()
	// What the overlay holds of this day must be in Pebble before the range
	// deletion below, which the scan then replaces.
	if err := dv.checkpointLocked(); err != nil {
		return err
	}
	b := d.NewBatch()
	defer b.Close()
	all := []string{"", botAll}
	for n := range names {
		all = append(all, n)
	}
	for _, name := range all {
		for _, level := range [...]byte{LevelMinute, LevelHour, LevelDay} {
			p := rollupPrefix(nil, ds, name, level)
			lo := appendTS(append([]byte(nil), p...), day)
			hi := appendTS(append([]byte(nil), p...), day+dayMs)
			if err := b.b.DeleteRange(lo, hi, nil); err != nil {
				return err
			}
		}
	}
	err := d.ScanEvents(ds, day, day+dayMs-1, func(e *Event) bool {
		bot := IsBot(e.Properties)
		b.derive(ds, e, bot, 0, names[seriesName(e.Name, bot)])
		return true
	})
	if err != nil {
		return err
	}
	return b.Commit(true)
}
