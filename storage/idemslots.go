package storage

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/cockroachdb/pebble/v2"

	"github.com/eventd/eventd/storage/slotfilter"
)

// Idempotency records are kept by the second they were created in, for
// every API key together: F second len keyID key (idemSlotKey). A flushed
// table of them overlaps, below it, only tables of the seconds it holds,
// however random the keys: UUID messageIds, which analytics-go and the
// mobile SDKs send, scattered over their API key's day partition (the
// layout before, H) made every flushed table overlap all of the day's
// tables below, and compaction rewrite them (docs/benchmarks.md, proposal
// 20).
//
// Since the second is not in the key a look-up is given, the filter in
// memory (package slotfilter) maps each key's hash to the seconds it may
// be in: a new key, the common case, is answered without reading Pebble,
// a retry with one seek. The filter is derived data: Open rebuilds it from
// its last save and the records since (idemsave.go), or without a save
// from every record's key, about 0.5-0.8 µs a key, on a goroutine of its
// own, so that a store holding millions of keys opens and serves reads
// and writes without keys at once; look-ups wait for the rebuild
// (idemReady).
// Past its bound (Options.IdempotencyFilterKeys), keys go to the day
// layout, which look-ups then read too (idemDayInUse), as they do while
// records written before this layout are left.

// DefaultIdempotencyFilterKeys bounds the filter when
// Options.IdempotencyFilterKeys is 0: 16 million keys, a day at 194 keyed
// events a second, in at most 128 MiB.
const DefaultIdempotencyFilterKeys = 16 << 20

// idemSlots is the filter and what look-ups need to read it.
type idemSlots struct {
	filter *slotfilter.Filter
	// seed keys the hash: random, or the saved filter's (idemsave.go).
	seed atomic.Uint64
	// hi is the latest second a record was written in: the filter reads
	// its seconds back relative to it (or now, if later).
	hi atomic.Uint32
	// overflow: the filter refused a key in this process, which went to
	// the day layout. It stays set until the next Open, which finds that
	// record as it finds records of the layout before.
	overflow atomic.Bool
	// ready is closed once Open's rebuild is over, loadErr its error;
	// fromSave and read say whether it started from a saved filter and
	// how many records it read into the filter.
	ready    chan struct{}
	loadErr  error
	fromSave bool
	read     int
}

