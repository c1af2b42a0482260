package storage

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAddEventCommit measures one synced commit of a batch of 100
// events: record, three index entries and counter merges each.
func BenchmarkAddEventCommit(b *testing.B) {
	db := openTestDB(b, "")
	const batch = 100
	events := make([]Event, batch)
	for i := range events {
		events[i] = Event{
			Name:       modelNames[i%len(modelNames)],
			VisitorID:  fmt.Sprintf("visitor-%d", i%17),
			HasVisitor: i%5 != 0,
			Properties: []byte(`{"path":"/pricing","amount":12.5}`),
		}
	}
	ts := int64(planDay)
	var n uint64
	b.ReportAllocs()
	for b.Loop() {
		bt := db.NewBatch()
		for i := range events {
			n++
			ts += 37
			events[i].ID = testID(n)
			events[i].Timestamp, events[i].CreatedAt = ts, ts
			bt.AddEvent(1, &events[i])
		}
		if err := bt.Commit(true); err != nil {
			b.Fatal(err)
		}
		bt.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/event")
}

// BenchmarkIdempotencyLookup compares a Get per key with one IdemLookup for
// a batch of 100 keys, half of them stored, over 200,000 remembered keys
// (flushed, so the seeks reach the sstables and their filters).
func BenchmarkIdempotencyLookup(b *testing.B) {
	db := openTestDB(b, "")
	const stored = 200_000
	// Written over two seconds, as an import at 100,000 a second.
	now := time.Now().UnixMilli() - 2000
	for i := 0; i < stored; i += 1000 {
		bt := db.NewBatch()
		for j := i; j < i+1000; j++ {
			bt.AddIdempotency("key_1", fmt.Sprintf("msg-%d", j), IdemRecord{Hash: uint64(j), ID: testID(uint64(j + 1)), CreatedAt: now + int64(j)/100})
		}
		if err := bt.Commit(false); err != nil {
			b.Fatal(err)
		}
		bt.Close()
	}
	if err := db.Pebble().Flush(); err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("msg-%d", i*4001%(2*stored)) // half past the stored range
	}
	b.Run("get", func(b *testing.B) {
		for b.Loop() {
			for _, k := range keys {
				if _, err := db.GetIdempotency("key_1", k); err != nil && err != ErrNotFound {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/key")
	})
	// An SDK's time-ordered messageIds, all new: keys in order, none stored.
	inOrder := make([]string, 100)
	for i := range inOrder {
		inOrder[i] = fmt.Sprintf("node-next-1764000000000-%06d", i)
	}
	for _, c := range []struct {
		name string
		keys []string
	}{{"lookup", keys}, {"lookup-new-in-order", inOrder}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				l, err := db.NewIdemLookup()
				if err != nil {
					b.Fatal(err)
				}
				for _, k := range c.keys {
					if _, err := l.Get("key_1", k); err != nil && err != ErrNotFound {
						b.Fatal(err)
					}
				}
				_ = l.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.keys)), "ns/key")
		})
	}
}

// BenchmarkIdempotencyReimport looks up again, in requests of 2,000 in
// the order written, 300,000 keys of one API key written over one second
// in commits of 2,000: an import run again over its lines, every key
// found. With idempotency records in groups by the second, each request
// read its whole second's groups (docs/benchmarks.md, session 30).
func BenchmarkIdempotencyReimport(b *testing.B) {
	const keys, per = 300_000, 2000
	db := openTestDB(b, "")
	start := time.Now().UnixMilli()/1000*1000 - 1000
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("line-%d", i)
	}
	for lo := 0; lo < keys; lo += per {
		bt := db.NewBatch()
		for i := lo; i < lo+per; i++ {
			bt.AddIdempotency("key_1", names[i], IdemRecord{Hash: uint64(i), ID: testID(uint64(i + 1)), CreatedAt: start + int64(i)*1000/keys})
		}
		if err := bt.Commit(false); err != nil {
			b.Fatal(err)
		}
		bt.Close()
	}
	if err := db.Pebble().Flush(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		for lo := 0; lo < keys; lo += per {
			l, err := db.NewIdemLookup()
			if err != nil {
				b.Fatal(err)
			}
			for _, k := range names[lo : lo+per] {
				if _, err = l.Get("key_1", k); err != nil {
					break
				}
			}
			if err = cmp.Or(err, l.Close()); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*keys), "ns/key")
}

