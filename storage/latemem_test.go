package storage

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// stopBackground stops the store's sealer and late writer, so that only
// the test writes memory out, at the db.now it sets (both read d.now).
func stopBackground(db *DB) {
	stopSealer(db)
	db.lateW.close()
	done := make(chan struct{})
	close(done)
	db.lateW = &worker{stop: make(chan struct{}), done: done}
}

// TestLateMemAdvance: the writer's cut trails the id clock by lateGrace,
// never goes back, and past the bound takes the oldest cells early down
// to 7/8 of it; floor stays at or before every entry left in memory.
func TestLateMemAdvance(t *testing.T) {
	const s = lateCellMs
	for _, tc := range []struct {
		name      string
		max       int
		cut       int64
		cells     map[int64]int // cell -> entries
		vlen      int           // each entry's visitor id, in bytes
		ceil      int64
		all       bool
		wantCells []int64
		wantCut   int64
	}{
		{"nothing due", 100, 0, map[int64]int{40: 1, 41: 1}, 0, 60 * s, false, nil, 30 * s},
		{"due cells", 100, 0, map[int64]int{10: 1, 29: 2, 30: 1}, 0, 60 * s, false, []int64{10, 29}, 30 * s},
		{"cut never goes back", 100, 50 * s, map[int64]int{40: 1, 50: 1}, 0, 60 * s, false, []int64{40}, 50 * s},
		{"over the bound", 10, 0, map[int64]int{40: 4, 41: 4, 42: 4}, 0, 60 * s, false, []int64{40}, 41 * s},
		{"over the bound, several cells", 16, 0, map[int64]int{40: 4, 41: 4, 42: 4, 43: 4, 44: 4}, 0, 60 * s, false, []int64{40, 41}, 42 * s},
		// 12 entries of 540 bytes: 6,480 of 6,400, down to 5,600.
		{"over the bound in bytes", 100, 0, map[int64]int{40: 4, 41: 4, 42: 4}, 500, 60 * s, false, []int64{40}, 41 * s},
		{"under it in bytes", 100, 0, map[int64]int{40: 4, 41: 4, 42: 4}, 490, 60 * s, false, nil, 30 * s},
		{"all", 100, 0, map[int64]int{40: 1, 45: 1}, 0, 60 * s, true, []int64{40, 45}, 60 * s},
		{"all, a cell ahead of the clock", 100, 0, map[int64]int{40: 1, 90: 1}, 0, 60 * s, true, []int64{40, 90}, 60 * s},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLateMem(tc.max)
			l.cut = tc.cut
			var id uint16
			for cell, n := range tc.cells {
				for range n {
					id++
					l.insert(&pendingLate{ds: 1, ts: cell * s, id: idAt(cell*s+int64(id), byte(id)), name: "e",
						visitor: strings.Repeat("v", tc.vlen), hasVisitor: tc.vlen > 0})
				}
			}
			got := l.advance(tc.ceil, tc.all)
			if !slices.Equal(got, tc.wantCells) || l.cut != tc.wantCut {
				t.Fatalf("advance: cells %v, cut %d; want %v, %d", got, l.cut, tc.wantCells, tc.wantCut)
			}
			for k, c := range l.cells {
				if !slices.Contains(got, k) && c.minID < l.floor {
					t.Errorf("cell %d left with ids from %d, floor %d past them", k, c.minID, l.floor)
				}
			}
			if len(got) == 0 && l.floor != tc.ceil-lateFloorSlack && len(l.cells) == 0 {
				t.Errorf("floor %d, want %d", l.floor, tc.ceil-lateFloorSlack)
			}
		})
	}
}

// lateEvents are displaced events of dataset 1 at times from base on, a
// second apart, visitors v0-v2 and names a and b; with ids from n on.
func lateEvents(base int64, n uint64, k int) []*Event {
	var evs []*Event
	for i := range k {
		n++
		evs = append(evs, &Event{ID: testID(n), Name: []string{"a", "b"}[i%2], Timestamp: base + int64(i)*lateCellMs,
			VisitorID: fmt.Sprint("v", i%3), HasVisitor: true, CreatedAt: base})
	}
	return evs
}

