package storage

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// openMem opens a store on fs with checkpoints only when the test asks.
func openMem(t *testing.T, fs vfs.FS) *DB {
	t.Helper()
	db, err := Open("db", Options{FS: fs, DerivedInterval: time.Hour})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return db
}

// derivedWant is what the counters and rollups of ds must say.
type derivedWant struct {
	count    map[string]int64 // per name, "" for all
	sum      float64          // of "amount" over every event
	visitors int64
}

func checkDerived(t *testing.T, db *DB, ds uint32, from, to int64, w derivedWant) {
	t.Helper()
	for name, n := range w.count {
		if got, err := db.Count(ds, name, from, to); err != nil || got != n {
			t.Errorf("Count(%q) = %d, %v; want %d", name, got, err, n)
		}
	}
	aggs, err := db.Aggregate(AggQuery{Dataset: ds, Property: "amount", Unique: true, Bounds: []int64{from, to + 1}})
	if err != nil {
		t.Fatalf("Aggregate: %v", err)
	}
	a := aggs[0]
	if a.Count != w.count[""] || a.Sum != w.sum || a.Sketch.Count() != w.visitors {
		t.Errorf("Aggregate = count %d sum %v visitors %d; want %d %v %d", a.Count, a.Sum, a.Sketch.Count(), w.count[""], w.sum, w.visitors)
	}
}

// TestDerivedExactAfterCrash crashes the store at each point of the derived
// data's life (folded only, checkpointed but unsynced, checkpoint half on
// disk, synced, more commits after a checkpoint) and checks counts, sums and
// visitors are exact after the restart.
func TestDerivedExactAfterCrash(t *testing.T) {
	const ds = 7
	day := int64(planDay)
	steps := []struct {
		name       string
		checkpoint bool
		sync       bool    // make the checkpoint durable before the crash
		unsynced   float64 // share of unsynced writes that reach the disk anyway
		after      bool    // commit more events after the checkpoint
	}{
		{name: "before any checkpoint"},
		{name: "checkpoint lost", checkpoint: true},
		{name: "checkpoint half written", checkpoint: true, unsynced: 50},
		{name: "checkpoint all written", checkpoint: true, unsynced: 100},
		{name: "checkpoint synced", checkpoint: true, sync: true},
		{name: "commits after a lost checkpoint", checkpoint: true, after: true},
		{name: "commits after a synced checkpoint", checkpoint: true, sync: true, after: true},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			db := openMem(t, fs)
			w := derivedWant{count: map[string]int64{}}
			var n uint64
			visitors := map[string]bool{}
			commit := func(k int) {
				var evs []*Event
				for i := 0; i < k; i++ {
					n++
					name := []string{"signup", "buy"}[n%2]
					v := fmt.Sprint("v", n%5)
					evs = append(evs, &Event{ID: testID(n), Name: name, VisitorID: v, HasVisitor: true,
						Timestamp: day + int64(n)*7*minuteMs, Properties: []byte(fmt.Sprintf(`{"amount":%d}`, n))})
					w.count[name]++
					w.count[""]++
					w.sum += float64(n)
					visitors[v] = true
				}
				commitEvents(t, db, ds, evs...)
			}
			commit(20)
			commit(5)
			if st.checkpoint {
				db.derived.checkpoint()
			}
			if st.sync {
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			if st.after {
				commit(3)
			}
			w.visitors = int64(len(visitors))
			checkDerived(t, db, ds, day, day+dayMs-1, w)

			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: int(st.unsynced), RNG: rand.New(rand.NewPCG(1, 2))})
			db2 := openMem(t, crashed)
			checkDerived(t, db2, ds, day, day+dayMs-1, w)
			// And once more after the replayed entries were checkpointed.
			db2.derived.checkpoint()
			if err := db2.Flush(); err != nil {
				t.Fatal(err)
			}
			db3 := openMem(t, crashed.CrashClone(vfs.CrashCloneCfg{}))
			checkDerived(t, db3, ds, day, day+dayMs-1, w)
			for _, d := range []*DB{db, db2, db3} {
				_ = d.Close()
			}
		})
	}
}

