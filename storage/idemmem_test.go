package storage

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// idemModes run the idempotency tests with records in memory (and the J
// journal) and, the memory off, as I keys.
var idemModes = []struct {
	name string
	o    Options
}{
	{"memory", Options{}},
	{"pebble", Options{IdempotencyMemory: -1}},
}

// putIdem commits records for keys k0, k1, ... of key "key" in one batch.
func putIdem(t *testing.T, db *DB, created int64, keys ...int) *Batch {
	t.Helper()
	b := db.NewBatch()
	for _, k := range keys {
		b.AddIdempotency("key", fmt.Sprint("k", k), IdemRecord{Hash: uint64(k), ID: testID(uint64(k)), Timestamp: int64(k), CreatedAt: created})
	}
	return b
}

func commitIdem(t *testing.T, b *Batch) {
	t.Helper()
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
}

// wantIdem checks which of keys k0..k(n-1) are remembered.
func wantIdem(t *testing.T, db *DB, n int, gone ...int) {
	t.Helper()
	l, err := db.NewIdemLookup()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for k := range n {
		missing := false
		for _, g := range gone {
			missing = missing || g == k
		}
		for _, get := range []func(string, string) (IdemRecord, error){db.GetIdempotency, l.Get} {
			r, err := get("key", fmt.Sprint("k", k))
			switch {
			case missing && !errors.Is(err, ErrNotFound):
				t.Errorf("k%d = %+v, %v; want ErrNotFound", k, r, err)
			case !missing && (err != nil || r.Hash != uint64(k) || r.ID != testID(uint64(k))):
				t.Errorf("k%d = %+v, %v; want its record", k, r, err)
			}
		}
	}
}

// TestIdemMemBound: past the bound, records are I keys; look-ups find both
// kinds, before and after a reopen, and a reopen rebuilds the memory from
// one journal entry per batch.
func TestIdemMemBound(t *testing.T) {
	db := openTestDBWith(t, Options{IdempotencyMemory: 3})
	now := time.Now().UnixMilli()
	commitIdem(t, putIdem(t, db.DB, now, 0, 1, 2))
	if db.idem.pebble.Load() {
		t.Error("look-ups read I keys before any was written")
	}
	commitIdem(t, putIdem(t, db.DB, now, 3, 4))
	if got := countKeys(t, db.DB, []byte{prefixIdemLog}, []byte{prefixIdemLog + 1}); got != 1 {
		t.Errorf("%d journal entries, want 1 (the first batch)", got)
	}
	if got := countKeys(t, db.DB, []byte{prefixIdem}, []byte{prefixIdem + 1}); got != 2 {
		t.Errorf("%d I keys, want 2 (past the bound)", got)
	}
	if n := db.idem.entries.Load(); n != 3 {
		t.Errorf("%d records in memory, want 3", n)
	}
	wantIdem(t, db.DB, 6, 5)
	db.close(t)
	db = openTestDBIn(t, db.dir, Options{IdempotencyMemory: 3})
	if n := db.idem.entries.Load(); n != 3 || !db.idem.pebble.Load() {
		t.Errorf("reopened: %d records in memory, I keys read: %v; want 3, true", n, db.idem.pebble.Load())
	}
	wantIdem(t, db.DB, 6, 5)
}