// checkLate checks what lists, counts, funnels' occurrences and visitor
// lists of dataset 1 give against evs, from evs' first time on (retention
// keeps the day counts of what it deleted).
func checkLate(t *testing.T, db *DB, evs []*Event) {
	t.Helper()
	from := evs[0].Timestamp
	byName := map[string]int{}
	byVisitor := map[string]int{}
	for _, e := range evs {
		byName[e.Name]++
		byVisitor[e.VisitorID]++
	}
	page, total, err := db.List(ListQuery{Dataset: 1, From: from, To: math.MaxInt64, Limit: 1000})
	if err != nil || len(page) != len(evs) || total != int64(len(evs)) {
		t.Fatalf("List: %d events, total %d, %v; want %d", len(page), total, err, len(evs))
	}
	for i := 1; i < len(page); i++ {
		if page[i].Timestamp > page[i-1].Timestamp {
			t.Fatalf("List out of order at %d", i)
		}
	}
	for name, want := range byName {
		// A range ending mid-minute: Count reads the edge's keys.
		c, err := db.Count(1, name, from, evs[len(evs)-1].Timestamp)
		if err != nil || c != int64(want) {
			t.Errorf("Count(%s) = %d, %v; want %d", name, c, err, want)
		}
		n, err := db.StepOccurrences(1, name, "", false, from, math.MaxInt64, 0, func(Occurrence) {})
		if err != nil || n != want {
			t.Errorf("StepOccurrences(%s) = %d, %v; want %d", name, n, err, want)
		}
	}
	for v, want := range byVisitor {
		got, err := db.VisitorEvents(1, v, from, math.MaxInt64, 0)
		if err != nil || len(got) != want {
			t.Errorf("VisitorEvents(%s) = %d, %v; want %d", v, len(got), err, want)
		}
	}
}

// lateKeyCount counts the M and J keys of dataset 1 in Pebble.
func lateKeyCount(t *testing.T, db *DB) (m, j int) {
	t.Helper()
	return countKeys(t, db, appendDataset(nil, prefixDisplacedMark, 1), appendDataset(nil, prefixDisplacedMark, 2)),
		countKeys(t, db, appendDataset(nil, prefixDisplacedName, 1), appendDataset(nil, prefixDisplacedName, 2))
}

// TestLateMemWritesDueCells: the displaced events' keys stay in memory
// until their second is lateGrace behind the id clock, then are written;
// reads give every event once throughout, and erasure and retention take
// the events out of memory too, so that no key of them is written later.
func TestLateMemWritesDueCells(t *testing.T) {
	db := openTestDB(t, "")
	stopBackground(db.DB)
	base := int64(planDay)
	evs := lateEvents(base, 0, 40)
	commitEvents(t, db.DB, 1, evs...)
	if m, j := lateKeyCount(t, db.DB); m != 0 || j != 0 {
		t.Fatalf("%d M and %d J keys in Pebble, want them in memory", m, j)
	}
	checkLate(t, db.DB, evs)

	// The id clock 30 s past the 20th second: its first 20 cells are due.
	db.now = func() time.Time { return time.UnixMilli(base + 20*lateCellMs + lateGrace) }
	if err := db.writeLate(false); err != nil {
		t.Fatal(err)
	}
	if m, j := lateKeyCount(t, db.DB); m != 20 || j != 20 {
		t.Fatalf("%d M and %d J keys written, want 20 each", m, j)
	}
	checkLate(t, db.DB, evs)

	// v0's events, half of them written and half in memory, erased; the
	// first five seconds expired.
	if n, err := db.EraseVisitor(1, "v0", nil); err != nil || n != 14 {
		t.Fatalf("EraseVisitor = %d, %v; want 14", n, err)
	}
	if n, err := db.ExpireBefore(1, base+5*lateCellMs); err != nil || n != 3 {
		t.Fatalf("ExpireBefore = %d, %v; want 3 (v1's and v2's of the first five seconds)", n, err)
	}
	var left []*Event
	for i, e := range evs {
		if e.VisitorID != "v0" && i >= 5 {
			left = append(left, e)
		}
	}
	checkLate(t, db.DB, left)
	if err := db.WriteLateMemory(); err != nil {
		t.Fatal(err)
	}
	if m, j := lateKeyCount(t, db.DB); m != len(left) || j != len(left) {
		t.Fatalf("%d M and %d J keys after writing all, want %d each", m, j, len(left))
	}
	checkLate(t, db.DB, left)
	// Past the cut, a commit writes the keys itself.
	more := lateEvents(base, 100, 2)
	commitEvents(t, db.DB, 1, more...)
	if m, _ := lateKeyCount(t, db.DB); m != len(left)+2 {
		t.Fatalf("%d M keys, want %d: a commit behind the cut writes its own", m, len(left)+2)
	}
}

