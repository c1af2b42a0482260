package storage

import (
	"errors"
	"testing"
)

// TestIdemLookup: the lookup answers as GetIdempotency does, for stored
// keys, absent ones, keys that extend a stored one and other API keys, in
// the memtable and after a flush.
func TestIdemLookup(t *testing.T) {
	db := openTestDB(t, "")
	bt := db.NewBatch()
	bt.AddIdempotency("key_1", "msg-10", IdemRecord{Hash: 10, ID: testID(10), Timestamp: 100, CreatedAt: 1000})
	bt.AddIdempotency("key_1", "msg-2", IdemRecord{Hash: 2, ID: testID(2), Timestamp: 200, CreatedAt: 2000})
	bt.AddIdempotency("key_2", "msg-1", IdemRecord{Hash: 21, CreatedAt: 3000})
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
