package storage

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// memModel is what a visitor index must return: every entry written, per
// visitor in key order.
type memModel struct {
	t       *testing.T
	r       *rand.Rand
	n       uint64
	entries map[string][]string // visitor -> "ts id name bot", sorted at check time
	stamps  map[string][]int64
}

var memVisitors = []string{"a", "b", "ab", "ba", "visitor-with-a-long-id"}

// write commits n random events in batches of 1-20, with timestamps on
// days first-3 to first+2 (days in Pebble and in memory alike).
func (m *memModel) write(db *DB, first uint32, n int) {
	m.t.Helper()
	for n > 0 {
		k := min(n, 1+m.r.IntN(20))
		n -= k
		evs := make([]*Event, k)
		for i := range evs {
			m.n++
			day := int64(first) + m.r.Int64N(6) - 3
			ts := day*dayMs + m.r.Int64N(dayMs)
			vis := memVisitors[m.r.IntN(len(memVisitors))]
			name := []string{"x", "y", "pageview"}[m.r.IntN(3)]
			props := `{}`
			if m.r.IntN(5) == 0 {
				props = `{"$bot":true}`
			}
			evs[i] = &Event{ID: testID(m.n), Timestamp: ts, CreatedAt: ts, Name: name, VisitorID: vis, HasVisitor: true, Properties: []byte(props)}
			m.entries[vis] = append(m.entries[vis], entryText(ts, evs[i].ID, name, IsBot(evs[i].Properties)))
			m.stamps[vis] = append(m.stamps[vis], ts)
		}
		commitEvents(m.t, db, 1, evs...)
	}
}

func entryText(ts int64, id ID, name string, bot bool) string {
	return fmt.Sprintf("%016x %x %s %v", ts, id, name, bot)
}

// walkEntries reads a visitor's entries of dataset 1 in [from, to],
// forwards or backwards, as entryText, oldest first.
func walkEntries(t *testing.T, db *DB, vis string, from, to int64, backwards bool) []string {
	t.Helper()
	return walkEntriesIn(t, db, 1, vis, from, to, backwards)
}

// walkEntriesIn is walkEntries in dataset ds.
func walkEntriesIn(t *testing.T, db *DB, ds uint32, vis string, from, to int64, backwards bool) []string {
	t.Helper()
	var out []string
	walkIter(t, db, ds, vis, from, to, backwards, func(ts int64, id ID, value []byte) {
		name, bot := splitBot(value)
		out = append(out, entryText(ts, id, string(name), bot))
	})
	if backwards {
		slices.Reverse(out)
	}
	return out
}

// check compares every visitor's entries, whole and in random ranges, in
// both directions, and VisitorsEvents, with the model.
func (m *memModel) check(db *DB, label string) {
	m.t.Helper()
	ranges := [][2]int64{{0, math.MaxInt64}}
	for range 20 {
		all := m.stamps[memVisitors[m.r.IntN(len(memVisitors))]]
		if len(all) == 0 {
			continue
		}
		a, b := all[m.r.IntN(len(all))], all[m.r.IntN(len(all))]
		ranges = append(ranges, [2]int64{min(a, b), max(a, b)})
	}
	for _, vis := range memVisitors {
		slices.Sort(m.entries[vis])
		for _, rg := range ranges {
			var want []string
			for _, e := range m.entries[vis] {
				var ts int64
				_, _ = fmt.Sscanf(e, "%016x", &ts)
				if ts >= rg[0] && ts <= rg[1] {
					want = append(want, e)
				}
			}
			for _, back := range []bool{false, true} {
				if got := walkEntries(m.t, db, vis, rg[0], rg[1], back); !slices.Equal(got, want) {
					m.t.Fatalf("%s: visitor %q [%d, %d] backwards=%v:\n got %d entries %v\nwant %d entries %v", label, vis, rg[0], rg[1], back, len(got), got, len(want), want)
				}
			}
		}
	}
	got, err := db.VisitorsEvents(1, memVisitors, 0, math.MaxInt64, 0)
	if err != nil {
		m.t.Fatal(err)
	}
	for _, vis := range memVisitors {
		var texts []string
		for _, e := range got[vis] {
			texts = append(texts, entryText(e.Timestamp, e.ID, e.Name, e.Bot))
		}
		if !slices.Equal(texts, m.entries[vis]) {
			m.t.Fatalf("%s: VisitorsEvents of %q:\n got %v\nwant %v", label, vis, texts, m.entries[vis])
		}
	}
}

