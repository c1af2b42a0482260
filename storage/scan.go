package storage

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

// HasEvent reports whether ds holds an event with this id: a record at its
// id's millisecond or a Z key (written and deleted with its record).
func (d *DB) HasEvent(ds uint32, id ID) (bool, error) {
	ok, err := d.has(recordKey(nil, ds, IDTime(id), id))
	if ok || err != nil {
		return ok, err
	}
	return d.has(displacedKey(nil, ds, id))
}

// ScanEvents calls fn for every event of ds with a timestamp in [from, to]
// (inclusive), oldest first, until fn returns false. Exports use it. An
// event erased between its index entry and its record is skipped.
func (d *DB) ScanEvents(ds uint32, from, to int64, fn func(*Event) bool) error {
	it, err := d.openIndex(ds, "", "", false, from, to)
	if err != nil {
		return err
	}
	defer it.Close()
	er := entryReader{d: d, ds: ds}
	defer er.close()
	for it.First(); it.Valid(); it.Next() {
		ts, id, ok := tsIDSuffix(it.Key())
		if !ok {
			return errCorrupt
		}
		e, err := er.read(it, ts, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
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
