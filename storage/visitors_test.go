package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// visitorEntries writes visitor index entries of dataset 1 straight into
// Pebble: for each visitor, events at the given timestamps.
func visitorEntries(t *testing.T, db *DB, entries map[string][]int64) {
	t.Helper()
	b := db.Pebble().NewBatch()
	defer b.Close()
	n := uint64(0)
	for vis, tss := range entries {
		for _, ts := range tss {
			n++
			if err := b.Set(visitorKey(nil, 1, vis, ts, testID(n)), []byte("e"), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// walk reads every timestamp a visitorIter yields, forwards or backwards.
func walk(t *testing.T, db *DB, vis string, from, to int64, backwards bool) []int64 {
	t.Helper()
	var out []int64
	walkIter(t, db, 1, vis, from, to, backwards, func(ts int64, _ ID, _ []byte) { out = append(out, ts) })
	return out
}

// walkIter calls fn with every entry of ds's visitor a visitorIter
// yields, forwards or backwards, and checks that it is valid exactly while
// it yields.
func walkIter(t *testing.T, db *DB, ds uint32, vis string, from, to int64, backwards bool, fn func(ts int64, id ID, value []byte)) {
	t.Helper()
	it, err := newVisitorIter(db.Pebble(), db.vmem, ds, vis, from, to)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	step, ok := it.Next, it.First()
	if backwards {
		step, ok = it.Prev, it.Last()
	}
	for ; ok; ok = step() {
		if !it.Valid() {
			t.Fatal("a positioning returned true on an invalid iterator")
		}
		ts, id, _ := tsIDSuffix(it.Key())
		fn(ts, id, it.Value())
	}
	if it.Valid() {
		t.Fatal("iterator still valid after a positioning returned false")
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
}

// TestVisitorIter checks that a visitor's entries come back in timestamp
// order across day partitions, exactly those in [from, to], in both
// directions: with days where only other visitors (one whose id extends
// this one's, and ids sorting before and after it) have entries, empty
// days, and entries on the first and last millisecond of a day.
func TestVisitorIter(t *testing.T) {
	const day = dayMs
	d0 := int64(20_000) * day
	entries := map[string][]int64{
		"v": {d0, d0 + 5, d0 + day - 1, // one day, both edges
			d0 + 2*day + 7, // day 1 has others only
			d0 + 5*day, d0 + 5*day + 1, d0 + 6*day - 1,
			d0 + 30*day + 3},
		"va":  {d0 + 1, d0 + day + 1, d0 + 3*day, d0 + 31*day},
		"a":   {d0 + 2, d0 + day, d0 + 4*day, d0 + 32*day},
		"w":   {d0 + 3, d0 + day + 2, d0 + 5*day + 2, d0 + 40*day},
		"":    {d0 + 4, d0 + 7*day},
		"old": {0, 1},
	}
	db := openTestDB(t, "")
	visitorEntries(t, db.DB, entries)

	cases := []struct {
		name     string
		from, to int64
	}{
		{"everything", 0, math.MaxInt64},
		{"one day", d0, d0 + day - 1},
		{"inside one day", d0 + 1, d0 + 5},
		{"edges of days", d0 + day - 1, d0 + 5*day},
		{"only days of others", d0 + day, d0 + 2*day - 1},
		{"nothing after", d0 + 50*day, math.MaxInt64},
		{"nothing before", 0, d0 - 1},
		{"from after to", d0 + 10, d0},
		{"one millisecond", d0 + 5, d0 + 5},
		{"from zero", 0, 1},
		{"negative from", -dayMs, d0},
		{"negative to", 0, -1},
		{"both negative", -2 * dayMs, -dayMs},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		a, b := d0-day+r.Int64N(45*day), d0-day+r.Int64N(45*day)
		cases = append(cases, struct {
			name     string
			from, to int64
		}{fmt.Sprintf("random %d", i), min(a, b), max(a, b)})
	}
	for vis, all := range entries {
		slices.Sort(all)
		for _, c := range cases {
			var want []int64
			for _, ts := range all {
				if ts >= c.from && ts <= c.to {
					want = append(want, ts)
				}
			}
			if got := walk(t, db.DB, vis, c.from, c.to, false); !slices.Equal(got, want) {
				t.Errorf("%q %s forwards: %v, want %v", vis, c.name, got, want)
			}
			slices.Reverse(want)
			if got := walk(t, db.DB, vis, c.from, c.to, true); !slices.Equal(got, want) {
				t.Errorf("%q %s backwards: %v, want %v", vis, c.name, got, want)
			}
		}
	}
}

// legacyVisitorIndex rewrites every W entry as the V entry an older release wrote.
func legacyVisitorIndex(t testing.TB, db *DB) {
	t.Helper()
	it, err := db.Pebble().NewIter(&pebble.IterOptions{LowerBound: []byte{prefixVisitor}, UpperBound: []byte{prefixVisitor + 1}})
	if err != nil {
		t.Fatal(err)
	}
	b := db.Pebble().NewBatch()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		old := append([]byte{prefixVisitorV1}, k[1:datasetPrefLen]...)
		old = append(old, k[datasetPrefLen+4:]...) // drop the day
		_ = b.Set(old, it.Value(), nil)
		_ = b.Delete(k, nil)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateVisitorIndex turns a store's visitor index back into the
// layout before the day partitions, reopens it, and checks that Open moved
// every entry and that visitor lists answer as before.
func TestMigrateVisitorIndex(t *testing.T) {
	db := openTestDB(t, "")
	var evs []*Event
	for i := range 30 {
		evs = append(evs, &Event{ID: testID(uint64(i + 1)), Name: []string{"a", "b"}[i%2],
			VisitorID: []string{"v1", "v2", "v3"}[i%3], HasVisitor: true,
			Timestamp: int64(20_000)*dayMs + int64(i)*dayMs/3, CreatedAt: 1})
	}
	commitEvents(t, db.DB, 1, evs...)
	list := func(db *DB) map[string][]Event {
		out := map[string][]Event{}
		for _, v := range []string{"v1", "v2", "v3"} {
			got, total, err := db.List(ListQuery{Dataset: 1, VisitorID: v, HasVisitor: true, To: math.MaxInt64, Limit: 100})
			if err != nil || total != 10 {
				t.Fatalf("List(%s): total %d, %v", v, total, err)
			}
			out[v] = got
		}
		return out
	}
	before := list(db.DB)

	legacyVisitorIndex(t, db.DB)
	lo, hi := []byte{prefixVisitor}, []byte{prefixVisitor + 1}
	if n := countKeys(t, db.DB, lo, hi); n != 0 {
		t.Fatalf("%d W keys left after the rewrite", n)
	}
	// A migration that crashed before its range deletion left some W keys
	// beside every V key: the next one writes them again.
	for _, e := range evs[:7] {
		if err := db.Pebble().Set(visitorKey(nil, 1, e.VisitorID, e.Timestamp, e.ID), []byte(e.Name), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if n := countKeys(t, db.DB, []byte{prefixVisitorV1}, []byte{prefixVisitorV1 + 1}); n != len(evs) {
		t.Fatalf("%d V keys, want %d", n, len(evs))
	}
	if n := countKeys(t, db.DB, lo, hi); n != 7 {
		t.Fatalf("%d W keys, want the 7 of the crashed migration", n)
	}

	// A read-only open (serve's when the disk is full) cannot migrate: it
	// reads the old layout.
	db.close(t)
	ro, err := Open(db.dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	readOnly := list(ro)
	together, err := ro.VisitorsEvents(1, []string{"v1", "v2", "v3", "v1"}, 0, math.MaxInt64, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"v1", "v2", "v3"} {
		if want, _ := ro.VisitorEvents(1, v, 0, math.MaxInt64, 0); len(want) != 10 || !slices.Equal(together[v], want) {
			t.Errorf("read-only VisitorsEvents(%s): %v, want the 10 of VisitorEvents %v", v, together[v], want)
		}
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	db = openTestDB(t, db.dir)
	if n := countKeys(t, db.DB, []byte{prefixVisitorV1}, []byte{prefixVisitorV1 + 1}); n != 0 {
		t.Errorf("%d V keys left after Open", n)
	}
	if n := countKeys(t, db.DB, lo, hi); n != len(evs) {
		t.Errorf("%d W keys after Open, want %d", n, len(evs))
	}
	for name, after := range map[string]map[string][]Event{"read-only": readOnly, "migrated": list(db.DB)} {
		for v, want := range before {
			got := after[v]
			if len(got) != len(want) {
				t.Fatalf("%s, %s: %d events, %d before", name, v, len(got), len(want))
			}
			for i := range want {
				if !sameEvent(&got[i], &want[i]) {
					t.Errorf("%s, %s event %d: %+v, want %+v", name, v, i, got[i], want[i])
				}
			}
		}
	}
}

// TestVisitorIterCorruptKey: a key under the visitor index too short to be
// an entry ends the iteration with an error in either direction instead of
// being read as a day.
func TestVisitorIterCorruptKey(t *testing.T) {
	db := openTestDB(t, "")
	d0 := int64(20_000) * dayMs
	visitorEntries(t, db.DB, map[string][]int64{"v": {d0, d0 + dayMs, d0 + 3*dayMs}})
	// W ds day alone sorts before the day's entries (backwards reads meet
	// it), W ds day 0xff after them (forwards reads do).
	day := binary.BigEndian.AppendUint32(appendDataset(nil, prefixVisitor, 1), 20_002)
	for _, short := range [][]byte{day, append(day[:len(day):len(day)], 0xff)} {
		if err := db.Pebble().Set(short, nil, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	for _, backwards := range []bool{false, true} {
		it, err := newVisitorIter(db.Pebble(), db.vmem, 1, "v", 0, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		step, ok := it.Next, it.First()
		if backwards {
			step, ok = it.Prev, it.Last()
		}
		for n := 0; ok; ok = step() {
			if n++; n > 10 {
				t.Fatal("more entries than were written")
			}
		}
		if !errors.Is(it.Error(), errCorrupt) {
			t.Errorf("backwards %v: Error() = %v, want errCorrupt", backwards, it.Error())
		}
		_ = it.Close()
	}
	if _, err := db.VisitorsEvents(1, []string{"v"}, 0, math.MaxInt64, 0); !errors.Is(err, errCorrupt) {
		t.Errorf("VisitorsEvents: %v, want errCorrupt", err)
	}
}

// TestVisitorsEvents checks that reading many visitors at once returns, for
// each, what VisitorEvents returns for it alone: with one visitor asked for
// (each day is sought) and with many (each day is read through), over
// ranges that start and end inside days, and that the limit counts every
// visitor's events together.
func TestVisitorsEvents(t *testing.T) {
	db := openTestDB(t, "")
	d0 := int64(20_000) * dayMs
	r := rand.New(rand.NewPCG(3, 4))
	var evs []*Event
	for i := range 600 {
		evs = append(evs, &Event{ID: testID(uint64(i + 1)), Name: []string{"a", "b", "c"}[r.IntN(3)],
			VisitorID: fmt.Sprintf("v%d", r.IntN(40)), HasVisitor: r.IntN(10) > 0,
			Timestamp: d0 + r.Int64N(6*dayMs), CreatedAt: 1})
	}
	commitEvents(t, db.DB, 1, evs...)
	all := make([]string, 45) // five with no events
	for i := range all {
		all[i] = fmt.Sprintf("v%d", i)
	}
	for _, c := range []struct {
		name     string
		visitors []string
		from, to int64
	}{
		{"one visitor, every day sought", []string{"v7"}, 0, math.MaxInt64},
		{"one visitor, inside days", []string{"v7"}, d0 + dayMs/2, d0 + 4*dayMs + dayMs/3},
		{"all visitors, every day read through", all, 0, math.MaxInt64},
		{"all visitors, inside days", all, d0 + dayMs/2, d0 + 4*dayMs + dayMs/3},
		{"some visitors, twice", []string{"v1", "v2", "v1", "v39"}, d0, d0 + 3*dayMs},
		{"empty range", all, d0 + 10, d0},
	} {
		got, err := db.VisitorsEvents(1, c.visitors, c.from, c.to, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		total := 0
		for _, v := range c.visitors {
			want, err := db.VisitorEvents(1, v, c.from, c.to, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got[v], want) {
				t.Errorf("%s: %s: %d events %v, want %d %v", c.name, v, len(got[v]), got[v], len(want), want)
			}
			if len(want) == 0 && got[v] != nil {
				t.Errorf("%s: %s has no events but an entry", c.name, v)
			}
		}
		for _, evs := range got {
			total += len(evs)
		}
		if total > 0 {
			if _, err := db.VisitorsEvents(1, c.visitors, c.from, c.to, total-1); !errors.Is(err, ErrScanLimit) {
				t.Errorf("%s: limit %d of %d: %v, want ErrScanLimit", c.name, total-1, total, err)
			}
			if _, err := db.VisitorsEvents(1, c.visitors, c.from, c.to, total); err != nil {
				t.Errorf("%s: limit %d of %d: %v", c.name, total, total, err)
			}
		}
	}
}
