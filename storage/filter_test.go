package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// familyKey is a key of the family prefix, unique by n.
func familyKey(prefix byte, n int) []byte {
	return fmt.Appendf([]byte{prefix}, "\x00\x00\x00\x01key-%06d", n)
}

// The filter holds the point families' keys and answers "may contain" for
// every key of a scanned family, held or not.
func TestPointFilter(t *testing.T) {
	f := newPointFilter()
	w := f.NewWriter(pebble.TableFilter)
	point := []byte{prefixRecord, prefixDisplaced, prefixIdemGroup, prefixConfig, prefixLog, prefixGoal}
	scanned := []byte{prefixName, prefixDisplacedName, prefixDisplacedMark, prefixVisitor, prefixVisitorV1, prefixCounter, prefixRollup}
	for _, p := range append(point, scanned...) {
		for n := range 1000 {
			w.AddKey(familyKey(p, n))
		}
	}
	filter := w.Finish(nil)
	for _, p := range point {
		falsePositives := 0
		for n := range 1000 {
			if !f.MayContain(pebble.TableFilter, filter, familyKey(p, n)) {
				t.Fatalf("%c: a key added is not in the filter", p)
			}
			if f.MayContain(pebble.TableFilter, filter, familyKey(p, 1000+n)) {
				falsePositives++
			}
		}
		// 10 bits a key: about 1%; 5% would mean the filter holds other keys.
		if falsePositives > 50 {
			t.Errorf("%c: %d false positives in 1,000 keys never added", p, falsePositives)
		}
	}
	for _, p := range scanned {
		if !f.MayContain(pebble.TableFilter, filter, familyKey(p, 5000)) {
			t.Errorf("%c: a scanned family's key is said absent", p)
		}
	}
	// The last level's filter holds the idempotency seeks' keys alone.
	last := newIdemSeekFilter()
	w = last.NewWriter(pebble.TableFilter)
	for _, p := range []byte{prefixIdemDay, prefixRecord} {
		for n := range 1000 {
			w.AddKey(familyKey(p, n))
		}
	}
	filter = w.Finish(nil)
	for n := range 1000 {
		if !last.MayContain(pebble.TableFilter, filter, familyKey(prefixIdemDay, n)) ||
			!last.MayContain(pebble.TableFilter, filter, familyKey(prefixRecord, 5000+n)) {
			t.Fatal("the last level's filter said absent a key it holds or leaves out")
		}
	}
	// Left out of the filter: a table of scanned keys alone has a filter of
	// the empty set, a few bytes.
	w = f.NewWriter(pebble.TableFilter)
	for n := range 10_000 {
		w.AddKey(familyKey(prefixName, n))
	}
	if n := len(w.Finish(nil)); n > 64 {
		t.Errorf("a filter of 10,000 name-index keys is %d bytes, want them left out", n)
	}
}

