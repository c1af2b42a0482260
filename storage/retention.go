package storage

import (
	"github.com/cockroachdb/pebble/v2"
)

// ExpireBefore deletes the events of ds with timestamps before cutoff (Unix
// ms), their index entries, and the minute and hour counters and rollups of
// buckets starting before cutoff. Day-level counters and rollups are kept:
// charts by day still cover expired data. It returns how many events it deleted.
func (d *DB) ExpireBefore(ds uint32, cutoff int64) (int, error) {
	if cutoff <= 0 {
		return 0, nil
	}
	lo, hi := rangeBounds(appendDataset(nil, prefixRecord, ds), 0, cutoff-1)
	n := 0
	for {
		count, last, err := d.expireChunk(ds, lo, hi)
		if err != nil {
			return n, err
		}
		n += count
		if count < eraseChunk {
			break
		}
		lo = append(last, 0)
	}
	b := d.db.NewBatch()
	defer b.Close()
	for _, p := range []byte{prefixCounter, prefixRollup} {
		if err := d.eachNamePrefix(ds, p, func(prefix []byte) error {
			for _, level := range [...]byte{LevelMinute, LevelHour} {
				lp := append(append([]byte(nil), prefix...), level)
				if err := b.DeleteRange(appendTS(append([]byte(nil), lp...), 0), appendTS(lp, cutoff), nil); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return n, err
		}
	}
	return n, d.commit(b, pebble.Sync)
}

// expireChunk deletes the first eraseChunk records of the range [lo, hi)
// of ds with their index entries, and reports how many and the last record
// key. It holds the sealer off for its chunk only, so that a long expiry
// does not keep a day in memory past its bound.
func (d *DB) expireChunk(ds uint32, lo, hi []byte) (count int, last []byte, err error) {
	m := d.vmem
	m.sealMu.Lock() // no day moves from memory to Pebble meanwhile
	defer m.sealMu.Unlock()
	ti, err := d.openTime(lo, hi)
	if err != nil {
		return 0, nil, err
	}
	it := &recordIndex{timeIter: ti}
	er := entryReader{d: d, ds: ds}
	defer er.close()
	b := d.NewBatch()
	defer b.Close()
	inMem := map[memVisitor]map[ID]bool{}
	late := map[ID]int64{}
	for it.First(); it.Valid() && count < eraseChunk; it.Next() {
		ts, id, _ := tsIDSuffix(it.Key())
		isLate := it.late()
		e, err := er.read(it, ts, id)
		if err == nil {
			switch {
			case isLate:
				_ = b.b.Delete(displacedKey(nil, ds, id), nil)
				_ = b.b.Delete(displacedNameKey(nil, ds, e.Name, ts, id), nil)
			case displaced(ts, id): // written before session 21
				_ = b.b.Delete(displacedKey(nil, ds, id), nil)
				fallthrough
			default:
				_ = b.b.Delete(nameKey(nil, ds, e.Name, ts, id), nil)
			}
			if e.HasVisitor {
				// Also for a memory day: a split day's earlier entries are
				// keys, and a stale key (a crashed seal's) must not outlive
				// the event.
				_ = b.b.Delete(visitorKey(nil, ds, e.VisitorID, ts, id), nil)
				if v := (memVisitor{ds, e.VisitorID}); m.inMemory(visitorDay(ts)) {
					if inMem[v] == nil {
						inMem[v] = map[ID]bool{}
					}
					inMem[v][id] = true
				}
			}
		}
		if isLate {
			_ = b.b.Delete(displacedMarkKey(nil, ds, ts, id), nil)
			late[id] = ts // in memory, perhaps (latemem.go)
		} else {
			_ = b.b.Delete(it.Key(), nil)
		}
		last = append(last[:0], it.Key()...)
		count++
	}
	if err := it.Close(); err != nil {
		return 0, nil, err
	}
	return count, last, d.commitRemoving(b, inMem, ds, late)
}

// eachNamePrefix calls fn with "p ds len name" for every event name that has
// keys under prefix p (counters or rollups), skipping from name to name.
func (d *DB) eachNamePrefix(ds uint32, p byte, fn func(prefix []byte) error) error {
	base := appendDataset(nil, p, ds)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: base, UpperBound: appendDataset(nil, p, ds+1)})
	if err != nil {
		return err
	}
	defer it.Close()
	for valid := it.First(); valid; {
		k := it.Key()
		if len(k) <= datasetPrefLen {
			valid = it.Next()
			continue
		}
		end := datasetPrefLen + 1 + int(k[datasetPrefLen])
		if end > len(k) {
			valid = it.Next()
			continue
		}
		prefix := append([]byte(nil), k[:end]...)
		if err := fn(prefix); err != nil {
			return err
		}
		valid = it.SeekGE(prefixEnd(prefix))
	}
	return it.Error()
}
