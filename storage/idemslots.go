package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/cockroachdb/pebble/v2"

	"github.com/eventd/eventd/storage/slotfilter"
)

// Idempotency records are kept by the slot, the 128th of a second, they
// were created in, for every API key together, a group of them to a key
// (idemgroups.go). A flushed table of them overlaps, below it, only
// tables of the slots it holds,
// however random the keys: UUID messageIds, which analytics-go and the
// mobile SDKs send, scattered over their API key's day partition (the
// layout before, H) made every flushed table overlap all of the day's
// tables below, and compaction rewrite them (docs/benchmarks.md, proposal
// 20).
//
// Since the slot is not in the key a look-up is given, the filter in
// memory (package slotfilter) maps each key's hash to the slots it may
// be in: a new key, the common case, is answered without reading Pebble,
// a retry with a read of its slot's groups of its API key.
// Before the groups, records were kept one to a key by the second,
// F second len keyID key (idemSlotKey): those are still read, swept and
// erased until none is left; the filter holds them at their second's
// first slot. The filter is derived data: Open rebuilds it from
// its last save and the records since (idemsave.go), or without a save
// from every record's key, about 0.5-0.8 µs a key, on a goroutine of its
// own, so that a store holding millions of keys opens and serves reads
// and writes without keys at once; look-ups wait for the rebuild
// (idemReady).
// Past its bound (Options.IdempotencyFilterKeys), keys go to the day
// layout, which look-ups then read too (idemDayInUse), as they do while
// records written before this layout are left.

// DefaultIdempotencyFilterKeys bounds the filter when
// Options.IdempotencyFilterKeys is 0: 64 million keys, a day at 776 keyed
// events a second, in four tables of at most 128 MiB, which grow as keys
// come (a filter of few keys takes little memory whatever its bound).
const DefaultIdempotencyFilterKeys = 64 << 20

// idemSlots is the filter and what look-ups need to read it.
type idemSlots struct {
	filter *slotfilter.Filter
	// seed keys the hash: random, or the saved filter's (idemsave.go).
	seed atomic.Uint64
	// hi is the latest slot a record was written in: the filter reads
	// its slots back relative to it (or now, if later).
	hi atomic.Uint64
	// overflow: the filter refused a key in this process, which went to
	// the day layout. It stays set until the next Open, which finds that
	// record as it finds records of the layout before. byDay counts the
	// keys the filter refused; the first is logged (log) as a warning.
	overflow atomic.Bool
	byDay    atomic.Uint64
	log      *slog.Logger
	// ready is closed once Open's rebuild is over, loadErr its error;
	// fromSave and read say whether it started from a saved filter and
	// how many records it read into the filter.
	ready    chan struct{}
	loadErr  error
	fromSave bool
	read     int
}

// newIdemSlots is a filter of up to maxKeys keys (0: the default); with
// maxKeys < 0 there is none, and every key is kept by day. log, if not
// nil, says when the filter first refuses a key.
func newIdemSlots(maxKeys int, log *slog.Logger) *idemSlots {
	s := &idemSlots{ready: make(chan struct{}), log: log}
	s.seed.Store(rand.Uint64())
	switch {
	case maxKeys < 0:
		s.overflow.Store(true)
		return s
	case maxKeys == 0:
		maxKeys = DefaultIdempotencyFilterKeys
	}
	s.filter = slotfilter.New(maxKeys)
	return s
}

// hash is the filter's hash of keyID's key: xxhash with a random seed,
// which a client does not know to make its keys share tags.
func (s *idemSlots) hash(keyID, key string) uint64 {
	var h xxhash.Digest
	h.ResetWithSeed(s.seed.Load())
	_, _ = h.Write([]byte{byte(len(keyID))})
	_, _ = h.WriteString(keyID)
	_, _ = h.WriteString(key)
	return h.Sum64()
}

// hashPacked is hash of a key packed as len(keyID), keyID, key, the
// bytes hash writes: the tail of an F key, or a group's entry with its
// API key, at Open's rebuild.
func (s *idemSlots) hashPacked(p []byte) uint64 {
	var h xxhash.Digest
	h.ResetWithSeed(s.seed.Load())
	_, _ = h.Write(p)
	return h.Sum64()
}

