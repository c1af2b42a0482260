package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// Idempotency records are kept by the second they were created in
// (idemslots.go). Before, and when the filter that finds those is full,
// they are kept by API key and the UTC day they were created:
// H len keyID day key (idemDayKey). A look-up reads the partitions of today
// and yesterday, the only ones that can hold a record younger than a day;
// the sweep deletes each API key's older days with one range deletion.
//
// Before, the records were I len keyID key, and the hourly sweep read every
// record to find the expired ones: at a steady rate of keyed writes each
// record was read by some 25 sweeps before it was deleted, and each was
// deleted alone, 4-7.5 µs of sweep per keyed event in all
// (docs/benchmarks.md, session 23), more than storing it. Records in that layout are still read,
// swept and erased until none is left (idemLegacy).

// IdemRecord is what an idempotency key remembers.
type IdemRecord struct {
	Hash      uint64
	ID        ID
	Timestamp int64 // the event's time, Unix ms
	CreatedAt int64 // when the key was first used, Unix ms
}

const idemRecordLen = 8 + 16 + 8 + 8

// idemDay is the partition of a record created at ms: its UTC day.
func idemDay(ms int64) uint32 {
	if ms < 0 {
		return 0
	}
	return uint32(ms / dayMs)
}

// idemDayRange is what the look-ups read: the partitions of yesterday to
// today, and to the latest one written if the clock has gone back since.
type idemDayRange struct{ latest atomic.Uint32 }

// raise notes that day's partition was written.
func (r *idemDayRange) raise(day uint32) {
	for {
		cur := r.latest.Load()
		if day <= cur || r.latest.CompareAndSwap(cur, day) {
			return
		}
	}
}

// span is the partitions a look-up at nowMs reads, newest first: hi down
// to lo.
func (r *idemDayRange) span(nowMs int64) (hi, lo uint32) {
	today := idemDay(nowMs)
	hi = max(today, r.latest.Load())
	if today > 0 {
		lo = today - 1
	}
	return hi, lo
}

// openIdempotency notes at Open whether records of the day layout and of
// the one before are left, and the latest day partition written.
func (d *DB) openIdempotency() error {
	legacy, err := d.hasKeys(prefixIdem)
	if err != nil {
		return err
	}
	d.idemLegacy.Store(legacy)
	slots, err := d.hasKeys(prefixIdemSlot)
	if err != nil {
		return err
	}
	d.idemSlotLegacy.Store(slots)
	days, err := d.hasKeys(prefixIdemDay)
	if err != nil {
		return err
	}
	d.idemDayLegacy.Store(days)
	return d.eachIdemScope(func(it *pebble.Iterator, scope []byte) error {
		// The scope's last key holds its latest day.
		if it.SeekLT(prefixEnd(scope)) {
			if day, ok := keyDay(it.Key(), scope); ok {
				d.idemDays.raise(day)
			}
		}
		return it.Error()
	})
}

// keyDay is the day of key, a record of scope (H len keyID).
func keyDay(key, scope []byte) (uint32, bool) {
	if len(key) < len(scope)+4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(key[len(scope):]), true
}

// eachIdemScope calls fn with the H len keyID prefix of every API key that
// has records, one seek each; fn may move the iterator.
func (d *DB) eachIdemScope(fn func(it *pebble.Iterator, scope []byte) error) error {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIdemDay}, UpperBound: []byte{prefixIdemDay + 1}})
	if err != nil {
		return err
	}
	var scope []byte
	for valid := it.First(); valid; valid = it.SeekGE(prefixEnd(scope)) {
		k := it.Key()
		if len(k) < 2 || len(k) < 2+int(k[1]) {
			return errors.Join(errCorrupt, it.Close())
		}
		scope = append(scope[:0], k[:2+int(k[1])]...)
		if err := fn(it, scope); err != nil {
			return errors.Join(err, it.Close())
		}
	}
	return errors.Join(it.Error(), it.Close())
}

