package storage

import (
	"encoding/binary"

	"github.com/cockroachdb/pebble/v2"
)

// counterDelta identifies one counter bucket within a batch.
type counterDelta struct {
	ds    uint32
	name  string
	level byte
	start int64
}

// Batch collects events and idempotency records for one atomic commit.
// Counter increments are summed in memory first so that a group commit of
// many events in one minute writes one merge operand per bucket, not one per event.
type Batch struct {
	db       *DB
	b        *pebble.Batch
	counters map[counterDelta]int64
	scratch  []byte
	events   int
	roll     *rollups // sums and visitor sketches, see rollup.go
}

// NewBatch starts an empty batch.
func (d *DB) NewBatch() *Batch {
	return &Batch{db: d, b: d.db.NewBatch(), counters: make(map[counterDelta]int64)}
}

// Len is the number of events added.
func (b *Batch) Len() int { return b.events }

// AddEvent writes the record, its indexes and its counter increments.
func (b *Batch) AddEvent(ds uint32, e *Event) {
	b.events++
	k := eventKey(b.scratch[:0], ds, e.ID)
	v := appendRecord(k[len(k):], e)
	_ = b.b.Set(k, v, nil)
	b.scratch = v[:0]

	k = timeKey(b.scratch[:0], ds, e.Timestamp, e.ID)
	_ = b.b.Set(k, nil, nil)

	k = namePrefix(k[:0], ds, e.Name)
	k = append(appendTS(k, e.Timestamp), e.ID[:]...)
	_ = b.b.Set(k, nameIndexValue(k[len(k):], e), nil)

	if e.HasVisitor {
		k = visitorPrefix(k[:0], ds, e.VisitorID)
		k = append(appendTS(k, e.Timestamp), e.ID[:]...)
		_ = b.b.Set(k, []byte(e.Name), nil)
	}
	b.scratch = k[:0]

	for _, level := range [...]byte{LevelMinute, LevelHour, LevelDay} {
		start := e.Timestamp - e.Timestamp%levelWidth(level)
		b.counters[counterDelta{ds, "", level, start}]++
		b.counters[counterDelta{ds, e.Name, level, start}]++
	}
	b.addRollups(ds, e)
}

// IdemRecord is what an idempotency key remembers.
type IdemRecord struct {
	Hash      uint64
	ID        ID
	Timestamp int64 // the event's time, Unix ms
	CreatedAt int64 // when the key was first used, Unix ms
}

const idemRecordLen = 8 + 16 + 8 + 8

// AddIdempotency remembers key for keyID in the same atomic write as its event.
func (b *Batch) AddIdempotency(keyID, key string, r IdemRecord) {
	k := idemKey(b.scratch[:0], keyID, key)
	v := binary.BigEndian.AppendUint64(k[len(k):], r.Hash)
	v = append(v, r.ID[:]...)
	v = binary.BigEndian.AppendUint64(v, uint64(r.Timestamp))
	v = binary.BigEndian.AppendUint64(v, uint64(r.CreatedAt))
	_ = b.b.Set(k, v, nil)
	b.scratch = v[:0]
}

// Commit writes the batch; with sync it returns only after the WAL is fsynced.
func (b *Batch) Commit(sync bool) error {
	var val [8]byte
	for c, n := range b.counters {
		k := counterPrefix(b.scratch[:0], c.ds, c.name, c.level)
		k = appendTS(k, c.start)
		binary.LittleEndian.PutUint64(val[:], uint64(n))
		_ = b.b.Merge(k, val[:], nil)
		b.scratch = k[:0]
	}
	clear(b.counters)
	b.flushRollups()
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
	}
	return b.db.commit(b.b, opts)
}

// Close releases the batch; it must not be used afterwards.
func (b *Batch) Close() {
	b.releaseRollups()
	_ = b.b.Close()
}

// GetIdempotency reads a remembered idempotency key, ErrNotFound if none.
func (d *DB) GetIdempotency(keyID, key string) (IdemRecord, error) {
	v, err := d.get(idemKey(nil, keyID, key))
	if err != nil {
		return IdemRecord{}, err
	}
	if len(v) != idemRecordLen {
		return IdemRecord{}, errCorrupt
	}
	var r IdemRecord
	r.Hash = binary.BigEndian.Uint64(v)
	copy(r.ID[:], v[8:24])
	r.Timestamp = int64(binary.BigEndian.Uint64(v[24:]))
	r.CreatedAt = int64(binary.BigEndian.Uint64(v[32:]))
	return r, nil
}

// SweepIdempotency deletes idempotency records created before cutoffMs.
func (d *DB) SweepIdempotency(cutoffMs int64) (int, error) {
	return d.deleteWhere([]byte{prefixIdem}, []byte{prefixIdem + 1}, false, func(_, v []byte) bool {
		return len(v) == idemRecordLen && int64(binary.BigEndian.Uint64(v[32:])) < cutoffMs
	})
}