func (m *memModel) erase(vis string) {
	delete(m.entries, vis)
	delete(m.stamps, vis)
}

// memFirst is the first day the store holds in memory.
func memFirst(db *DB) uint32 {
	db.vmem.mu.Lock()
	defer db.vmem.mu.Unlock()
	return db.vmem.first
}

// memEntries is how many entries memory holds (removed ones included),
// counted two ways.
func memEntries(t *testing.T, db *DB) int {
	t.Helper()
	m := db.vmem
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, md := range m.days {
		n += int(md.n)
	}
	if n != m.entries {
		t.Fatalf("memory counts %d entries and holds %d", m.entries, n)
	}
	return n
}

// TestVisitorMem writes events on days in Pebble and in memory, and checks
// the visitor index against a model through each way a day leaves memory
// (its end, early for the bound, with entries arriving while it is
// written), a crash after the tables were ingested, reopening, erasure
// and retention.
func TestVisitorMem(t *testing.T) {
	db := openTestDB(t, "")
	first := memFirst(db.DB)
	m := &memModel{t: t, r: rand.New(rand.NewPCG(3, 4)), entries: map[string][]string{}, stamps: map[string][]int64{}}
	m.write(db.DB, first, 300)
	m.check(db.DB, "memory and Pebble days")
	if memEntries(t, db.DB) == 0 {
		t.Fatal("no entry in memory")
	}

	// Today split: its later entries from a second before now on go to
	// memory, the earlier ones to Pebble; tomorrow split: all its later
	// entries go to memory.
	for _, day := range []uint32{first, first + 1} {
		if err := db.sealVisitorDay(day, false); err != nil {
			t.Fatal(err)
		}
	}
	m.check(db.DB, "today and tomorrow split")
	m.write(db.DB, first, 100)
	m.check(db.DB, "written after the splits")

	// Today over: first moves past it; tomorrow is still split.
	if err := db.sealVisitorDay(first, true); err != nil {
		t.Fatal(err)
	}
	if f := memFirst(db.DB); f != first+1 {
		t.Fatalf("first memory day %d after sealing day %d, want %d", f, first, first+1)
	}
	m.write(db.DB, first, 100)
	m.check(db.DB, "today sealed")

	db = db.reopen(t)
	m.check(db.DB, "reopened")

	// Entries committed while a split day's tables are written go to its
	// new part, and readers take both parts.
	mem := db.vmem
	fz, ok := db.takeVisitorDay(first+2, true)
	if !ok {
		t.Fatalf("day %d is not in memory", first+2)
	}
	m.write(db.DB, first+3, 60) // days first to first+5: some on first+2
	mem.mu.Lock()
	added := mem.days[first+2].n
	mem.mu.Unlock()
	if added == 0 || fz.md.n != fz.snap.n {
		t.Fatalf("while the day was written: %d entries in its new part, %d added to the frozen one", added, fz.md.n-fz.snap.n)
	}
	m.check(db.DB, "while the day is written")
	paths, datasets, err := db.writeVisitorTables(first+2, fz.snap, fz.names)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.switchVisitorDay(first+2, false, fz, paths, datasets); err != nil {
		t.Fatal(err)
	}
	m.check(db.DB, "after the switch")

	// A crash after the ingest and before the switch: the day (tomorrow,
	// split) is still in memory and its tables are in Pebble too.
	f := memFirst(db.DB)
	mem.mu.Lock()
	md := mem.days[f]
	mem.mu.Unlock()
	if md == nil {
		t.Fatalf("no entry on day %d", f)
	}
	mem.mu.Lock()
	snap := md.snapshot()
	mem.mu.Unlock()
	paths, _, err = db.writeVisitorTables(f, snap, mem.names)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Pebble().Ingest(t.Context(), paths); err != nil {
		t.Fatal(err)
	}
	m.check(db.DB, "ingested, not switched")
	db = db.reopen(t)
	m.check(db.DB, "reopened after an ingest without switch")
	if err := db.sealVisitorDay(f, false); err != nil {
		t.Fatal(err)
	}
	m.check(db.DB, "split again")

	if _, err := db.EraseVisitor(1, "ab", nil); err != nil {
		t.Fatal(err)
	}
	m.erase("ab")
	m.check(db.DB, "erased")

	cutoff := int64(memFirst(db.DB))*dayMs + dayMs/2
	if _, err := db.ExpireBefore(1, cutoff); err != nil {
		t.Fatal(err)
	}
	for vis, all := range m.entries {
		m.entries[vis] = slices.DeleteFunc(all, func(e string) bool {
			var ts int64
			_, _ = fmt.Sscanf(e, "%016x", &ts)
			return ts < cutoff
		})
	}
	m.check(db.DB, "expired")
	db = db.reopen(t)
	m.check(db.DB, "reopened at the end")
	memEntries(t, db.DB)

	if err := db.DeleteDatasets(1); err != nil {
		t.Fatal(err)
	}
	memEntries(t, db.DB)
	for _, vis := range memVisitors {
		m.erase(vis)
	}
	m.check(db.DB, "dataset deleted")
}