// TestDerivedErasureAfterCrash: an erasure's negative counts are logged like
// any commit, so a crash before the checkpoint keeps the totals exact.
func TestDerivedErasureAfterCrash(t *testing.T) {
	const ds = 2
	day := int64(planDay)
	fs := vfs.NewCrashableMem()
	db := openMem(t, fs)
	var evs []*Event
	for i := uint64(1); i <= 10; i++ {
		evs = append(evs, &Event{ID: testID(i), Name: "view", VisitorID: fmt.Sprint("v", i%2), HasVisitor: true,
			Timestamp: day + int64(i)*minuteMs, Properties: []byte(`{"amount":1}`)})
	}
	commitEvents(t, db, ds, evs[:6]...)
	db.derived.checkpoint()
	commitEvents(t, db, ds, evs[6:]...) // in the overlay only when the erasure runs
	if n, err := db.EraseVisitor(ds, "v0", nil); err != nil || n != 5 {
		t.Fatalf("EraseVisitor = %d, %v", n, err)
	}
	w := derivedWant{count: map[string]int64{"": 5, "view": 5}, sum: 5, visitors: 1}
	checkDerived(t, db, ds, day, day+dayMs-1, w)
	db2 := openMem(t, fs.CrashClone(vfs.CrashCloneCfg{}))
	checkDerived(t, db2, ds, day, day+dayMs-1, w)
	_ = db.Close()
	_ = db2.Close()
}

// whileCheckpointing runs db's checkpoints and read in loops while write
// runs, and fails the test with read's first error.
func whileCheckpointing(t *testing.T, db *DB, read func() error, write func()) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	untilStopped(&wg, stop, errs, func() error {
		db.derived.checkpoint()
		return nil
	})
	untilStopped(&wg, stop, errs, read)
	write()
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// TestDerivedReadsDuringCheckpoints reads totals while commits and
// checkpoints run: a total never goes down, never exceeds what was
// committed, and never misses what was acknowledged before the read began.
func TestDerivedReadsDuringCheckpoints(t *testing.T) {
	const ds = 1
	db := openTestDB(t, "")
	day := int64(planDay)
	const total = 600
	var acked atomic.Int64
	var last int64
	whileCheckpointing(t, db.DB, func() error {
		before := acked.Load()
		got, err := db.Count(ds, "", day, day+dayMs-1)
		if err == nil && (got < before || got < last || got > total) {
			err = fmt.Errorf("Count = %d after %d acknowledged (previous read %d)", got, before, last)
		}
		last = got
		return err
	}, func() {
		for i := uint64(1); i <= total; i++ {
			commitEvents(t, db.DB, ds, &Event{ID: testID(i), Name: "e", Timestamp: day + int64(i)*1000})
			acked.Add(1)
		}
	})
	if got, _ := db.Count(ds, "", day, day+dayMs-1); got != total {
		t.Fatalf("final Count = %d, want %d", got, total)
	}
}

// TestCheckpointSettlesBetweenFolds commits and reads while a checkpoint
// settles its overlay's sketches: each must go through (settled under the
// overlay's locks, it held every commit's fold) and the totals stay exact
// across the checkpoint and a crash after it.
func TestCheckpointSettlesBetweenFolds(t *testing.T) {
	const ds = 3
	day := int64(planDay)
	fs := vfs.NewCrashableMem()
	db := openMem(t, fs)
	t.Cleanup(func() { _ = db.Close() })
	w := derivedWant{count: map[string]int64{}}
	var n uint64
	commit := func() {
		n++
		commitEvents(t, db, ds, &Event{ID: testID(n), Name: "buy", VisitorID: fmt.Sprint("visitor-", n), HasVisitor: true,
			Timestamp: day + int64(n)*17*minuteMs, Properties: []byte(`{"amount":2}`)})
		w.count["buy"]++
		w.count[""]++
		w.sum += 2
		w.visitors++
	}
	for range 40 {
		commit()
	}
	calls := 0
	db.derived.settling = func() {
		if calls++; calls == 3 {
			commit()
			checkDerived(t, db, ds, day, day+dayMs-1, w)
		}
	}
	db.derived.checkpoint()
	db.derived.settling = nil
	if calls < 3 {
		t.Fatalf("settling called %d times, want a call a bucket (at least 3)", calls)
	}
	checkDerived(t, db, ds, day, day+dayMs-1, w)
	db.derived.checkpoint() // writes the commit folded during the first
	db2 := openMem(t, fs.CrashClone(vfs.CrashCloneCfg{}))
	t.Cleanup(func() { _ = db2.Close() })
	checkDerived(t, db2, ds, day, day+dayMs-1, w)
}

