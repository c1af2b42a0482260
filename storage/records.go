package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// RecordReader reads many event records of one dataset through one Pebble
// iterator. GetEvent builds and tears down an iterator over every memtable
// and level for each record (half the CPU of a where= query over raw
// events, docs/benchmarks.md "where"); a query that reads the records of an
// index range pays that once here. Seeks in increasing (ts, id) order, the
// order of the indexes, also let Pebble step forward instead of seeking
// from the top.
type RecordReader struct {
	db  *DB
	it  *pebble.Iterator
	ds  uint32
	key []byte
}

// NewRecordReader opens a reader of dataset ds's records as of now; Close
// releases it.
func (d *DB) NewRecordReader(ds uint32) (*RecordReader, error) {
	lo := appendDataset(nil, prefixRecord, ds)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return nil, err
	}
	return &RecordReader{db: d, it: it, ds: ds}, nil
}

// Get reads the record of event id with timestamp ts, as every index entry
// gives them. decodeRecord copies what it keeps, so the event outlives the
// iterator's position.
func (r *RecordReader) Get(ts int64, id ID) (Event, error) {
	r.key = recordKey(r.key[:0], r.ds, ts, id)
	if !r.it.SeekGE(r.key) || !bytes.Equal(r.it.Key(), r.key) {
		if err := r.it.Error(); err != nil {
			return Event{}, err
		}
		// Not in the reader's view of the store, which is as of its
		// opening: an event committed since (that a scan opened later
		// found in an index) is read on its own.
		v, err := r.db.get(r.key)
		if err != nil {
			return Event{}, err
		}
		return DecodeEvent(id, v)
	}
	v, err := r.it.ValueAndErr()
	if err != nil {
		return Event{}, err
	}
	return DecodeEvent(id, v)
}

// Close releases the reader.
func (r *RecordReader) Close() error { return r.it.Close() }

// decodeRecordEntry decodes the record at an S key.
func decodeRecordEntry(key, record []byte) (Event, error) {
	_, id, ok := tsIDSuffix(key)
	if !ok {
		return Event{}, errCorrupt
	}
	return DecodeEvent(id, record)
}

// recordIndex reads a range of S keys as an index of every event: Value is
// what the time index held before (the bot mark, bots.go), so the readers
// of the name and visitor indexes read it alike.
type recordIndex struct {
	*pebble.Iterator
	val []byte
}

// Value is the bot mark of the record under the iterator.
func (r *recordIndex) Value() []byte {
	r.val = appendBotMark(r.val[:0], recordIsBot(r.Iterator.Value()))
	return r.val
}

// readAt reads the event of the entry under it: from the entry itself
// when it walks the records, else through rr.
func readAt(it indexIter, rr *RecordReader, ts int64, id ID) (Event, error) {
	if r, ok := it.(*recordIndex); ok {
		return DecodeEvent(id, r.Iterator.Value())
	}
	return rr.Get(ts, id)
}

// recordIsBot reports whether a record's properties flag a bot.
func recordIsBot(p []byte) bool {
	if len(p) < 1 || p[0] != recordVersion {
		return false
	}
	p = p[1:]
	var ok bool
	for range 2 { // timestamp, created_at
		if _, p, ok = uvarint(p); !ok {
			return false
		}
	}
	if _, p, ok = lenString(p); !ok || len(p) < 1 {
		return false
	}
	hasVisitor := p[0] == 1
	p = p[1:]
	if hasVisitor {
		if _, p, ok = lenString(p); !ok {
			return false
		}
	}
	return IsBot(p)
}

