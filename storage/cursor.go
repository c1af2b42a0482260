package storage

import (
	"bytes"
	"encoding/binary"
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

// prefixCursor keys the named cursors of the durable tail (/stream?cursor=):
// Q ds name -> cursorRecord. It starts with the dataset, so deleting a
// dataset deletes its cursors (datasetPrefixes).
const prefixCursor = 'Q'

// Cursor is the durable state of one named cursor of a dataset.
type Cursor struct {
	Name string
	// Position is the last acknowledged id: a resume replays after it.
	Position ID
	// Delivered is the highest id sent to the cursor's consumers as last
	// saved (with acknowledgements and at disconnect): a resume flags the
	// events in (Position, Delivered] as redelivered.
	Delivered ID
	// Expired is set when a retention sweep deleted an event after
	// Position; only a reset clears it.
	Expired bool
	// UpdatedAt is the Unix ms of the last write.
	UpdatedAt int64
}

const cursorRecordLen = 1 + 16 + 16 + 1 + 8

// errCursorRecord reports a cursor value of the wrong shape.
var errCursorRecord = errors.New("storage: malformed cursor record")

func cursorKey(dst []byte, ds uint32, name string) []byte {
	return append(appendDataset(dst, prefixCursor, ds), name...)
}

func encodeCursor(c *Cursor) []byte {
	v := make([]byte, 0, cursorRecordLen)
	v = append(v, 1) // version
	v = append(v, c.Position[:]...)
	v = append(v, c.Delivered[:]...)
	var flags byte
	if c.Expired {
		flags |= 1
	}
	v = append(v, flags)
	return binary.BigEndian.AppendUint64(v, uint64(c.UpdatedAt))
}

func decodeCursor(name string, v []byte) (Cursor, error) {
	if len(v) != cursorRecordLen || v[0] != 1 {
		return Cursor{}, errCursorRecord
	}
	c := Cursor{Name: name}
	copy(c.Position[:], v[1:17])
	copy(c.Delivered[:], v[17:33])
	c.Expired = v[33]&1 != 0
	c.UpdatedAt = int64(binary.BigEndian.Uint64(v[34:]))
	return c, nil
}

// GetCursor reads one cursor; ErrNotFound when it does not exist.
func (d *DB) GetCursor(ds uint32, name string) (Cursor, error) {
	v, err := d.get(cursorKey(nil, ds, name))
	if err != nil {
		return Cursor{}, err
	}
	return decodeCursor(name, v)
}

// PutCursor writes a cursor. sync=false is for acknowledgements: a write
// lost in a crash only moves the cursor back, so events are redelivered,
// never skipped (at-least-once); see docs/decisions.md.
func (d *DB) PutCursor(ds uint32, c *Cursor, sync bool) error {
	o := pebble.NoSync
	if sync {
		o = pebble.Sync
	}
	return d.apply(func() error { return d.db.Set(cursorKey(nil, ds, c.Name), encodeCursor(c), o) })
}

// DeleteCursor deletes a cursor (a no-op when it does not exist).
func (d *DB) DeleteCursor(ds uint32, name string) error {
	return d.apply(func() error { return d.db.Delete(cursorKey(nil, ds, name), pebble.Sync) })
}

// ListCursors reads the cursors of ds in name order, at most limit.
func (d *DB) ListCursors(ds uint32, limit int) ([]Cursor, error) {
	lo := appendDataset(nil, prefixCursor, ds)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: appendDataset(nil, prefixCursor, ds+1)})
	if err != nil {
		return nil, err
	}
	var out []Cursor
	for it.First(); it.Valid() && len(out) < limit; it.Next() {
		c, err := decodeCursor(string(it.Key()[datasetPrefLen:]), it.Value())
		if err != nil {
			_ = it.Close()
			return nil, err
		}
		out = append(out, c)
	}
	return out, it.Close()
}

// CountEventsAfter counts the events of ds recorded after id and at most
// up to upTo, stopping at limit (more is then true). It reads keys only,
// so a count costs about a microsecond per event; the limit bounds it.
func (d *DB) CountEventsAfter(ds uint32, after, upTo ID, limit int) (n int, more bool, err error) {
	err = d.eachByID(ds, after, upTo, false, func(ID, []byte) bool {
		if n == limit {
			more = true
			return false
		}
		n++
		return true
	})
	return n, more, err
}

// FirstEventAfter returns the first event of ds recorded after id, if any.
func (d *DB) FirstEventAfter(ds uint32, after ID) (Event, bool, error) {
	var out Event
	found := false
	err := d.EventsAfter(ds, after, 1, func(e *Event) bool { out, found = *e, true; return false })
	return out, found, err
}

// MaxIDBefore returns the highest id among the events of ds with a
// timestamp before cutoff: the last id a retention sweep at cutoff would
// delete. It reads the records' keys only.
func (d *DB) MaxIDBefore(ds uint32, cutoff int64) (ID, bool, error) {
	var maxID ID
	if cutoff <= 0 {
		return maxID, false, nil
	}
	// The S keys with the displaced events' (timeindex.go).
	it, err := d.openTime(rangeBounds(appendDataset(nil, prefixRecord, ds), 0, cutoff-1))
	if err != nil {
		return maxID, false, err
	}
	found := false
	for valid := it.First(); valid; valid = it.Next() {
		if _, id, ok := tsIDSuffix(it.Key()); ok && bytes.Compare(id[:], maxID[:]) > 0 {
			maxID, found = id, true
		}
	}
	return maxID, found, it.Close()
}

// ExpireCursors marks expired, durably and at once, every cursor of ds
// whose position is before deleted (an id a retention sweep is about to
// delete: such a cursor would skip it on resume), and returns their names.
func (d *DB) ExpireCursors(ds uint32, deleted ID, now int64) ([]string, error) {
	cs, err := d.ListCursors(ds, maxCursorsScan)
	if err != nil {
		return nil, err
	}
	b := d.db.NewBatch()
	defer b.Close()
	var names []string
	for i := range cs {
		c := &cs[i]
		if c.Expired || bytes.Compare(c.Position[:], deleted[:]) >= 0 {
			continue
		}
		c.Expired, c.UpdatedAt = true, now
		if err := b.Set(cursorKey(nil, ds, c.Name), encodeCursor(c), nil); err != nil {
			return nil, err
		}
		names = append(names, c.Name)
	}
	if len(names) == 0 {
		return nil, nil
	}
	return names, d.commit(b, pebble.Sync)
}

// maxCursorsScan bounds a sweep's scan of one dataset's cursors; the
// engine caps cursors per dataset far below it.
const maxCursorsScan = 1 << 20