// IdemLookup reads many idempotency keys through one Pebble iterator per
// day partition. A Get sets up an iterator over every memtable and level
// for each key; a batch of 100 messages that each carry a key (Segment's
// messageId, an import line's idempotency_key) pays that once here. One
// iterator per day keeps each one's seeks in the order of the keys, which
// lets Pebble step from the last position instead of seeking afresh when
// the keys come in order (an SDK's time-ordered messageIds). It sees the
// store as of NewIdemLookup or later (a partition's iterator is opened at
// its first seek), so a caller creates one per request, after the keys
// still being committed were set aside.
type IdemLookup struct {
	db    *DB
	nowMs int64
	found []uint64 // the slots the filter gives a key
	// grouped reads the groups of records by slot, opened on first use;
	// groups is what it read (idemgroups.go), entries how many entries of
	// them it decoded.
	grouped *pebble.Iterator
	groups  []groupRead
	entries int
	// slots reads the records by second kept one by one, before the
	// groups, while any may be left (slotLegacy).
	slots      *pebble.Iterator
	slotLegacy bool
	dayed      bool   // the day layout is read too (idemDayInUse)
	hi, lo     uint32 // the day partitions read (idemDayRange.span)
	days       []*pebble.Iterator
	old        *pebble.Iterator // the layout before the days, when records of it may be left
	legacy     bool
	key        []byte
}

// NewIdemLookup opens a lookup, once the filter is rebuilt after Open;
// Close releases it.
func (d *DB) NewIdemLookup() (*IdemLookup, error) {
	if err := d.idemReady(); err != nil {
		return nil, err
	}
	now := d.now().UnixMilli()
	legacy := d.idemLegacy.Load()
	l := &IdemLookup{db: d, nowMs: now, dayed: legacy || d.idemDayInUse(), legacy: legacy, slotLegacy: d.idemSlotLegacy.Load()}
	if l.dayed {
		l.hi, l.lo = d.idemDays.span(now)
		l.days = make([]*pebble.Iterator, l.hi-l.lo+1)
	}
	return l, nil
}

// Get is GetIdempotency through the lookup's iterators: the seconds the
// filter gives, newest first, then, when they are read, the day
// partitions, newest first, and the layout before them. The store keys
// whole-key bloom filters (the default Split), so a seek in a day
// partition for a key that was never written is usually answered by the
// filters.
func (l *IdemLookup) Get(keyID, key string) (IdemRecord, error) {
	return l.GetHashed(keyID, key, l.db.IdempotencyHash(keyID, key))
}

// GetHashed is Get of a key whose IdempotencyHash is h.
func (l *IdemLookup) GetHashed(keyID, key string, h uint64) (IdemRecord, error) {
	l.found = l.db.idemSlots.find(h, l.nowMs, l.found[:0])
	for _, slot := range l.found {
		r, err := l.getSlot(slot, keyID, key)
		if err == ErrNotFound {
			continue // two keys shared a tag, or the record was swept
		}
		if err != nil || !l.dayed {
			return r, err
		}
		// A key stored again once its record was past its day, while the
		// filter was full: the newer record is in the day layout.
		if d, err := l.getDayed(keyID, key); err == nil && d.CreatedAt > r.CreatedAt {
			return d, nil
		}
		return r, nil
	}
	if !l.dayed {
		return IdemRecord{}, ErrNotFound
	}
	return l.getDayed(keyID, key)
}

// getSlot reads key's record of slot: in the slot's groups, then, while
// records of the layout before the groups may be left, its own key in the
// slot's second.
func (l *IdemLookup) getSlot(slot uint64, keyID, key string) (IdemRecord, error) {
	r, err := l.getGrouped(slot, keyID, key)
	if err != ErrNotFound || !l.slotLegacy {
		return r, err
	}
	l.key = idemSlotKey(l.key[:0], slotSecond(slot), keyID, key)
	return l.seek(&l.slots, prefixIdemSlot)
}

// getDayed reads key in the day partitions, then in the layout before.
func (l *IdemLookup) getDayed(keyID, key string) (IdemRecord, error) {
	for i := range l.days {
		l.key = idemDayKey(l.key[:0], keyID, l.hi-uint32(i), key)
		if r, err := l.seek(&l.days[i], prefixIdemDay); err != ErrNotFound {
			return r, err
		}
	}
	if !l.legacy {
		return IdemRecord{}, ErrNotFound
	}
	l.key = legacyIdemKey(l.key[:0], keyID, key)
	return l.seek(&l.old, prefixIdem)
}