// eachByID calls fn for the events of ds with ids in (after, upTo] in id
// order (the order they were recorded in), until fn returns false. Records
// are keyed by timestamp, so it merges two ranges of one view of the store:
// the S keys over [after's millisecond, upTo's], where an event whose
// timestamp is its id's millisecond sits in id order, and the Z keys over
// (after, upTo] of the displaced events, whose records it reads by the
// timestamp each holds. It skips the displaced events' own S keys in that
// range only up to the millisecond of the next Z id, so the waste is
// bounded by the displaced events whose timestamps fall within the span
// read. With records false, fn gets a nil record and no record of a
// displaced event is read (counts).
func (d *DB) eachByID(ds uint32, after, upTo ID, records bool, fn func(id ID, record []byte) bool) error {
	lo := append(recordKey(nil, ds, IDTime(after), after), 0)
	hi := append(recordKey(nil, ds, IDTime(upTo), upTo), 0)
	if bytes.Compare(lo, hi) >= 0 {
		return nil
	}
	opts := pebble.IterOptions{LowerBound: lo, UpperBound: hi, KeyTypes: pebble.IterKeyTypePointsOnly}
	recs, err := d.db.NewIter(&opts)
	if err != nil {
		return err
	}
	defer recs.Close()
	// Clones share the records' view: a commit between them cannot show
	// in one range and not the other.
	disp, err := recs.Clone(pebble.CloneOptions{IterOptions: &pebble.IterOptions{
		LowerBound: append(displacedKey(nil, ds, after), 0),
		UpperBound: append(displacedKey(nil, ds, upTo), 0),
		KeyTypes:   pebble.IterKeyTypePointsOnly,
	}})
	if err != nil {
		return err
	}
	defer disp.Close()
	var all *pebble.Iterator // the dataset's records, for displaced events
	if records {
		base := appendDataset(nil, prefixRecord, ds)
		if all, err = recs.Clone(pebble.CloneOptions{IterOptions: &pebble.IterOptions{LowerBound: base, UpperBound: prefixEnd(base)}}); err != nil {
			return err
		}
		defer all.Close()
	}
	recOK, dispOK := recs.First(), disp.First()
	var key []byte
	for recOK || dispOK {
		var z ID
		if dispOK {
			copy(z[:], disp.Key()[datasetPrefLen:])
		}
		var ts int64
		var id ID
		if recOK {
			ts, id, _ = tsIDSuffix(recs.Key())
		}
		// A displaced event's S key: skip it, but only while it sits no
		// later than the next Z id's millisecond; past it, z comes first.
		if recOK && displaced(ts, id) && (!dispOK || ts <= IDTime(z)) {
			recOK = recs.Next()
			continue
		}
		if recOK && !displaced(ts, id) && (!dispOK || bytes.Compare(id[:], z[:]) < 0) {
			var v []byte
			if records {
				if v, err = recs.ValueAndErr(); err != nil {
					return err
				}
			}
			if !fn(id, v) {
				return nil
			}
			recOK = recs.Next()
			continue
		}
		// Here dispOK: the next event in id order is z.
		var v []byte
		if records {
			zts, ok := decodeTS(disp.Value())
			if !ok {
				return errCorrupt
			}
			key = recordKey(key[:0], ds, zts, z)
			if !all.SeekGE(key) || !bytes.Equal(all.Key(), key) {
				if err := all.Error(); err != nil {
					return err
				}
				dispOK = disp.Next() // a Z key without its record: nothing to give
				continue
			}
			if v, err = all.ValueAndErr(); err != nil {
				return err
			}
		}
		if !fn(z, v) {
			return nil
		}
		dispOK = disp.Next()
	}
	if err := recs.Error(); err != nil {
		return err
	}
	return disp.Error()
}

// decodeTS reads an 8-byte big-endian timestamp.
func decodeTS(v []byte) (int64, bool) {
	if len(v) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(v)), true
}

// openRecords moves the records of a store written before they were keyed
// by timestamp (E ds id, with a T ds ts id time index) to S and Z keys at
// Open, logging its progress. A read-only open cannot, and fails.
func (d *DB) openRecords(o Options) error {
	if o.ReadOnly {
		it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixEventV1}, UpperBound: []byte{prefixEventV1 + 1}})
		if err != nil {
			return err
		}
		old := it.First()
		if err := it.Close(); err != nil {
			return err
		}
		if old {
			return errors.New("the store keeps records by id, as before eventd keyed them by time; open it once read-write to move them")
		}
		return nil
	}
	var progress func(int)
	if o.Logger != nil {
		progress = func(n int) { o.Logger.Info("keying event records by timestamp", "records", n) }
	}
	n, err := d.migrateRecords(progress)
	if n > 0 && err == nil && o.Logger != nil {
		o.Logger.Info("event records keyed by timestamp", "records", n)
	}
	return err
}

// migrateRecords rewrites every E record as an S record (and a Z key for a
// displaced event) in batches of 10,000, then deletes every E and T key
// with one synced range deletion. Until that deletion commits the E keys
// stay, so a crash in the middle leaves a store that the next Open
// migrates again from the start (setting an S key twice is harmless); the
// batches need no sync of their own. It returns how many records it moved;
// progress, if not nil, hears of every 100,000.
func (d *DB) migrateRecords(progress func(moved int)) (int, error) {
	lo, hi := []byte{prefixEventV1}, []byte{prefixEventV1 + 1}
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n := 0
	b := d.db.NewBatch()
	defer func() { _ = b.Close() }()
	var k []byte
	found := false
	for it.First(); it.Valid(); it.Next() {
		found = true
		old := it.Key() // E ds id
		if len(old) != datasetPrefLen+len(ID{}) {
			continue // not a record: the range deletion below drops it
		}
		ds := binary.BigEndian.Uint32(old[1:datasetPrefLen])
		var id ID
		copy(id[:], old[datasetPrefLen:])
		var e Event
		if err := decodeRecord(it.Value(), &e); err != nil {
			return n, fmt.Errorf("record %x: %w", old, err)
		}
		k = recordKey(k[:0], ds, e.Timestamp, id)
		if err := b.Set(k, it.Value(), nil); err != nil {
			return n, err
		}
		if displaced(e.Timestamp, id) {
			k = displacedKey(k[:0], ds, id)
			if err := b.Set(k, appendTS(k[len(k):], e.Timestamp), nil); err != nil {
				return n, err
			}
		}
		if n++; n%10_000 == 0 {
			if err := d.db.Apply(b, pebble.NoSync); err != nil {
				return n, err
			}
			_ = b.Close()
			b = d.db.NewBatch()
			if progress != nil && n%100_000 == 0 {
				progress(n)
			}
		}
	}
	if err := it.Error(); err != nil {
		return n, err
	}
	if !found {
		return 0, nil
	}
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		return n, err
	}
	if err := b.DeleteRange([]byte{prefixTimeV1}, []byte{prefixTimeV1 + 1}, nil); err != nil {
		return n, err
	}
	return n, d.db.Apply(b, pebble.Sync)
}