// TestLateMemBound: past its bound, memory writes its oldest seconds
// early, down to 7/8 of the bound.
func TestLateMemBound(t *testing.T) {
	db := openTestDBWith(t, Options{LateMemory: 10})
	stopBackground(db.DB)
	evs := lateEvents(planDay, 0, 16)
	commitEvents(t, db.DB, 1, evs...)
	// The id clock far back: no cell is due by time.
	db.now = func() time.Time { return time.UnixMilli(0) }
	if err := db.writeLate(false); err != nil {
		t.Fatal(err)
	}
	if m, _ := lateKeyCount(t, db.DB); m != 7 {
		t.Fatalf("%d M keys written, want 7 (16 held, bound 10: down to 9)", m)
	}
	checkLate(t, db.DB, evs)
}

// TestLateMemAfterACrash: after a crash, memory is rebuilt from the Z
// keys after the last watermark, whether the writer's batches reached the
// disk or not (all, some, none), and reads give every acknowledged event
// once, the visitor memory's included.
func TestLateMemAfterACrash(t *testing.T) {
	for _, unsynced := range []int{0, 50, 100} {
		t.Run(fmt.Sprintf("unsynced %d%%", unsynced), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			db := openMem(t, fs)
			stopBackground(db)
			lateFromZero(t, db)
			db.late.batch = 7 // several batches per write
			// Today's times: their visitor entries are in the visitor
			// memory's days, which Open rebuilds from J keys and memory.
			base := floorTo(time.Now().UnixMilli(), dayMs) + hourMs
			evs := lateEvents(base, 0, 30)
			commitEvents(t, db, 1, evs[:20]...)
			db.now = func() time.Time { return time.UnixMilli(base + 10*lateCellMs + lateGrace) }
			if err := db.writeLate(false); err != nil { // not synced
				t.Fatal(err)
			}
			commitEvents(t, db, 1, evs[20:]...) // synced
			checkLate(t, db, evs)

			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rand.New(rand.NewPCG(1, 2))})
			db2 := openMem(t, crashed)
			checkLate(t, db2, evs)
			if err := db2.WriteLateMemory(); err != nil {
				t.Fatal(err)
			}
			if m, j := lateKeyCount(t, db2); m != len(evs) || j != len(evs) {
				t.Fatalf("%d M and %d J keys after writing all, want %d each", m, j, len(evs))
			}
			checkLate(t, db2, evs)
			for _, d := range []*DB{db, db2} {
				_ = d.Close()
			}
		})
	}
}

// TestLateMemIdleWatermark: with nothing to write, the writer records its
// watermark only once the floor has moved lateRecordEvery: an idle store
// is not written every second.
func TestLateMemIdleWatermark(t *testing.T) {
	db := openTestDB(t, "")
	stopBackground(db.DB)
	watermark := func() string {
		t.Helper()
		v, err := db.get(configKey(lateWatermarkKind, ""))
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%x", v)
	}
	at := int64(planDay)
	db.now = func() time.Time { return time.UnixMilli(at) }
	if err := db.writeLate(false); err != nil { // the floor moves from 0: recorded
		t.Fatal(err)
	}
	first := watermark()
	at += lateRecordEvery - 1
	if err := db.writeLate(false); err != nil {
		t.Fatal(err)
	}
	if got := watermark(); got != first {
		t.Fatalf("watermark rewritten with nothing to write %d ms on: %s, was %s", lateRecordEvery-1, got, first)
	}
	at++
	if err := db.writeLate(false); err != nil {
		t.Fatal(err)
	}
	if got := watermark(); got == first {
		t.Fatalf("watermark not recorded %d ms on", lateRecordEvery)
	}
}

