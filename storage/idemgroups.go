package storage

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Idempotency records kept by slot (idemslots.go) are written a group to
// a key: one per commit, slot and API key,
// B slot len keyID firstID -> entries, where firstID is the event id of
// the group's first entry and an entry is uvarint len(key), key, then its
// record in the compact form below (before session 39, encodeIdemRecord's
// 40 bytes, still read). A record is written with the new
// event it names, whose id no other commit writes: so firstID keeps two
// commits' groups of a slot apart (a group written again under the same
// key would replace the first). A keyed batch of 100 events
// writes one key instead of 100: each key costs a memtable insert,
// its flushed table's block and bloom filter entries, and for random
// messageIds (UUIDs) an insert far from the last, whatever its size
// (eventd-keycost with look-ups: a UUID-keyed event 9.3-9.7 -> 6.4-6.8 µs
// of storage CPU, what an analytics-node-keyed one costs; a Segment
// message 13% less of eventd's CPU; docs/benchmarks.md, session 30).
//
// A look-up is given the slots a key may be in by the filter and reads
// that slot's groups of its API key (a retry: usually the one batch it
// came in); IdemLookup keeps what it read, so that a retried batch reads
// them once. A slot is a 128th of a second so that a found key reads a
// few thousand entries at most at the highest rates: with slots of a
// second, an import run again over keys of one busy second read 124 µs
// a key (docs/benchmarks.md, session 30). Before groups, each record had
// its own key, F second len keyID key: those are still read, swept and
// erased until none is left (idemSlotLegacy).

// idemGroupPrefix is B slot len keyID, the start of a group's key.
func idemGroupPrefix[T string | []byte](dst []byte, slot uint64, keyID T) []byte {
	dst = append(dst, prefixIdemGroup)
	dst = binary.BigEndian.AppendUint64(dst, slot)
	dst = append(dst, byte(len(keyID)))
	return append(dst, keyID...)
}

// parseIdemGroupKey splits a B key; keyID points into k.
func parseIdemGroupKey(k []byte) (slot uint64, keyID []byte, ok bool) {
	if len(k) < 10 || k[0] != prefixIdemGroup || len(k) != 10+int(k[9])+len(ID{}) {
		return 0, nil, false
	}
	return binary.BigEndian.Uint64(k[1:]), k[10 : 10+int(k[9])], true
}

// appendEntryKey appends the start of a group's entry: the length of its
// key, then the key; the encoded record follows.
func appendEntryKey[T string | []byte](dst []byte, key T) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

// encodeIdemRecord appends r as stored: hash, id, timestamp, created.
func encodeIdemRecord(dst []byte, r IdemRecord) []byte {
	dst = binary.BigEndian.AppendUint64(dst, r.Hash)
	dst = append(dst, r.ID[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.Timestamp))
	return binary.BigEndian.AppendUint64(dst, uint64(r.CreatedAt))
}

// idemRecordID is the event id in a record encodeIdemRecord wrote.
func idemRecordID(rec []byte) []byte { return rec[8 : 8+len(ID{})] }

// A group's value in the compact form (since session 39) is a 0 byte, which
// no value of 40-byte records starts with (a key is never empty), then
// entries of uvarint len(key), key, the content hash (8 bytes), the event
// id as a step from the entry before's (the group's firstID for the first),
// and the event's time and the record's creation as varints of their
// difference from the id's millisecond: a step is uvarint x, the id before
// plus x-1 in the same millisecond, or 0 and the whole id. A commit's ids
// are made one after the other and its records created at once, so a
// record takes 11 bytes after its key instead of 40: an analytics-node
// messageId's entry 72 bytes instead of 101, the bench's 41 instead of 70,
// fewer bytes to write, flush and compact (docs/benchmarks.md, session 39).
const compactGroup = 0

// appendCompactEntry appends key's entry in the compact form with its
// record rec (encodeIdemRecord's form); prev is the id of the entry before
// (the group's firstID for the first), and becomes rec's.
func appendCompactEntry(dst, key, rec []byte, prev *ID) []byte {
	dst = append(appendEntryKey(dst, key), rec[:8]...)
	id := ID(idemRecordID(rec))
	if step, ok := idStep(*prev, id); ok {
		dst = binary.AppendUvarint(dst, step+1)
	} else {
		dst = append(append(dst, 0), id[:]...)
	}
	*prev = id
	ms := IDTime(id)
	// Differences wrap around in int64, and adding them back undoes it:
	// any time is kept exactly, a far one in more bytes.
	dst = binary.AppendVarint(dst, int64(binary.BigEndian.Uint64(rec[24:]))-ms)
	return binary.AppendVarint(dst, int64(binary.BigEndian.Uint64(rec[32:]))-ms)
}