// TestSketchReadsDuringCheckpoints reads visitor counts while commits and
// checkpoints run, so that readers settle sketches of the frozen overlay
// while the checkpoint settles and writes it (the race detector watches),
// and the final count is the sketch of every visitor committed.
func TestSketchReadsDuringCheckpoints(t *testing.T) {
	const ds = 4
	db := openTestDB(t, "")
	day := int64(planDay)
	unique := func() (int64, error) {
		aggs, err := db.Aggregate(AggQuery{Dataset: ds, Unique: true, Bounds: []int64{day, day + dayMs}})
		if err != nil {
			return 0, err
		}
		return aggs[0].Sketch.Count(), nil
	}
	var want Sketch
	whileCheckpointing(t, db.DB, func() error {
		_, err := unique()
		return err
	}, func() {
		for i := uint64(1); i <= 3000; i += 10 {
			var evs []*Event
			for j := i; j < i+10; j++ {
				v := fmt.Sprint("visitor-", j)
				want.Add(HashVisitor(v))
				evs = append(evs, &Event{ID: testID(j), Name: "e", VisitorID: v, HasVisitor: true, Timestamp: day + int64(j)*20*1000})
			}
			commitEvents(t, db.DB, ds, evs...)
		}
	})
	if got, err := unique(); err != nil || got != want.Count() {
		t.Fatalf("visitors = %d, %v; want %d", got, err, want.Count())
	}
}

func TestDerivedLogRoundTrip(t *testing.T) {
	r := newRollups()
	*r.cell(1, "signup", 5*minuteMs) = rollupAgg{count: 3, hll: []uint32{1<<8 | 2, 9<<8 | 1}, props: []propSum{{"amount", sumValue{sum: 1.5, comp: 1e-17, n: 2}}}}
	*r.cell(1, "", 5*minuteMs) = rollupAgg{count: -2}
	*r.cell(400, "x", 0) = rollupAgg{count: 1, props: []propSum{{"a", sumValue{sum: -3, n: 1}}, {"b", sumValue{sum: 4, n: 1}}}}
	enc := appendLog(nil, r)
	got := newRollups()
	if err := decodeLog(enc, got); err != nil {
		t.Fatalf("decodeLog: %v", err)
	}
	if len(got.cells) != len(r.cells) {
		t.Fatalf("%d cells, want %d", len(got.cells), len(r.cells))
	}
	for k, a := range r.cells {
		b := got.cells[k]
		if b == nil || b.count != a.count || len(b.hll) != len(a.hll) || (len(a.hll) > 0 && !reflect.DeepEqual(b.hll, a.hll)) ||
			len(b.props) != len(a.props) || (len(a.props) > 0 && !reflect.DeepEqual(b.props, a.props)) {
			t.Errorf("cell %+v = %+v, want %+v", k, b, a)
		}
	}
	// Every truncation is refused or decodes to fewer cells; none panics.
	for i := 0; i < len(enc); i++ {
		_ = decodeLog(enc[:i], newRollups())
	}
	for _, bad := range [][]byte{nil, {9}, {logVersion, 1, 200}} {
		if err := decodeLog(bad, newRollups()); err == nil {
			t.Errorf("decodeLog(%x) accepted", bad)
		}
	}
}

// TestSyncedWithMinSyncInterval: spacing WAL syncs delays a Sync commit,
// never acknowledges it before its fsync; each sync arms the wake-up that
// ends the interval on time (package wakeup).
func TestSyncedWithMinSyncInterval(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db, err := Open("db", Options{FS: fs, DerivedInterval: time.Hour, WALMinSyncInterval: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := uint64(1); i <= 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			commitEvents(t, db, 1, &Event{ID: testID(i), Name: "e", Timestamp: int64(planDay) + int64(i)})
		}()
	}
	wg.Wait()
	if runtime.GOOS == "linux" {
		for db.wake.Fired() == 0 { // bounded by the test's timeout
			time.Sleep(time.Millisecond)
		}
	}
	crashed := openMem(t, fs.CrashClone(vfs.CrashCloneCfg{}))
	for i := uint64(1); i <= 20; i++ {
		if _, err := crashed.GetEvent(1, testID(i)); err != nil {
			t.Errorf("event %d acknowledged but lost in the crash: %v", i, err)
		}
	}
	_ = db.Close()
	_ = crashed.Close()
}
