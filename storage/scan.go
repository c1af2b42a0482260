package storage

import (
	"github.com/cockroachdb/pebble/v2"
)

// HasEvent reports whether ds holds an event with this id.
func (d *DB) HasEvent(ds uint32, id ID) (bool, error) {
	_, err := d.get(eventKey(nil, ds, id))
	if err == ErrNotFound {
		return false, nil
	}
	return err == nil, err
}

// ScanEvents calls fn for every event of ds with a timestamp in [from, to]
// (inclusive), oldest first, until fn returns false. Exports use it.
func (d *DB) ScanEvents(ds uint32, from, to int64, fn func(*Event) bool) error {
	lower, upper := rangeBounds(appendDataset(nil, prefixTime, ds), from, to)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	defer it.Close()
	rr, err := d.NewRecordReader(ds)
	if err != nil {
		return err
	}
	defer rr.Close()
	for it.First(); it.Valid(); it.Next() {
		_, id, ok := tsIDSuffix(it.Key())
		if !ok {
			return errCorrupt
		}
		e, err := rr.Get(id)
		if err != nil {
			return err
		}
		if !fn(&e) {
			return nil
		}
	}
	return it.Error()
}

// Checkpoint writes a consistent copy of the whole store to dir, which must
// not exist; the WAL is flushed first so the copy holds every acknowledged write.
func (d *DB) Checkpoint(dir string) error {
	return d.apply(func() error { return d.db.Checkpoint(dir, pebble.WithFlushedWAL()) })
}