// idStep is how far id's counter is past prev's, if both are of one
// millisecond and id is not before prev by it; ok false otherwise.
func idStep(prev, id ID) (uint64, bool) {
	if [6]byte(prev[:6]) != [6]byte(id[:6]) {
		return 0, false
	}
	lo, borrow := bits.Sub64(binary.BigEndian.Uint64(id[8:]), binary.BigEndian.Uint64(prev[8:]), 0)
	hi := int(binary.BigEndian.Uint16(id[6:])) - int(binary.BigEndian.Uint16(prev[6:])) - int(borrow)
	return lo, hi == 0 && lo < math.MaxUint64
}

// idPlus is id with its counter step past it (carried into its upper
// bits): the inverse of idStep.
func idPlus(id ID, step uint64) ID {
	lo, carry := bits.Add64(binary.BigEndian.Uint64(id[8:]), step, 0)
	binary.BigEndian.PutUint64(id[8:], lo)
	binary.BigEndian.PutUint16(id[6:], binary.BigEndian.Uint16(id[6:])+uint16(carry))
	return id
}

// groupFirstID is the first entry's event id that group key k ends with;
// ok false if k is too short to hold one.
func groupFirstID(k []byte) (ID, bool) {
	if len(k) < len(ID{}) {
		return ID{}, false
	}
	return ID(k[len(k)-len(ID{}):]), true
}

// eachIdemEntry calls fn with each entry of the group at k with value v, in
// the order written: key points into v, rec is the entry's record in
// encodeIdemRecord's form, valid until fn returns.
func eachIdemEntry(k, v []byte, fn func(key, rec []byte)) error {
	if len(v) == 0 || v[0] != compactGroup {
		for len(v) > 0 {
			n, w := binary.Uvarint(v)
			if w <= 0 || n > uint64(len(v)-w) || uint64(len(v)-w)-n < idemRecordLen {
				return errCorrupt
			}
			v = v[w:]
			fn(v[:n], v[n:n+idemRecordLen])
			v = v[n+idemRecordLen:]
		}
		return nil
	}
	prev, ok := groupFirstID(k)
	if !ok {
		return errCorrupt
	}
	var rec [idemRecordLen]byte
	for v = v[1:]; len(v) > 0; {
		n, w := binary.Uvarint(v)
		if w <= 0 || n == 0 || n > uint64(len(v)-w) || uint64(len(v)-w)-n < 8 {
			return errCorrupt
		}
		key := v[w : w+int(n)]
		v = v[w+int(n):]
		copy(rec[:8], v)
		step, w := binary.Uvarint(v[8:])
		if w <= 0 {
			return errCorrupt
		}
		v = v[8+w:]
		if step == 0 {
			if len(v) < len(ID{}) {
				return errCorrupt
			}
			prev = ID(v)
			v = v[len(ID{}):]
		} else {
			prev = idPlus(prev, step-1)
		}
		ts, w := binary.Varint(v)
		if w <= 0 {
			return errCorrupt
		}
		created, w2 := binary.Varint(v[w:])
		if w2 <= 0 {
			return errCorrupt
		}
		v = v[w+w2:]
		ms := IDTime(prev)
		copy(rec[8:], prev[:])
		binary.BigEndian.PutUint64(rec[24:], uint64(ms+ts))
		binary.BigEndian.PutUint64(rec[32:], uint64(ms+created))
		fn(key, rec[:])
	}
	return nil
}

// groupRead is a slot's groups of one API key that an IdemLookup read:
// once for one key, then again into recs, each key's latest record, for
// the next keys. A look-up of a new key reads them when its tag is one
// the filter holds for another key (about n in 2^40 for n keys held), a
// retried batch for all its keys.
type groupRead struct {
	slot  uint64
	keyID string
	recs  map[string]IdemRecord
}