// TestIdemMemSweep: the sweep forgets old records in memory, in the journal
// and as I keys, and look-ups stop reading I keys once none is left, but
// not while a batch that writes one is in flight.
func TestIdemMemSweep(t *testing.T) {
	db := openTestDBWith(t, Options{IdempotencyMemory: 2})
	now := time.Now().UnixMilli()
	commitIdem(t, putIdem(t, db.DB, now-2000, 0, 1)) // memory, one journal entry
	commitIdem(t, putIdem(t, db.DB, now-2000, 2))    // an I key
	if n, err := db.SweepIdempotency(now - 1000); err != nil || n != 3 {
		t.Fatalf("SweepIdempotency = %d, %v; want 3", n, err)
	}
	if db.idem.pebble.Load() || db.idem.entries.Load() != 0 {
		t.Errorf("after the sweep: I keys read %v, %d records in memory; want false, 0", db.idem.pebble.Load(), db.idem.entries.Load())
	}
	if j, i := countKeys(t, db.DB, []byte{prefixIdemLog}, []byte{prefixIdemLog + 1}), countKeys(t, db.DB, []byte{prefixIdem}, []byte{prefixIdem + 1}); j != 0 || i != 0 {
		t.Errorf("after the sweep: %d journal entries, %d I keys; want none", j, i)
	}
	wantIdem(t, db.DB, 3, 0, 1, 2)

	// Memory full again; a batch spilling to an I key is in flight.
	commitIdem(t, putIdem(t, db.DB, now, 10, 11))
	spill := putIdem(t, db.DB, now, 12)
	if _, err := db.SweepIdempotency(now - 1000); err != nil {
		t.Fatal(err)
	}
	if !db.idem.pebble.Load() {
		t.Fatal("the sweep stopped I key reads while a batch was writing one")
	}
	commitIdem(t, spill)
	if r, err := db.GetIdempotency("key", "k12"); err != nil || r.Hash != 12 {
		t.Errorf("k12 = %+v, %v; want its I key", r, err)
	}

	// A journal entry with a live record stays whole; Open skips its
	// expired ones.
	db.idem.bound = 100
	commitIdem(t, putIdem(t, db.DB, now-IdempotencyTTL.Milliseconds()-1000, 20))
	b := putIdem(t, db.DB, now, 21)
	b.AddIdempotency("key", "k22", IdemRecord{Hash: 22, ID: testID(22), CreatedAt: now - IdempotencyTTL.Milliseconds() - 1000})
	commitIdem(t, b)
	db.close(t)
	db = openTestDBIn(t, db.dir, Options{IdempotencyMemory: 100})
	for k, want := range map[string]bool{"k10": true, "k11": true, "k12": true, "k20": false, "k21": true, "k22": false} {
		if _, ok := db.idem.get(idemFingerprint("key", k)); ok != want && k != "k12" {
			t.Errorf("reopened: %s in memory %v, want %v", k, ok, want)
		}
	}
}

// TestIdemMemErase: erasure forgets the records of erased events, in memory
// and in the journal.
func TestIdemMemErase(t *testing.T) {
	db := openTestDB(t, "")
	commitIdem(t, putIdem(t, db.DB, time.Now().UnixMilli(), 0, 1, 2))
	commitIdem(t, putIdem(t, db.DB, time.Now().UnixMilli(), 3))
	if err := db.eraseIdempotency(map[ID]bool{testID(1): true, testID(3): true}); err != nil {
		t.Fatal(err)
	}
	wantIdem(t, db.DB, 4, 1, 3)
	if got := countKeys(t, db.DB, []byte{prefixIdemLog}, []byte{prefixIdemLog + 1}); got != 1 {
		t.Errorf("%d journal entries, want 1 (the emptied one deleted)", got)
	}
	db = db.reopen(t)
	wantIdem(t, db.DB, 4, 1, 3)
}

// TestIdemFingerprint: the journal keeps fingerprints, so the function
// must not change between builds (golden values), and pairs whose
// concatenation is the same stay apart.
func TestIdemFingerprint(t *testing.T) {
	golden := []struct {
		keyID, key string
		want       idemFP
	}{
		{"key_0123456789abcdef", "node-next-1764000000000-1", idemFP{0x3c843a71a749104e, 0xd735d8b372fd8ff5}},
		{"k", "ab", idemFP{0xf2854e08a211c1d4, 0xe7d385a16e3ee7fb}},
		{"ka", "b", idemFP{0xccb0d0f1b2cfcfac, 0xf815e300fc43b6a5}},
		{"", "", idemFP{0xe934a84adb052768, 0x126bb57a12364aa5}},
	}
	seen := map[idemFP]string{}
	for _, g := range golden {
		got := idemFingerprint(g.keyID, g.key)
		if got != g.want {
			t.Errorf("idemFingerprint(%q, %q) = %#x, want %#x", g.keyID, g.key, got, g.want)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("%q/%q and %s share a fingerprint", g.keyID, g.key, other)
		}
		seen[got] = g.keyID + "/" + g.key
	}
}
