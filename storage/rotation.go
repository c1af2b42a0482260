package storage

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// The memtable is rotated by eventd, between the commits of the batches
// that hold event ids, not by Pebble in the middle of them. A shard takes
// its events' ids as it builds a batch, and the other shard's batch, with
// later ids, can reach the memtable first; when Pebble rotated the
// memtable between the two, the new memtable held ids older than the last
// of the old, and every flushed table of records (S, Z), idempotency
// groups (B) and name index (N) overlapped the one below: Pebble merged
// both instead of moving the new one down whole. That was a third of the
// bytes merged in the segment scenario (docs/benchmarks.md, session 36).
//
// So a batch from NewBatch holds the rotation off from its creation,
// before its first id, until Pebble has applied it to the memtable (not
// until its WAL sync: DB.commitApplied); once the memtable is nearly
// full, a rotation waits for the batches holding it, keeps new ones from
// starting, and rotates the memtable (DB.AsyncFlush) before Pebble would.
// Batches without ids (erasure, retention) and other writes do not hold
// it; their bytes count toward the fill.

// entryOverhead is about what the memtable's arena takes for an entry
// beyond the key and value bytes a batch holds: its node with the average
// tower of the skiplist, the key's trailer, the alignment.
const entryOverhead = 44

// rotationShare is the memtable's fill, in eighths, past which eventd
// rotates it: what is left holds the batches committed while the rotation
// waits for the last ones and the writes this estimate misses.
const rotationShare = 7

// memRotation rotates the memtable at a commit boundary of every batch
// that holds ids.
type memRotation struct {
	// held is read-locked by each batch that holds ids, from its creation
	// until it is applied; a rotation write-locks it, so new batches wait
	// while it waits for those under way.
	held  sync.RWMutex
	used  atomic.Int64 // estimated bytes in the memtable since it was made
	limit int64        // rotate once used passes it
	busy  atomic.Bool  // a rotation is asked for or under way
	flush func() error // rotates the memtable (and flushes the old one)
	// closeMu keeps a rotation and the store's Close apart: Pebble
	// panics on a flush after Close.
	closeMu sync.Mutex
	closed  bool
	// ours and all count the rotations eventd made and every memtable
	// Pebble made since the store opened (its first included); heldNs is
	// how long rotations kept new batches from starting, in all.
	ours, all atomic.Uint64
	heldNs    atomic.Int64
}

// Rotations is what the memtable's rotations did since the store opened.
type Rotations struct {
	// ByEventd counts the memtables eventd rotated between batches,
	// ByPebble those Pebble rotated itself (the first, smaller ones, or
	// an estimate that fell short).
	ByEventd, ByPebble uint64
	// Held is how long new batches waited for rotations, in all.
	Held time.Duration
}

// Rotations reports the memtable's rotations (rotation.go), for metrics.
func (d *DB) Rotations() Rotations {
	ours, all := d.rot.ours.Load(), d.rot.all.Load()
	return Rotations{ByEventd: ours, ByPebble: all - min(all, ours+1), Held: time.Duration(d.rot.heldNs.Load())}
}

// wrote counts a committed batch's bytes and reports whether the caller
// should now rotate (it is then the one to: call rotate).
func (r *memRotation) wrote(b *pebble.Batch) bool {
	n := int64(b.Len()) + entryOverhead*int64(b.Count())
	return r.used.Add(n) >= r.limit && r.busy.CompareAndSwap(false, true)
}

// rotate waits for the batches holding ids, rotates the memtable if it is
// still past the limit (Pebble may have rotated it meanwhile) and lets new
// batches start again.
func (r *memRotation) rotate() error {
	defer r.busy.Store(false)
	start := time.Now()
	r.held.Lock()
	defer func() {
		r.held.Unlock()
		r.heldNs.Add(int64(time.Since(start)))
	}()
	r.closeMu.Lock()
	defer r.closeMu.Unlock()
	if r.closed || r.used.Load() < r.limit {
		return nil
	}
	r.ours.Add(1)
	return r.flush()
}

// close makes later rotations do nothing, once one under way is done.
func (r *memRotation) close() {
	r.closeMu.Lock()
	r.closed = true
	r.closeMu.Unlock()
}

// made is told of each new memtable (with its WAL): the fill starts again.
func (r *memRotation) made() {
	r.used.Store(0)
	r.all.Add(1)
}
