package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/eventd/eventd/storage/diskspace"
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
	z   *pebble.Iterator // the dataset's Z keys, for displaced events: opened at the first
	ds  uint32
	key []byte
	// noSteps counts down the reads that seek without stepping (seek).
	noSteps int
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
// gives them: a displaced event's from its Z key. decodeRecord copies what
// it keeps, so the event outlives the iterator's position.
func (r *RecordReader) Get(ts int64, id ID) (Event, error) {
	rec, err := r.raw(ts, id)
	if err != nil {
		return Event{}, err
	}
	return DecodeEvent(id, rec)
}

// raw is Get's record, undecoded: it aliases the reader's iterators and is
// valid until the reader's next read.
func (r *RecordReader) raw(ts int64, id ID) ([]byte, error) {
	if displaced(ts, id) {
		if r.z == nil {
			lo := appendDataset(nil, prefixDisplaced, r.ds)
			z, err := r.it.Clone(pebble.CloneOptions{IterOptions: &pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)}})
			if err != nil {
				return nil, err
			}
			r.z = z
		}
		v, err := r.seek(r.z, displacedKey(r.key[:0], r.ds, id))
		if err != nil {
			return nil, err
		}
		_, record, ok := displacedValue(v)
		if !ok {
			return nil, errCorrupt
		}
		if record != nil {
			return record, nil
		}
		// Written before session 21: the record is under S.
	}
	return r.seek(r.it, recordKey(r.key[:0], r.ds, ts, id))
}

// seekNexts is how many keys seek steps over before it seeks: an index
// walked in time order mostly asks for the next record or one a few keys
// on (a commit's records lie next to each other in S and in Z), and a
// step moves the merged iterator alone where a seek repositions every
// memtable and level.
const seekNexts = 4

// seekNoSteps is how many reads seek at once after steps missed, on
// either iterator: a walk whose records lie further apart keeps Pebble's
// own stepping in each level.
const seekNoSteps = 32

// seek reads key's value through it, valid until its next move.
func (r *RecordReader) seek(it *pebble.Iterator, key []byte) ([]byte, error) {
	r.key = key
	if r.noSteps > 0 {
		r.noSteps--
	} else if it.Valid() {
		// Forward for a walk oldest first, backward for a list's, newest
		// first.
		c := bytes.Compare(it.Key(), key)
		forward := c < 0
		for range seekNexts {
			if c == 0 {
				return it.ValueAndErr()
			}
			if (c > 0) == forward { // stepped past it: not in the view
				break
			}
			if forward && !it.Next() || !forward && !it.Prev() {
				break
			}
			c = bytes.Compare(it.Key(), key)
		}
		if c == 0 {
			return it.ValueAndErr()
		}
		// Too far: seek for a while. Pebble's own seeks step a few
		// keys in each memtable and level first, but only when the
		// previous move was a seek too.
		r.noSteps = seekNoSteps
	}
	if !it.SeekGE(key) || !bytes.Equal(it.Key(), key) {
		if err := it.Error(); err != nil {
			return nil, err
		}
		// Not in the reader's view of the store, which is as of its
		// opening: an event committed since (that a scan opened later
		// found in an index) is read on its own.
		return r.db.get(key)
	}
	return it.ValueAndErr()
}

// Close releases the reader.
func (r *RecordReader) Close() error {
	if r.z != nil {
		_ = r.z.Close()
	}
	return r.it.Close()
}

// recordIndex reads a range of S keys, with the displaced events' M keys,
// as an index of every event: Value is what the time index held before (the
// bot mark, bots.go), so the readers of the name and visitor indexes read
// it alike.
type recordIndex struct {
	*timeIter
	val []byte
}

// Value is the bot mark of the event under the iterator: an M key's value,
// or read from the record at an S key.
func (r *recordIndex) Value() []byte {
	if r.late() {
		return r.timeIter.Value()
	}
	r.val = appendBotMark(r.val[:0], recordIsBot(r.timeIter.Value()))
	return r.val
}

// entryReader reads the events of index entries: from the entry itself
// when the index walks the records, else through a RecordReader opened at
// the first need.
type entryReader struct {
	d  *DB
	ds uint32
	rr *RecordReader
}

// read reads the event of the entry under it, at ts and id.
func (r *entryReader) read(it indexIter, ts int64, id ID) (Event, error) {
	e, _, err := r.matching(it, ts, id, nil)
	return e, err
}

// raw is read's record, undecoded: valid until it or the reader moves.
func (r *entryReader) raw(it indexIter, ts int64, id ID) ([]byte, error) {
	if ri, ok := it.(*recordIndex); ok && !ri.late() {
		return ri.timeIter.Value(), nil
	}
	if r.rr == nil {
		rr, err := r.d.NewRecordReader(r.ds)
		if err != nil {
			return nil, err
		}
		r.rr = rr
	}
	return r.rr.raw(ts, id)
}

