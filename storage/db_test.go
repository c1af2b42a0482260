package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

func TestIdempotencyRoundTrip(t *testing.T) {
	db := openTestDB(t, "")
	recs := []struct {
		keyID, key string
		rec        IdemRecord
	}{
		{"key1", "order-1", IdemRecord{Hash: 0xdeadbeefcafef00d, ID: testID(1), Timestamp: 1_768_000_000_000, CreatedAt: 1_768_000_000_005}},
		{"key1", "order-2", IdemRecord{Hash: 1, ID: testID(2), Timestamp: 2, CreatedAt: 3}},
		{"key2", "order-1", IdemRecord{Hash: math.MaxUint64, ID: maxID(), Timestamp: math.MaxInt64, CreatedAt: 4}},
		// (keyID, key) pairs with the same concatenation stay apart.
		{"k", "ab", IdemRecord{Hash: 10, ID: testID(10), CreatedAt: 5}},
		{"ka", "b", IdemRecord{Hash: 11, ID: testID(11), CreatedAt: 6}},
		{"k", "ünïcode-ключ", IdemRecord{Hash: 12, ID: testID(12), CreatedAt: 7}},
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

func TestSweepIdempotency(t *testing.T) {
	db := openTestDB(t, "")
	b := db.NewBatch()
	created := map[string]int64{"a": 100, "b": 199, "c": 200, "d": 201, "e": 5000}
	for k, c := range created {
		b.AddIdempotency("key", k, IdemRecord{Hash: uint64(c), ID: testID(uint64(c)), CreatedAt: c})
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

	steps := []struct {
		cutoff  int64
		removed int
		left    []string
	}{
		{cutoff: 100, removed: 0, left: []string{"a", "b", "c", "d", "e"}},
		{cutoff: 200, removed: 2, left: []string{"c", "d", "e"}}, // strictly before the cutoff
		{cutoff: 200, removed: 0, left: []string{"c", "d", "e"}},
		{cutoff: 202, removed: 2, left: []string{"e"}},
		{cutoff: math.MaxInt64, removed: 1, left: nil},
	}
	for _, s := range steps {
		n, err := db.SweepIdempotency(s.cutoff)
		if err != nil {
			t.Fatalf("SweepIdempotency(%d): %v", s.cutoff, err)
		}
		if n != s.removed {
			t.Errorf("SweepIdempotency(%d) removed %d, want %d", s.cutoff, n, s.removed)
		}
		for k, c := range created {
			r, err := db.GetIdempotency("key", k)
			if slices.Contains(s.left, k) {
				if err != nil || r.CreatedAt != c {
					t.Errorf("after sweep(%d): %q = %+v, %v; want kept", s.cutoff, k, r, err)
				}
			} else if !errors.Is(err, ErrNotFound) {
				t.Errorf("after sweep(%d): %q = %v, want ErrNotFound", s.cutoff, k, err)
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
	b.AddIdempotency("key", "k", IdemRecord{ID: testID(1), CreatedAt: 1})
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
var globalPrefixes = []byte{prefixIdem, prefixWindows, prefixConfig}

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

// TestSweepIdempotencyInChunks sweeps more records than one deletion batch
// holds: every expired one goes, every other stays, and the count is exact.
func TestSweepIdempotencyInChunks(t *testing.T) {
	db := openTestDB(t, "")
	const expired, kept = 2*deleteChunk + 5, 7
	b := db.NewBatch()
	for i := range expired + kept {
		created := int64(100)
		if i >= expired {
			created = 500
		}
		b.AddIdempotency("key", fmt.Sprintf("k%06d", i), IdemRecord{ID: testID(uint64(i)), CreatedAt: created})
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.Close()
	n, err := db.SweepIdempotency(200)
	if err != nil || n != expired {
		t.Fatalf("SweepIdempotency = %d, %v; want %d", n, err, expired)
	}
	left := 0
	it, err := db.Pebble().NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIdem}, UpperBound: []byte{prefixIdem + 1}})
	if err != nil {
		t.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
		left++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if left != kept {
		t.Errorf("%d records left, want %d", left, kept)
	}
}

// TestDeleteWhereKeepsKeysWrittenAgain rewrites an expired idempotency key
// after the sweep's scan saw it and before its batch is committed, as a
// writer using the key anew would: the fresh record stays.
func TestDeleteWhereKeepsKeysWrittenAgain(t *testing.T) {
	db := openTestDB(t, "")
	put := func(key string, created int64) {
		t.Helper()
		b := db.NewBatch()
		defer b.Close()
		b.AddIdempotency("key", key, IdemRecord{ID: testID(uint64(created)), CreatedAt: created})
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
	}
	put("a", 100)
	put("b", 100)
	rewritten := false
	n, err := db.deleteWhere([]byte{prefixIdem}, []byte{prefixIdem + 1}, false, func(k, v []byte) bool {
		if !rewritten {
			rewritten = true
			put("a", 5000) // used anew between the scan and the deletion
		}
		r, err := decodeIdemRecord(v)
		return err == nil && r.CreatedAt < 200
	})
	if err != nil || n != 1 {
		t.Fatalf("deleteWhere = %d, %v; want 1", n, err)
	}
	if r, err := db.GetIdempotency("key", "a"); err != nil || r.CreatedAt != 5000 {
		t.Errorf("a = %+v, %v; want the record written again", r, err)
	}
	if _, err := db.GetIdempotency("key", "b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("b: %v, want ErrNotFound", err)
	}
}

// TestBatchKeyFamilies: a batch's records come first, then its Z, N and I
// keys, each family in the order its events were added (keyFamily). The
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
	if want := "SSSZZZNNNIII"; string(got) != want {
		t.Errorf("key prefixes in batch order %q, want %q", got, want)
	}
}
