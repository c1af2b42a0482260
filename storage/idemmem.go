package storage

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2"
)

// The idempotency records of the last 24 hours are held in memory, and the
// commit that stores their events writes them as one J journal entry keyed
// by time: keys that only grow at their end, which Pebble flushes and moves
// down without rewriting. Kept as I keys (idemKey: key id, then the client's
// key) they were the only random inserts of a keyed write, and compacting
// them cost about as much as the rest of the event (docs/benchmarks.md,
// session 13). Open rebuilds the memory from the journal; the hourly sweep
// deletes journal entries past 24 hours with one range deletion.
//
// Past the memory's bound (Options.IdempotencyMemory), records go to I keys
// as before, and look-ups that miss the memory read Pebble too while any I
// key may exist: a store written by an older build, or a busier day than
// the bound, costs what it cost before and no more.

// prefixIdemLog keys the idempotency journal: J createdMs id -> entries,
// createdMs the latest creation time of the entries, id the first entry's
// event id (unique, so that commits in the same millisecond do not collide).
const prefixIdemLog = 'J'

// idemLogVersion is a journal value's first byte.
const idemLogVersion = 1

// idemLogEntryLen is one journal entry: fingerprint, content hash, event
// id, event time and creation time.
const idemLogEntryLen = 16 + 8 + 16 + 8 + 8

// IdempotencyTTL is how long an idempotency key is remembered; Open does
// not load journal entries older than that.
const IdempotencyTTL = 24 * time.Hour

// DefaultIdempotencyMemory is Options.IdempotencyMemory when 0: a record
// takes 37-56 bytes of memory (the map's slack after it grows), so at
// most 350-530 MiB.
const DefaultIdempotencyMemory = 10_000_000

// idemFP identifies a key id and an idempotency key: 128 bits of xxhash,
// so that two keys in one memory collide with a probability far below that
// of a disk error (about 2^-70 with 8 million records).
type idemFP [2]uint64

// idemSeed is the second half's xxhash seed (any constant other than 0).
const idemSeed = 0x9E3779B97F4A7C15

func idemFingerprint(keyID, key string) idemFP {
	var d xxhash.Digest
	var fp idemFP
	for i, seed := range [2]uint64{0, idemSeed} {
		d.ResetWithSeed(seed)
		// The key id's length first, as in idemKey: "k"+"ab" is not "ka"+"b".
		_, _ = d.Write([]byte{byte(len(keyID))})
		_, _ = d.WriteString(keyID)
		_, _ = d.WriteString(key)
		fp[i] = d.Sum64()
	}
	return fp
}

// idemShards spreads the memory over locks: key actors look up while
// shards' commits add.
const idemShards = 32

// idemMem is the idempotency memory: each record's fingerprint and the
// millisecond of its journal key, 24 bytes a record and 37-56 in the map
// (the record itself is read from the journal on a hit, which only a retry
// or a reused key makes).
type idemMem struct {
	bound   int64
	entries atomic.Int64
	shards  [idemShards]struct {
		mu sync.RWMutex
		m  map[idemFP]int64
	}

	// pebble is set while I keys may hold live records: look-ups that miss
	// the memory read them. spillMu orders it against the sweep that
	// clears it: spilling counts batches in flight and bumps spills.
	pebble   atomic.Bool
	spillMu  sync.Mutex
	spilling int
	spills   uint64
}

func newIdemMem(bound int) *idemMem {
	if bound == 0 {
		bound = DefaultIdempotencyMemory
	}
	m := &idemMem{bound: int64(max(bound, 0))}
	for i := range m.shards {
		m.shards[i].m = make(map[idemFP]int64)
	}
	return m
}

func (m *idemMem) shard(fp idemFP) int { return int(fp[0] % idemShards) }

// room reports whether a batch may add one more record to memory. Commits
// in flight may pass the bound by what they hold (at most a few batches).
func (m *idemMem) room() bool { return m.entries.Load() < m.bound }

// get gives the millisecond of the journal key that holds fp's record.
func (m *idemMem) get(fp idemFP) (int64, bool) {
	s := &m.shards[m.shard(fp)]
	s.mu.RLock()
	ms, ok := s.m[fp]
	s.mu.RUnlock()
	return ms, ok
}