// matching reads the event of the entry under it when match (nil: any)
// accepts its properties, read in place: a where= filter decodes only the
// events it keeps. ok is false for an event match refuses.
func (r *entryReader) matching(it indexIter, ts int64, id ID, match func(props []byte) bool) (e Event, ok bool, err error) {
	rec, err := r.raw(it, ts, id)
	if err != nil {
		return Event{}, false, err
	}
	if match != nil {
		parts, valid := splitRecord(rec)
		if !valid {
			return Event{}, false, errCorrupt
		}
		if !match(parts.props) {
			return Event{}, false, nil
		}
	}
	e, err = DecodeEvent(id, rec)
	return e, err == nil, err
}

// close releases the RecordReader, if one was opened.
func (r *entryReader) close() {
	if r.rr != nil {
		_ = r.rr.Close()
	}
}

// recordIsBot reports whether a record's properties flag a bot.
func recordIsBot(p []byte) bool {
	r, ok := splitRecord(p)
	return ok && IsBot(r.props)
}

// eachByID calls fn for the events of ds with ids in (after, upTo] in id
// order (the order they were recorded in), until fn returns false. Records
// are keyed by timestamp, so it merges two ranges of one view of the store:
// the S keys from after's millisecond to upTo's, where an event whose
// timestamp is its id's millisecond sits in id order, and the Z keys over
// (after, upTo] of the displaced events, which hold their records (in a
// store written before session 21, the timestamp of their S record). The S range ends at idCeil too: no id is later
// than the clock at its write, so the events timestamped ahead of their
// recording (up to the hour a timestamp may lead) are not walked by every
// read that has caught up. It skips the displaced events' own S keys only
// up to the millisecond of the next Z id, so the waste is bounded by the
// displaced events whose timestamps fall within the span read. With
// records false, fn gets a nil record and no record of a displaced event
// is read (counts).
func (d *DB) eachByID(ds uint32, after, upTo ID, records bool, fn func(id ID, record []byte) bool) error {
	if bytes.Compare(after[:], upTo[:]) >= 0 {
		return nil
	}
	lo := append(recordKey(nil, ds, IDTime(after), after), 0)
	hi := append(recordKey(nil, ds, IDTime(upTo), upTo), 0)
	recs, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi, KeyTypes: pebble.IterKeyTypePointsOnly})
	if err != nil {
		return err
	}
	defer recs.Close()
	// The ceiling is read after the iterator took its view: a commit it
	// sees raised maxIDMs before Pebble showed it.
	if ceil := d.idCeil(); ceil < IDTime(upTo) {
		hi = appendTS(appendDataset(nil, prefixRecord, ds), ceil+1)
		if bytes.Compare(lo, hi) > 0 {
			hi = lo // no S key: the displaced events only
		}
		recs.SetBounds(lo, hi)
	}
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
	var all *pebble.Iterator // the dataset's records, for displaced events: opened at the first
	defer func() {
		if all != nil {
			_ = all.Close()
		}
	}()
	// An iterator that stops on an error must end the walk there: going on
	// with the other range would skip the failed one's events.
	next := func(it *pebble.Iterator, valid bool) (bool, error) {
		if !valid {
			return false, it.Error()
		}
		return true, nil
	}
	recOK, err := next(recs, recs.First())
	if err != nil {
		return err
	}
	dispOK, err := next(disp, disp.First())
	if err != nil {
		return err
	}
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
			if recOK, err = next(recs, recs.Next()); err != nil {
				return err
			}
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
			if recOK, err = next(recs, recs.Next()); err != nil {
				return err
			}
			continue
		}
		// Here dispOK: the next event in id order is z.
		found := true
		var v []byte
		if records {
			zts, record, ok := displacedValue(disp.Value())
			if !ok {
				return errCorrupt
			}
			// Written before session 21, the record is under S.
			if v = record; v == nil {
				key = recordKey(key[:0], ds, zts, z)
				if all == nil {
					base := appendDataset(nil, prefixRecord, ds)
					if all, err = recs.Clone(pebble.CloneOptions{IterOptions: &pebble.IterOptions{LowerBound: base, UpperBound: prefixEnd(base)}}); err != nil {
						return err
					}
				}
				if found = all.SeekGE(key) && bytes.Equal(all.Key(), key); !found {
					if err := all.Error(); err != nil {
						return err
					}
				} else if v, err = all.ValueAndErr(); err != nil {
					return err
				}
			}
		}
		// A Z key without its record (none is written so) gives nothing.
		if found && !fn(z, v) {
			return nil
		}
		if dispOK, err = next(disp, disp.Next()); err != nil {
			return err
		}
	}
	return nil
}

// idCeil is a millisecond no event id in the store is later than: the
// clock, or a later id written (an imported one, up to the hour a
// timestamp may lead; Open starts maxIDMs at the latest record time).
func (d *DB) idCeil() int64 {
	return max(d.now().UnixMilli(), d.maxIDMs.Load())
}