// Tables written with the whole-key bloom filter before the point filter
// keep answering look-ups of absent keys from their filters; tables written
// after it find every key they hold, of every family; the last level's get
// no filter.
func TestPointFilterTables(t *testing.T) {
	fs := vfs.NewMem()
	// Flushed tables stay in L0 until the test compacts them.
	options := func() *pebble.Options {
		return &pebble.Options{FS: fs, FormatMajorVersion: pebble.FormatNewest, Logger: pebbleLogger{},
			L0CompactionThreshold: 100, L0StopWritesThreshold: 200}
	}
	opts := options()
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(filterBitsPerKey)
	}
	db, err := pebble.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	// Even numbers are written, odd ones looked up: absent keys inside the
	// tables' ranges, which Pebble does not skip by their bounds alone.
	for n := 0; n < 2000; n += 2 {
		if err := db.Set(familyKey(prefixRecord, n), []byte{prefixRecord}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	opts = options()
	setFilters(opts)
	if db, err = pebble.Open("db", opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	absent := func(prefix byte) int64 {
		t.Helper()
		before := db.Metrics().Filter.Hits
		for n := 1; n < 2000; n += 2 {
			if _, _, err := db.Get(familyKey(prefix, n)); !errors.Is(err, pebble.ErrNotFound) {
				t.Fatalf("Get of an absent %c key: %v", prefix, err)
			}
		}
		return db.Metrics().Filter.Hits - before
	}
	if hits := absent(prefixRecord); hits < 900 {
		t.Errorf("the old table's filter answered %d of 1,000 absent keys, want it read", hits)
	}
	families := []byte{prefixRecord, prefixDisplaced, prefixIdemGroup, prefixConfig, prefixName, prefixVisitor, prefixRollup, prefixCounter}
	for _, p := range families[1:] {
		for n := 0; n < 2000; n += 2 {
			if err := db.Set(familyKey(p, n), []byte{p}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	found := func() {
		t.Helper()
		for _, p := range families {
			for n := 0; n < 2000; n += 2 {
				v, closer, err := db.Get(familyKey(p, n))
				if err != nil {
					t.Fatalf("Get of a %c key: %v", p, err)
				}
				if len(v) != 1 || v[0] != p {
					t.Fatalf("Get of a %c key = %q", p, v)
				}
				_ = closer.Close()
			}
		}
	}
	found()
	if hits := absent(prefixDisplaced); hits < 900 {
		t.Errorf("the new table's filter answered %d of 1,000 absent keys, want it read", hits)
	}
	absent(prefixName) // not in the filter: found absent by reading the table
	policies := func() map[string]int {
		t.Helper()
		levels, err := db.SSTables(pebble.WithProperties())
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for l, tables := range levels {
			for _, tb := range tables {
				n[fmt.Sprintf("L%d %s", l, tb.Properties.FilterPolicyName)]++
			}
		}
		return n
	}
	want := map[string]int{"L0 rocksdb.BuiltinBloomFilter": 1, "L0 eventd.point-bloom.v1": 1}
	if got := policies(); !maps.Equal(got, want) {
		t.Errorf("tables by level and filter = %v, want %v", got, want)
	}
	for n := 0; n < 2000; n += 2 {
		if err := db.Set(familyKey(prefixIdemDay, n), []byte{prefixIdemDay}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		t.Fatal(err)
	}
	for name := range policies() {
		if name != "L6 eventd.idem-seek-bloom.v1" {
			t.Errorf("after a full compaction a table is %q, want every one in L6 with the idempotency seeks' filter", name)
		}
	}
	found()
	// In the last level, an idempotency seek of an absent key is answered
	// by the filter, as IdemLookup.seek opens its iterators.
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixIdemDay}, UpperBound: []byte{prefixIdemDay + 1}, UseL6Filters: true})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	before := db.Metrics().Filter.Hits
	for n := 1; n < 2000; n += 2 {
		if k := familyKey(prefixIdemDay, n); it.SeekPrefixGE(k) && bytes.Equal(it.Key(), k) {
			t.Fatalf("found an absent key %q", k)
		}
	}
	if hits := db.Metrics().Filter.Hits - before; hits < 900 {
		t.Errorf("the last level's filter answered %d of 1,000 seeks of absent idempotency keys, want it read", hits)
	}
}

// An idempotency look-up of a key never written, in the day layout (a full
// filter in memory), is answered by the last level's filter once the
// records are compacted there: IdemLookup's seeks read it.
func TestIdemLookupLastLevelFilter(t *testing.T) {
	db := openTestDBWith(t, Options{IdempotencyFilterKeys: -1})
	now := time.Now().UnixMilli()
	b := db.NewBatch()
	for n := range 2000 {
		b.AddIdempotency("key_1", fmt.Sprintf("msg-%06d", 2*n), IdemRecord{Hash: uint64(n + 1), ID: testID(uint64(n + 1)), CreatedAt: now})
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := db.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		t.Fatal(err)
	}
	l, err := db.NewIdemLookup()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	before := db.db.Metrics().Filter.Hits
	for n := range 1000 {
		if _, err := l.Get("key_1", fmt.Sprintf("msg-%06d", 2*n+1)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("an absent key: %v", err)
		}
	}
	if hits := db.db.Metrics().Filter.Hits - before; hits < 900 {
		t.Errorf("the last level's filter answered %d of 1,000 look-ups of absent keys, want it read", hits)
	}
	if r, err := l.Get("key_1", "msg-000002"); err != nil || r.Hash != 2 {
		t.Errorf("a stored key: %+v %v", r, err)
	}
}