// TestLateMemAllKeepsWhatCommitsAddMeanwhile: a write of every cell
// (WriteLateMemory, Close) takes a cell ahead of the cut too, which
// commits may still add to while it is written. What they add meanwhile
// stays in memory, is read once, and goes out with the next write.
func TestLateMemAllKeepsWhatCommitsAddMeanwhile(t *testing.T) {
	db := openTestDB(t, "")
	stopBackground(db.DB)
	clock := int64(planDay)
	db.now = func() time.Time { return time.UnixMilli(clock) }
	// Five events of one cell 5 s ahead of the id clock (a client's clock
	// ahead), ids of the clock's time.
	ahead := clock + 5*lateCellMs
	var evs []*Event
	for i := range 6 {
		evs = append(evs, &Event{ID: idAt(clock, byte(i)), Name: "a", Timestamp: ahead + int64(i),
			VisitorID: "v", HasVisitor: true, CreatedAt: clock})
	}
	commitEvents(t, db.DB, 1, evs[:5]...)
	db.late.writing = func() {
		db.late.writing = nil
		commitEvents(t, db.DB, 1, evs[5])
	}
	if err := db.WriteLateMemory(); err != nil {
		t.Fatal(err)
	}
	if m, j := lateKeyCount(t, db.DB); m != 5 || j != 5 {
		t.Fatalf("%d M and %d J keys written, want the 5 committed before the write", m, j)
	}
	db.late.mu.Lock()
	held := 0
	for _, c := range db.late.cells {
		held += len(c.entries)
	}
	db.late.mu.Unlock()
	n, size := db.LateMemory()
	if held != 1 || n != 1 || size != lateEntryBytes+len("v") {
		t.Fatalf("memory holds %d entries (counted %d, %d bytes), want the one committed during the write (%d bytes)", held, n, size, lateEntryBytes+len("v"))
	}
	checkLate(t, db.DB, evs)
	if err := db.WriteLateMemory(); err != nil {
		t.Fatal(err)
	}
	if m, j := lateKeyCount(t, db.DB); m != 6 || j != 6 {
		t.Fatalf("%d M and %d J keys after the next write, want 6", m, j)
	}
	if n, size := db.LateMemory(); n != 0 || size != 0 {
		t.Fatalf("LateMemory = %d entries, %d bytes after writing all; want 0, 0", n, size)
	}
	checkLate(t, db.DB, evs)
}

// TestLateEntrySize: lateEntryBytes, which memory's bound in bytes counts
// per entry, is a lateEntry's size.
func TestLateEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(lateEntry{}); got != lateEntryBytes {
		t.Fatalf("a lateEntry is %d bytes, lateEntryBytes %d", got, lateEntryBytes)
	}
}