// initIDCeil sets maxIDMs from the latest record timestamp of each
// dataset, one seek each: an event whose timestamp is its id's millisecond
// is no later, so ids ahead of the clock written before a restart stay
// within the ceiling.
func (d *DB) initIDCeil() error {
	base := []byte{prefixRecord}
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: base, UpperBound: prefixEnd(base), KeyTypes: pebble.IterKeyTypePointsOnly})
	if err != nil {
		return err
	}
	defer it.Close()
	for valid := it.First(); valid; {
		k := it.Key()
		if len(k) < datasetPrefLen {
			valid = it.Next()
			continue
		}
		ds := binary.BigEndian.Uint32(k[1:datasetPrefLen])
		last := it.SeekLT(prefixEnd(appendDataset(nil, prefixRecord, ds)))
		if ts, _, ok := tsIDSuffix(it.Key()); last && ok && len(it.Key()) == datasetPrefLen+24 {
			d.maxIDMs.Store(max(d.maxIDMs.Load(), ts))
		}
		if ds == ^uint32(0) {
			break
		}
		valid = it.SeekGE(appendDataset(nil, prefixRecord, ds+1))
	}
	return it.Error()
}

// openRecords moves the records of a store written before they were keyed
// by timestamp (E ds id, with a T ds ts id time index) to S and Z keys at
// Open, logging its progress. A read-only open cannot: it notes the old
// layout (OldRecords), under which no event reads.
func (d *DB) openRecords(o Options) error {
	old, err := d.hasOldRecords()
	if err != nil || !old {
		return err
	}
	if o.ReadOnly {
		d.oldRecords = true
		return nil
	}
	if err := d.roomToMoveRecords(); err != nil {
		return err
	}
	var progress func(int)
	if o.Logger != nil {
		progress = func(n int) { o.Logger.Info("keying event records by timestamp", "records", n) }
	}
	n, err := d.migrateRecords(progress, func(key []byte, err error) {
		if o.Logger != nil {
			o.Logger.Warn("an unreadable event record is kept at its id's time", "key", fmt.Sprintf("%x", key), "err", err)
		}
	})
	if err == nil && o.Logger != nil {
		o.Logger.Info("event records keyed by timestamp", "records", n)
	}
	return err
}

// OldRecords reports a store opened read-only before its records were
// keyed by timestamp: its events cannot be read until a read-write open
// moves them.
func (d *DB) OldRecords() bool { return d.oldRecords }

// hasOldRecords reports whether the store holds E or T keys; T keys alone
// are left when a move stopped before its last batch.
func (d *DB) hasOldRecords() (bool, error) {
	for _, p := range []byte{prefixEventV1, prefixTimeV1} {
		if found, err := d.hasKeys(p); err != nil || found {
			return found, err
		}
	}
	return false, nil
}

// migrateSlack is the free space a record move needs beyond the records
// (their Z keys, the batches' WAL).
const migrateSlack = 256 << 20

// statVolume reports the data volume's usage; tests replace it.
var statVolume diskspace.StatFunc = diskspace.Stat

// roomToMoveRecords refuses a move that would fill the volume: until
// compactions drop the moved E keys, the records take their space twice.
func (d *DB) roomToMoveRecords() error {
	need, err := d.db.EstimateDiskUsage([]byte{prefixEventV1}, []byte{prefixEventV1 + 1})
	if err != nil {
		return err
	}
	u, err := statVolume(d.dir)
	if err != nil {
		return nil // unknown: try
	}
	if u.Free < need+migrateSlack {
		return fmt.Errorf("keying the event records by timestamp needs about %s free on the data volume and %s is: free some (delete <data>/ballast) and start again",
			diskspace.FormatSize(int64(need+migrateSlack)), diskspace.FormatSize(int64(u.Free)))
	}
	return nil
}

// migrateRecords rewrites the E records as S records (and a Z key for a
// displaced event), then deletes every T key (moveKeys). A record whose
// timestamp cannot be read is kept at its id's millisecond and reported to
// bad, so one damaged record does not stop the store from opening (reading
// it fails as before); a key that is not a record is dropped.
func (d *DB) migrateRecords(progress func(moved int), bad func(key []byte, err error)) (int, error) {
	var k []byte
	return d.moveKeys(prefixEventV1, true, func(b *pebble.Batch, old, v []byte) error {
		if len(old) != datasetPrefLen+len(ID{}) { // E ds id
			return nil
		}
		ds := binary.BigEndian.Uint32(old[1:datasetPrefLen])
		var id ID
		copy(id[:], old[datasetPrefLen:])
		ts, ok := recordTS(v)
		if !ok {
			if bad != nil {
				bad(old, errCorrupt)
			}
			ts = IDTime(id)
		}
		k = recordKey(k[:0], ds, ts, id)
		if err := b.Set(k, v, nil); err != nil {
			return err
		}
		if !displaced(ts, id) {
			return nil
		}
		k = displacedKey(k[:0], ds, id)
		return b.Set(k, appendTS(k[len(k):], ts), nil)
	}, func(b *pebble.Batch) error {
		return b.DeleteRange([]byte{prefixTimeV1}, []byte{prefixTimeV1 + 1}, nil)
	}, progress)
}

// recordTS reads the timestamp at the head of a record.
func recordTS(p []byte) (int64, bool) {
	if len(p) < 1 || p[0] != recordVersion {
		return 0, false
	}
	v, _, ok := uvarint(p[1:])
	return int64(v), ok
}