// idemSlotsPerSecond is the filter's slots in a second. A found key reads
// its slot's groups of its API key: at a 128th of a second, a few
// thousand entries at the highest rates (an import), where a whole second
// was hundreds of thousands (docs/benchmarks.md, session 30). Finer
// slots would leave fewer bits of the filter's entries to the tag.
const idemSlotsPerSecond = 128

// idemFilterSpan is how old a record a start still puts in the filter, in
// slots: 30 hours. The filter reads a slot back within 36 hours of the
// latest (slotfilter's slotBits); the engine keeps a key 24 hours and
// sweeps hourly, so older records are dead and about to go, and put in the
// filter they would read back as recent.
const idemFilterSpan = 30 * 3600 * idemSlotsPerSecond

// idemSlot is the slot of a record created at ms.
func idemSlot(ms int64) uint64 {
	if ms < 0 {
		return 0
	}
	return uint64(ms) * idemSlotsPerSecond / 1000
}

// secondSlot is the first slot of second sec: the slot the filter holds a
// record kept one to a key by second (F) at.
func secondSlot(sec uint32) uint64 { return uint64(sec) * idemSlotsPerSecond }

// slotSecond is the second slot is in.
func slotSecond(slot uint64) uint32 { return uint32(slot / idemSlotsPerSecond) }

// addHash notes the key hashed to h stored in slot; false if the filter
// is full or slot is below its floor (idemsave.go), and the record must
// go to the day layout.
func (s *idemSlots) addHash(h uint64, slot uint64) bool {
	if s.filter == nil {
		return false // every key is kept by day (overflow is set)
	}
	if !s.filter.Insert(h, slot) {
		s.overflow.Store(true)
		if s.byDay.Add(1) == 1 && s.log != nil {
			s.log.Warn("idempotency filter refused a key: new keys are kept by day, which every keyed write then reads too; raise --idempotency-filter-keys if this is not a clock going back past a save",
				"keys", s.filter.Len(), "bytes", s.filter.Bytes())
		}
		return false
	}
	for {
		cur := s.hi.Load()
		if slot <= cur || s.hi.CompareAndSwap(cur, slot) {
			return true
		}
	}
}

// find appends the slots the key hashed to h may be stored in, newest
// first.
func (s *idemSlots) find(h uint64, nowMs int64, dst []uint64) []uint64 {
	if s.filter == nil {
		return dst
	}
	return s.filter.Find(h, max(s.hi.Load(), idemSlot(nowMs)), dst)
}

// IdempotencyHash is the hash by which the filter knows keyID's key:
// the key actor hashes a key once, looks it up and files it with the hash
// (IdemLookup.GetHashed, FileIdempotency). It holds from the moment
// IdempotencyReady is closed (a start may read the hash's seed back).
func (d *DB) IdempotencyHash(keyID, key string) uint64 { return d.idemSlots.hash(keyID, key) }

// FileIdempotency puts the key hashed to h (IdempotencyHash) in the
// filter at the slot of nowMs, for the record a batch adds with
// Batch.AddIdempotencyFiled once the key's event is stored: the key actor
// files a new key right after its look-up missed, while the filter's
// buckets are in its CPU's cache, where the shard read them again. filed
// is false if the filter refused it (the record then goes to the day
// layout, which look-ups read from then on). A key filed whose event is
// not stored (its write failed or waits for another) costs a later
// look-up of it a read of its slot's groups.
func (d *DB) FileIdempotency(h uint64, nowMs int64) (slot uint64, filed bool) {
	slot = idemSlot(nowMs)
	return slot, d.idemSlots.addHash(h, slot)
}

// TouchIdempotency reads the filter's buckets of the keys hashed to hs
// (IdempotencyHash), so that their look-ups and inserts soon after find
// them in the CPU's cache (slotfilter's Touch): a keyed batch of 100 made
// 200 calls to the filter, each waiting for its own cache misses.
func (d *DB) TouchIdempotency(hs []uint64) {
	if f := d.idemSlots.filter; f != nil {
		f.Touch(hs)
	}
}