// newIdemSlots is a filter of up to maxKeys keys (0: the default); with
// maxKeys < 0 there is none, and every key is kept by day.
func newIdemSlots(maxKeys int) *idemSlots {
	s := &idemSlots{ready: make(chan struct{})}
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

// hashKey is hash of a record's key (F sec len keyID key), which
// parseIdemSlotKey has checked.
func (s *idemSlots) hashKey(k []byte) uint64 {
	var h xxhash.Digest
	h.ResetWithSeed(s.seed.Load())
	_, _ = h.Write(k[5:]) // len keyID key, as hash writes them
	return h.Sum64()
}

// idemSecond is the slot of a record created at ms.
func idemSecond(ms int64) uint32 {
	if ms < 0 {
		return 0
	}
	return uint32(ms / 1000)
}

// addHash notes the key hashed to h stored in second sec; false if the
// filter is full or sec is below its floor (idemsave.go), and the record
// must go to the day layout.
func (s *idemSlots) addHash(h uint64, sec uint32) bool {
	if s.filter == nil || !s.filter.Insert(h, sec) {
		s.overflow.Store(true)
		return false
	}
	for {
		cur := s.hi.Load()
		if sec <= cur || s.hi.CompareAndSwap(cur, sec) {
			return true
		}
	}
}

// find appends the seconds the key hashed to h may be stored in, newest
// first.
func (s *idemSlots) find(h uint64, nowMs int64, dst []uint32) []uint32 {
	if s.filter == nil {
		return dst
	}
	return s.filter.Find(h, max(s.hi.Load(), idemSecond(nowMs)), dst)
}

// IdempotencyHash is the hash by which the filter knows keyID's key:
// callers that look a key up and then store it (the key actor, the shard)
// hash it once and pass it on (IdemLookup.GetHashed,
// Batch.AddIdempotencyHashed). It holds from the moment
// IdempotencyReady is closed (a start may read the hash's seed back).
func (d *DB) IdempotencyHash(keyID, key string) uint64 { return d.idemSlots.hash(keyID, key) }

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

// rebuildIdemSlots is Open's rebuild of the filter (loadIdemSlots); it
// closes ready when done.
func (d *DB) rebuildIdemSlots() {
	defer close(d.idemSlots.ready)
	start := time.Now()
	n, saved, err := d.loadIdemSlots()
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
func (d *DB) loadIdemSlots() (n int, saved bool, err error) {
	lower := []byte{prefixIdemSlot}
	floor, saved, serr := d.loadSavedIdemSlots()
	switch {
	case serr != nil && d.log != nil:
		d.log.Warn("saved idempotency filter not used: rebuilt from the records", "err", serr)
	case saved:
		lower = binary.BigEndian.AppendUint32(lower, floor)
	}
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{prefixIdemSlot + 1}})
	if err != nil {
		return 0, saved, err
	}
	if f := d.idemSlots.filter; f != nil && !saved {
		if size, err := d.db.EstimateDiskUsage([]byte{prefixIdemSlot}, []byte{prefixIdemSlot + 1}); err == nil {
			f.Reserve(int(min(size/idemBytesPerRecord, 1<<40)))
		}
	}
	b := d.db.NewBatch()
	defer b.Close()
	var secs []uint32
	for valid := it.First(); valid; valid = it.Next() {
		sec, keyID, key, ok := parseIdemSlotKey(it.Key())
		if !ok {
			return n, saved, errors.Join(errCorrupt, it.Close())
		}
		h := d.idemSlots.hashKey(it.Key())
		if saved {
			if secs = d.idemSlots.filter.Find(h, sec, secs[:0]); slices.Contains(secs, sec) {
				continue // in the save already
			}
		}
		if d.idemSlots.addHash(h, sec) {
			n++
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return n, saved, errors.Join(err, it.Close())
		}
		r, err := decodeIdemRecord(v)
		if err != nil {
			return n, saved, errors.Join(err, it.Close())
		}
		day := idemDay(r.CreatedAt)
		d.idemDays.raise(day)
		_ = b.Set(idemDayKey(nil, string(keyID), day, string(key)), v, nil)
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

// sweepIdemSlots adds to b the deletion of the records of the seconds
// before cut, one range deletion, if there are any. The caller forgets
// them in the filter once b is committed (forgetIdemSlots).
func (d *DB) sweepIdemSlots(b *pebble.Batch, cut uint32) error {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIdemSlot}, UpperBound: []byte{prefixIdemSlot + 1}})
	if err != nil {
		return err
	}
	if it.First() {
		if sec, _, _, ok := parseIdemSlotKey(it.Key()); ok && sec < cut {
			_ = b.DeleteRange([]byte{prefixIdemSlot}, binary.BigEndian.AppendUint32([]byte{prefixIdemSlot}, cut), nil)
		}
	}
	return errors.Join(it.Error(), it.Close())
}

// forgetIdemSlots removes the seconds before cut from the filter.
func (d *DB) forgetIdemSlots(cut uint32) {
	if d.idemSlots.filter == nil {
		return
	}
	d.idemSlots.filter.Expire(cut, max(d.idemSlots.hi.Load(), idemSecond(d.now().UnixMilli())))
}

// IdempotencyFilter is the keys the filter holds and its table's bytes.
func (d *DB) IdempotencyFilter() (keys, bytes int) {
	if f := d.idemSlots.filter; f != nil {
		return f.Len(), f.Bytes()
	}
	return 0, 0
}
