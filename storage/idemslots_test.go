package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/eventd/eventd/logtest"
)

// putIdem stores keyID's keys, each created at createdMs, in one batch.
func putIdem(t testing.TB, db *DB, keyID string, createdMs int64, keys ...string) {
	t.Helper()
	b := db.NewBatch()
	defer b.Close()
	for _, k := range keys {
		b.AddIdempotency(keyID, k, IdemRecord{Hash: uint64(createdMs), ID: testID(uint64(createdMs)), CreatedAt: createdMs})
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
}

// checkIdem fails the test unless each key's record was created at
// want[key] (0: none is found).
func checkIdem(t testing.TB, db *DB, phase, keyID string, want map[string]int64) {
	t.Helper()
	for key, created := range want {
		r, err := db.GetIdempotency(keyID, key)
		switch {
		case created == 0 && !errors.Is(err, ErrNotFound):
			t.Errorf("%s: %s/%q = %+v, %v; want not found", phase, keyID, key, r, err)
		case created != 0 && (err != nil || r.CreatedAt != created):
			t.Errorf("%s: %s/%q = %+v, %v; want the record created at %d", phase, keyID, key, r, err, created)
		}
	}
}

// idemBySecond counts the records kept by second, the groups' entries and
// the keys of the layout before them (F), and the groups.
func idemBySecond(t testing.TB, db *DB) (records, groups int) {
	t.Helper()
	it, err := db.Pebble().NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIdemGroup}, UpperBound: []byte{prefixIdemGroup + 1}})
	if err != nil {
		t.Fatal(err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		groups++
		if err := eachIdemEntry(it.Key(), it.Value(), func(_, _ []byte) { records++ }); err != nil {
			t.Fatal(err)
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return records + countKeys(t, db, []byte{prefixIdemSlot}, []byte{prefixIdemSlot + 1}), groups
}

// waitIdem waits for Open's rebuild of the idempotency filter.
func waitIdem(t testing.TB, db *DB) {
	t.Helper()
	if err := db.idemReady(); err != nil {
		t.Fatal(err)
	}
}

// keyNames is n keys named prefix0, prefix1, ...
func keyNames(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint(prefix, i)
	}
	return keys
}

// TestIdemSlots: records are kept by slot, for every API key together,
// a group per commit, slot and API key; a sweep deletes the seconds before
// the cutoff's and the filter forgets them; a reopened store rebuilds the
// filter from the records.
func TestIdemSlots(t *testing.T) {
	db := openTestDB(t, "")
	now := time.Now().UnixMilli() / 1000 * 1000
	putIdem(t, db.DB, "key", now-3000, "a")
	putIdem(t, db.DB, "other_key", now-3000, "a")
	putIdem(t, db.DB, "key", now-2001, "b")
	putIdem(t, db.DB, "key", now-1500, "c")
	putIdem(t, db.DB, "key", now-1000, "d", "e")
	if n, groups := idemBySecond(t, db.DB); n != 6 || groups != 5 {
		t.Fatalf("%d records kept by second in %d groups, want 6 in 5", n, groups)
	}
	if n := countKeys(t, db.DB, []byte{prefixIdemDay}, []byte{prefixIdem + 1}); n != 0 || db.idemDayInUse() {
		t.Fatalf("%d records kept by day (look-ups read them: %v), want none", n, db.idemDayInUse())
	}
	all := map[string]int64{"a": now - 3000, "b": now - 2001, "c": now - 1500, "d": now - 1000, "e": now - 1000, "f": 0}
	checkIdem(t, db.DB, "written", "key", all)
	checkIdem(t, db.DB, "written", "other_key", map[string]int64{"a": now - 3000, "b": 0})
	checkIdem(t, db.DB, "written", "nokey", map[string]int64{"a": 0})

	db = db.reopen(t)
	waitIdem(t, db.DB)
	if n := db.idemSlots.filter.Len(); n != 6 {
		t.Errorf("the reopened store's filter holds %d keys, want 6", n)
	}
	checkIdem(t, db.DB, "reopened", "key", all)

	// c is older than the cutoff, but of its second: it stays.
	if err := db.SweepIdempotency(now - 1200); err != nil {
		t.Fatal(err)
	}
	checkIdem(t, db.DB, "swept", "key", map[string]int64{"a": 0, "b": 0, "c": now - 1500, "d": now - 1000, "e": now - 1000})
	checkIdem(t, db.DB, "swept", "other_key", map[string]int64{"a": 0})
	if n, groups := idemBySecond(t, db.DB); n != 3 || groups != 2 {
		t.Errorf("%d records in %d groups after the sweep, want 3 in 2", n, groups)
	}
	if n := db.idemSlots.filter.Len(); n != 3 {
		t.Errorf("the filter holds %d keys after the sweep, want 3", n)
	}
	// A second sweep changes nothing.
	if err := db.SweepIdempotency(now - 1200); err != nil {
		t.Fatal(err)
	}
	checkIdem(t, db.DB, "swept again", "key", map[string]int64{"c": now - 1500, "e": now - 1000})
}

// TestIdempotencyHashed: a key filed, stored and looked up by the hash its
// caller computed once (IdempotencyHash), after TouchIdempotency, is the
// key stored and looked up by name.
func TestIdempotencyHashed(t *testing.T) {
	db := openTestDB(t, "")
	now := time.Now().UnixMilli()
	keys := []string{"a", "b", "node-next-1-x"}
	hs := make([]uint64, len(keys))
	for i, k := range keys {
		hs[i] = db.IdempotencyHash("key_1", k)
		if hs[i] != db.IdempotencyHash("key_1", k) || hs[i] == db.IdempotencyHash("key_2", k) {
			t.Fatalf("IdempotencyHash(%q) is not a function of the API key and the key", k)
		}
	}
	db.TouchIdempotency(hs)
	b := db.NewBatch()
	for i, k := range keys {
		slot, filed := db.FileIdempotency(hs[i], now)
		b.AddIdempotencyFiled("key_1", k, slot, filed, IdemRecord{Hash: uint64(i + 1), ID: testID(uint64(i + 1)), CreatedAt: now})
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.Close()
	db.TouchIdempotency(hs)
	l, err := db.NewIdemLookup()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i, k := range keys {
		byHash, err1 := l.GetHashed("key_1", k, hs[i])
		byName, err2 := db.GetIdempotency("key_1", k)
		if err1 != nil || err2 != nil || byHash.Hash != uint64(i+1) || byHash != byName {
			t.Errorf("%q: GetHashed %+v, %v; GetIdempotency %+v, %v", k, byHash, err1, byName, err2)
		}
	}
	if _, err := l.GetHashed("key_2", "a", db.IdempotencyHash("key_2", "a")); !errors.Is(err, ErrNotFound) {
		t.Errorf("another API key's key: %v, want ErrNotFound", err)
	}
}

// TestIdemSlotsFull: keys past the filter's bound are kept by day and
// found there, counted (IdempotencyKeysByDay), and the first is logged.
func TestIdemSlotsFull(t *testing.T) {
	var logs logtest.Buffer
	db := openTestDBWith(t, Options{IdempotencyFilterKeys: 4096, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	now := time.Now().UnixMilli()
	putIdem(t, db.DB, "key", now-25*hourMs, "again") // past its day, not yet swept
	keys := keyNames("k", 5000)
	putIdem(t, db.DB, "key", now-hourMs, keys...)
	if !db.idemDayInUse() {
		t.Fatal("5,001 keys fit a filter of 4,096")
	}
	putIdem(t, db.DB, "key", now-60_000, "again")
	bySec, _ := idemBySecond(t, db.DB)
	byDay := countKeys(t, db.DB, []byte{prefixIdemDay}, []byte{prefixIdemDay + 1})
	if bySec+byDay != 5002 || byDay == 0 || bySec < 3000 {
		t.Fatalf("%d records by second and %d by day, want 5,002, at least 3,000 by second", bySec, byDay)
	}
	if n := db.IdempotencyKeysByDay(); n != uint64(byDay) {
		t.Errorf("IdempotencyKeysByDay = %d, want the %d records by day", n, byDay)
	}
	if n := strings.Count(logs.String(), "idempotency filter refused a key"); n != 1 {
		t.Errorf("the refusal logged %d times, want once:\n%s", n, logs.String())
	}
	want := map[string]int64{"again": now - 60_000, "never": 0}
	for _, k := range keys {
		want[k] = now - hourMs
	}
	checkIdem(t, db.DB, "written", "key", want)
	db = db.reopen(t)
	checkIdem(t, db.DB, "reopened", "key", want)
}

// TestIdemSlotsRebuildRefused: a filter that cannot take at Open every
// key kept by second (a smaller bound) writes the others to the day
// layout too.
func TestIdemSlotsRebuildRefused(t *testing.T) {
	db := openTestDB(t, "")
	now := time.Now().UnixMilli()
	keys := keyNames("k", 6000)
	putIdem(t, db.DB, "key", now-hourMs, keys...)
	db.close(t)
	db = openTestDBIn(t, db.dir, Options{IdempotencyFilterKeys: 4096})
	waitIdem(t, db.DB)
	bySec, _ := idemBySecond(t, db.DB)
	byDay := countKeys(t, db.DB, []byte{prefixIdemDay}, []byte{prefixIdemDay + 1})
	if bySec != 6000 || byDay == 0 || byDay+db.idemSlots.filter.Len() != 6000 {
		t.Fatalf("%d records by second (the filter holds %d) and %d by day, want 6,000, some by day", bySec, db.idemSlots.filter.Len(), byDay)
	}
	want := map[string]int64{"never": 0}
	for _, k := range keys {
		want[k] = now - hourMs
	}
	checkIdem(t, db.DB, "reopened smaller", "key", want)
}

// TestIdemSlotsSaved: a store closed cleanly saves the filter, and the
// next start reads the save instead of every record. A start after a
// crash reads the last save and the records from its floor on; a record
// older than the floor written after the save went to the day layout.
// A save that does not check out is ignored, as is one of version 1
// (24-bit seconds), 2 (17-bit seconds) or 3 (buckets of four); one of
// version 4 (one table, no count of them) is read.
func TestIdemSlotsSaved(t *testing.T) {
	db := openTestDBWith(t, Options{IdempotencyFilterKeys: 16 << 20}) // one table, as a save of version 4 held
	now := time.Now().UnixMilli()
	old := keyNames("old", 3000)
	putIdem(t, db.DB, "key", now-2*hourMs, old...)
	db = db.reopen(t)
	waitIdem(t, db.DB)
	if !db.idemSlots.fromSave || db.idemSlots.read != 0 {
		t.Fatalf("after a clean close: from a save %v, %d records read; want the save alone", db.idemSlots.fromSave, db.idemSlots.read)
	}
	want := map[string]int64{"never": 0}
	for _, k := range old {
		want[k] = now - 2*hourMs
	}
	checkIdem(t, db.DB, "from the save", "key", want)

	// A save, then writes the next save will not hold: the crash keeps it.
	if err := db.saveIdemSlots(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(db.dir, idemFilterFile)
	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	putIdem(t, db.DB, "key", now, "after")
	putIdem(t, db.DB, "key", now-hourMs, "late") // below the floor: by day
	want["after"], want["late"] = now, now-hourMs
	db = reopenWithSave(t, db, path, saved)
	if !db.idemSlots.fromSave || db.idemSlots.read != 1 {
		t.Errorf("after a crash: from a save %v, %d records read; want the save and the one after it", db.idemSlots.fromSave, db.idemSlots.read)
	}
	checkIdem(t, db.DB, "after a crash", "key", want)

	// A save of an earlier version, whose entries hold seconds (1, 2) or
	// sit in buckets of four (3), checksum and all: every record is read
	// again.
	version := func(v byte) []byte {
		file := append([]byte(nil), saved...)
		file[7] = v
		body := file[:len(file)-4]
		binary.LittleEndian.PutUint32(file[len(body):], crc32.Checksum(body, crcTable))
		return file
	}
	v1, v2, v3 := version(1), version(2), version(3)
	// Version 4: the head's count is the one table's size, and no sizes
	// follow the entries.
	v4 := append([]byte(nil), saved[:idemFileHead-4]...)
	v4[7] = idemFileV4
	v4 = append(v4, saved[len(saved)-8:len(saved)-4]...)
	v4 = append(v4, saved[idemFileHead:len(saved)-8]...)
	v4 = binary.LittleEndian.AppendUint32(v4, crc32.Checksum(v4, crcTable))
	db = reopenWithSave(t, db, path, v4)
	if !db.idemSlots.fromSave || db.idemSlots.read != 1 {
		t.Errorf("with a save of version 4: from a save %v, %d records read; want the save and the one after it", db.idemSlots.fromSave, db.idemSlots.read)
	}
	checkIdem(t, db.DB, "with a save of version 4", "key", want)
	// A damaged save: the same.
	saved[len(saved)/2] ^= 1
	for _, c := range []struct {
		name string
		file []byte
	}{{"a save of version 1", v1}, {"a save of version 2", v2}, {"a save of version 3", v3}, {"a damaged save", saved}} {
		db = reopenWithSave(t, db, path, c.file)
		if db.idemSlots.fromSave || db.idemSlots.read != 3001 {
			t.Errorf("with %s: from a save %v, %d records read; want all 3,001 kept by second", c.name, db.idemSlots.fromSave, db.idemSlots.read)
		}
		checkIdem(t, db.DB, "with "+c.name, "key", want)
	}
}

// TestIdemSlotsSavedTables: a filter of several tables (a bound past one
// table's) is saved and read back whole; a start under a bound of another
// number of tables rebuilds from the records, and so does one whose save
// names more tables than its length holds.
func TestIdemSlotsSavedTables(t *testing.T) {
	db := openTestDBWith(t, Options{IdempotencyFilterKeys: 40 << 20})
	if n := db.idemSlots.filter.Tables(); n != 3 {
		t.Fatalf("%d tables for 40 M keys, want 3", n)
	}
	now := time.Now().UnixMilli()
	keys := keyNames("k", 3000)
	putIdem(t, db.DB, "key", now-hourMs, keys...)
	want := map[string]int64{"never": 0}
	for _, k := range keys {
		want[k] = now - hourMs
	}
	db = db.reopen(t)
	waitIdem(t, db.DB)
	if !db.idemSlots.fromSave || db.idemSlots.read != 0 || db.idemSlots.filter.Len() != 3000 {
		t.Fatalf("three tables after a clean close: from a save %v, %d records read, %d keys; want the save alone, 3,000 keys", db.idemSlots.fromSave, db.idemSlots.read, db.idemSlots.filter.Len())
	}
	checkIdem(t, db.DB, "three tables from the save", "key", want)

	path := filepath.Join(db.dir, idemFilterFile)
	db.close(t)
	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	db = openTestDBIn(t, db.dir, Options{IdempotencyFilterKeys: 16 << 20}) // one table
	waitIdem(t, db.DB)
	if db.idemSlots.fromSave || db.idemSlots.read != 3000 {
		t.Errorf("one table from a save of three: from a save %v, %d records read; want all 3,000", db.idemSlots.fromSave, db.idemSlots.read)
	}
	checkIdem(t, db.DB, "one table from a save of three", "key", want)

	// A count of tables past the file's length, checksum and all.
	db.close(t)
	binary.LittleEndian.PutUint32(saved[idemFileHead-4:], 1<<15)
	body := saved[:len(saved)-4]
	binary.LittleEndian.PutUint32(saved[len(body):], crc32.Checksum(body, crcTable))
	if err := os.WriteFile(path, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	db = openTestDBIn(t, db.dir, Options{IdempotencyFilterKeys: 40 << 20})
	waitIdem(t, db.DB)
	if db.idemSlots.fromSave || db.idemSlots.read != 3000 {
		t.Errorf("a save naming 32,768 tables: from a save %v, %d records read; want all 3,000", db.idemSlots.fromSave, db.idemSlots.read)
	}
	checkIdem(t, db.DB, "a save naming 32,768 tables", "key", want)
}

// reopenWithSave closes db, puts file in the saved filter's place (path)
// and reopens it once the filter is rebuilt.
func reopenWithSave(t *testing.T, db testDB, path string, file []byte) testDB {
	t.Helper()
	db.close(t)
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	db = db.reopen(t)
	waitIdem(t, db.DB)
	return db
}

// TestFileIdempotency: a key filed ahead of its batch is written in the
// group of the slot it was filed at, even when the batch's records are
// created later, and found there; a key the filter refuses (here: no
// filter) goes to the day layout and is found there.
func TestFileIdempotency(t *testing.T) {
	for _, tc := range []struct {
		name       string
		filterKeys int
		filed      bool
	}{{"filter", 0, true}, {"no filter", -1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTestDBWith(t, Options{IdempotencyFilterKeys: tc.filterKeys})
			waitIdem(t, db.DB)
			now := time.Now().UnixMilli()
			slot, filed := db.FileIdempotency(db.IdempotencyHash("key", "a"), now-2000)
			if filed != tc.filed || slot != idemSlot(now-2000) {
				t.Fatalf("filed at %d: %v; want %d: %v", slot, filed, idemSlot(now-2000), tc.filed)
			}
			b := db.NewBatch()
			b.AddIdempotencyFiled("key", "a", slot, filed, IdemRecord{Hash: 1, ID: testID(1), CreatedAt: now})
			if err := b.Commit(true); err != nil {
				t.Fatal(err)
			}
			b.Close()
			checkIdem(t, db.DB, "filed", "key", map[string]int64{"a": now, "b": 0})
			groups := idemGroups(t, db.DB)
			for k := range groups {
				if s, _, _ := parseIdemGroupKey([]byte(k)); s != slot {
					t.Errorf("group of slot %d, want the filed %d", s, slot)
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.filed]; len(groups) != want {
				t.Errorf("%d groups, want %d", len(groups), want)
			}
		})
	}
}
