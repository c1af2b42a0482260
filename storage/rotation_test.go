package storage

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// TestRotationWaitsForBatches: a batch holding older ids while others
// commit newer ones keeps the memtable from being rotated until it is
// committed, so that its records land in the memtable before the
// rotation and no flushed table of records overlaps another (each can be
// moved down whole).
func TestRotationWaitsForBatches(t *testing.T) {
	exp := Experiment{Pebble: func(o *pebble.Options) {
		o.MemTableSize = 256 << 10 // no ramp: every memtable this size
		o.DisableAutomaticCompactions = true
	}}
	db := openTestDBWith(t, Options{Experiment: &exp})
	props := []byte(`{"page":"` + strings.Repeat("x", 200) + `"}`)
	event := func(n uint64) *Event {
		id := testID(n)
		return &Event{ID: id, Name: "e", Timestamp: IDTime(id), CreatedAt: 1, Properties: props}
	}

	// A shard's batch takes its ids, then waits for more events...
	held := db.NewBatch()
	for n := uint64(1000); n < 1010; n++ {
		held.AddEvent(1, event(n))
	}
	// ...while the other shard commits later ids until the memtable is
	// nearly full and a rotation is asked for.
	next := uint64(2000)
	for !db.rot.busy.Load() {
		if next > 100000 {
			t.Fatal("no rotation asked for after 98,000 events")
		}
		b := db.NewBatch()
		for range 10 {
			b.AddEvent(1, event(next))
			next++
		}
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	// The rotation now waits for the held batch: a writer waiting makes
	// TryRLock fail. (Were it not held off, it would be done meanwhile.)
	for deadline := time.Now().Add(30 * time.Second); db.rot.ours.Load() == 0 && db.rot.held.TryRLock(); time.Sleep(time.Millisecond) {
		db.rot.held.RUnlock()
		if time.Now().After(deadline) {
			t.Fatal("the rotation asked for neither waits nor happened")
		}
	}
	if db.rot.ours.Load() != 0 {
		t.Fatal("the memtable was rotated while a batch held older ids")
	}
	if err := held.Commit(true); err != nil {
		t.Fatal(err)
	}
	held.Close()
	for deadline := time.Now().Add(30 * time.Second); db.rot.ours.Load() == 0 || db.rot.busy.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the rotation did not happen once the batch was committed")
		}
	}
	if r := db.Rotations(); r.ByEventd != 1 || r.Held <= 0 {
		t.Errorf("Rotations() = %+v, want one by eventd, with new batches held", r)
	}
	commitEvents(t, db.DB, 1, event(next), event(next+1))
	if err := db.Pebble().Flush(); err != nil {
		t.Fatal(err)
	}

	levels, err := db.Pebble().SSTables()
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ lo, hi []byte }
	var records []span
	for _, tb := range levels[0] {
		if lo, hi := tb.Smallest.UserKey, tb.Largest.UserKey; lo[0] == prefixRecord {
			records = append(records, span{lo, hi})
		}
	}
	if len(records) < 2 {
		t.Fatalf("%d flushed tables of records, want 2 or more", len(records))
	}
	for i, a := range records {
		for _, b := range records[i+1:] {
			if bytes.Compare(a.lo, b.hi) <= 0 && bytes.Compare(b.lo, a.hi) <= 0 {
				t.Errorf("flushed tables of records overlap: %x..%x and %x..%x", a.lo, a.hi, b.lo, b.hi)
			}
		}
	}
}

// TestRotationEstimate: the fill counts a committed batch's bytes and an
// overhead per entry; one caller, the first past the limit, rotates; a new
// memtable starts the count again.
func TestRotationEstimate(t *testing.T) {
	flushes := 0
	r := &memRotation{limit: 1000, flush: func() error { flushes++; return nil }}
	b := new(pebble.Batch)
	_ = b.Set(make([]byte, 100), make([]byte, 300), nil) // one entry, about 400 bytes
	if r.wrote(b) || r.wrote(b) {
		t.Fatal("a rotation asked for below the limit")
	}
	if !r.wrote(b) {
		t.Fatalf("no rotation asked for at %d bytes of %d", r.used.Load(), r.limit)
	}
	if r.wrote(b) {
		t.Fatal("a second rotation asked for while one is under way")
	}
	if err := r.rotate(); err != nil || flushes != 1 || r.ours.Load() != 1 {
		t.Fatalf("rotate: err %v, %d flushes, %d counted", err, flushes, r.ours.Load())
	}
	r.made() // Pebble's new memtable
	if r.used.Load() != 0 {
		t.Fatalf("fill %d after a new memtable, want 0", r.used.Load())
	}
	// Pebble rotated it itself before the rotation could: nothing to do.
	r.used.Store(2000)
	r.busy.Store(true)
	r.made()
	if err := r.rotate(); err != nil || flushes != 1 {
		t.Fatalf("rotate after Pebble's own: err %v, %d flushes, want 1", err, flushes)
	}
	r.close()
	r.used.Store(2000)
	if err := r.rotate(); err != nil || flushes != 1 {
		t.Fatalf("rotate after close: err %v, %d flushes, want 1", err, flushes)
	}
}
