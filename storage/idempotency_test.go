package storage

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestIdemLookup: the lookup answers as GetIdempotency does, for stored
// keys, absent ones, keys that extend a stored one and other API keys, in
// the memtable and after a flush, with records kept by second and by day.
func TestIdemLookup(t *testing.T) {
	for _, o := range []struct {
		name string
		keys int
	}{{"by second", 0}, {"by day", -1}} {
		t.Run(o.name, func(t *testing.T) { testIdemLookup(t, openTestDBWith(t, Options{IdempotencyFilterKeys: o.keys})) })
	}
}

func testIdemLookup(t *testing.T, db testDB) {
	now := time.Now().UnixMilli()
	bt := db.NewBatch()
	bt.AddIdempotency("key_1", "msg-10", IdemRecord{Hash: 10, ID: testID(10), Timestamp: 100, CreatedAt: now - 1000})
	bt.AddIdempotency("key_1", "msg-2", IdemRecord{Hash: 2, ID: testID(2), Timestamp: 200, CreatedAt: now - 2000})
	bt.AddIdempotency("key_2", "msg-1", IdemRecord{Hash: 21, CreatedAt: now - 3000})
	if err := bt.Commit(true); err != nil {
		t.Fatal(err)
	}
	bt.Close()
	tests := []struct {
		keyID, key string
		hash       uint64 // 0: not found
	}{
		{"key_1", "msg-10", 10},
		{"key_1", "msg-2", 2},
		{"key_1", "msg-1", 0},  // a prefix of msg-10, and key_2's key
		{"key_1", "msg-20", 0}, // extends msg-2
		{"key_2", "msg-1", 21},
		{"key_2", "msg-10", 0},
		{"key_", "1msg-10", 0},
	}
	check := func(phase string) {
		l, err := db.NewIdemLookup()
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for _, tc := range tests {
			got, err := l.Get(tc.keyID, tc.key)
			want, wantErr := db.GetIdempotency(tc.keyID, tc.key)
			switch {
			case tc.hash == 0 && !errors.Is(err, ErrNotFound):
				t.Errorf("%s %s/%s: %+v %v, want not found", phase, tc.keyID, tc.key, got, err)
			case tc.hash != 0 && (err != nil || got.Hash != tc.hash):
				t.Errorf("%s %s/%s: %+v %v, want hash %d", phase, tc.keyID, tc.key, got, err, tc.hash)
			case got != want || (err == nil) != (wantErr == nil):
				t.Errorf("%s %s/%s: lookup %+v %v, Get %+v %v", phase, tc.keyID, tc.key, got, err, want, wantErr)
			}
		}
	}
	check("memtable")
	if err := db.Pebble().Flush(); err != nil {
		t.Fatal(err)
	}
	check("sstable")
}

// TestIdemLookupDays: with records kept by day, look-ups read the
// partitions of today and yesterday,
// the newest first, and a later one written while the clock was ahead; the
// layout before the partitions only while records of it are left.
func TestIdemLookupDays(t *testing.T) {
	db := openTestDBWith(t, Options{IdempotencyFilterKeys: -1}) // keys by day, as when the filter is full
	ms := time.Now().UnixMilli()
	yesterday := ms/dayMs*dayMs - hourMs // 23:00 yesterday
	put := func(key string, createdMs int64) {
		t.Helper()
		b := db.NewBatch()
		defer b.Close()
		b.AddIdempotency("key", key, IdemRecord{Hash: uint64(createdMs), CreatedAt: createdMs})
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
	}
	put("today", ms-hourMs)
	put("yesterday", yesterday)
	put("two days ago", ms-49*hourMs) // older than any live record: not read
	put("again", yesterday)           // used again today: the newest record answers
	put("again", ms-2*hourMs)
	check := func(phase string, want map[string]int64) {
		t.Helper()
		for key, created := range want {
			r, err := db.GetIdempotency("key", key)
			switch {
			case created == 0 && !errors.Is(err, ErrNotFound):
				t.Errorf("%s: %q = %+v, %v; want not found", phase, key, r, err)
			case created != 0 && (err != nil || r.CreatedAt != created):
				t.Errorf("%s: %q = %+v, %v; want the record created at %d", phase, key, r, err, created)
			}
		}
	}
	check("now", map[string]int64{"today": ms - hourMs, "yesterday": yesterday, "two days ago": 0, "again": ms - 2*hourMs, "never": 0})

	// A record written while the clock was more than a day ahead: once the
	// clock is back, look-ups read its partition too, also once reopened.
	put("ahead", ms+30*hourMs)
	check("clock back", map[string]int64{"ahead": ms + 30*hourMs, "today": ms - hourMs})
	db = db.reopen(t)
	check("reopened", map[string]int64{"ahead": ms + 30*hourMs, "yesterday": yesterday})

	// Records of the layout before the partitions, read until none is left.
	db = putLegacyIdem(t, db, "key", map[string]IdemRecord{"old": {Hash: 7, CreatedAt: ms - 30*hourMs}})
	check("old layout", map[string]int64{"old": ms - 30*hourMs, "today": ms - hourMs})
	if err := db.SweepIdempotency(ms - 24*hourMs); err != nil {
		t.Fatal(err)
	}
	check("old layout swept", map[string]int64{"old": 0, "today": ms - hourMs, "yesterday": yesterday, "ahead": ms + 30*hourMs})
	if db.idemLegacy.Load() {
		t.Error("look-ups still read the old layout after its last record was swept")
	}
	if left := idemRecordsLeft(t, db.DB, "key"); slices.Contains(left, "two days ago") || !slices.Contains(left, "yesterday") {
		t.Errorf("records left after the sweep: %q; want yesterday's, not those of two days ago", left)
	}
}