// BenchmarkRecordReads compares GetEvent per record with one RecordReader
// for the records of a time range, as a where= query reads them: 100,000
// events flushed to sstables, 10,000 read in id order.
func BenchmarkRecordReads(b *testing.B) {
	db := openTestDB(b, "")
	const stored = 100_000
	props := []byte(`{"amount":12.5,"currency":"EUR","sku":"sku_1","page":"/checkout/confirm"}`)
	for i := 0; i < stored; i += 1000 {
		bt := db.NewBatch()
		for j := i; j < i+1000; j++ {
			bt.AddEvent(1, &Event{ID: testID(uint64(j)), Name: "purchase", Timestamp: int64(j), CreatedAt: int64(j), Properties: props})
		}
		if err := bt.Commit(false); err != nil {
			b.Fatal(err)
		}
		bt.Close()
	}
	if err := db.Pebble().Flush(); err != nil {
		b.Fatal(err)
	}
	const reads = 10_000
	b.Run("get", func(b *testing.B) {
		for b.Loop() {
			for j := range reads {
				if _, err := db.GetEvent(1, testID(uint64(j*7))); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*reads), "ns/record")
	})
	b.Run("reader", func(b *testing.B) {
		for b.Loop() {
			r, err := db.NewRecordReader(1)
			if err != nil {
				b.Fatal(err)
			}
			for j := range reads {
				if _, err := r.Get(int64(j*7), testID(uint64(j*7))); err != nil {
					b.Fatal(err)
				}
			}
			_ = r.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*reads), "ns/record")
	})
}