// TestLateMemUnderConcurrentCommits: committers write events at every
// distance from their ids' time (none, milliseconds, seconds, past the
// cut, a backfill, ahead of the clock) while the id clock runs, the writer
// writes the cells behind the cut and a reader lists; one visitor is
// erased midway. Lists never repeat an event nor leave time order, and at
// the end lists, counts, occurrences and visitor lists are exact, before
// and after memory is written out.
func TestLateMemUnderConcurrentCommits(t *testing.T) {
	db := openTestDB(t, "")
	stopBackground(db.DB)
	var clock atomic.Int64
	clock.Store(planDay)
	db.now = func() time.Time { return time.UnixMilli(clock.Load()) }
	const committers, batches, perBatch = 4, 120, 10
	delays := []int64{0, 5, 500, 8_000, 29_000, 45_000, 2 * hourMs, -2_000}
	var seq atomic.Uint64
	var mu sync.Mutex
	var kept []*Event
	var half, done sync.WaitGroup
	half.Add(committers)
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for c := range committers {
		done.Add(1)
		go func() {
			defer done.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for i := range batches {
				if i == batches/2 {
					half.Done()
				}
				now := clock.Add(200)
				b := db.NewBatch()
				var evs []*Event
				for range perBatch {
					id := IDAt(now)
					binary.BigEndian.PutUint64(id[8:], seq.Add(1))
					visitor := fmt.Sprint("v", rng.IntN(5))
					if i < batches/2 && rng.IntN(4) == 0 {
						visitor = "gone"
					}
					e := &Event{ID: id, Name: []string{"a", "b", "c"}[rng.IntN(3)], VisitorID: visitor, HasVisitor: true,
						Timestamp: now - delays[rng.IntN(len(delays))], CreatedAt: now}
					b.AddEvent(1, e)
					evs = append(evs, e)
				}
				err := b.Commit(true)
				b.Close()
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				kept = append(kept, evs...)
				mu.Unlock()
			}
		}()
	}
	var wrote atomic.Int64 // writes that took cells out of memory
	var bg sync.WaitGroup
	untilStopped(&bg, stop, errs, func() error { // the writer
		before, _ := db.LateMemory()
		if err := db.writeLate(false); err != nil {
			return err
		}
		if after, _ := db.LateMemory(); after < before {
			wrote.Add(1)
		}
		return nil
	})
	untilStopped(&bg, stop, errs, func() error { // a reader
		page, _, err := db.List(ListQuery{Dataset: 1, From: 0, To: math.MaxInt64, Limit: 100})
		if err != nil {
			return err
		}
		seen := map[ID]bool{}
		for i, e := range page {
			if seen[e.ID] || (i > 0 && e.Timestamp > page[i-1].Timestamp) {
				return fmt.Errorf("a list repeats or leaves time order at %d: %v", i, e.ID)
			}
			seen[e.ID] = true
		}
		return nil
	})
	half.Wait()
	erased, err := db.EraseVisitor(1, "gone", nil)
	if err != nil {
		t.Fatal(err)
	}
	done.Wait()
	close(stop)
	bg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	evs := slices.DeleteFunc(kept, func(e *Event) bool { return e.VisitorID == "gone" })
	if len(evs)+erased != committers*batches*perBatch {
		t.Fatalf("%d kept and %d erased of %d", len(evs), erased, committers*batches*perBatch)
	}
	// Whether the writer ran between commits is up to the scheduler; that
	// memory and Pebble both hold keys now is not.
	t.Logf("%d of the writer's runs took cells out of memory during the commits", wrote.Load())
	if held, _ := db.LateMemory(); held == 0 {
		t.Fatalf("no entry held: memory should hold the latest events' keys")
	}
	if m, _ := lateKeyCount(t, db.DB); m == 0 {
		t.Fatalf("no M key in Pebble: the writer and the commits behind the cut should have written some")
	}
	slices.SortFunc(evs, func(a, b *Event) int { return cmp.Compare(a.Timestamp, b.Timestamp) })
	checkLateAll(t, db.DB, evs)
	if err := db.WriteLateMemory(); err != nil {
		t.Fatal(err)
	}
	if n, size := db.LateMemory(); n != 0 || size != 0 {
		t.Fatalf("LateMemory = %d entries, %d bytes after writing all; want 0, 0", n, size)
	}
	checkLateAll(t, db.DB, evs)
}

// checkLateAll is checkLate for more events than a page: the list's ids
// page by page, then checkLate's counts.
func checkLateAll(t *testing.T, db *DB, evs []*Event) {
	t.Helper()
	want := map[ID]bool{}
	for _, e := range evs {
		want[e.ID] = true
	}
	got := map[ID]bool{}
	for off := 0; ; off += 100 {
		page, total, err := db.List(ListQuery{Dataset: 1, From: evs[0].Timestamp, To: math.MaxInt64, Limit: 100, Offset: off})
		if err != nil || total != int64(len(evs)) {
			t.Fatalf("List: total %d, %v; want %d", total, err, len(evs))
		}
		for _, e := range page {
			if got[e.ID] || !want[e.ID] {
				t.Fatalf("List gives %v twice or not committed", e.ID)
			}
			got[e.ID] = true
		}
		if len(page) < 100 {
			break
		}
	}
	if len(got) != len(evs) {
		t.Fatalf("List gave %d events, want %d", len(got), len(evs))
	}
	byName := map[string]int{}
	byVisitor := map[string]int{}
	for _, e := range evs {
		byName[e.Name]++
		byVisitor[e.VisitorID]++
	}
	for name, want := range byName {
		if c, err := db.Count(1, name, evs[0].Timestamp, evs[len(evs)-1].Timestamp); err != nil || c != int64(want) {
			t.Errorf("Count(%s) = %d, %v; want %d", name, c, err, want)
		}
		if n, err := db.StepOccurrences(1, name, "", false, evs[0].Timestamp, math.MaxInt64, 0, func(Occurrence) {}); err != nil || n != want {
			t.Errorf("StepOccurrences(%s) = %d, %v; want %d", name, n, err, want)
		}
	}
	for v, want := range byVisitor {
		if got, err := db.VisitorEvents(1, v, evs[0].Timestamp, math.MaxInt64, 0); err != nil || len(got) != want {
			t.Errorf("VisitorEvents(%s) = %d, %v; want %d", v, len(got), err, want)
		}
	}
}
