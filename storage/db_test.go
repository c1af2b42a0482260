package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

func TestIdempotencyRoundTrip(t *testing.T) {
	db := openTestDB(t, "")
	now := time.Now().UnixMilli() // look-ups read the records of yesterday and today
	recs := []struct {
		keyID, key string
		rec        IdemRecord
	}{
		{"key1", "order-1", IdemRecord{Hash: 0xdeadbeefcafef00d, ID: testID(1), Timestamp: 1_768_000_000_000, CreatedAt: now}},
		{"key1", "order-2", IdemRecord{Hash: 1, ID: testID(2), Timestamp: 2, CreatedAt: now - 23*hourMs}},
		{"key2", "order-1", IdemRecord{Hash: math.MaxUint64, ID: maxID(), Timestamp: math.MaxInt64, CreatedAt: now - 1}},
		// (keyID, key) pairs with the same concatenation stay apart.
		{"k", "ab", IdemRecord{Hash: 10, ID: testID(10), CreatedAt: now - 5}},
		{"ka", "b", IdemRecord{Hash: 11, ID: testID(11), CreatedAt: now - 6}},
		{"k", "ünïcode-ключ", IdemRecord{Hash: 12, ID: testID(12), CreatedAt: now - 7}},
	}
	b := db.NewBatch()
	for i, r := range recs {
		// Each key is remembered in the batch of its event.
		b.AddEvent(1, &Event{ID: r.rec.ID, Name: "e", Timestamp: int64(i)})
		b.AddIdempotency(r.keyID, r.key, r.rec)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()

	check := func(t *testing.T, db *DB) {
		t.Helper()
		for _, r := range recs {
			got, err := db.GetIdempotency(r.keyID, r.key)
			if err != nil {
				t.Fatalf("GetIdempotency(%q, %q): %v", r.keyID, r.key, err)
			}
			if got != r.rec {
				t.Errorf("GetIdempotency(%q, %q) = %+v, want %+v", r.keyID, r.key, got, r.rec)
			}
		}
		for _, k := range [][2]string{{"key1", "order-3"}, {"key3", "order-1"}, {"key", "1order-1"}, {"", ""}} {
			if _, err := db.GetIdempotency(k[0], k[1]); !errors.Is(err, ErrNotFound) {
				t.Errorf("GetIdempotency(%q, %q) = %v, want ErrNotFound", k[0], k[1], err)
			}
		}
	}
	t.Run("open", func(t *testing.T) { check(t, db.DB) })
	db = db.reopen(t)
	t.Run("reopened", func(t *testing.T) { check(t, db.DB) })
}

// TestSweepIdempotency: with records kept by day, a sweep deletes each API
// key's days before the cutoff's with one range deletion and leaves the cutoff's own day, the
// days after it and every other kind of record.
func TestSweepIdempotency(t *testing.T) {
	db := openTestDBWith(t, Options{IdempotencyFilterKeys: -1}) // keys by day, as when the filter is full
	day := time.Now().UnixMilli()/dayMs - 5
	at := func(d, ms int64) int64 { return (day+d)*dayMs + ms }
	created := map[string]int64{"a": at(0, 100), "b": at(1, 5), "c": at(2, 0), "d": at(2, dayMs-1), "e": at(3, 7)}
	b := db.NewBatch()
	for k, c := range created {
		for _, keyID := range []string{"key", "other_key"} {
			b.AddIdempotency(keyID, k, IdemRecord{Hash: uint64(c), ID: testID(uint64(c)), CreatedAt: c})
		}
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.Close()
	// A config record and a window record are not idempotency records.
	if err := db.PutConfig("key", "x", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := db.PutWindows("key", []byte("w")); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		cutoff int64
		left   string
	}{
		{cutoff: at(0, 500), left: "a b c d e"}, // a is older, but of the cutoff's day
		{cutoff: at(1, 1), left: "b c d e"},
		{cutoff: at(1, 1), left: "b c d e"},
		{cutoff: at(2, dayMs-1), left: "c d e"},
		{cutoff: at(3, 0), left: "e"},
		{cutoff: at(9, 0), left: ""},
	} {
		if err := db.SweepIdempotency(s.cutoff); err != nil {
			t.Fatalf("SweepIdempotency(%d): %v", s.cutoff, err)
		}
		for _, keyID := range []string{"key", "other_key"} {
			if got := strings.Join(idemRecordsLeft(t, db.DB, keyID), " "); got != s.left {
				t.Errorf("after sweep(day %+.3f): %s's records %q, want %q", float64(s.cutoff)/float64(dayMs)-float64(day), keyID, got, s.left)
			}
		}
	}
	if _, err := db.GetConfig("key", "x"); err != nil {
		t.Errorf("config record after sweeps: %v", err)
	}
	if _, err := db.GetWindows("key"); err != nil {
		t.Errorf("windows record after sweeps: %v", err)
	}
}

// idemRecordsLeft lists keyID's idempotency keys in the store (H, by day),
// whatever their day, in key order.
func idemRecordsLeft(t testing.TB, db *DB, keyID string) []string {
	t.Helper()
	scope := idemScope(nil, keyID)
	var out []string
	for _, k := range allKeys(t, db) {
		if _, ok := keyDay(k, scope); ok && bytes.HasPrefix(k, scope) {
			out = append(out, string(k[len(scope)+4:]))
		}
	}
	return out
}

func TestConfig(t *testing.T) {
	db := openTestDB(t, "")
	put := func(kind, id, v string) {
		t.Helper()
		if err := db.PutConfig(kind, id, []byte(v)); err != nil {
			t.Fatalf("PutConfig(%q, %q): %v", kind, id, err)
		}
	}
	scan := func(kind string) []string {
		t.Helper()
		var out []string
		err := db.ScanConfig(kind, func(id string, value []byte) error {
			out = append(out, id+"="+string(value))
			return nil
		})
		if err != nil {
			t.Fatalf("ScanConfig(%q): %v", kind, err)
		}
		return out
	}

	put("key", "k2", "two")
	put("key", "k1", "one")
	put("key", "k10", "ten")
	put("keys", "k0", "other kind")
	put("keys", "", "empty id")
	put("ke", "yk1", "other kind")
	put("kez", "a", "after")
	put("project", "p1", `{"name":"P"}`)
	put("key", "k2", "two v2") // overwrite

	t.Run("get", func(t *testing.T) {
		for _, tc := range []struct{ kind, id, want string }{
			{"key", "k1", "one"}, {"key", "k2", "two v2"}, {"keys", "k0", "other kind"},
			{"keys", "", "empty id"}, {"project", "p1", `{"name":"P"}`},
		} {
			got, err := db.GetConfig(tc.kind, tc.id)
			if err != nil || string(got) != tc.want {
				t.Errorf("GetConfig(%q, %q) = %q, %v; want %q", tc.kind, tc.id, got, err, tc.want)
			}
		}
		for _, k := range [][2]string{{"key", "k3"}, {"keys", "k1"}, {"key", ""}, {"nokind", "k1"}} {
			if _, err := db.GetConfig(k[0], k[1]); !errors.Is(err, ErrNotFound) {
				t.Errorf("GetConfig(%q, %q) = %v, want ErrNotFound", k[0], k[1], err)
			}
		}
	})

	t.Run("scan", func(t *testing.T) {
		for _, tc := range []struct {
			kind string
			want []string
		}{
			{"key", []string{"k1=one", "k10=ten", "k2=two v2"}}, // id order, no "keys"
			{"keys", []string{"=empty id", "k0=other kind"}},
			{"ke", []string{"yk1=other kind"}},
			{"project", []string{`p1={"name":"P"}`}},
			{"none", nil},
		} {
			if got := scan(tc.kind); !slices.Equal(got, tc.want) {
				t.Errorf("ScanConfig(%q) = %q, want %q", tc.kind, got, tc.want)
			}
		}
	})

	t.Run("scan error stops", func(t *testing.T) {
		stop := errors.New("stop")
		calls := 0
		err := db.ScanConfig("key", func(string, []byte) error {
			calls++
			return stop
		})
		if !errors.Is(err, stop) || calls != 1 {
			t.Errorf("ScanConfig = %v after %d calls, want stop after 1", err, calls)
		}
	})

	t.Run("delete", func(t *testing.T) {
		if err := db.DeleteConfig("key", "k1"); err != nil {
			t.Fatal(err)
		}
		if err := db.DeleteConfig("key", "missing"); err != nil {
			t.Errorf("DeleteConfig of a missing record: %v", err)
		}
		if _, err := db.GetConfig("key", "k1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetConfig after delete = %v, want ErrNotFound", err)
		}
		if got, want := scan("key"), []string{"k10=ten", "k2=two v2"}; !slices.Equal(got, want) {
			t.Errorf("ScanConfig after delete = %q, want %q", got, want)
		}
		if got, want := scan("keys"), []string{"=empty id", "k0=other kind"}; !slices.Equal(got, want) {
			t.Errorf("ScanConfig(keys) after delete = %q, want %q", got, want)
		}
	})

	t.Run("durable", func(t *testing.T) {
		db := db.reopen(t)
		if got, want := scanOf(t, db.DB, "key"), []string{"k10=ten", "k2=two v2"}; !slices.Equal(got, want) {
			t.Errorf("ScanConfig after reopen = %q, want %q", got, want)
		}
	})
}

func scanOf(t *testing.T, db *DB, kind string) []string {
	t.Helper()
	var out []string
	if err := db.ScanConfig(kind, func(id string, value []byte) error {
		out = append(out, id+"="+string(value))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWindows(t *testing.T) {
	db := openTestDB(t, "")
	if _, err := db.GetWindows("k1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetWindows of a new key = %v, want ErrNotFound", err)
	}
	for _, s := range []string{"state1", "state2"} {
		if err := db.PutWindows("k1", []byte(s)); err != nil {
			t.Fatal(err)
		}
		got, err := db.GetWindows("k1")
		if err != nil || string(got) != s {
			t.Errorf("GetWindows = %q, %v; want %q", got, err, s)
		}
	}
	if _, err := db.GetWindows("k"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetWindows(k) = %v, want ErrNotFound", err)
	}
	if err := db.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	db = db.reopen(t)
	if got, err := db.GetWindows("k1"); err != nil || string(got) != "state2" {
		t.Errorf("GetWindows after Flush and reopen = %q, %v; want state2", got, err)
	}
}

func TestDeleteDatasets(t *testing.T) {
	db := openTestDB(t, "")
	day := int64(planDay)
	var n uint64
	byDS := map[uint32][]Event{}
	for _, ds := range []uint32{1, 2, 3, 4} {
		var evs []*Event
		for i := range 40 {
			n++
			e := Event{ID: testID(n), Name: modelNames[i%len(modelNames)], Timestamp: day + int64(i)*7*minuteMs + int64(i),
				CreatedAt: day, Properties: fmt.Appendf(nil, `{"amount":%d.5}`, i+1)}
			if i%3 != 0 {
				e.HasVisitor, e.VisitorID = true, modelVisitors[i%4]
			}
			evs = append(evs, &e)
			byDS[ds] = append(byDS[ds], e)
		}
		commitEvents(t, db.DB, ds, evs...)
	}
	b := db.NewBatch()
	b.AddIdempotency("key", "k", IdemRecord{ID: testID(1), CreatedAt: time.Now().UnixMilli()})
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := db.PutConfig("project", "p", []byte("{}")); err != nil {
		t.Fatal(err)
	}

	if err := db.DeleteDatasets(2, 4); err != nil {
		t.Fatal(err)
	}
	// The displaced events' keys held in memory (latemem.go): those of the
	// deleted datasets must not come back.
	if err := db.WriteLateMemory(); err != nil {
		t.Fatal(err)
	}

	all := ListQuery{To: math.MaxInt64, Limit: 100}
	for ds, evs := range byDS {
		deleted := ds == 2 || ds == 4
		t.Run(fmt.Sprintf("dataset %d", ds), func(t *testing.T) {
			q := all
			q.Dataset = ds
			page, total, err := db.List(q)
			if err != nil {
				t.Fatal(err)
			}
			wantTotal := int64(len(evs))
			if deleted {
				wantTotal = 0
			}
			if total != wantTotal || int64(len(page)) != wantTotal {
				t.Errorf("List: %d events, total %d; want %d", len(page), total, wantTotal)
			}
			for _, name := range modelNames {
				q := all
				q.Dataset, q.Name = ds, name
				_, total, err := db.List(q)
				if err != nil {
					t.Fatal(err)
				}
				c, err := db.Count(ds, name, 0, math.MaxInt64)
				if err != nil {
					t.Fatal(err)
				}
				want := int64(0)
				if !deleted {
					want = int64(len(evs) / len(modelNames))
				}
				if total != want || c != want {
					t.Errorf("name %q: List total %d, Count %d; want %d", name, total, c, want)
				}
			}
			q.HasVisitor, q.VisitorID = true, modelVisitors[1]
			if _, total, err := db.List(q); err != nil || (deleted && total != 0) || (!deleted && total == 0) {
				t.Errorf("visitor list: total %d, %v (deleted %v)", total, err, deleted)
			}
			for _, e := range evs {
				_, err := db.GetEvent(ds, e.ID)
				if deleted != errors.Is(err, ErrNotFound) {
					t.Fatalf("GetEvent(%d, %x) = %v (deleted %v)", ds, e.ID, err, deleted)
				}
			}
			// No key of any kind is left for a deleted dataset (the events
			// are displaced: testID's times are near 0).
			for _, p := range []byte{prefixDisplaced, prefixDisplacedMark, prefixDisplacedName, prefixVisitor, prefixCounter} {
				keys := countKeys(t, db.DB, appendDataset(nil, p, ds), appendDataset(nil, p, ds+1))
				if deleted && keys != 0 {
					t.Errorf("%d keys with prefix %c left", keys, p)
				}
				if !deleted && keys == 0 {
					t.Errorf("no keys with prefix %c", p)
				}
			}
			// Nor under any other dataset-scoped prefix (the rollups of
			// doc.go: S sums, U visitor sketches, G goals, and any added later).
			left := map[byte]int{}
			for _, k := range allKeys(t, db.DB) {
				if len(k) >= datasetPrefLen && !slices.Contains(globalPrefixes, k[0]) &&
					binary.BigEndian.Uint32(k[1:datasetPrefLen]) == ds {
					left[k[0]]++
				}
			}
			if deleted && len(left) != 0 {
				t.Errorf("keys left by prefix: %v", fmtPrefixCounts(left))
			}
			if !deleted && left[prefixDisplaced] != len(evs) {
				t.Errorf("%d event records, want %d", left[prefixDisplaced], len(evs))
			}
		})
	}
	if _, err := db.GetIdempotency("key", "k"); err != nil {
		t.Errorf("idempotency record after DeleteDatasets: %v", err)
	}
	if _, err := db.GetConfig("project", "p"); err != nil {
		t.Errorf("config record after DeleteDatasets: %v", err)
	}

	// New events of a deleted dataset count from zero.
	commitEvents(t, db.DB, 2, &Event{ID: testID(1000), Name: "a", Timestamp: day})
	if c, err := db.Count(2, "", 0, math.MaxInt64); err != nil || c != 1 {
		t.Errorf("Count after re-adding = %d, %v; want 1", c, err)
	}
}

// globalPrefixes are the key prefixes not followed by a dataset number.
var globalPrefixes = []byte{prefixIdemSlot, prefixIdemDay, prefixIdem, prefixWindows, prefixConfig}

func fmtPrefixCounts(m map[byte]int) string {
	out := ""
	for _, p := range slices.Sorted(maps.Keys(m)) {
		out += fmt.Sprintf(" %c:%d", p, m[p])
	}
	return out
}

// allKeys returns a copy of every key in the store.
func allKeys(t testing.TB, db *DB) [][]byte {
	t.Helper()
	it, err := db.Pebble().NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for it.First(); it.Valid(); it.Next() {
		out = append(out, append([]byte(nil), it.Key()...))
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSweepIdempotencyInChunks sweeps more records of the layout before
// the days (I) than one deletion batch holds: every expired one goes, every
// other stays; once none is left, look-ups stop reading that layout.
func TestSweepIdempotencyInChunks(t *testing.T) {
	db := openTestDB(t, "")
	now := time.Now().UnixMilli()
	const expired, kept = 2*deleteChunk + 5, 7
	recs := map[string]IdemRecord{}
	for i := range expired + kept {
		created := now - 30*hourMs
		if i >= expired {
			created = now - hourMs
		}
		recs[fmt.Sprintf("k%06d", i)] = IdemRecord{ID: testID(uint64(i)), CreatedAt: created}
	}
	db = putLegacyIdem(t, db, "key", recs)
	if err := db.SweepIdempotency(now - 24*hourMs); err != nil {
		t.Fatal(err)
	}
	if left := countKeys(t, db.DB, []byte{prefixIdem}, []byte{prefixIdem + 1}); left != kept {
		t.Errorf("%d records left, want %d", left, kept)
	}
	if !db.idemLegacy.Load() {
		t.Fatal("records of the old layout are left, but look-ups no longer read it")
	}
	if r, err := db.GetIdempotency("key", fmt.Sprintf("k%06d", expired)); err != nil || r != recs[fmt.Sprintf("k%06d", expired)] {
		t.Errorf("a kept record of the old layout: %+v, %v", r, err)
	}
	if err := db.SweepIdempotency(now); err != nil {
		t.Fatal(err)
	}
	if left := countKeys(t, db.DB, []byte{prefixIdem}, []byte{prefixIdem + 1}); left != 0 || db.idemLegacy.Load() {
		t.Errorf("after every old record expired: %d left, still read: %v", left, db.idemLegacy.Load())
	}
}

// putLegacyIdem writes records as builds before the day partitions did
// (I len keyID key) and reopens the store, which then reads that layout.
func putLegacyIdem(t testing.TB, db testDB, keyID string, recs map[string]IdemRecord) testDB {
	t.Helper()
	b := db.Pebble().NewBatch()
	for key, r := range recs {
		v := binary.BigEndian.AppendUint64(nil, r.Hash)
		v = append(v, r.ID[:]...)
		v = binary.BigEndian.AppendUint64(v, uint64(r.Timestamp))
		v = binary.BigEndian.AppendUint64(v, uint64(r.CreatedAt))
		if err := b.Set(legacyIdemKey(nil, keyID, key), v, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db = db.reopen(t)
	if !db.idemLegacy.Load() {
		t.Fatal("Open did not see the records of the old layout")
	}
	return db
}

// TestDeleteWhereKeepsKeysWrittenAgain rewrites an expired idempotency key
// after the sweep's scan saw it and before its batch is committed, as a
// writer using the key anew would: the fresh record stays.
func TestDeleteWhereKeepsKeysWrittenAgain(t *testing.T) {
	db := openTestDBWith(t, Options{IdempotencyFilterKeys: -1}) // keys by day, as when the filter is full
	today := time.Now().UnixMilli() / dayMs * dayMs             // one partition, which look-ups read
	put := func(key string, created int64) {
		t.Helper()
		b := db.NewBatch()
		defer b.Close()
		b.AddIdempotency("key", key, IdemRecord{ID: testID(uint64(created)), CreatedAt: today + created})
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
	}
	put("a", 100)
	put("b", 100)
	rewritten := false
	n, err := db.deleteWhere([]byte{prefixIdemDay}, []byte{prefixIdemDay + 1}, false, func(k, v []byte) bool {
		if !rewritten {
			rewritten = true
			put("a", 5000) // used anew between the scan and the deletion
		}
		r, err := decodeIdemRecord(v)
		return err == nil && r.CreatedAt < today+200
	})
	if err != nil || n != 1 {
		t.Fatalf("deleteWhere = %d, %v; want 1", n, err)
	}
	if r, err := db.GetIdempotency("key", "a"); err != nil || r.CreatedAt != today+5000 {
		t.Errorf("a = %+v, %v; want the record written again", r, err)
	}
	if _, err := db.GetIdempotency("key", "b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("b: %v, want ErrNotFound", err)
	}
}

// TestBatchKeyFamilies: a batch's records come first, then its Z, N and B
// (idempotency: one group of an API key's slot) keys, each family in the
// order its events were added (keyFamily). The
// displaced events' M and J keys wait for Commit (latemem.go).
func TestBatchKeyFamilies(t *testing.T) {
	db := openTestDB(t, "")
	b := db.NewBatch()
	defer b.Close()
	for i := range 3 {
		own := idAt(int64(1000+i), 0)
		// At its id's millisecond: an S record and an N key.
		b.AddEvent(1, &Event{ID: own, Name: "e", Timestamp: IDTime(own), CreatedAt: 5})
		// A client's time, not the id's millisecond: a Z key.
		b.AddEvent(1, &Event{ID: idAt(int64(1000+i), 1), Name: "e", Timestamp: int64(100 + i), CreatedAt: 5})
		b.AddIdempotency("key", fmt.Sprint("k", i), IdemRecord{ID: own})
	}
	b.appendFamilies()
	var got []byte
	for r := b.b.Reader(); ; {
		_, k, _, ok, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, k[0])
	}
	if want := "SSSZZZNNNB"; string(got) != want {
		t.Errorf("key prefixes in batch order %q, want %q", got, want)
	}
}