// idemSlotKey is F second len keyID key.
func idemSlotKey(dst []byte, sec uint32, keyID, key string) []byte {
	dst = append(dst, prefixIdemSlot)
	dst = binary.BigEndian.AppendUint32(dst, sec)
	dst = append(dst, byte(len(keyID)))
	dst = append(dst, keyID...)
	return append(dst, key...)
}

// parseIdemSlotKey splits an F key; keyID and key point into k.
func parseIdemSlotKey(k []byte) (sec uint32, keyID, key []byte, ok bool) {
	if len(k) < 6 || k[0] != prefixIdemSlot || len(k) < 6+int(k[5]) {
		return 0, nil, nil, false
	}
	n := int(k[5])
	return binary.BigEndian.Uint32(k[1:]), k[6 : 6+n], k[6+n:], true
}

// idemBytesPerRecord is less than a record kept by second takes on disk,
// so that the filter reserved from the records' disk usage holds them all.
const idemBytesPerRecord = 48

// idemDayInUse says look-ups must read the day layout too: records of it
// are left from before, or the filter was full.
func (d *DB) idemDayInUse() bool {
	return d.idemDayLegacy.Load() || d.idemSlots.overflow.Load()
}

// rebuildIdemSlots is Open's rebuild of the filter (loadIdemSlots) at
// now, Open's time; it closes ready when done.
func (d *DB) rebuildIdemSlots(now time.Time) {
	defer close(d.idemSlots.ready)
	start := time.Now()
	n, saved, err := d.loadIdemSlots(now)
	d.idemSlots.loadErr, d.idemSlots.fromSave, d.idemSlots.read = err, saved, n
	switch {
	case err != nil && d.log != nil:
		d.log.Error("rebuild the idempotency filter; keyed writes fail until a restart", "err", err)
	case d.log != nil:
		// Logged with no keys too: it says when keyed writes stopped
		// waiting (the bench's restart reads it).
		keys, _ := d.IdempotencyFilter()
		d.log.Info("idempotency filter rebuilt in memory", "keys", keys, "took", time.Since(start).Round(time.Millisecond), "from_save", saved, "read", n)
	}
}

// IdempotencyReady is closed once the idempotency filter is rebuilt after
// Open: look-ups before that wait for it.
func (d *DB) IdempotencyReady() <-chan struct{} { return d.idemSlots.ready }

// idemReady waits for Open's rebuild of the filter and returns its error.
func (d *DB) idemReady() error {
	<-d.idemSlots.ready
	return d.idemSlots.loadErr
}

// loadIdemSlots fills the filter from the records' keys at Open. A key
// the filter refuses (a table filled in another order can take fewer) is
// moved to the day layout, so that look-ups still find it.
//
// With a saved filter (idemsave.go) it reads only the records from the
// save's floor on, those the save may not hold. It returns the records it
// read into the filter and whether it started from a save.
func (d *DB) loadIdemSlots(now time.Time) (n int, saved bool, err error) {
	lower, lowerGroups := []byte{prefixIdemSlot}, []byte{prefixIdemGroup}
	floor, saved, serr := d.loadSavedIdemSlots()
	switch {
	case serr != nil && d.log != nil:
		d.log.Warn("saved idempotency filter not used: rebuilt from the records", "err", serr)
	case saved:
		lower = binary.BigEndian.AppendUint32(lower, slotSecond(floor))
		lowerGroups = binary.BigEndian.AppendUint64(lowerGroups, floor)
	}
	if f := d.idemSlots.filter; f != nil && !saved {
		var size uint64
		for _, p := range []byte{prefixIdemGroup, prefixIdemSlot} {
			if s, err := d.db.EstimateDiskUsage([]byte{p}, []byte{p + 1}); err == nil {
				size += s
			}
		}
		f.Reserve(int(min(size/idemBytesPerRecord, 1<<40)))
	}
	var oldest uint64
	if slot := idemSlot(now.UnixMilli()); slot > idemFilterSpan {
		oldest = slot - idemFilterSpan
	}
	b := d.db.NewBatch()
	defer b.Close()
	if n, err = d.loadIdemGroups(lowerGroups, oldest, saved, b); err != nil {
		return n, saved, err
	}
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{prefixIdemSlot + 1}})
	if err != nil {
		return n, saved, err
	}
	var slots []uint64
	for valid := it.First(); valid; valid = it.Next() {
		sec, keyID, key, ok := parseIdemSlotKey(it.Key())
		if !ok {
			return n, saved, errors.Join(errCorrupt, it.Close())
		}
		slot := secondSlot(sec)
		if slot < oldest {
			continue
		}
		// Past F and the second: len keyID key.
		kept, added := d.filterKey(d.idemSlots.hashPacked(it.Key()[5:]), slot, saved, &slots)
		if added {
			n++
		}
		if kept {
			continue
		}
		v, err := it.ValueAndErr()
		if err == nil {
			err = d.keepByDay(b, keyID, key, v)
		}
		if err != nil {
			return n, saved, errors.Join(err, it.Close())
		}
		_ = b.Delete(it.Key(), nil)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return n, saved, err
	}
	if b.Empty() || d.readOnly {
		// A read-only store moves nothing: it takes no writes to check.
		return n, saved, nil
	}
	return n, saved, d.commit(b, pebble.Sync)
}

