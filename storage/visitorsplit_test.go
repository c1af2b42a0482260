package storage

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Tests of the split day (visitormem.go, visitorseal.go): a day that is
// over sealed by sealDue, the boundary at since, the bound splitting and
// not sealing early, the WAL sync before a seal's ingest, and a store an
// older build wrote with a day sealed early. Each drives the seals itself
// (stopSealer) at a fixed db.now: no sleep, no clock.

// stopSealer stops the store's background sealer, so that only the test
// seals and splits, at the db.now it sets (the sealer reads d.now, and a
// kick past the bound would split behind the test's back). Close gets a
// sealer that is already stopped.
func stopSealer(db *DB) {
	db.sealer.close()
	done := make(chan struct{})
	close(done)
	db.sealer = &worker{stop: make(chan struct{}), done: done}
}

// openSplitStore opens a store on fs with its sealer stopped; closeDB
// closes it (once: Cleanup calls it too), for a test that reopens fs.
func openSplitStore(t *testing.T, fs vfs.FS) (db *DB, closeDB func()) {
	t.Helper()
	db = openMem(t, fs)
	var once sync.Once
	closeDB = func() {
		once.Do(func() {
			if err := db.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(closeDB)
	stopSealer(db)
	return db, closeDB
}

// atNoon fixes db's clock at noon of its first memory day and returns the
// day, that time, and the since a split then records.
func atNoon(db *DB) (day uint32, T, since int64) {
	day = memFirst(db)
	T = int64(day)*dayMs + 12*3_600_000
	db.now = func() time.Time { return time.UnixMilli(T) }
	return day, T, T - visitorSplitSlack.Milliseconds()
}

// splitEvent is an event of visitor at ts, a bot's when bot.
func splitEvent(n uint64, ts int64, visitor string, bot bool) *Event {
	props := `{}`
	if bot {
		props = `{"$bot":true}`
	}
	return &Event{ID: testID(n), Timestamp: ts, CreatedAt: ts, Name: fmt.Sprint("e", n%3), VisitorID: visitor, HasVisitor: true, Properties: []byte(props)}
}

func eventText(e *Event) string { return entryText(e.Timestamp, e.ID, e.Name, IsBot(e.Properties)) }

// splitWant is what the visitor index must return: per visitor, its
// entries as entryText.
type splitWant map[string][]string

func (w splitWant) add(evs ...*Event) {
	for _, e := range evs {
		w[e.VisitorID] = append(w[e.VisitorID], eventText(e))
	}
}

func (w splitWant) clone() splitWant {
	c := splitWant{}
	for v, s := range w {
		c[v] = slices.Clone(s)
	}
	return c
}

// checkReads compares every reader of ds's visitor index with want, each
// entry exactly once: the iterator both ways, List (its page, read from
// the records, and its total) and VisitorsEvents. A visitor want maps to
// nil must have nothing.
func checkReads(t *testing.T, db *DB, label string, ds uint32, want splitWant) {
	t.Helper()
	visitors := slices.Sorted(maps.Keys(want))
	all, err := db.VisitorsEvents(ds, visitors, 0, math.MaxInt64, 0)
	if err != nil {
		t.Fatalf("%s: VisitorsEvents of ds %d: %v", label, ds, err)
	}
	for _, vis := range visitors {
		w := slices.Sorted(slices.Values(want[vis]))
		for _, back := range []bool{false, true} {
			if got := walkEntriesIn(t, db, ds, vis, 0, math.MaxInt64, back); !slices.Equal(got, w) {
				t.Fatalf("%s: ds %d %q walked backwards=%v:\n got %v\nwant %v", label, ds, vis, back, got, w)
			}
		}
		evs, total, err := db.List(ListQuery{Dataset: ds, VisitorID: vis, HasVisitor: true, To: math.MaxInt64, Limit: 1000})
		if err != nil {
			t.Fatalf("%s: List of ds %d %q: %v", label, ds, vis, err)
		}
		var listed []string
		for i := range evs {
			listed = append(listed, eventText(&evs[i]))
		}
		slices.Reverse(listed) // newest first
		if total != int64(len(w)) || !slices.Equal(listed, w) {
			t.Fatalf("%s: List of ds %d %q: total %d\n got %v\nwant %v", label, ds, vis, total, listed, w)
		}
		var got []string
		for _, e := range all[vis] {
			got = append(got, entryText(e.Timestamp, e.ID, e.Name, e.Bot))
		}
		if !slices.Equal(got, w) {
			t.Fatalf("%s: VisitorsEvents of ds %d %q:\n got %v\nwant %v", label, ds, vis, got, w)
		}
	}
}

// pebbleDay is what Pebble holds of ds's W keys of day, by visitor, stale
// keys of a memory day included: what the readers merge into a split
// day, and all they read of a day before first.
func pebbleDay(t *testing.T, db *DB, ds, day uint32) splitWant {
	t.Helper()
	lo := visitorDayBound(ds, day)
	it, err := db.Pebble().NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	out := splitWant{}
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		ts, id, ok := tsIDSuffix(k)
		if !ok || len(k) < minVisitorKeyLen {
			t.Fatalf("day %d: corrupt key %x", day, k)
		}
		name, bot := splitBot(it.Value())
		vis := string(k[len(lo)+2 : len(k)-24])
		out[vis] = append(out[vis], entryText(ts, id, string(name), bot))
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return out
}

// memDayEntries is what memory holds of day (removed entries left out), by
// visitor, and whether it holds the day at all.
func memDayEntries(db *DB, day uint32) (splitWant, bool) {
	m := db.vmem
	m.mu.Lock()
	defer m.mu.Unlock()
	md := m.days[day]
	if md == nil {
		return nil, false
	}
	out := splitWant{}
	for i := range md.n {
		e := md.entry(i)
		if e.flags&entryRemoved != 0 {
			continue
		}
		_, vis := md.visitor(e.vis)
		out[string(vis)] = append(out[string(vis)], entryText(e.ts, e.id, m.names[e.name], e.bot()))
	}
	return out, true
}

// sameEntries compares two splitWants as sets of entries per visitor.
func sameEntries(a, b splitWant) bool {
	norm := func(w splitWant) map[string]string {
		out := map[string]string{}
		for v, s := range w {
			if len(s) > 0 {
				out[v] = strings.Join(slices.Sorted(slices.Values(s)), "\n")
			}
		}
		return out
	}
	return maps.Equal(norm(a), norm(b))
}

// splitState is first, the split days and the two records as stored.
func splitState(t *testing.T, db *DB) (first uint32, since map[uint32]int64, days, splits []byte) {
	t.Helper()
	m := db.vmem
	m.mu.Lock()
	first, since = m.first, maps.Clone(m.since)
	m.mu.Unlock()
	days, err := db.get(visitorDaysKey)
	if err != nil {
		t.Fatal(err)
	}
	splits, err = db.get(visitorSplitsKey)
	if err != nil && err != ErrNotFound {
		t.Fatal(err)
	}
	return first, since, days, splits
}

// hookFS calls a hook before a visitor table (visitors-*.sst) is removed:
// Pebble removes it once it linked it into the store (its ingest is
// durable then: the manifest is synced), and sealVisitorDay removes it
// again after the switch (the file is gone then; exists is false). The
// first is where a crash after the ingest is cloned; the second is a
// moment inside a sealer pass, between two of its seals, when no lock of
// the memory is held. onCreate, if set, runs before a visitor table is
// created (a seal is writing its tables: a split day is frozen, and no
// lock of the memory is held) and may fail the creation.
type hookFS struct {
	vfs.FS
	mu       sync.Mutex
	hook     func(name string, exists bool)
	onCreate func() error
}

func (fs *hookFS) setOnCreate(h func() error) {
	fs.mu.Lock()
	fs.onCreate = h
	fs.mu.Unlock()
}

func (fs *hookFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	fs.mu.Lock()
	h := fs.onCreate
	fs.mu.Unlock()
	if base := fs.PathBase(name); h != nil && strings.HasPrefix(base, "visitors-") && strings.HasSuffix(base, ".sst") {
		if err := h(); err != nil {
			return nil, err
		}
	}
	return fs.FS.Create(name, category)
}

func (fs *hookFS) setHook(h func(name string, exists bool)) {
	fs.mu.Lock()
	fs.hook = h
	fs.mu.Unlock()
}

func (fs *hookFS) Remove(name string) error {
	fs.mu.Lock()
	h := fs.hook
	fs.mu.Unlock()
	if base := fs.PathBase(name); h != nil && strings.HasPrefix(base, "visitors-") && strings.HasSuffix(base, ".sst") {
		_, err := fs.FS.Stat(name)
		h(name, err == nil)
	}
	return fs.FS.Remove(name)
}

// Unwrap lets vfs.Root and friends see the file system below.
func (fs *hookFS) Unwrap() vfs.FS { return fs.FS }

// TestVisitorSealSyncsBeforeIngest: a seal syncs the WAL before it
// ingests its tables, so that no ingested W key names an event a crash can
// still lose. Dataset 2's events are committed without sync, dataset 1's
// with; the day is split and the store crashes right after the ingest,
// before the switch's synced batch. Without the sync dataset 2's records
// are lost while the ingested tables hold their keys; nothing ever clears
// them (the day's next tables hold no dataset 2 and a split day's keys are
// not cleared), so once the day is split again or sealed, List reads a
// key whose record is gone and fails.
func TestVisitorSealSyncsBeforeIngest(t *testing.T) {
	mem := vfs.NewCrashableMem()
	fs := &hookFS{FS: mem}
	db := openMem(t, fs)
	t.Cleanup(func() { _ = db.Close() })
	stopSealer(db)
	day := memFirst(db)
	at := func(h int64) int64 { return int64(day)*dayMs + h*3_600_000 }

	var events []*Event
	var ds2 []*Event
	for i := range uint64(8) {
		vis := []string{"a", "b"}[i%2]
		events = append(events, splitEvent(i+1, at(int64(1+i)), vis, i == 3))
		ds2 = append(ds2, splitEvent(i+101, at(int64(1+i))+1, vis, i == 5))
	}
	commitEvents(t, db, 1, events...)
	b := db.NewBatch()
	for _, e := range ds2 {
		b.AddEvent(2, e)
	}
	if err := b.Commit(false); err != nil { // in the WAL, not synced
		t.Fatal(err)
	}
	b.Close()

	var crashed *vfs.MemFS
	fs.setHook(func(_ string, exists bool) {
		if exists && crashed == nil {
			crashed = mem.CrashClone(vfs.CrashCloneCfg{}) // unsynced writes lost
		}
	})
	db.now = func() time.Time { return time.UnixMilli(at(12)) }
	if err := db.sealVisitorDay(day, false); err != nil {
		t.Fatal(err)
	}
	fs.setHook(nil)
	if crashed == nil {
		t.Fatal("no visitor table was ingested")
	}

	db2 := openMem(t, crashed)
	t.Cleanup(func() { _ = db2.Close() })
	stopSealer(db2)
	// The crash came after the ingest (its keys of both datasets are in)
	// and before the switch (the day is not split).
	for _, ds := range []uint32{1, 2} {
		if len(pebbleDay(t, db2, ds, day)) == 0 {
			t.Fatalf("no W key of dataset %d after the crash: the clone was taken before the ingest", ds)
		}
	}
	if _, since, _, _ := splitState(t, db2); len(since) != 0 {
		t.Fatalf("day split in the clone (%v): it was taken after the switch", since)
	}

	// What must be read is what survived: dataset 1's events, synced,
	// and dataset 2's if the seal synced them.
	want := map[uint32]splitWant{1: {"a": nil, "b": nil}, 2: {"a": nil, "b": nil}}
	for ds, evs := range map[uint32][]*Event{1: events, 2: ds2} {
		for _, e := range evs {
			if _, err := db2.GetEvent(ds, e.ID); err == nil {
				want[ds].add(e)
			} else if !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
		}
	}
	if n := len(want[1]["a"]) + len(want[1]["b"]); n != len(events) {
		t.Fatalf("%d of %d synced events survived the crash", n, len(events))
	}
	check := func(label string) {
		t.Helper()
		for ds, w := range want {
			checkReads(t, db2, label, ds, w)
		}
	}
	check("reopened after the crash")
	db2.now = func() time.Time { return time.UnixMilli(at(13)) }
	if err := db2.sealVisitorDay(day, false); err != nil {
		t.Fatal(err)
	}
	check("split again")
	if err := db2.sealVisitorDay(day, true); err != nil {
		t.Fatal(err)
	}
	if f := memFirst(db2); f != day+1 {
		t.Fatalf("first memory day %d after the day's seal, want %d", f, day+1)
	}
	check("sealed")
	// The day is Pebble's alone now: each of its keys has its record.
	for ds, w := range want {
		if got := pebbleDay(t, db2, ds, day); !sameEntries(got, w) {
			t.Fatalf("dataset %d's W keys of the sealed day:\n got %v\nwant %v", ds, got, w)
		}
	}
}

// TestVisitorSealDayOver: the common path, a day never split and sealed by
// sealDue once it is over and its grace has passed: it leaves memory
// whole, no day is recorded split (an older build can still open the
// store), and every reader returns the same before and after, and after a
// reopen.
func TestVisitorSealDayOver(t *testing.T) {
	db := openTestDB(t, "")
	stopSealer(db.DB)
	first := memFirst(db.DB)
	want := splitWant{"a": nil, "b": nil, "visitor-c": nil}
	n := uint64(0)
	write := func(day uint32, ms ...int64) {
		t.Helper()
		for _, off := range ms {
			n++
			vis := []string{"a", "b", "visitor-c"}[n%3]
			e := splitEvent(n, int64(day)*dayMs+off, vis, n%4 == 0)
			commitEvents(t, db.DB, 1, e)
			want.add(e)
		}
	}
	write(first-1, 5, 60_000)                                 // a day in Pebble
	write(first, 0, 1, 3_600_000, 43_200_000, 86_399_999, 77) // its first and last milliseconds too
	write(first+1, 10, 20)                                    // tomorrow: stays in memory
	today, ok := memDayEntries(db.DB, first)
	if !ok || len(today) == 0 {
		t.Fatal("today not in memory")
	}
	checkReads(t, db.DB, "before the seal", 1, want)

	end := int64(first+1) * dayMs
	for _, c := range []struct {
		name  string
		now   int64
		first uint32
	}{
		{"within the grace", end + VisitorSealGrace.Milliseconds() - 60_000, first},
		{"after the grace", end + VisitorSealGrace.Milliseconds() + 60_000, first + 1},
	} {
		if err := db.sealDue(time.UnixMilli(c.now)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if f := memFirst(db.DB); f != c.first {
			t.Fatalf("%s: first memory day %d, want %d", c.name, f, c.first)
		}
		checkReads(t, db.DB, c.name, 1, want)
	}

	sealed := func(label string) {
		t.Helper()
		f, since, days, splits := splitState(t, db.DB)
		if f != first+1 || len(since) != 0 || len(days) != 4 || len(splits) != 0 {
			t.Fatalf("%s: first %d since %v, days record %x splits record %x; want first %d, no split, a record of 4 bytes",
				label, f, since, days, splits, first+1)
		}
		if _, ok := memDayEntries(db.DB, first); ok {
			t.Fatalf("%s: day %d still in memory", label, first)
		}
		if got := memEntries(t, db.DB); got != 2 {
			t.Fatalf("%s: %d entries in memory, want tomorrow's 2 alone", label, got)
		}
		if got := pebbleDay(t, db.DB, 1, first); !sameEntries(got, today) {
			t.Fatalf("%s: the sealed day in Pebble:\n got %v\nwant %v", label, got, today)
		}
		checkReads(t, db.DB, label, 1, want)
	}
	sealed("sealed")
	db = db.reopen(t)
	stopSealer(db.DB)
	sealed("reopened")
}

// TestVisitorSplitBoundary: a day split at T holds in memory its entries
// from since (T less the slack) on. An entry at since-1 committed after
// the split is a W key, one at since is memory's; an entry of the slack
// committed before the split is in the split's tables and, at reopen, in
// memory too, and every reader takes it once. Erasure removes the entries
// of both parts, and the day's final seal keeps what is left.
func TestVisitorSplitBoundary(t *testing.T) {
	db := openTestDB(t, "")
	stopSealer(db.DB)
	day := memFirst(db.DB)
	T := int64(day)*dayMs + 12*3_600_000
	since := T - visitorSplitSlack.Milliseconds()
	want := splitWant{"v": nil, "keep": nil}
	n := uint64(0)
	write := func(vis string, ts int64) *Event {
		t.Helper()
		n++
		e := splitEvent(n, ts, vis, n == 2)
		commitEvents(t, db.DB, 1, e)
		want.add(e)
		return e
	}
	before := splitWant{}
	before.add(write("v", T-2*3_600_000), write("v", T-500), write("keep", T-3*3_600_000))

	db.now = func() time.Time { return time.UnixMilli(T) }
	if err := db.sealVisitorDay(day, false); err != nil {
		t.Fatal(err)
	}
	if _, s, days, _ := splitState(t, db.DB); s[day] != since || len(days)%4 == 0 {
		t.Fatalf("split at %d: since %v, days record %x; want %d and the mark", T, s, days, since)
	}
	after := splitWant{}
	late := write("v", since-1) // committed after the split, dated before since
	after.add(write("v", since), write("v", since+1))

	inPebble := before.clone()
	inPebble.add(late)
	if got := pebbleDay(t, db.DB, 1, day); !sameEntries(got, inPebble) {
		t.Fatalf("Pebble after the split:\n got %v\nwant %v", got, inPebble)
	}
	if got, _ := memDayEntries(db.DB, day); !sameEntries(got, after) {
		t.Fatalf("memory after the split:\n got %v\nwant %v", got, after)
	}
	checkReads(t, db.DB, "split", 1, want)

	// Open rebuilds the day from since: the slack's entry, already in the
	// tables, comes back to memory as well.
	db = db.reopen(t)
	stopSealer(db.DB)
	rebuilt := after.clone()
	rebuilt.add(splitEvent(2, T-500, "v", true))
	if got, _ := memDayEntries(db.DB, day); !sameEntries(got, rebuilt) {
		t.Fatalf("memory after the reopen:\n got %v\nwant %v", got, rebuilt)
	}
	checkReads(t, db.DB, "reopened", 1, want)

	if _, err := db.EraseVisitor(1, "v", nil); err != nil {
		t.Fatal(err)
	}
	want["v"] = nil
	checkReads(t, db.DB, "v erased", 1, want)
	if got := pebbleDay(t, db.DB, 1, day); len(got["v"]) != 0 {
		t.Fatalf("W keys of v left after the erasure: %v", got["v"])
	}
	if got, _ := memDayEntries(db.DB, day); len(got["v"]) != 0 {
		t.Fatalf("memory entries of v left after the erasure: %v", got["v"])
	}

	db.now = func() time.Time { return time.UnixMilli(int64(day+1)*dayMs + VisitorSealGrace.Milliseconds() + 60_000) }
	if err := db.sealDue(db.now()); err != nil {
		t.Fatal(err)
	}
	if f, s, _, _ := splitState(t, db.DB); f != day+1 || len(s) != 0 {
		t.Fatalf("after the day's seal: first %d since %v, want %d and none", f, s, day+1)
	}
	checkReads(t, db.DB, "sealed", 1, want)
	if got := pebbleDay(t, db.DB, 1, day); !sameEntries(got, splitWant{"keep": want["keep"]}) {
		t.Fatalf("the sealed day in Pebble: %v, want keep's entry alone", got)
	}
	db = db.reopen(t)
	checkReads(t, db.DB, "sealed and reopened", 1, want)
}

// TestVisitorSplitCommitsGoOn: a split freezes the day's part and writes
// its tables while commits go on into a new part, not held by the seal:
// the events committed during the write (a commit waiting for the seal
// would hang the test) are read with the frozen ones, and after the switch
// they are memory's, not W keys, but for the one dated before since,
// which becomes a W key and leaves memory. A reopen rebuilds the new part
// from since, the slack's tabled entry with it.
func TestVisitorSplitCommitsGoOn(t *testing.T) {
	fs := &hookFS{FS: vfs.NewMem()}
	db, closeDB := openSplitStore(t, fs)
	day, T, since := atNoon(db)
	want := splitWant{"v": nil, "w": nil, "keep": nil}
	n := uint64(0)
	write := func(vis string, ts int64) *Event {
		t.Helper()
		n++
		e := splitEvent(n, ts, vis, n == 2)
		commitEvents(t, db, 1, e)
		want.add(e)
		return e
	}
	tabled := splitWant{}
	tabled.add(write("v", T-2*3_600_000), write("v", T-500), write("keep", T-3*3_600_000))

	during, late := splitWant{}, splitWant{}
	fs.setOnCreate(func() error {
		fs.setOnCreate(nil)
		during.add(write("v", T+100), write("w", T+200))
		late.add(write("v", since-4000)) // dated before since, committed before the switch
		checkReads(t, db, "while the tables are written", 1, want)
		return nil
	})
	if err := db.sealVisitorDay(day, false); err != nil {
		t.Fatal(err)
	}
	if len(during) == 0 {
		t.Fatal("the split wrote no table")
	}
	if _, s, _, _ := splitState(t, db); s[day] != since {
		t.Fatalf("split at %d: since %v, want %d", T, s, since)
	}
	inPebble := tabled.clone()
	for v, e := range late {
		inPebble[v] = append(inPebble[v], e...)
	}
	if got := pebbleDay(t, db, 1, day); !sameEntries(got, inPebble) {
		t.Fatalf("Pebble after the split:\n got %v\nwant %v", got, inPebble)
	}
	if got, _ := memDayEntries(db, day); !sameEntries(got, during) {
		t.Fatalf("memory after the split:\n got %v\nwant %v", got, during)
	}
	if got := memEntries(t, db); got != 3 {
		t.Fatalf("%d entries counted in memory, want the new part's 3", got)
	}
	checkReads(t, db, "split", 1, want)

	closeDB()
	db2, _ := openSplitStore(t, fs)
	rebuilt := during.clone()
	rebuilt.add(splitEvent(2, T-500, "v", true))
	if got, _ := memDayEntries(db2, day); !sameEntries(got, rebuilt) {
		t.Fatalf("memory after the reopen:\n got %v\nwant %v", got, rebuilt)
	}
	checkReads(t, db2, "reopened", 1, want)
}

// TestVisitorSplitCrashWhileFrozen: a crash while a split writes its
// tables, after commits went into the day's new part, loses no entry: the
// day's recorded since has not moved (it is not split yet), so Open
// rebuilds the frozen part and the new one from the name index.
func TestVisitorSplitCrashWhileFrozen(t *testing.T) {
	mem := vfs.NewCrashableMem()
	fs := &hookFS{FS: mem}
	db, _ := openSplitStore(t, fs)
	day, T, _ := atNoon(db)
	want := splitWant{"v": nil, "w": nil}
	var evs []*Event
	for i := range uint64(6) {
		evs = append(evs, splitEvent(i+1, T-int64(6-i)*60_000+int64(i/4)*120_000, []string{"v", "w"}[i%2], i == 2))
	}
	commitEvents(t, db, 1, evs[:4]...)
	var crashed *vfs.MemFS
	fs.setOnCreate(func() error {
		fs.setOnCreate(nil)
		commitEvents(t, db, 1, evs[4:]...) // into the new part, synced
		crashed = mem.CrashClone(vfs.CrashCloneCfg{})
		return nil
	})
	if err := db.sealVisitorDay(day, false); err != nil {
		t.Fatal(err)
	}
	if crashed == nil {
		t.Fatal("the split wrote no table")
	}
	want.add(evs...)
	db2, _ := openSplitStore(t, crashed)
	if _, s, _, _ := splitState(t, db2); len(s) != 0 {
		t.Fatalf("split recorded in the clone (%v): it was taken after the switch", s)
	}
	if got, _ := memDayEntries(db2, day); !sameEntries(got, want) {
		t.Fatalf("memory after the crash:\n got %v\nwant %v", got, want)
	}
	checkReads(t, db2, "reopened after a crash while frozen", 1, want)
}

// TestVisitorSplitConcurrent: splits while two writers commit and a
// reader reads (run it with -race): every committed entry is read exactly
// once at the end, and again after a reopen. Some writes are dated before
// since, which after the first split go to Pebble in their commit. The
// splits are spread over the writes by counting commits, not by time.
func TestVisitorSplitConcurrent(t *testing.T) {
	fs := vfs.NewMem()
	db, closeDB := openSplitStore(t, fs)
	day, T, _ := atNoon(db)
	const writers, commits, splits = 2, 300, 5
	var mu sync.Mutex
	var all []*Event
	progress := make(chan struct{}, writers*commits)
	errs := make(chan error, writers+1)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range commits {
				n := uint64(w*commits+c) + 1
				ts := T + int64(c)
				if c%7 == 3 {
					ts = T - 5_000 // before since once the day is split
				}
				e := splitEvent(n, ts, fmt.Sprint("v", n%13), c%5 == 0)
				b := db.NewBatch()
				b.AddEvent(1, e)
				err := b.Commit(true)
				b.Close()
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				all = append(all, e)
				mu.Unlock()
				progress <- struct{}{}
			}
		}()
	}
	stop := make(chan struct{})
	var rg sync.WaitGroup
	rg.Add(1)
	go func() { // reads go on through the splits
		defer rg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := db.VisitorsEvents(1, []string{"v1", "v2", "v3"}, 0, math.MaxInt64, 0); err != nil {
				errs <- err
				return
			}
		}
	}()
	for i := range splits {
		for range writers * commits / (splits + 1) {
			<-progress
		}
		if err := db.sealVisitorDay(day, false); err != nil {
			t.Fatalf("split %d: %v", i, err)
		}
	}
	wg.Wait()
	close(stop)
	rg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := splitWant{}
	for i := range 13 {
		want[fmt.Sprint("v", i)] = nil
	}
	want.add(all...)
	checkReads(t, db, "after the splits", 1, want)
	closeDB()
	db2, _ := openSplitStore(t, fs)
	checkReads(t, db2, "reopened", 1, want)
}

// TestVisitorSplitThaw: a split that fails after the freeze puts the day's
// two parts together again: nothing is lost, the day is not split, and the
// next split succeeds.
func TestVisitorSplitThaw(t *testing.T) {
	fs := &hookFS{FS: vfs.NewMem()}
	db, _ := openSplitStore(t, fs)
	day, T, _ := atNoon(db)
	want := splitWant{"v": nil, "w": nil}
	var all []*Event
	for i := range uint64(6) {
		e := splitEvent(i+1, T-int64(6-i)*60_000, []string{"v", "w"}[i%2], i == 1)
		all = append(all, e)
	}
	commitEvents(t, db, 1, all[:4]...)
	fs.setOnCreate(func() error {
		fs.setOnCreate(nil)
		commitEvents(t, db, 1, all[4:]...)
		return errors.New("disk full")
	})
	if err := db.sealVisitorDay(day, false); err == nil {
		t.Fatal("the split did not fail")
	}
	want.add(all...)
	if got, _ := memDayEntries(db, day); !sameEntries(got, want) {
		t.Fatalf("memory after the failed split:\n got %v\nwant %v", got, want)
	}
	db.vmem.mu.Lock()
	frozen := len(db.vmem.frozen)
	db.vmem.mu.Unlock()
	if _, s, _, _ := splitState(t, db); len(s) != 0 || frozen != 0 || memEntries(t, db) != len(all) {
		t.Fatalf("after the failed split: since %v, %d frozen parts, %d entries in memory; want none, none, %d", s, frozen, memEntries(t, db), len(all))
	}
	checkReads(t, db, "failed split", 1, want)
	if err := db.sealVisitorDay(day, false); err != nil {
		t.Fatal(err)
	}
	checkReads(t, db, "split", 1, want)
}

// TestVisitorMemBoundSplits: past the bound sealDue splits the fullest
// day, today, and does not seal it early: the entries committed after,
// dated from since on, are held in memory again, and none is a W key in
// the commit. A sealer pass splits a day once: commits that fill it again
// during the pass (made here between its seals, when the pass removes its
// tables) wait for the next pass instead of splitting it again and again.
func TestVisitorMemBoundSplits(t *testing.T) {
	const bound = 50
	fs := &hookFS{FS: vfs.NewMem()}
	db, err := Open("db", Options{FS: fs, VisitorMemory: bound, DerivedInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	stopSealer(db)
	day, T, since := atNoon(db)
	want := splitWant{"a": nil, "b": nil, "c": nil}
	n := uint64(0)
	write := func(k int, ts func(i int) int64) {
		t.Helper()
		evs := make([]*Event, k)
		for i := range evs {
			n++
			evs[i] = splitEvent(n, ts(i), []string{"a", "b", "c"}[n%3], false)
		}
		commitEvents(t, db, 1, evs...)
		want.add(evs...)
	}
	write(bound+10, func(i int) int64 { return T - 3_600_000 + int64(i)*1000 }) // the hour before T

	seals, refills := 0, 0
	fs.setHook(func(_ string, exists bool) {
		if exists {
			return
		}
		seals++
		if refills < 3 { // past the bound again, from since on
			refills++
			write(bound+1, func(i int) int64 { return T + int64(refills*1000+i) })
		}
	})
	if err := db.sealDue(db.now()); err != nil {
		t.Fatal(err)
	}
	fs.setHook(nil)
	if seals != 1 {
		t.Fatalf("the pass split the day %d times, want once", seals)
	}
	if got := db.VisitorSplitDays(); got != 1 {
		t.Fatalf("VisitorSplitDays = %d after the split, want 1", got)
	}
	if got := memEntries(t, db); got != bound+1 {
		t.Fatalf("%d entries in memory after the pass, want the refill's %d", got, bound+1)
	}

	write(10, func(i int) int64 { return T + 10_000 + int64(i) }) // today, now
	if got := memEntries(t, db); got != bound+11 {
		t.Fatalf("%d entries in memory, want %d: today's new entries are not held", got, bound+11)
	}
	for vis, s := range pebbleDay(t, db, 1, day) {
		for _, e := range s {
			var ts int64
			_, _ = fmt.Sscanf(e, "%016x", &ts)
			if ts >= since {
				t.Fatalf("W key of %q at %d, since %d: today's entries are written to Pebble", vis, ts, since)
			}
		}
	}
	checkReads(t, db, "split for the bound", 1, want)

	// The next pass splits it again (it is past the bound), once.
	if err := db.sealDue(db.now()); err != nil {
		t.Fatal(err)
	}
	if got := memEntries(t, db); got != 0 {
		t.Fatalf("%d entries in memory after the second pass, want 0", got)
	}
	checkReads(t, db, "split twice", 1, want)
}

// TestVisitorSplitUpgradeFromSealedEarly: a store an older build wrote,
// with today sealed early (its days record lists it after first, and there
// is no splits record; every entry of the day is a W key), reads the day
// as split at its end: every entry is read, none is held in memory, new
// entries of the day are W keys, and the day's seal once over moves first
// on and leaves records an older build reads.
func TestVisitorSplitUpgradeFromSealedEarly(t *testing.T) {
	db := openTestDB(t, "")
	stopSealer(db.DB)
	day := memFirst(db.DB)
	at := func(h int64) int64 { return int64(day)*dayMs + h*3_600_000 }
	want := splitWant{"v": nil, "w": nil}
	n := uint64(0)
	write := func(vis string, h int64) {
		t.Helper()
		n++
		e := splitEvent(n, at(h), vis, false)
		commitEvents(t, db.DB, 1, e)
		want.add(e)
	}
	write("v", 1)
	write("w", 5)
	// Sealed early as the older build did: its tables, then its later
	// entries as W keys in the commits.
	db.now = func() time.Time { return time.UnixMilli(at(24) + 600_000) }
	if err := db.sealVisitorDay(day, false); err != nil {
		t.Fatal(err)
	}
	write("v", 6)
	if _, ok := memDayEntries(db.DB, day); !ok || memEntries(t, db.DB) != 0 {
		t.Fatal("the day is not split at its end")
	}
	old := binary4(day, day) // first, then the day sealed early
	if err := db.Pebble().Set(visitorDaysKey, old, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Pebble().Delete(visitorSplitsKey, pebble.Sync); err != nil {
		t.Fatal(err)
	}

	db = db.reopen(t)
	stopSealer(db.DB)
	db.now = func() time.Time { return time.UnixMilli(at(24) + 600_000) }
	if f, s, _, _ := splitState(t, db.DB); f != day || !maps.Equal(s, map[uint32]int64{day: int64(day+1) * dayMs}) {
		t.Fatalf("older record read as first %d since %v, want %d and the day split at its end", f, s, day)
	}
	if got := memEntries(t, db.DB); got != 0 {
		t.Fatalf("%d entries of the day sealed early in memory, want 0", got)
	}
	checkReads(t, db.DB, "reopened", 1, want)

	write("w", 7)
	if got := memEntries(t, db.DB); got != 0 {
		t.Fatalf("%d entries in memory after a commit to the day sealed early, want 0", got)
	}
	if got := pebbleDay(t, db.DB, 1, day); !sameEntries(got, want) {
		t.Fatalf("W keys of the day:\n got %v\nwant %v", got, want)
	}
	checkReads(t, db.DB, "written after the reopen", 1, want)

	db.now = func() time.Time { return time.UnixMilli(at(25) + VisitorSealGrace.Milliseconds()) }
	if err := db.sealDue(db.now()); err != nil {
		t.Fatal(err)
	}
	if f, s, days, _ := splitState(t, db.DB); f != day+1 || len(s) != 0 || !bytes.Equal(days, binary4(day+1)) {
		t.Fatalf("after the day's seal: first %d since %v days record %x, want %d, none, %x", f, s, days, day+1, binary4(day+1))
	}
	checkReads(t, db.DB, "sealed", 1, want)
	db = db.reopen(t)
	checkReads(t, db.DB, "sealed and reopened", 1, want)
}

// binary4 is the days as 4 big-endian bytes each: the days record an
// older build wrote.
func binary4(days ...uint32) []byte {
	var out []byte
	for _, d := range days {
		out = append(out, byte(d>>24), byte(d>>16), byte(d>>8), byte(d))
	}
	return out
}