// BenchmarkPathsHistories reads 2,000 visitors' histories over 30 days of a
// store holding 600,000 events of 50,000 visitors, as the paths analysis
// does: one VisitorsEvents call against a VisitorEvents call per visitor
// (which seeks every day of the range for each).
func BenchmarkPathsHistories(b *testing.B) {
	db := openTestDB(b, "")
	d0 := int64(20_000) * dayMs
	r := rand.New(rand.NewPCG(5, 6))
	for day := range 30 {
		evs := make([]*Event, 0, 20_000)
		for i := range 20_000 {
			evs = append(evs, &Event{ID: testID(uint64(day*20_000 + i + 1)), Name: "page_view",
				VisitorID: fmt.Sprintf("v_%d", r.IntN(50_000)), HasVisitor: true,
				Timestamp: d0 + int64(day)*dayMs + r.Int64N(dayMs), CreatedAt: 1})
		}
		commitEvents(b, db.DB, 1, evs...)
	}
	if err := db.Pebble().Flush(); err != nil {
		b.Fatal(err)
	}
	visitors := make([]string, 2000)
	for i := range visitors {
		visitors[i] = fmt.Sprintf("v_%d", i*25)
	}
	from, to := d0, d0+30*dayMs-1
	b.Run("together", func(b *testing.B) {
		for b.Loop() {
			if _, err := db.VisitorsEvents(1, visitors, from, to, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one by one", func(b *testing.B) {
		for b.Loop() {
			for _, v := range visitors {
				if _, err := db.VisitorEvents(1, v, from, to, 0); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	// The layout before the day partitions: one contiguous range per visitor.
	legacyVisitorIndex(b, db.DB)
	b.Run("before the day partitions", func(b *testing.B) {
		for b.Loop() {
			for _, v := range visitors {
				it, err := openVisitor(db.Pebble(), db.vmem, true, 1, v, from, to)
				if err != nil {
					b.Fatal(err)
				}
				if err := eachEntry(it, func(int64, ID, []byte) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkMemDayAdd adds one-event visitors to a memory day, the import's
// and the bench's shape (a new visitor per event), a million to a day.
func BenchmarkMemDayAdd(b *testing.B) {
	m := newVisitorMem(0, &inflight{})
	vs := make([]memVisitor, 1<<20)
	hs := make([]uint64, len(vs))
	for i := range vs {
		vs[i] = memVisitor{1, fmt.Sprintf("v_%d", 10_000_000+i)}
		hs[i] = m.hash(vs[i])
	}
	md := newMemDay()
	b.ResetTimer()
	for i := range b.N {
		j := i % len(vs)
		if j == 0 && i > 0 {
			b.StopTimer()
			md = newMemDay()
			b.StartTimer()
		}
		md.add(hs[j], vs[j], memEntry{ts: int64(i), id: testID(uint64(i))})
	}
}

// BenchmarkCountEdge is the partial minute at an unaligned bound of a
// total: 100,000 events of one name in one minute, flushed, counted over
// all but its first millisecond. Without a name the count walks the
// records' keys, with one the name index's (as the T keys were walked
// before records were keyed by timestamp).
func BenchmarkCountEdge(b *testing.B) {
	db := openTestDB(b, "")
	const n = 100_000
	props := []byte(`{"amount":12.5,"currency":"EUR","sku":"sku_1","page":"/checkout/confirm","referrer":"https://www.example.com/products/sku_1","campaign":"spring_sale"}`)
	start := int64(1_764_000_000_000) // a minute's start
	for i := 0; i < n; i += 1000 {
		bt := db.NewBatch()
		for j := i; j < i+1000; j++ {
			ts := start + int64(j)*60_000/n
			id := IDAt(ts)
			id[15] = byte(j)
			id[14] = byte(j >> 8)
			bt.AddEvent(1, &Event{ID: id, Name: "purchase", VisitorID: "v", HasVisitor: true, Timestamp: ts, CreatedAt: ts, Properties: props})
		}
		if err := bt.Commit(false); err != nil {
			b.Fatal(err)
		}
		bt.Close()
	}
	if err := db.Pebble().Flush(); err != nil {
		b.Fatal(err)
	}
	want := int64(n - 2) // the first two events share the bound's excluded millisecond
	for _, name := range []string{"", "purchase"} {
		b.Run(fmt.Sprintf("name=%q", name), func(b *testing.B) {
			for b.Loop() {
				got, err := db.Count(1, name, start+1, start+60_000)
				if err != nil || got != want {
					b.Fatalf("Count = %d, %v; want %d", got, err, want)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
		})
	}
}

// BenchmarkVisitorMemAdd adds commits of 100 new visitors' entries, as the
// batch scenario does (a new visitor per event), to a day that holds up to
// a million visitors: visitorMem.add loads every entry's slot before it
// adds them, so that their cache misses overlap.
func BenchmarkVisitorMemAdd(b *testing.B) {
	m := newVisitorMem(0, &inflight{})
	const perCommit, perDay = 100, 1_000_000
	ts := time.Now().UnixMilli()
	pending := make([]pendingVisitor, perDay)
	for i := range pending {
		pending[i] = pendingVisitor{v: memVisitor{1, fmt.Sprintf("v_%d", 10_000_000+i)}, e: memEntry{ts: ts, id: testID(uint64(i))}, n: "purchase"}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += perCommit {
		j := i % perDay
		if j == 0 && i > 0 {
			b.StopTimer()
			m = newVisitorMem(0, &inflight{})
			b.StartTimer()
		}
		m.add(pending[j : j+perCommit])
	}
}

// BenchmarkWriteVisitorTables writes a memory day of a million one-event
// visitors as its sorted table (a split's or a seal's work before the
// ingest): ids as the bench sends them (v_<n>, which share their first
// eight bytes in runs of a hundred) and UUIDs, in no particular order.
func BenchmarkWriteVisitorTables(b *testing.B) {
	for _, tc := range []struct {
		name string
		id   func(i int) string
	}{
		{"bench", func(i int) string { return fmt.Sprintf("v_%d", 10_000_000+i) }},
		{"uuid", func(i int) string {
			h1, h2 := uint64(i)*0x9E3779B97F4A7C15, uint64(i+1)*0xC2B2AE3D27D4EB4F
			return fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", uint32(h1), uint16(h1>>32), uint16(h1>>48)&0xfff, uint16(h2)&0xfff, h2>>16)
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			db := openTestDB(b, "")
			m := newVisitorMem(0, &inflight{})
			md := newMemDay()
			for i := range 1 << 20 {
				// Visitors arrive out of key order, as from many clients.
				v := memVisitor{1, tc.id(i * 0x9E3779B1 % (1 << 20))}
				md.add(m.hash(v), v, memEntry{ts: int64(i), id: testID(uint64(i))})
			}
			snap := md.snapshot()
			b.ResetTimer()
			for range b.N {
				paths, _, err := db.writeVisitorTables(20_000, snap, []string{"e"})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				for _, p := range paths {
					if err := db.fs.Remove(p); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkListLateMemory lists the newest 20 events of a dataset whose
// 300,000 events, queued by their clients over the last 30 s, are all
// held in the late memory (latemem.go).
func BenchmarkListLateMemory(b *testing.B) {
	db := openTestDB(b, "")
	stopBackground(db.DB)
	const n = 300_000
	base := int64(planDay)
	fillLateMemory(b, db.DB, n, func(j int) Event {
		ts := base + int64(j)*30_000/n - int64(j*7919%5000) // 0-5 s queueing
		return Event{ID: testID(uint64(j + 1)), Name: "e", Timestamp: ts, CreatedAt: ts}
	})
	q := ListQuery{Dataset: 1, To: math.MaxInt64, Limit: 20}
	b.ReportAllocs()
	for b.Loop() {
		if page, _, err := db.List(q); err != nil || len(page) != 20 {
			b.Fatal(len(page), err)
		}
	}
}

// fillLateMemory commits n displaced events, event(j) each with a visitor
// of 1,000, in batches of 1,000, and checks that the late memory holds
// them all.
func fillLateMemory(b *testing.B, db *DB, n int, event func(j int) Event) {
	b.Helper()
	for i := 0; i < n; i += 1000 {
		bt := db.NewBatch()
		for j := i; j < i+1000; j++ {
			e := event(j)
			e.VisitorID, e.HasVisitor = fmt.Sprint("v", j%1000), true
			bt.AddEvent(1, &e)
		}
		if err := bt.Commit(false); err != nil {
			b.Fatal(err)
		}
		bt.Close()
	}
	if got, _ := db.LateMemory(); got != n {
		b.Fatalf("%d entries in memory, want %d", got, n)
	}
}

// BenchmarkWriteLateMemory writes 100,000 displaced events' M and J keys
// held in the late memory to Pebble, as the late writer does with the
// cells behind its cut (latewrite.go).
func BenchmarkWriteLateMemory(b *testing.B) {
	db := openTestDB(b, "")
	stopBackground(db.DB)
	const n = 100_000
	b.ReportAllocs()
	for round := 0; b.Loop(); round++ {
		b.StopTimer()
		// Ids of now, times up to 5 s before them, past the cut the last
		// round's write left.
		base := max(time.Now().UnixMilli(), db.late.cut+5000)
		fillLateMemory(b, db.DB, n, func(j int) Event {
			id := IDAt(base)
			binary.BigEndian.PutUint64(id[8:], uint64(round*n+j))
			ts := base - 1 - int64(j*7919%5000)
			return Event{ID: id, Name: fmt.Sprint("e", j%8), Timestamp: ts, CreatedAt: ts}
		})
		b.StartTimer()
		if err := db.WriteLateMemory(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}

// BenchmarkSweepIdempotency sweeps a store of 500,000 idempotency records
// of one API key spread over two days, as the hourly sweep does: it
// deletes the seconds before the cutoff's with one range deletion however
// many records they hold (the sweep before session 23 read all of them),
// and forgets them in the filter, a pass over its table: most of the
// sweep's time since session 25 (docs/benchmarks.md).
func BenchmarkSweepIdempotency(b *testing.B) {
	db := openTestDB(b, "")
	const stored = 500_000
	day := time.Now().UnixMilli()/dayMs - 1
	storeIdem(b, db.DB, stored, func(j int) (int64, string) {
		created := day*dayMs + int64(j)*2*dayMs/stored
		return created, fmt.Sprintf("node-next-%013d-%06d", created, j)
	})
	for b.Loop() {
		if err := db.SweepIdempotency((day + 1) * dayMs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/stored, "ns/record-held")
}

// BenchmarkIdemSlotsRebuild fills the idempotency filter from a store of
// 1,000,000 records kept by second, as Open does (idemslots.go): what a
// start costs per key the filter holds.
func BenchmarkIdemSlotsRebuild(b *testing.B) {
	db := openTestDB(b, "")
	const stored = 1_000_000
	now := time.Now().UnixMilli()
	storeIdem(b, db.DB, stored, func(j int) (int64, string) {
		return now - dayMs + int64(j)*dayMs/stored, fmt.Sprintf("%016x-%016x", uint64(j)*0x9E3779B97F4A7C15, j)
	})
	for b.Loop() {
		db.idemSlots = newIdemSlots(0, nil)
		db.rebuildIdemSlots(time.Now())
		if err, n := db.idemSlots.loadErr, db.idemSlots.filter.Len(); err != nil || n != stored {
			b.Fatal(n, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/stored, "ns/key")
}

// BenchmarkIdemSlotsLoadSaved is a start's read of a saved idempotency
// filter filled to the default bound (idemsave.go): its checksum's pass
// over the file and its entries' into the tables. Set-up inserts tens of
// millions of keys: run it by hand, with -benchtime 3x.
func BenchmarkIdemSlotsLoadSaved(b *testing.B) {
	db := openFullIdemFilter(b)
	f := db.idemSlots.filter
	if err := db.saveIdemSlots(); err != nil {
		b.Fatal(err)
	}
	keys := f.Len()
	b.ResetTimer()
	for b.Loop() {
		db.idemSlots = newIdemSlots(0, nil)
		_, ok, err := db.loadSavedIdemSlots()
		close(db.idemSlots.ready) // for Close
		if !ok || err != nil || db.idemSlots.filter.Len() != keys {
			b.Fatal(ok, err, db.idemSlots.filter.Len(), keys)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(keys), "ns/key")
	b.ReportMetric(float64(keys), "keys")
}

// BenchmarkIdemSaveBesideSyncs saves an idempotency filter filled to the
// default bound (512 MiB) beside a WAL's syncs (syncsBeside) and reports
// their latencies during the saves: what a save costs the commits beside
// it. Set-up inserts tens of millions of keys: run it by hand, with
// -benchtime 4x.
func BenchmarkIdemSaveBesideSyncs(b *testing.B) {
	db := openFullIdemFilter(b)
	syncs := syncsBeside(b, db.dir)
	b.ResetTimer()
	for b.Loop() {
		if err := db.saveIdemSlots(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	syncs()
}

// BenchmarkVisitorTablesBesideSyncs writes the tables of a visitor-memory
// day at its default bound (4 M entries of UUID visitors), as a seal or a
// split does, beside a WAL's syncs (syncsBeside).
func BenchmarkVisitorTablesBesideSyncs(b *testing.B) {
	db := openTestDB(b, "")
	m := newVisitorMem(0, &inflight{})
	md := newMemDay()
	const n = DefaultVisitorMemory
	for i := range n {
		h1, h2 := uint64(i)*0x9E3779B97F4A7C15, uint64(i+1)*0xC2B2AE3D27D4EB4F
		v := memVisitor{1, fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", uint32(h1), uint16(h1>>32), uint16(h1>>48)&0xfff, uint16(h2)&0xfff, h2>>16)}
		md.add(m.hash(v), v, memEntry{ts: int64(i), id: testID(uint64(i))})
	}
	snap := md.snapshot()
	syncs := syncsBeside(b, db.dir)
	b.ResetTimer()
	for b.Loop() {
		paths, _, err := db.writeVisitorTables(20_000, snap, []string{"e"})
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range paths {
			if err := db.fs.Remove(p); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	syncs()
}

// openFullIdemFilter is a store whose idempotency filter holds random
// keys up to its default bound (65 M).
func openFullIdemFilter(b *testing.B) testDB {
	b.Helper()
	db := openTestDB(b, "")
	<-db.IdempotencyReady()
	r := rand.New(rand.NewPCG(1, 2))
	slot := idemSlot(time.Now().UnixMilli())
	for db.idemSlots.filter.Insert(r.Uint64(), slot) {
	}
	return db
}

// syncsBeside appends 8 KiB to a file of dir and fdatasyncs it every
// 300 µs, as the WAL does, until the function it returns is called, which
// reports the syncs' p99, p99.9 and maximum latency.
func syncsBeside(b *testing.B, dir string) func() {
	b.Helper()
	wal, err := os.Create(filepath.Join(dir, "wal-beside"))
	if err != nil {
		b.Fatal(err)
	}
	var stop atomic.Bool
	lats := make(chan []time.Duration)
	go func() {
		buf := make([]byte, 8192)
		var lat []time.Duration
		for !stop.Load() {
			start := time.Now()
			if _, err := wal.Write(buf); err == nil {
				_ = wal.Sync()
			}
			lat = append(lat, time.Since(start))
			time.Sleep(300 * time.Microsecond)
		}
		lats <- lat
	}()
	return func() {
		stop.Store(true)
		lat := <-lats
		_ = wal.Close()
		slices.Sort(lat)
		at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
		b.ReportMetric(at(0.99), "sync-p99-µs")
		b.ReportMetric(at(0.999), "sync-p99.9-µs")
		b.ReportMetric(at(1), "sync-max-µs")
	}
}

// storeIdem stores n idempotency records of key_1, record j created at
// and keyed as rec(j) says, in batches of 1,000, and flushes them.
func storeIdem(b *testing.B, db *DB, n int, rec func(j int) (created int64, key string)) {
	b.Helper()
	for i := 0; i < n; i += 1000 {
		bt := db.NewBatch()
		for j := i; j < min(i+1000, n); j++ {
			created, key := rec(j)
			bt.AddIdempotency("key_1", key, IdemRecord{Hash: uint64(j), CreatedAt: created})
		}
		if err := bt.Commit(false); err != nil {
			b.Fatal(err)
		}
		bt.Close()
	}
	if err := db.Pebble().Flush(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkVisitorMemRebuild is Open's rebuild of the visitor memory from
// the name index: a million events of today by 50,000 visitors (the
// loaded phase's), read back into a fresh memory.
func BenchmarkVisitorMemRebuild(b *testing.B) {
	db := openTestDB(b, "")
	const stored = 1_000_000
	now := time.Now().UnixMilli()
	names := []string{"purchase", "page_view", "click", "signup"}
	for i := 0; i < stored; i += 1000 {
		bt := db.NewBatch()
		for j := i; j < i+1000; j++ {
			ts := now - int64(stored-j)
			e := Event{ID: idAt(ts, byte(j)), Name: names[j%len(names)], VisitorID: fmt.Sprintf("v_%d", j%50_000), HasVisitor: true,
				Timestamp: ts, Properties: []byte(`{}`)}
			bt.AddEvent(1, &e)
		}
		if err := bt.Commit(false); err != nil {
			b.Fatal(err)
		}
		bt.Close()
	}
	if err := db.Pebble().Flush(); err != nil {
		b.Fatal(err)
	}
	b.Run("warm", func(b *testing.B) {
		first := db.vmem.first
		for b.Loop() {
			db.vmem = newVisitorMem(0, db.inflight)
			db.vmem.first = first
			n, err := db.rebuildVisitorMem()
			if err != nil || n != stored {
				b.Fatal(n, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/stored, "ns/entry")
	})
	// As after a restart: a new block cache (Open rebuilds the memory).
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			db = db.reopen(b)
			if n := db.vmem.entries; n != stored {
				b.Fatal(n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/stored, "ns/entry")
	})
}