// seek reads the record at l.key through *it, opened over prefix's keys if
// it is not yet.
func (l *IdemLookup) seek(it **pebble.Iterator, prefix byte) (IdemRecord, error) {
	if *it == nil {
		var err error
		// UseL6Filters: a key never written is answered by the last
		// level's filter too (filter.go), not by reading its blocks.
		if *it, err = l.db.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}, UseL6Filters: true}); err != nil {
			return IdemRecord{}, err
		}
	}
	if !(*it).SeekPrefixGE(l.key) || !bytes.Equal((*it).Key(), l.key) {
		if err := (*it).Error(); err != nil {
			return IdemRecord{}, err
		}
		return IdemRecord{}, ErrNotFound
	}
	v, err := (*it).ValueAndErr()
	if err != nil {
		return IdemRecord{}, err
	}
	return decodeIdemRecord(v)
}

// Close releases the iterators.
func (l *IdemLookup) Close() error {
	var errs []error
	for _, it := range append(l.days, l.old, l.slots, l.grouped) {
		if it != nil {
			errs = append(errs, it.Close())
		}
	}
	return errors.Join(errs...)
}

// GetIdempotency reads a remembered idempotency key: kept by second, or
// created since the start of yesterday when kept by day (or left in the
// layout before), ErrNotFound if none.
func (d *DB) GetIdempotency(keyID, key string) (IdemRecord, error) {
	l, err := d.NewIdemLookup()
	if err != nil {
		return IdemRecord{}, err
	}
	r, err := l.Get(keyID, key)
	if cerr := l.Close(); cerr != nil {
		return IdemRecord{}, cerr
	}
	return r, err
}

func decodeIdemRecord(v []byte) (IdemRecord, error) {
	if len(v) != idemRecordLen {
		return IdemRecord{}, errCorrupt
	}
	var r IdemRecord
	r.Hash = binary.BigEndian.Uint64(v)
	copy(r.ID[:], idemRecordID(v))
	r.Timestamp = int64(binary.BigEndian.Uint64(v[24:]))
	r.CreatedAt = int64(binary.BigEndian.Uint64(v[32:]))
	return r, nil
}

// SweepIdempotency deletes the idempotency records created before
// cutoffMs's second, with one range deletion, and forgets them in the
// filter; the records of the days before cutoffMs's, with one range
// deletion per API key; and the records of the old layout created before
// cutoffMs. Records of cutoffMs's own day that are older than it stay
// until the next day's sweep; a look-up compares a record's age anyway
// (actors.IdempotencyLive).
func (d *DB) SweepIdempotency(cutoffMs int64) error {
	if err := d.idemReady(); err != nil {
		return err
	}
	b := d.db.NewBatch()
	defer b.Close()
	sec := uint32(max(cutoffMs, 0) / 1000)
	if err := d.sweepIdemSlots(b, sec); err != nil {
		return err
	}
	cut := idemDay(cutoffMs)
	err := d.eachIdemScope(func(it *pebble.Iterator, scope []byte) error {
		// The scope's first key is its oldest day.
		if day, ok := keyDay(it.Key(), scope); !ok || day >= cut {
			return nil
		}
		return b.DeleteRange(scope, binary.BigEndian.AppendUint32(append([]byte(nil), scope...), cut), nil)
	})
	if err != nil {
		return err
	}
	if !b.Empty() {
		if err := d.commit(b, pebble.NoSync); err != nil {
			return err
		}
	}
	d.forgetIdemSlots(sec)
	if d.idemSlotLegacy.Load() {
		// Nothing writes F keys any more: once none is left, none will be.
		left, err := d.hasKeys(prefixIdemSlot)
		if err != nil {
			return err
		}
		d.idemSlotLegacy.Store(left)
	}
	if d.idemDayLegacy.Load() {
		// Once none of the records written before Open is left, the flag
		// clears: those the filter refused since are read through its own
		// flag (idemDayInUse).
		left, err := d.hasKeys(prefixIdemDay)
		if err != nil {
			return err
		}
		if !left {
			d.idemDayLegacy.Store(false)
		}
	}
	if !d.idemLegacy.Load() {
		return nil
	}
	if _, err := d.deleteWhere([]byte{prefixIdem}, []byte{prefixIdem + 1}, false, func(_, v []byte) bool {
		return len(v) == idemRecordLen && int64(binary.BigEndian.Uint64(v[32:])) < cutoffMs
	}); err != nil {
		return err
	}
	// Nothing writes the old layout any more: once it is empty, it stays so.
	left, err := d.hasKeys(prefixIdem)
	if err == nil && !left {
		d.idemLegacy.Store(false)
	}
	return err
}
