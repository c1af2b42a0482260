package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// idemGroups is the store's groups: each key and its entries' keys.
func idemGroups(t testing.TB, db *DB) map[string][]string {
	t.Helper()
	it, err := db.Pebble().NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIdemGroup}, UpperBound: []byte{prefixIdemGroup + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	out := map[string][]string{}
	for valid := it.First(); valid; valid = it.Next() {
		var keys []string
		if err := eachIdemEntry(it.Key(), it.Value(), func(k, _ []byte) { keys = append(keys, string(k)) }); err != nil {
			t.Fatal(err)
		}
		out[string(it.Key())] = keys
	}
	return out
}

// reopenUnsaved closes the store, deletes its saved filter, as a kill -9
// before the first save leaves it, and opens it again with the filter
// rebuilt from the records.
func reopenUnsaved(t testing.TB, db testDB) testDB {
	t.Helper()
	db.close(t)
	if err := os.Remove(filepath.Join(db.dir, idemFilterFile)); err != nil {
		t.Fatal(err)
	}
	db = db.reopen(t)
	waitIdem(t, db.DB)
	return db
}

// TestIdemGroups: a batch writes one group per slot and API key, keyed by
// its first entry's event id; a key twice in a batch is found with its
// later record, also among several groups of a slot; a look-up keeps a
// slot's groups of an API key from its second key of them on; a
// reopened store without a saved filter rebuilds it from the groups'
// entries.
func TestIdemGroups(t *testing.T) {
	db := openTestDB(t, "")
	now := time.Now().UnixMilli() / 1000 * 1000
	b := db.NewBatch()
	add := func(keyID, key string, n uint64, created int64) {
		b.AddIdempotency(keyID, key, IdemRecord{Hash: n, ID: testID(n), Timestamp: int64(n), CreatedAt: created})
	}
	add("key_a", "a1", 1, now-1000)
	add("key_b", "b1", 2, now-1000)
	add("key_a", "a2", 3, now-1000)
	add("key_a", "a3", 4, now-2000) // a second before
	add("key_a", "a1", 5, now-1000) // again: the later record stays
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	putIdem(t, db.DB, "key_a", now-1000, "a4") // a second group of key_a's slot

	slot := idemSlot(now - 1000)
	group := func(slot uint64, keyID string, first uint64) string {
		id := testID(first)
		return string(append(idemGroupPrefix(nil, slot, []byte(keyID)), id[:]...))
	}
	want := map[string][]string{
		group(slot, "key_a", 1):                {"a1", "a2", "a1"},
		group(slot, "key_a", uint64(now-1000)): {"a4"}, // putIdem's id is its time
		group(slot, "key_b", 2):                {"b1"},
		group(slot-128, "key_a", 4):            {"a3"},
	}
	got := idemGroups(t, db.DB)
	if len(got) != len(want) {
		t.Errorf("%d groups, want %d", len(got), len(want))
	}
	for k, keys := range want {
		if !slices.Equal(got[k], keys) {
			t.Errorf("group %x holds %q, want %q", k, got[k], keys)
		}
	}

	l, err := db.NewIdemLookup()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key string
		n   uint64
	}{{"a1", 5}, {"a3", 4}, {"a2", 3}, {"a4", uint64(now - 1000)}, {"a1", 5}} {
		if r, err := l.Get("key_a", c.key); err != nil || r.ID != testID(c.n) || r.Hash != c.n {
			t.Errorf("key_a/%s = %+v, %v; want the record of event %d", c.key, r, err, c.n)
		}
	}
	if _, err := l.Get("key_b", "a1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("key_b/a1: %v, want ErrNotFound", err)
	}
	if _, err := l.Get("key_a", "a5"); !errors.Is(err, ErrNotFound) {
		t.Errorf("key_a/a5: %v, want ErrNotFound", err)
	}
	kept := map[uint64]int{}
	for _, g := range l.groups {
		kept[g.slot] += len(g.recs)
	}
	// key_b's a1 and key_a's a5 are not in the filter: nothing is read.
	if len(l.groups) != 2 || kept[slot] != 3 || kept[slot-128] != 0 {
		t.Errorf("the look-up read %d slots' groups, kept %v records by slot; want 2, and 3 of slot %d", len(l.groups), kept, slot)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	db = reopenUnsaved(t, db)
	if n := db.idemSlots.filter.Len(); n != 6 {
		t.Errorf("rebuilt from the groups, the filter holds %d keys, want 6", n)
	}
	checkIdem(t, db.DB, "rebuilt", "key_a", map[string]int64{"a1": now - 1000, "a3": now - 2000, "a4": now - 1000, "a5": 0})
	checkIdem(t, db.DB, "rebuilt", "key_b", map[string]int64{"b1": now - 1000})
}