// getGrouped reads key's record in slot's groups of keyID.
func (l *IdemLookup) getGrouped(slot uint64, keyID, key string) (IdemRecord, error) {
	i := slices.IndexFunc(l.groups, func(g groupRead) bool { return g.slot == slot && g.keyID == keyID })
	if i < 0 {
		l.groups = append(l.groups, groupRead{slot: slot, keyID: keyID})
		var r IdemRecord
		err := ErrNotFound
		serr := l.scanGroups(slot, keyID, func(k, rec []byte) {
			if string(k) == key {
				r, err = decodeIdemRecord(rec)
			}
		})
		return r, cmp.Or(serr, err)
	}
	g := &l.groups[i]
	if g.recs == nil {
		g.recs = make(map[string]IdemRecord)
		var bad error
		if err := l.scanGroups(slot, keyID, func(k, rec []byte) {
			r, err := decodeIdemRecord(rec)
			bad = cmp.Or(bad, err)
			g.recs[string(k)] = r
		}); err != nil || bad != nil {
			g.recs = nil
			return IdemRecord{}, cmp.Or(err, bad)
		}
	}
	if r, ok := g.recs[key]; ok {
		return r, nil
	}
	return IdemRecord{}, ErrNotFound
}

// scanGroups calls fn with every entry of slot's groups of keyID, and
// counts them in l.entries. Groups are in the order of their first ids,
// entries in the order written: of a key's entries, the last is its
// latest record.
func (l *IdemLookup) scanGroups(slot uint64, keyID string, fn func(key, rec []byte)) error {
	if l.grouped == nil {
		var err error
		if l.grouped, err = l.db.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIdemGroup}, UpperBound: []byte{prefixIdemGroup + 1}}); err != nil {
			return err
		}
	}
	l.key = idemGroupPrefix(l.key[:0], slot, keyID)
	it := l.grouped
	for valid := it.SeekGE(l.key); valid && bytes.HasPrefix(it.Key(), l.key); valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := eachIdemEntry(it.Key(), v, func(key, rec []byte) {
			l.entries++
			fn(key, rec)
		}); err != nil {
			return err
		}
	}
	return it.Error()
}

// loadIdemGroups fills the filter at Open from the groups from lower on
// (a B key), leaving out those of slots before oldest and the keys a
// saved filter holds already (saved); a key the filter refuses is written
// to the day layout too, in b, so that look-ups find it there. It returns
// the keys it read into the filter.
func (d *DB) loadIdemGroups(lower []byte, oldest uint64, saved bool, b *pebble.Batch) (int, error) {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{prefixIdemGroup + 1}})
	if err != nil {
		return 0, err
	}
	n := 0
	var slots []uint64
	var packed []byte // len keyID key, as idemSlots.hashPacked takes them
	var bad error
	for valid := it.First(); valid; valid = it.Next() {
		slot, keyID, ok := parseIdemGroupKey(it.Key())
		if !ok {
			return n, errors.Join(errCorrupt, it.Close())
		}
		if slot < oldest {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return n, errors.Join(err, it.Close())
		}
		err = eachIdemEntry(it.Key(), v, func(key, rec []byte) {
			packed = append(append(append(packed[:0], byte(len(keyID))), keyID...), key...)
			kept, added := d.filterKey(d.idemSlots.hashPacked(packed), slot, saved, &slots)
			if added {
				n++
			}
			if !kept {
				bad = cmp.Or(bad, d.keepByDay(b, keyID, key, rec))
			}
		})
		if err = errors.Join(err, bad); err != nil {
			return n, errors.Join(err, it.Close())
		}
	}
	return n, errors.Join(it.Error(), it.Close())
}

// eraseIdemGroups removes from the groups the entries of erased events,
// rewriting each group that held one (or deleting it, if nothing is
// left), deleteChunk groups to a synced commit. Nothing else rewrites a
// group: a commit writes new ones.
func (d *DB) eraseIdemGroups(erased map[ID]bool) error {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIdemGroup}, UpperBound: []byte{prefixIdemGroup + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	b := d.db.NewBatch()
	defer b.Close()
	var kept []byte
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		k := it.Key()
		prev, ok := groupFirstID(k) // the key stays: its first id too
		if !ok {
			return errCorrupt
		}
		kept = append(kept[:0], compactGroup)
		hit := false
		err = eachIdemEntry(k, v, func(key, rec []byte) {
			if erased[ID(idemRecordID(rec))] {
				hit = true
				return
			}
			kept = appendCompactEntry(kept, key, rec, &prev)
		})
		if err != nil {
			return err
		}
		switch {
		case !hit:
			continue
		case len(kept) == 1:
			_ = b.Delete(it.Key(), nil)
		default:
			_ = b.Set(it.Key(), kept, nil)
		}
		if b.Count() >= deleteChunk {
			if err := d.commit(b, pebble.Sync); err != nil {
				return err
			}
			b.Reset()
		}
	}
	if err := it.Error(); err != nil || b.Empty() {
		return err
	}
	return d.commit(b, pebble.Sync)
}