// TestVisitorMemBound: past Options.VisitorMemory entries the fullest day
// is split, what memory held of it written to Pebble, and nothing is lost
// (TestVisitorMemBoundSplits: what the split keeps in memory).
func TestVisitorMemBound(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{VisitorMemory: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	first := memFirst(db)
	m := &memModel{t: t, r: rand.New(rand.NewPCG(5, 6)), entries: map[string][]string{}, stamps: map[string][]int64{}}
	m.write(db, first, 400)
	if err := db.sealDue(time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := memEntries(t, db); n > 50 {
		t.Fatalf("%d entries in memory, bound 50", n)
	}
	m.check(db, "bounded")
}

// TestVisitorMemDaysRecord: the records of which days are in memory and
// which are split round-trip; an older build refuses them only while a day
// is split; a day sealed early by an older build reads as split at its
// end; a corrupt record is an error.
func TestVisitorMemDaysRecord(t *testing.T) {
	m := newVisitorMem(0, &inflight{})
	m.first = 20_500
	m.since[20_502] = 20_502*dayMs + 5
	m.since[20_501] = 20_501*dayMs + 7
	got := newVisitorMem(0, &inflight{})
	if err := got.decodeDays(m.encodeDays(), m.encodeSplits()); err != nil {
		t.Fatal(err)
	}
	if got.first != m.first || !maps.Equal(got.since, m.since) {
		t.Fatalf("decoded first %d since %v", got.first, got.since)
	}
	// A build before days were split refuses a value whose length is not a
	// multiple of 4: it must, while a day is split, and need not otherwise.
	if v := m.encodeDays(); len(v)%4 == 0 {
		t.Fatalf("days record %v with a day split: an older build would read it", v)
	}
	none := newVisitorMem(0, &inflight{})
	none.first = 20_500
	if v := none.encodeDays(); len(v) != 4 {
		t.Fatalf("days record %v with no day split, want first alone", v)
	}
	older := newVisitorMem(0, &inflight{})
	if err := older.decodeDays([]byte{0, 0, 0x50, 0x14, 0, 0, 0x50, 0x16, 0, 0, 0x50, 0x10}, nil); err != nil {
		t.Fatal(err)
	}
	if want := map[uint32]int64{20_502: 20_503 * dayMs}; older.first != 20_500 || !maps.Equal(older.since, want) {
		t.Fatalf("older record decoded as first %d since %v, want 20500 %v", older.first, older.since, want)
	}
	for _, bad := range [][]byte{nil, {1, 2, 3}, {0, 0, 0, 1, 2}} {
		if err := newVisitorMem(0, &inflight{}).decodeDays(bad, nil); err == nil {
			t.Fatalf("decodeDays(%v) = nil", bad)
		}
	}
	if err := newVisitorMem(0, &inflight{}).decodeDays([]byte{0, 0, 0, 1}, []byte{1, 2, 3}); err == nil {
		t.Fatal("decodeDays with a short split = nil")
	}
}

// TestVisitorMemSplit: a split day's memory part holds only its entries
// from the split on, also when Open rebuilds it; the earlier ones, and
// those committed later with earlier timestamps, are read from Pebble;
// erasure removes both; a day split after its end (as an older build's
// day sealed early reads) takes nothing more in memory.
func TestVisitorMemSplit(t *testing.T) {
	db := openTestDB(t, "")
	stopSealer(db.DB) // it reads db.now, which the test sets
	day := memFirst(db.DB)
	at := func(h int) int64 { return int64(day)*dayMs + int64(h)*3_600_000 }
	n := uint64(0)
	want := map[string][]string{}
	write := func(vis string, hours ...int) {
		t.Helper()
		for _, h := range hours {
			n++
			e := &Event{ID: testID(n), Timestamp: at(h) + int64(n), CreatedAt: at(h), Name: "x", VisitorID: vis, HasVisitor: true, Properties: []byte(`{}`)}
			commitEvents(t, db.DB, 1, e)
			want[vis] = append(want[vis], entryText(e.Timestamp, e.ID, "x", false))
		}
	}
	check := func(label string, inMemory int) {
		t.Helper()
		for vis, w := range want {
			slices.Sort(w)
			for _, back := range []bool{false, true} {
				if got := walkEntries(t, db.DB, vis, 0, math.MaxInt64, back); !slices.Equal(got, w) {
					t.Fatalf("%s: %q backwards=%v:\n got %v\nwant %v", label, vis, back, got, w)
				}
			}
		}
		if got := memEntries(t, db.DB); got != inMemory {
			t.Fatalf("%s: %d entries in memory, want %d", label, got, inMemory)
		}
	}
	write("v", 6, 8)
	write("w", 7, 11)
	check("before the split", 4)

	db.now = func() time.Time { return time.UnixMilli(at(12)) }
	if err := db.sealVisitorDay(day, false); err != nil {
		t.Fatal(err)
	}
	check("split at noon", 0)
	write("v", 9, 20) // 9:00 before the split: Pebble; 20:00 memory
	write("w", 10, 21)
	check("written after the split", 2)
	db = db.reopen(t)
	stopSealer(db.DB)
	check("reopened", 2)

	if _, err := db.EraseVisitor(1, "w", nil); err != nil {
		t.Fatal(err)
	}
	delete(want, "w")
	check("w erased", 2) // removed entries take memory until the day is sealed

	db.now = func() time.Time { return time.UnixMilli(at(26)) }
	if err := db.sealVisitorDay(day, false); err != nil { // split after its end
		t.Fatal(err)
	}
	write("v", 22)
	check("split after the end", 0)
	db = db.reopen(t)
	check("reopened after the late split", 0)
	if err := db.sealVisitorDay(day, true); err != nil {
		t.Fatal(err)
	}
	if f := memFirst(db.DB); f != day+1 {
		t.Fatalf("first memory day %d after the day's seal, want %d", f, day+1)
	}
	check("sealed", 0)
}

// TestVisitorTablesLeftByACrash: a table a crash left half written is
// deleted at the next read-write open.
func TestVisitorTablesLeftByACrash(t *testing.T) {
	db := openTestDB(t, "")
	db.close(t)
	left := filepath.Join(db.dir, "visitors-20500-1.sst")
	if err := os.WriteFile(left, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	db = openTestDB(t, db.dir)
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("%s still there after Open: %v", left, err)
	}
}

// TestMemDayHashCollision: visitors whose hashes collide share a chain
// and are still told apart, also after removals.
func TestMemDayHashCollision(t *testing.T) {
	md := newMemDay()
	a, b, c := memVisitor{1, "a"}, memVisitor{1, "b"}, memVisitor{2, "a"}
	for i, v := range []memVisitor{a, b, a, c, b, a} {
		md.add(7, v, memEntry{ts: int64(100 - i), id: testID(uint64(i))})
	}
	ts := func(v memVisitor) []int64 {
		var out []int64
		for _, e := range md.collect(7, v) {
			out = append(out, e.ts)
		}
		return out
	}
	for _, c := range []struct {
		v    memVisitor
		want []int64
	}{{a, []int64{95, 98, 100}}, {b, []int64{96, 99}}, {c, []int64{97}}, {memVisitor{1, "x"}, nil}} {
		if got := ts(c.v); !slices.Equal(got, c.want) {
			t.Fatalf("%v: %v, want %v", c.v, got, c.want)
		}
	}
	if len(md.vis) != 3 {
		t.Fatalf("%d visitors in the arena, want 3", len(md.vis))
	}
	md.each(7, a, func(_ uint32, e *memEntry) {
		if e.ts == 98 {
			e.flags |= entryRemoved
		}
	})
	if got := ts(a); !slices.Equal(got, []int64{95, 100}) {
		t.Fatalf("a after a removal: %v", got)
	}
}

// memEvent is an event of visitor on day at second s.
func memEvent(n uint64, day uint32, s int64, visitor string) *Event {
	ts := int64(day)*dayMs + s*1000
	return &Event{ID: testID(n), Timestamp: ts, CreatedAt: ts, Name: "x", VisitorID: visitor, HasVisitor: true, Properties: []byte(`{}`)}
}

// TestVisitorMemEraseAfterACrashedSeal: a crash after a day's tables were
// ingested leaves their keys in Pebble; a visitor erased after it must
// not come back when the day is sealed again (found in review).
func TestVisitorMemEraseAfterACrashedSeal(t *testing.T) {
	db := openTestDB(t, "")
	m := db.vmem
	f := memFirst(db.DB)
	for i := range 5 {
		commitEvents(t, db.DB, 1, memEvent(uint64(i+1), f, int64(i), "victim"))
	}
	commitEvents(t, db.DB, 1, memEvent(9, f, 9, "other"))
	m.mu.Lock()
	snap := m.days[f].snapshot()
	m.mu.Unlock()
	paths, _, err := db.writeVisitorTables(f, snap, m.names)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Pebble().Ingest(t.Context(), paths); err != nil {
		t.Fatal(err)
	}
	db = db.reopen(t)
	if _, err := db.EraseVisitor(1, "victim", nil); err != nil {
		t.Fatal(err)
	}
	if err := db.sealVisitorDay(f, false); err != nil {
		t.Fatal(err)
	}
	got, err := db.VisitorsEvents(1, []string{"victim", "other"}, 0, math.MaxInt64, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got["victim"]) != 0 || len(got["other"]) != 1 {
		t.Fatalf("after erasure and seal: victim %v, other %v", got["victim"], got["other"])
	}
}

// TestVisitorMemSameEventTwice: an event committed twice (two imports of
// one id racing) is one entry, and its day still seals (found in review).
func TestVisitorMemSameEventTwice(t *testing.T) {
	db := openTestDB(t, "")
	f := memFirst(db.DB)
	e := memEvent(1, f, 1, "v")
	commitEvents(t, db.DB, 1, e)
	commitEvents(t, db.DB, 1, e)
	if got := walkEntries(t, db.DB, "v", 0, math.MaxInt64, false); len(got) != 1 {
		t.Fatalf("%d entries, want 1: %v", len(got), got)
	}
	if err := db.sealVisitorDay(f, false); err != nil {
		t.Fatalf("seal: %v", err)
	}
	if got := walkEntries(t, db.DB, "v", 0, math.MaxInt64, false); len(got) != 1 {
		t.Fatalf("%d entries after the seal, want 1: %v", len(got), got)
	}
}

// TestVisitorMemExpiryDuringACommit: retention that runs between a
// commit's write and its memory add waits for the add, so no entry of
// the expired event is left to be sealed (found in review).
func TestVisitorMemExpiryDuringACommit(t *testing.T) {
	db := openTestDB(t, "")
	m := db.vmem
	f := memFirst(db.DB)
	e := memEvent(1, f, 1, "v")
	b := db.NewBatch()
	defer b.Close()
	b.AddEvent(1, e)
	pending := b.visitors
	b.visitors = nil
	m.commitMu.RLock() // Batch.Commit, replayed by hand: the Pebble write...
	for i := range b.late {
		b.addLateKeys(&b.late[i]) // its id is long before the late memory's floor
	}
	b.appendFamilies()
	if err := db.commit(b.b, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := db.ExpireBefore(1, e.Timestamp+1)
		done <- err
	}()
	m.add(pending) // ... then the memory add
	m.commitMu.RUnlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := db.sealVisitorDay(f, false); err != nil {
		t.Fatal(err)
	}
	if got := walkEntries(t, db.DB, "v", 0, math.MaxInt64, false); len(got) != 0 {
		t.Fatalf("the expired event's entry is left: %v", got)
	}
}

// TestMemDayArenaChunks fills a day's arena past several chunks and reads
// every visitor back.
func TestMemDayArenaChunks(t *testing.T) {
	m := newVisitorMem(0, &inflight{})
	md := newMemDay()
	const n = 20000 // 20,000 visitors of 206 bytes: 4 MiB, eight chunks and more
	vis := func(i int) memVisitor {
		return memVisitor{uint32(i % 3), fmt.Sprintf("%0200d", i)}
	}
	for i := range n {
		v := vis(i)
		md.add(m.hash(v), v, memEntry{ts: int64(i), id: testID(uint64(i))})
	}
	if len(md.arena) < 8 {
		t.Fatalf("%d arena chunks, want 8 or more", len(md.arena))
	}
	for i := range n {
		v := vis(i)
		if ds, b := md.visitor(uint32(i)); ds != v.ds || string(b) != v.visitor {
			t.Fatalf("visitor %d = %d %q", i, ds, b)
		}
		if got := md.collect(m.hash(v), v); len(got) != 1 || got[0].ts != int64(i) {
			t.Fatalf("entries of visitor %d = %v", i, got)
		}
	}
}

// TestVisitorMemArenaBound splits a day once its visitor arena reaches its
// chunk bound, and its visitors are still found, now in Pebble.
func TestVisitorMemArenaBound(t *testing.T) {
	db := openTestDB(t, "")
	stopSealer(db.DB) // the test's sealDue, after the commits, is the only split
	db.vmem.mu.Lock()
	db.vmem.sealChunks = 2 // two chunks, 12 KiB: a few visitors of 1 KiB ids
	db.vmem.mu.Unlock()
	now := time.Now().UnixMilli()
	vis := func(i int) string { return fmt.Sprintf("%01000d", i) }
	for i := range 10 {
		commitEvents(t, db.DB, 1, &Event{ID: testID(uint64(i + 1)), Name: "e", VisitorID: vis(i), HasVisitor: true, Timestamp: now, CreatedAt: now})
	}
	if err := db.sealDue(time.Now()); err != nil {
		t.Fatal(err)
	}
	if n, split := memEntries(t, db.DB), db.VisitorSplitDays(); n != 0 || split != 1 {
		t.Fatalf("%d entries in memory and %d days split, want the day split: 0 and 1", n, split)
	}
	db.vmem.mu.Lock()
	for day, md := range db.vmem.days {
		if len(md.arena) >= 2 {
			t.Errorf("day %d: %d arena chunks after the seal, bound 2", day, len(md.arena))
		}
	}
	db.vmem.mu.Unlock()
	for i := range 10 {
		if _, n, err := db.List(ListQuery{Dataset: 1, VisitorID: vis(i), HasVisitor: true, To: math.MaxInt64, Limit: 10}); err != nil || n != 1 {
			t.Fatalf("visitor %d after the seal: total %d, %v", i, n, err)
		}
	}
}

// TestWriteVisitorTablesOrder: a day's table is written in key order (the
// sstable writer refuses any other) and holds every entry, with visitor
// ids that tie on the sort's fixed-size key in every way: the same first
// 8 or 16 bytes, one a prefix of another, the same length, two datasets,
// and more visitors than writeVisitorTables loads at once.
func TestWriteVisitorTablesOrder(t *testing.T) {
	db := openTestDB(t, "")
	ids := []string{"a", "b", "v_1", "v_10", "v_100", "v_2", "user_0000000000000001", "user_0000000000000002",
		"user_00000000000000010", "user_000000000000000", "12345678", "123456789", "1234567890123456", "12345678901234567", "\x00", "\xff\xff"}
	for i := range 3 * lookAhead {
		ids = append(ids, fmt.Sprintf("v_%d", 10_000_000+i*7919%1000))
	}
	m := newVisitorMem(0, &inflight{})
	md := newMemDay()
	const day = 20_000
	want := map[uint32][]string{}
	n := uint64(0)
	for _, ds := range []uint32{2, 1} {
		for _, id := range ids {
			if slices.Contains(want[ds], id) {
				continue
			}
			want[ds] = append(want[ds], id)
			for range 2 {
				n++
				v := memVisitor{ds, id}
				md.add(m.hash(v), v, memEntry{ts: int64(day)*dayMs + int64(n), id: testID(n)})
			}
		}
	}
	paths, datasets, err := db.writeVisitorTables(day, md.snapshot(), []string{"e"})
	if err != nil {
		t.Fatalf("writeVisitorTables: %v", err)
	}
	if !slices.Equal(datasets, []uint32{1, 2}) {
		t.Fatalf("datasets %v, want [1 2]", datasets)
	}
	if err := db.Pebble().Ingest(t.Context(), paths); err != nil {
		t.Fatal(err)
	}
	for ds, visitors := range want {
		got, err := db.VisitorsEvents(ds, visitors, 0, math.MaxInt64, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range visitors {
			if len(got[v]) != 2 {
				t.Errorf("dataset %d, visitor %q: %d entries, want 2", ds, v, len(got[v]))
			}
		}
	}
}

// TestVisitorMemRebuild reopens a store whose memory holds entries of two
// datasets, several names, bots and displaced events: the rebuilt memory
// holds the same entries as the one before.
func TestVisitorMemRebuild(t *testing.T) {
	db := openTestDB(t, "")
	now := time.Now().UnixMilli()
	names := []string{"a", "bb", "ccc"}
	const n = 12_305
	for i := 0; i < n; i += 500 {
		b := db.NewBatch()
		for j := i; j < min(i+500, n); j++ {
			ts := now - int64(n-j)
			e := Event{ID: idAt(ts, byte(j)), Name: names[j%len(names)], VisitorID: fmt.Sprintf("v_%d", j%701), HasVisitor: true,
				Timestamp: ts, Properties: []byte(`{}`)}
			if j%5 == 0 {
				e.Properties = []byte(`{"$bot":true}`)
			}
			if j%7 == 0 {
				e.Timestamp -= 1500 // displaced: its name index entry is a J key
			}
			b.AddEvent(uint32(1+j%2), &e)
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	before := dumpVisitorMem(db.DB)
	if len(before) != n {
		t.Fatalf("memory holds %d entries, want %d", len(before), n)
	}
	db = db.reopen(t)
	if after := dumpVisitorMem(db.DB); !slices.Equal(after, before) {
		t.Fatalf("rebuilt memory differs: %d entries, want %d", len(after), len(before))
	}
}

// dumpVisitorMem is every entry in memory as text, sorted.
func dumpVisitorMem(db *DB) []string {
	m := db.vmem
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for day, md := range m.days {
		for i := uint32(0); i < md.n; i++ {
			e := md.entry(i)
			ds, vis := md.visitor(e.vis)
			out = append(out, fmt.Sprintf("%d %d %s %d %x %s %d", day, ds, vis, e.ts, e.id, m.names[e.name], e.flags))
		}
	}
	slices.Sort(out)
	return out
}

// TestHashVisitor: the rebuild's hash of a visitor's bytes is the hash
// look-ups take of its string, or rebuilt entries could not be found.
func TestHashVisitor(t *testing.T) {
	m := newVisitorMem(0, &inflight{})
	for _, v := range []memVisitor{{1, "v_1"}, {2, "v_1"}, {7, ""}, {1, strings.Repeat("x", 300)}} {
		if got, want := hashVisitor(m.seed, v.ds, []byte(v.visitor)), m.hash(v); got != want {
			t.Errorf("hashVisitor(%d, %q) = %x, hash = %x", v.ds, v.visitor, got, want)
		}
	}
}