// TestIdemGroupsFoundReadsItsSlot: a found key reads its slot's groups of
// its API key, not its second's. 64,000 keys of one API key written over
// one second in commits of 500, as an import writes them, are looked up
// again in requests of 500 in the same order, as an import run again
// does: each request decodes at most 5 entries a key (its keys' one or
// two slots, each read twice: for its first key, then for the rest of the
// request). With slots of a second it decoded some 250 a key (the whole
// second, twice), 124 µs a key against 0.6 with a record per key
// (docs/benchmarks.md, session 30).
func TestIdemGroupsFoundReadsItsSlot(t *testing.T) {
	const keys, per = 64_000, 500
	db := openTestDB(t, "")
	start := time.Now().UnixMilli() / 1000 * 1000
	created := func(i int) int64 { return start + int64(i)*1000/keys }
	names := keyNames("k", keys)
	for lo := 0; lo < keys; lo += per {
		b := db.NewBatch()
		for i := lo; i < lo+per; i++ {
			b.AddIdempotency("key", names[i], IdemRecord{ID: testID(uint64(i + 1)), CreatedAt: created(i)})
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	worst := 0
	for lo := 0; lo < keys; lo += per {
		l, err := db.NewIdemLookup()
		if err != nil {
			t.Fatal(err)
		}
		for i := lo; i < lo+per; i++ {
			if r, err := l.Get("key", names[i]); err != nil || r.CreatedAt != created(i) {
				t.Fatalf("key %d = %+v, %v; want its record", i, r, err)
			}
		}
		worst = max(worst, l.entries)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if worst > 5*per {
		t.Errorf("a request of %d found keys decoded up to %d entries, want at most %d", per, worst, 5*per)
	}
}

// TestIdemGroupsLegacySlots: records by second written one to a key, as
// eventd did before the groups, are found after an upgrade, also by a
// filter rebuilt from them, and swept; once none is left, look-ups stop
// reading them.
func TestIdemGroupsLegacySlots(t *testing.T) {
	db := openTestDB(t, "")
	now := time.Now().UnixMilli() / 1000 * 1000
	old := IdemRecord{Hash: 7, ID: testID(7), Timestamp: 7, CreatedAt: now - 3000}
	b := db.Pebble().NewBatch()
	_ = b.Set(idemSlotKey(nil, uint32(old.CreatedAt/1000), "key", "old"), encodeIdemRecord(nil, old), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db = reopenUnsaved(t, db)
	putIdem(t, db.DB, "key", now-1000, "new")
	if !db.idemSlotLegacy.Load() {
		t.Fatal("a store holding F keys does not read them")
	}
	if r, err := db.GetIdempotency("key", "old"); err != nil || r != old {
		t.Errorf("old = %+v, %v; want %+v", r, err, old)
	}
	checkIdem(t, db.DB, "upgraded", "key", map[string]int64{"new": now - 1000, "none": 0})

	if err := db.SweepIdempotency(now - 2000); err != nil {
		t.Fatal(err)
	}
	if db.idemSlotLegacy.Load() {
		t.Error("swept of every F key, look-ups still read them")
	}
	checkIdem(t, db.DB, "swept", "key", map[string]int64{"old": 0, "new": now - 1000})
}

// TestIdemGroupsErase: erasing events removes their entries from the
// groups that hold them, and a group left empty.
func TestIdemGroupsErase(t *testing.T) {
	db := openTestDB(t, "")
	now := time.Now().UnixMilli()
	b := db.NewBatch()
	for i, key := range []string{"a", "b", "c"} {
		b.AddIdempotency("key", key, IdemRecord{ID: testID(uint64(i + 1)), CreatedAt: now})
	}
	b.AddIdempotency("other", "d", IdemRecord{ID: testID(4), CreatedAt: now})
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := db.eraseIdempotency(map[ID]bool{testID(2): true, testID(4): true}); err != nil {
		t.Fatal(err)
	}
	got := idemGroups(t, db.DB)
	if len(got) != 1 {
		t.Fatalf("%d groups after the erasure, want 1: %q", len(got), got)
	}
	for k, keys := range got {
		if !bytes.HasPrefix([]byte(k), idemGroupPrefix(nil, idemSlot(now), []byte("key"))) || !slices.Equal(keys, []string{"a", "c"}) {
			t.Errorf("group %x holds %q, want key's a and c", k, keys)
		}
	}
	checkIdem(t, db.DB, "erased", "key", map[string]int64{"a": now, "b": 0, "c": now})
	checkIdem(t, db.DB, "erased", "other", map[string]int64{"d": 0})
}

// TestEachIdemEntry: a group's value that ends inside an entry is
// corrupt, and nothing of it is taken past the last whole entry, in the
// 40-byte records' form and in the compact one.
func TestEachIdemEntry(t *testing.T) {
	first := ID{0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7}
	k := append(idemGroupPrefix(nil, 5, "key"), first[:]...)
	rec := encodeIdemRecord(nil, IdemRecord{Hash: 1, ID: first})
	whole := append(appendEntryKey(nil, []byte("k")), rec...)
	prev := first
	compact := appendCompactEntry(nil, []byte("k"), rec, &prev) // 1+1+8+1+1+1 bytes
	two := append([]byte{compactGroup}, compact...)
	two = append(two, compact...) // the same id again: a step of 0
	for _, tc := range []struct {
		name    string
		k, v    []byte
		entries int
		err     error
	}{
		{"empty", k, nil, 0, nil},
		{"one", k, whole, 1, nil},
		{"two", k, append(append([]byte(nil), whole...), whole...), 2, nil},
		{"short record", k, whole[:len(whole)-1], 0, errCorrupt},
		{"short key", k, appendEntryKey(nil, []byte("key"))[:2], 0, errCorrupt},
		{"bad length", k, []byte{0xff}, 0, errCorrupt},
		{"huge length", k, append(binary.AppendUvarint(nil, 1<<64-20), rec...), 0, errCorrupt},
		{"whole then short", k, append(append([]byte(nil), whole...), 5), 1, errCorrupt},
		{"compact, none", k, []byte{compactGroup}, 0, nil},
		{"compact, two", k, two, 2, nil},
		{"compact, empty key", k, []byte{compactGroup, 0, 1, 2, 3, 4, 5, 6, 7, 8, 1, 0, 0}, 0, errCorrupt},
		{"compact, short hash", k, two[:1+1+1+7], 0, errCorrupt},
		{"compact, no step", k, two[:1+1+1+8], 0, errCorrupt},
		{"compact, no time", k, two[:1+1+1+8+1], 0, errCorrupt},
		{"compact, no creation", k, two[:1+1+1+8+1+1], 0, errCorrupt},
		{"compact, short id", k, append([]byte{compactGroup, 1, 'k', 0, 0, 0, 0, 0, 0, 0, 0, 0}, first[:15]...), 0, errCorrupt},
		{"compact, then short", k, two[:len(two)-1], 1, errCorrupt},
		{"compact, short group key", first[:15], two, 0, errCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			err := eachIdemEntry(tc.k, tc.v, func(_, _ []byte) { n++ })
			if n != tc.entries || !errors.Is(err, tc.err) {
				t.Errorf("%d entries, %v; want %d, %v", n, err, tc.entries, tc.err)
			}
		})
	}
}

// TestCompactEntries: records written in the compact form read back as
// they were, whatever their ids' steps (within a millisecond, carried into
// the counter's upper bits, back, across milliseconds) and times (before
// and after the id's millisecond, as far as int64 goes).
func TestCompactEntries(t *testing.T) {
	id := func(ms int64, hi uint16, lo uint64) ID {
		x := IDAt(ms)
		binary.BigEndian.PutUint16(x[6:], hi)
		binary.BigEndian.PutUint64(x[8:], lo)
		return x
	}
	const ms = 1_764_000_000_123
	recs := []IdemRecord{
		{Hash: 1, ID: id(ms, 3, 10), Timestamp: ms, CreatedAt: ms},
		{Hash: 2, ID: id(ms, 3, 11), Timestamp: ms - 1500, CreatedAt: ms + 2},
		{Hash: 3, ID: id(ms, 3, 1<<64-1), Timestamp: ms - 10*86_400_000, CreatedAt: ms},
		{Hash: 4, ID: id(ms, 4, 5), Timestamp: math.MinInt64, CreatedAt: math.MaxInt64}, // carried into hi
		{Hash: 5, ID: id(ms, 4, 2), Timestamp: 0, CreatedAt: -1},                        // back: whole
		{Hash: 6, ID: id(ms+1, 0, 0), Timestamp: ms + 86_400_000, CreatedAt: ms},        // another millisecond
		{Hash: 7, ID: id(ms+1, 0, 1<<63), Timestamp: ms, CreatedAt: ms},
		{Hash: 1<<64 - 1, ID: id(ms+1, 1, 1<<63), Timestamp: ms, CreatedAt: ms}, // a step of 2^64: whole
	}
	k := append(idemGroupPrefix(nil, idemSlot(ms), "key"), recs[0].ID[:]...)
	v := []byte{compactGroup}
	prev := recs[0].ID
	for i, r := range recs {
		v = appendCompactEntry(v, []byte{'a' + byte(i)}, encodeIdemRecord(nil, r), &prev)
	}
	var got []IdemRecord
	var keys []string
	if err := eachIdemEntry(k, v, func(key, rec []byte) {
		r, err := decodeIdemRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, keys = append(got, r), append(keys, string(key))
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, recs) || !slices.Equal(keys, []string{"a", "b", "c", "d", "e", "f", "g", "h"}) {
		t.Errorf("read back %v %q, want %v", got, keys, recs)
	}
}

// TestCompactEntryGolden pins the compact form of a group's entries: a
// record of one commit takes 11 bytes after its key, where it took 40.
func TestCompactEntryGolden(t *testing.T) {
	const ms = 1_764_000_000_123
	first := IDAt(ms)
	first[15] = 9
	next := first
	next[15] = 10
	key := []byte("node-next-1764000000000-12345")
	prev := first
	v := []byte{compactGroup}
	v = appendCompactEntry(v, key, encodeIdemRecord(nil, IdemRecord{Hash: 0x0102030405060708, ID: first, Timestamp: ms - 3, CreatedAt: ms}), &prev)
	v = appendCompactEntry(v, key, encodeIdemRecord(nil, IdemRecord{Hash: 0x1112131415161718, ID: next, Timestamp: ms - 2, CreatedAt: ms + 1}), &prev)
	want := "00" +
		"1d" + hex.EncodeToString(key) + "0102030405060708" + "01" + "05" + "00" +
		"1d" + hex.EncodeToString(key) + "1112131415161718" + "02" + "03" + "02"
	if got := hex.EncodeToString(v); got != want {
		t.Errorf("compact group\n got %s\nwant %s", got, want)
	}
	if n := (len(v) - 1) / 2; n != len(appendEntryKey(nil, key))+11 {
		t.Errorf("an entry takes %d bytes", n)
	}
}

// TestIdemGroupsOldForm: groups of 40-byte records, which stores written
// before session 39 hold, are read by look-ups, rebuilt into the filter at
// a start without a saved one, and erased from, rewritten in the compact
// form with the key they had.
func TestIdemGroupsOldForm(t *testing.T) {
	db := openTestDB(t, "")
	now := time.Now().UnixMilli()
	first := IDAt(now)
	var v []byte
	for i, key := range []string{"a", "b", "c"} {
		id := first
		id[15] = byte(i)
		v = append(appendEntryKey(v, key), encodeIdemRecord(nil, IdemRecord{Hash: uint64(i), ID: id, Timestamp: now - 10, CreatedAt: now + int64(i)})...)
	}
	k := append(idemGroupPrefix(nil, idemSlot(now), "key"), first[:]...)
	if err := db.Pebble().Set(k, v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db = reopenUnsaved(t, db)
	checkIdem(t, db.DB, "old form", "key", map[string]int64{"a": now, "b": now + 1, "c": now + 2, "d": 0})

	if err := db.eraseIdempotency(map[ID]bool{first: true}); err != nil { // a's event
		t.Fatal(err)
	}
	got, closer, err := db.Pebble().Get(k)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[0] != compactGroup {
		t.Errorf("the group after the erasure is %x, want the compact form", got)
	}
	_ = closer.Close()
	checkIdem(t, db.DB, "erased", "key", map[string]int64{"a": 0, "b": now + 1, "c": now + 2})
	if r, err := db.GetIdempotency("key", "c"); err != nil || r.Timestamp != now-10 || r.Hash != 2 || r.ID[15] != 2 {
		t.Errorf("c after the erasure: %+v, %v", r, err)
	}
}

// FuzzCompactEntries: two records written in the compact form after a
// group's first id read back as they were, and any value read as a
// compact group either fails as corrupt or yields whole records.
func FuzzCompactEntries(f *testing.F) {
	f.Add([]byte("0123456789abcdef"), []byte("0123456789abcdeg"), int64(5), int64(-3), uint64(7), []byte{0, 1, 'k'})
	f.Fuzz(func(t *testing.T, a, b []byte, ts, created int64, hash uint64, raw []byte) {
		if len(a) != len(ID{}) || len(b) != len(ID{}) {
			return
		}
		first := ID(a)
		recs := []IdemRecord{
			{Hash: hash, ID: first, Timestamp: ts, CreatedAt: created},
			{Hash: ^hash, ID: ID(b), Timestamp: created, CreatedAt: ts},
		}
		k := append(idemGroupPrefix(nil, 1, "key"), first[:]...)
		v := []byte{compactGroup}
		prev := first
		for _, r := range recs {
			v = appendCompactEntry(v, []byte("k"), encodeIdemRecord(nil, r), &prev)
		}
		var got []IdemRecord
		if err := eachIdemEntry(k, v, func(_, rec []byte) {
			r, _ := decodeIdemRecord(rec)
			got = append(got, r)
		}); err != nil || !slices.Equal(got, recs) {
			t.Fatalf("read back %v, %v; want %v", got, err, recs)
		}
		_ = eachIdemEntry(k, append([]byte{compactGroup}, raw...), func(key, rec []byte) {
			if len(key) == 0 || len(rec) != idemRecordLen {
				t.Fatalf("entry %q with a record of %d bytes", key, len(rec))
			}
		})
	})
}