// filterKey puts the key hashed to h, of slot, in the filter at Open,
// unless the saved filter holds it already (saved; slots is scratch).
// kept says whether the filter has it; added whether it was put in now.
// A key the filter refuses goes to the day layout (keepByDay).
func (d *DB) filterKey(h uint64, slot uint64, saved bool, slots *[]uint64) (kept, added bool) {
	if saved {
		if *slots = d.idemSlots.filter.Find(h, slot, (*slots)[:0]); slices.Contains(*slots, slot) {
			return true, false
		}
	}
	added = d.idemSlots.addHash(h, slot)
	return added, added
}

// keepByDay adds to b keyID's key with its record rec in the day layout,
// where look-ups find it once the filter has refused a key.
func (d *DB) keepByDay(b *pebble.Batch, keyID, key, rec []byte) error {
	r, err := decodeIdemRecord(rec)
	if err != nil {
		return err
	}
	day := idemDay(r.CreatedAt)
	d.idemDays.raise(day)
	return b.Set(idemDayKey(nil, string(keyID), day, string(key)), rec, nil)
}

// sweepIdemSlots adds to b the deletion of the records of the seconds
// before cut, one range deletion per layout (the groups, and the keys one
// by one before them), if there are any. The caller forgets them in the
// filter once b is committed (forgetIdemSlots).
func (d *DB) sweepIdemSlots(b *pebble.Batch, cut uint32) error {
	// A layout's key starts with its slot or second, big-endian.
	groups := binary.BigEndian.AppendUint64([]byte{prefixIdemGroup}, secondSlot(cut))
	slots := binary.BigEndian.AppendUint32([]byte{prefixIdemSlot}, cut)
	for _, end := range [][]byte{groups, slots} {
		p := end[0]
		it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{p}, UpperBound: []byte{p + 1}})
		if err != nil {
			return err
		}
		if it.First() && bytes.Compare(it.Key(), end) < 0 {
			_ = b.DeleteRange([]byte{p}, end, nil)
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return err
		}
	}
	return nil
}

// forgetIdemSlots removes the seconds before cut from the filter.
func (d *DB) forgetIdemSlots(cut uint32) {
	if d.idemSlots.filter == nil {
		return
	}
	d.idemSlots.filter.Expire(secondSlot(cut), max(d.idemSlots.hi.Load(), idemSlot(d.now().UnixMilli())))
}

// IdempotencyKeysByDay is the keys the filter refused since Open (full,
// or older than its last save's floor), kept by day instead.
func (d *DB) IdempotencyKeysByDay() uint64 { return d.idemSlots.byDay.Load() }

// IdempotencyFilter is the keys the filter holds and its tables' bytes.
func (d *DB) IdempotencyFilter() (keys, bytes int) {
	if f := d.idemSlots.filter; f != nil {
		return f.Len(), f.Bytes()
	}
	return 0, 0
}