func (m *idemMem) put(fp idemFP, ms int64) {
	s := &m.shards[m.shard(fp)]
	s.mu.Lock()
	if _, ok := s.m[fp]; !ok {
		m.entries.Add(1)
	}
	s.m[fp] = ms
	s.mu.Unlock()
}

// drop deletes the fingerprints whose journal key is older than cutoffMs,
// and counts them.
func (m *idemMem) drop(cutoffMs int64) int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for fp, ms := range s.m {
			if ms < cutoffMs {
				delete(s.m, fp)
				n++
			}
		}
		s.mu.Unlock()
	}
	m.entries.Add(int64(-n))
	return n
}

// forget deletes one fingerprint.
func (m *idemMem) forget(fp idemFP) {
	s := &m.shards[m.shard(fp)]
	s.mu.Lock()
	if _, ok := s.m[fp]; ok {
		delete(s.m, fp)
		m.entries.Add(-1)
	}
	s.mu.Unlock()
}

// getIdem looks a key up in memory and reads its record from the journal.
func (d *DB) getIdem(fp idemFP) (IdemRecord, bool, error) {
	ms, ok := d.idem.get(fp)
	if !ok {
		return IdemRecord{}, false, nil
	}
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: idemLogKey(nil, ms, ID{}), UpperBound: idemLogKey(nil, ms+1, ID{})})
	if err != nil {
		return IdemRecord{}, false, err
	}
	defer it.Close()
	var rec IdemRecord
	found := false
	for it.First(); it.Valid() && !found; it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return IdemRecord{}, false, err
		}
		err = decodeIdemLog(v, func(e idemEntry) {
			if e.fp == fp {
				rec, found = e.rec, true
			}
		})
		if err != nil {
			return IdemRecord{}, false, err
		}
	}
	// Not found: swept or erased since the memory was read.
	return rec, found, it.Error()
}

// IdempotencyMemory reports the records held in memory and whether
// look-ups that miss it read I keys too.
func (d *DB) IdempotencyMemory() (records int, store bool) {
	return int(d.idem.entries.Load()), d.idem.pebble.Load()
}

// spillBegin marks a batch that writes I keys, before it commits.
func (m *idemMem) spillBegin() {
	m.spillMu.Lock()
	m.spilling++
	m.spills++
	m.pebble.Store(true)
	m.spillMu.Unlock()
}

// spillEnd is called once the batch's commit is done (or abandoned).
func (m *idemMem) spillEnd() {
	m.spillMu.Lock()
	m.spilling--
	m.spillMu.Unlock()
}

// idemEntry is a record on its way through a batch into memory.
type idemEntry struct {
	fp  idemFP
	rec IdemRecord
}

func appendIdemLogEntry(dst []byte, e *idemEntry) []byte {
	dst = binary.BigEndian.AppendUint64(dst, e.fp[0])
	dst = binary.BigEndian.AppendUint64(dst, e.fp[1])
	dst = binary.BigEndian.AppendUint64(dst, e.rec.Hash)
	dst = append(dst, e.rec.ID[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.rec.Timestamp))
	return binary.BigEndian.AppendUint64(dst, uint64(e.rec.CreatedAt))
}

// decodeIdemLog calls fn for each entry of a journal value.
func decodeIdemLog(v []byte, fn func(idemEntry)) error {
	if len(v) < 1 || v[0] != idemLogVersion || (len(v)-1)%idemLogEntryLen != 0 {
		return errCorrupt
	}
	for p := v[1:]; len(p) > 0; p = p[idemLogEntryLen:] {
		var e idemEntry
		e.fp[0] = binary.BigEndian.Uint64(p)
		e.fp[1] = binary.BigEndian.Uint64(p[8:])
		e.rec.Hash = binary.BigEndian.Uint64(p[16:])
		copy(e.rec.ID[:], p[24:40])
		e.rec.Timestamp = int64(binary.BigEndian.Uint64(p[40:]))
		e.rec.CreatedAt = int64(binary.BigEndian.Uint64(p[48:]))
		fn(e)
	}
	return nil
}

