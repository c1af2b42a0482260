package storage

import (
	"errors"
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// GetEvent reads one event of dataset ds, ErrNotFound if it is not there:
// its record at its id's millisecond, else under its Z key (or where an
// 8-byte Z value of a store written before session 21 says).
func (d *DB) GetEvent(ds uint32, id ID) (Event, error) {
	v, err := d.get(recordKey(nil, ds, IDTime(id), id))
	if errors.Is(err, ErrNotFound) {
		if v, err = d.get(displacedKey(nil, ds, id)); err == nil {
			ts, record, ok := displacedValue(v)
			switch {
			case !ok:
				err = errCorrupt
			case record != nil:
				v = record
			default:
				v, err = d.get(recordKey(nil, ds, ts, id))
			}
		}
	}
	if err != nil {
		return Event{}, err
	}
	return DecodeEvent(id, v)
}

// ListQuery selects events of one dataset, newest timestamp first.
type ListQuery struct {
	Dataset    uint32
	Name       string // "" for every name
	VisitorID  string
	HasVisitor bool
	From, To   int64 // inclusive Unix ms; To = math.MaxInt64 for no bound
	Limit      int
	Offset     int
	// Match, when set, keeps only the events whose properties it accepts
	// (where= filters). The records are then read one by one, at most
	// MaxScan of them: past it List fails with ErrScanLimit.
	Match   func(props []byte) bool
	MaxScan int
}

// List returns one page of matching events and the exact number of matches.
// Without a visitor filter the total comes from the counters plus scans of at
// most two partial minutes; with one it counts the visitor's index entries.
func (d *DB) List(q ListQuery) ([]Event, int64, error) {
	if q.Match != nil {
		return d.listMatching(q)
	}
	it, err := d.openIndex(q.Dataset, q.Name, q.VisitorID, q.HasVisitor, q.From, q.To)
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	er := entryReader{d: d, ds: q.Dataset}
	defer er.close()
	nameFilter := q.HasVisitor && q.Name != ""
	events := make([]Event, 0, q.Limit)
	var seen int64
	for it.Last(); it.Valid(); it.Prev() {
		if nameFilter && !sameName(it.Value(), q.Name) {
			continue
		}
		seen++
		if seen <= int64(q.Offset) {
			continue
		}
		if len(events) == q.Limit {
			if !q.HasVisitor {
				break // the counters give the total
			}
			continue
		}
		ts, id, ok := tsIDSuffix(it.Key())
		if !ok {
			return nil, 0, errCorrupt
		}
		e, err := er.read(it, ts, id)
		if errors.Is(err, ErrNotFound) {
			// Erased between its index entry and its record, as the
			// other readers skip it (listMatching, ScanEvents).
			seen--
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		events = append(events, e)
	}
	if err := it.Error(); err != nil {
		return nil, 0, err
	}
	total := seen
	if !q.HasVisitor {
		if total, err = d.Count(q.Dataset, q.Name, q.From, q.To); err != nil {
			return nil, 0, err
		}
	}
	return events, total, nil
}

// Count is the exact number of events of ds (of one name, or all for "")
// with timestamps in [from, to] inclusive, bots included (lists show every
// event): the human and the bot series are added.
func (d *DB) Count(ds uint32, name string, from, to int64) (int64, error) {
	if to == math.MaxInt64 {
		to-- // keep to+1 representable
	}
	plan := planCount(max(from, 0), to+1)
	v := d.derived.view()
	defer v.close()
	var total int64
	for _, bs := range plan.Buckets {
		for _, series := range [2]string{name, seriesName(name, true)} {
			n, err := v.seriesCount(ds, series, bs)
			if err != nil {
				return 0, err
			}
			total += n
		}
	}
	var prefix []byte
	if name == "" {
		prefix = appendDataset(nil, prefixRecord, ds)
	} else {
		prefix = namePrefix(nil, ds, name)
	}
	for _, e := range plan.Edges {
		// With the displaced events' keys, in Pebble and in memory (timeindex.go).
		it, err := d.openTime(rangeBounds(prefix, e.Start, e.End-1))
		if err != nil {
			return 0, err
		}
		for it.First(); it.Valid(); it.Next() {
			total++
		}
		if err := it.Close(); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// seriesCount is the count of one series over a bucket span: Pebble's
// counters plus the overlay.
func (v *view) seriesCount(ds uint32, series string, bs bucketSpan) (int64, error) {
	prefix := counterPrefix(nil, ds, series, bs.Level)
	lo := appendTS(append([]byte(nil), prefix...), bs.Start)
	hi := appendTS(append([]byte(nil), prefix...), bs.End)
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, err
	}
	var total int64
	for it.First(); it.Valid(); it.Next() {
		total += decodeCount(it.Value())
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	return total + v.count(ds, series, bs.Level, bs.Start, bs.End), nil
}

// sameName reports whether a visitor index value names the event name.
func sameName(v []byte, name string) bool {
	n, _ := splitBot(v)
	return string(n) == name
}

// EventsAfter calls fn for the events of ds recorded after id, in record
// order, until fn returns false or limit events were given.
func (d *DB) EventsAfter(ds uint32, after ID, limit int, fn func(*Event) bool) error {
	var decodeErr error
	err := d.RecordsAfter(ds, after, limit, func(id ID, record []byte) bool {
		e, err := DecodeEvent(id, record)
		if err != nil {
			decodeErr = err
			return false
		}
		return fn(&e)
	})
	return errors.Join(decodeErr, err)
}

// RecordsAfter is EventsAfter without decoding: fn gets each event's id and
// stored record, which is valid only until fn returns (DecodeEvent reads
// it). A reader that keeps what it made of a record, as the stream's
// shared cache does, decodes each event once instead of once per reader.
func (d *DB) RecordsAfter(ds uint32, after ID, limit int, fn func(id ID, record []byte) bool) error {
	if limit <= 0 {
		return nil
	}
	n := 0
	return d.eachByID(ds, after, lastID, true, func(id ID, record []byte) bool {
		n++
		return fn(id, record) && n < limit
	})
}

// lastID is the highest id: "no bound" for reads in id order.
var lastID = ID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// DecodeEvent decodes the stored record of event id (GetEvent,
// RecordReader and RecordsAfter read them); the event owns its bytes.
func DecodeEvent(id ID, record []byte) (Event, error) {
	e := Event{ID: id}
	err := decodeRecord(record, &e)
	return e, err
}

// checkScan fails with ErrScanLimit when ds holds more than maxScan events
// (of name; "" for every name) with timestamps in [from, to], as its
// counters say: a raw scan past its bound fails at once rather than after
// reading maxScan records. maxScan 0 is no bound.
func (d *DB) checkScan(ds uint32, name string, from, to int64, maxScan int) error {
	if maxScan <= 0 {
		return nil
	}
	n, err := d.Count(ds, name, from, to)
	if err != nil {
		return err
	}
	if n > int64(maxScan) {
		return ErrScanLimit
	}
	return nil
}
