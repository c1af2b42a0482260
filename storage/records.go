package storage

import (
	"bytes"

	"github.com/cockroachdb/pebble/v2"
)

// RecordReader reads many event records of one dataset through one Pebble
// iterator. GetEvent builds and tears down an iterator over every memtable
// and level for each record (half the CPU of a where= query over raw
// events, docs/benchmarks.md "where"); a query that reads the records of an
// index range pays that once here. Seeks in increasing id order, the order
// of a time range for events ingested live, also let Pebble step forward
// instead of seeking from the top.
type RecordReader struct {
	db  *DB
	it  *pebble.Iterator
	ds  uint32
	key []byte
}

// NewRecordReader opens a reader of dataset ds's records as of now; Close
// releases it.
func (d *DB) NewRecordReader(ds uint32) (*RecordReader, error) {
	lo := appendDataset(nil, prefixEvent, ds)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return nil, err
	}
	return &RecordReader{db: d, it: it, ds: ds}, nil
}

// Get is GetEvent through the reader. decodeRecord copies what it keeps,
// so the event outlives the iterator's position.
func (r *RecordReader) Get(id ID) (Event, error) {
	var e Event
	r.key = eventKey(r.key[:0], r.ds, id)
	if !r.it.SeekGE(r.key) || !bytes.Equal(r.it.Key(), r.key) {
		if err := r.it.Error(); err != nil {
			return e, err
		}
		// Not in the reader's view of the store, which is as of its
		// opening: an event committed since (that a scan opened later
		// found in an index) is read as GetEvent reads it.
		return r.db.GetEvent(r.ds, id)
	}
	v, err := r.it.ValueAndErr()
	if err != nil {
		return e, err
	}
	return DecodeEvent(id, v)
}

// Close releases the reader.
func (r *RecordReader) Close() error { return r.it.Close() }
