package storage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"

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
	if err := db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		t.Fatal(err)
	}
	for name := range policies() {
		if name != "L6 " {
			t.Errorf("after a full compaction a table is %q, want every one in L6 without a filter", name)
		}
	}
	found()
}