// idemLogKey keys a batch's journal entry.
func idemLogKey(dst []byte, createdMs int64, first ID) []byte {
	return append(appendTS(append(dst, prefixIdemLog), createdMs), first[:]...)
}

// writeIdemLog adds the batch's journal entry to its Pebble batch and
// gives its key's millisecond.
func (b *Batch) writeIdemLog() int64 {
	var created int64
	for i := range b.idems {
		created = max(created, b.idems[i].rec.CreatedAt)
	}
	k := idemLogKey(b.scratch[:0], created, b.idems[0].rec.ID)
	v := append(k[len(k):], idemLogVersion)
	for i := range b.idems {
		v = appendIdemLogEntry(v, &b.idems[i])
	}
	_ = b.b.Set(k, v, nil)
	b.scratch = v[:0]
	return created
}

// loadIdemMem rebuilds the memory from the journal's live records, all of
// them: they were within the bound when written (a bound lowered since is
// reached as they expire).
func (d *DB) loadIdemMem() (int, error) {
	cutoff := d.now().Add(-IdempotencyTTL).UnixMilli()
	// Entries whose records are all older start below the cutoff's key.
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: idemLogKey(nil, cutoff, ID{}), UpperBound: []byte{prefixIdemLog + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n := 0
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return n, err
		}
		ms := int64(binary.BigEndian.Uint64(it.Key()[1:]))
		err = decodeIdemLog(v, func(e idemEntry) {
			if e.rec.CreatedAt >= cutoff {
				d.idem.put(e.fp, ms)
				n++
			}
		})
		if err != nil {
			return n, err
		}
	}
	if err := it.Error(); err != nil {
		return n, err
	}
	live, err := d.anyIdemKey()
	d.idem.pebble.Store(live)
	return n, err
}

// anyIdemKey reports whether any I key is left.
func (d *DB) anyIdemKey() (bool, error) {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIdem}, UpperBound: []byte{prefixIdem + 1}})
	if err != nil {
		return false, err
	}
	found := it.First()
	if err := it.Error(); err != nil {
		_ = it.Close()
		return false, err
	}
	return found, it.Close()
}

// sweepIdemMem forgets the records created before cutoffMs: from memory,
// and from the journal those entries whose records are all that old.
func (d *DB) sweepIdemMem(cutoffMs int64) (int, error) {
	n := d.idem.drop(cutoffMs)
	err := d.apply(func() error {
		return d.db.DeleteRange([]byte{prefixIdemLog}, idemLogKey(nil, cutoffMs, ID{}), pebble.NoSync)
	})
	return n, err
}

// settleIdemKeys stops look-ups reading I keys once none is left and no
// batch is writing one.
func (d *DB) settleIdemKeys() error {
	m := d.idem
	if !m.pebble.Load() {
		return nil
	}
	m.spillMu.Lock()
	busy, spills := m.spilling > 0, m.spills
	m.spillMu.Unlock()
	if busy {
		return nil
	}
	live, err := d.anyIdemKey()
	if err != nil || live {
		return err
	}
	m.spillMu.Lock()
	if m.spilling == 0 && m.spills == spills {
		m.pebble.Store(false)
	}
	m.spillMu.Unlock()
	return nil
}

// eraseIdemMem forgets the records of erased events, in memory and in the
// journal.
func (d *DB) eraseIdemMem(erased map[ID]bool) error {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIdemLog}, UpperBound: []byte{prefixIdemLog + 1}})
	if err != nil {
		return err
	}
	b := d.db.NewBatch()
	defer b.Close()
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return err
		}
		kept, hit := []byte{idemLogVersion}, false
		err = decodeIdemLog(v, func(e idemEntry) {
			if erased[e.rec.ID] {
				hit = true
				d.idem.forget(e.fp)
				return
			}
			kept = appendIdemLogEntry(kept, &e)
		})
		if err != nil || !hit {
			continue // a value this build cannot read is left as it is
		}
		if len(kept) == 1 {
			_ = b.Delete(it.Key(), nil)
		} else {
			_ = b.Set(it.Key(), kept, nil)
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	if b.Empty() {
		return nil
	}
	return d.commit(b, pebble.Sync)
}
