package storage

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// VisitorSealGrace is how long after its end a day stays in memory, so
// that events sent late (queued in a browser or an SDK) still find it
// there; an entry that arrives after its day was sealed is written to
// Pebble directly.
const VisitorSealGrace = time.Hour

// visitorSealCheck is how often the sealer looks for a day that is over.
const visitorSealCheck = time.Minute

// runVisitorSealer seals each day once it is over and, when memory passes
// its bound, splits the fullest day; failures are logged (d.log) and
// retried.
func (d *DB) runVisitorSealer() *worker {
	// At once: a day may have ended while the store was closed.
	return startWorker(visitorSealCheck, d.vmem.kick, true, func() {
		if err := d.sealDue(d.now()); err != nil && d.log != nil {
			d.log.Error("seal the visitor index of a day", "err", err)
		}
	})
}

// sealDue seals the days that are over at now, then, while memory holds
// more than its bound, splits the fullest day (or a day whose visitor
// arena is near its limit), each day once: commits fill a split day again
// meanwhile, and a pass that split it again and again would never return
// to the sealer's stop.
func (d *DB) sealDue(now time.Time) error {
	m := d.vmem
	split := map[uint32]bool{}
	for {
		m.mu.Lock()
		day, over := m.first, m.first < visitorDay(now.Add(-VisitorSealGrace).UnixMilli())
		due := over
		if !due {
			day, due = m.overBound()
		}
		m.mu.Unlock()
		if !due || (!over && split[day]) {
			return nil
		}
		split[day] = !over
		if err := d.sealVisitorDay(day, over); err != nil {
			return err
		}
		m.mu.Lock()
		stuck := over && m.inMemory(day)
		m.mu.Unlock()
		if stuck { // cannot happen; never spin on it
			return fmt.Errorf("day %d still in memory after its seal", day)
		}
	}
}

// removeVisitorTables deletes tables a crash left half written; Pebble
// does not know them (it links an ingested file under its own name).
func (d *DB) removeVisitorTables() error {
	names, err := d.fs.List(d.dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasPrefix(n, "visitors-") && strings.HasSuffix(n, ".sst") {
			if err := d.fs.Remove(d.fs.PathJoin(d.dir, n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// fullestDay is the memory day holding the most entries; callers hold mu.
func (m *visitorMem) fullestDay() uint32 {
	best, n := m.first, uint32(0)
	for day, md := range m.days {
		if md.n > n || md.n == n && day < best {
			best, n = day, md.n
		}
	}
	return best
}

// daySnapshot is what the table writer reads of a sealing day, taken
// under mu: the entries below n, the visitors and their bytes. None of it
// changes while the day is sealing (new entries go after n, new visitors
// after these; erasure and retention wait for sealMu), so it is read
// without the lock.
type daySnapshot struct {
	blocks [][]memEntry
	n      uint32
	arena  [][]byte
	vis    []uint32
}

func (md *memDay) snapshot() daySnapshot {
	return daySnapshot{blocks: slices.Clone(md.blocks), n: md.n, arena: slices.Clone(md.arena), vis: md.vis}
}

// sealVisitorDay writes what memory holds of a day to Pebble: its entries
// as sorted sstables (one per dataset, so that the first part of a day
// covers a key range no other file touches and Pebble places it in the
// bottom level), ingested, and then, in one synced batch, the entries that
// neither the tables nor memory will hold and the new visitorDaysKey and
// visitorSplitsKey records (switchVisitorDay). A day that is over leaves
// memory; any other is split (visitormem.go): its part is frozen first, so
// that commits go on into a new part while the tables are written, and
// readers take both parts until the switch. (Before session 17 commits
// added to the part being written, and the switch, which holds them all,
// wrote what they had added meanwhile as W keys: 72 ms and 406,100 keys for
// a split during an import; docs/benchmarks.md.) Until that batch commits
// the recorded state is unchanged, and readers use the memory where the
// ingested keys repeat it, so a crash at any point leaves a consistent
// store: Open rebuilds a day being split, both parts, from the name index.
// A split that fails puts the parts together again.
func (d *DB) sealVisitorDay(day uint32, over bool) error {
	m := d.vmem
	m.sealMu.Lock()
	defer m.sealMu.Unlock()
	dt, ok := d.takeVisitorDay(day, !over)
	if !ok {
		return nil
	}
	paths, datasets, err := d.writeVisitorTables(day, dt.snap, dt.names)
	if err == nil && len(paths) > 0 {
		// No ingested key may name an event a crash can still lose:
		// readers take a split day's Pebble keys as entries, and a stale
		// key of a dataset the day's next tables do not hold is never
		// cleared. eventd commits events with sync, but Batch.Commit
		// allows one without; one fsync per seal covers both.
		err = d.apply(func() error { return d.db.LogData(nil, pebble.Sync) })
	}
	var held time.Duration
	if err == nil {
		held, err = d.switchVisitorDay(day, over, dt, paths, datasets)
	}
	switch {
	case err != nil && !over:
		m.thaw(day)
	case err == nil && !over && d.log != nil: // past --visitor-memory: an operator may raise it
		d.log.Info("visitor index day split", "day", time.UnixMilli(int64(day)*dayMs).UTC().Format(time.DateOnly),
			"entries_written", dt.snap.n, "bound", m.max, "commits_held", held.Round(time.Microsecond))
	}
	for _, p := range paths {
		_ = d.fs.Remove(p) // ingested files are linked into the store; what is left is ours
	}
	return err
}

// dayTables is what a seal writes: a day's part, the snapshot of it that
// its tables hold, the names they read, and when the snapshot was taken.
type dayTables struct {
	md    *memDay
	snap  daySnapshot
	names []string
	at    time.Time
}

// takeVisitorDay snapshots a memory day's part for its tables; false when
// the day is not in memory. With freeze (a split) the part is frozen and
// the day starts a new one. Under mu alone: a commit adds its entries
// under mu, and the day's since, by which it decided that they go to
// memory, changes only at the switch.
func (d *DB) takeVisitorDay(day uint32, freeze bool) (dayTables, bool) {
	m := d.vmem
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.inMemory(day) {
		return dayTables{}, false
	}
	md := m.days[day]
	if md == nil {
		md = newMemDay()
		m.days[day] = md
	}
	if freeze {
		m.frozen[day] = md
		m.days[day] = newMemDay()
	}
	return dayTables{md: md, snap: md.snapshot(), names: m.names, at: d.now()}, true
}

// thaw undoes a split that failed: the day's new part goes back into its
// frozen one, which holds the day again.
func (m *visitorMem) thaw(day uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	md := m.frozen[day]
	if md == nil {
		return
	}
	delete(m.frozen, day)
	if part := m.days[day]; part != nil {
		for i := range part.n {
			e := *part.entry(i)
			ds, vis := part.visitor(e.vis)
			v := memVisitor{ds, string(vis)}
			md.add(m.hash(v), v, e)
		}
	}
	m.days[day] = md
}

// writeVisitorTables writes a sealing day's entries as one sstable per
// dataset in key order and returns their paths: the visitors sorted by
// their arena bytes (which order as the keys do), each visitor's entries
// grouped by a counting sort and put in key order.
func (d *DB) writeVisitorTables(day uint32, snap daySnapshot, names []string) (paths []string, datasets []uint32, err error) {
	order := sealOrder(snap)                 // visitor numbers in key order
	start := make([]uint32, len(snap.vis)+1) // by position in order: where its entries start
	pos := make([]uint32, len(snap.vis))     // by visitor number: its position in order
	for p, num := range order {
		pos[num] = uint32(p)
	}
	entry := func(i uint32) *memEntry { return &snap.blocks[i/entryChunk][i%entryChunk] }
	for i := range snap.n {
		if e := entry(i); e.flags&entryRemoved == 0 {
			start[pos[e.vis]+1]++
		}
	}
	for p := 1; p < len(start); p++ {
		start[p] += start[p-1]
	}
	grouped := make([]memEntry, start[len(start)-1])
	next := slices.Clone(start[:len(start)-1])
	for i := range snap.n {
		if e := entry(i); e.flags&entryRemoved == 0 {
			grouped[next[pos[e.vis]]] = *e
			next[pos[e.vis]]++
		}
	}

	var w *sstable.Writer
	defer func() {
		if w != nil {
			_ = w.Close()
		}
	}()
	var pfx, k, val []byte
	lastDS := uint32(math.MaxUint32)
	var peeked uint32
	for p, num := range order {
		// In key order the visitors' bytes are anywhere in the arena: load
		// the next few visitors' first bytes in a loop that does nothing
		// else, so that their cache misses overlap instead of coming one
		// after the other in the writes (BenchmarkWriteVisitorTables).
		if p%lookAhead == 0 {
			peeked += snap.touch(order[p:min(p+lookAhead, len(order))])
		}
		s := grouped[start[p]:start[p+1]]
		if len(s) == 0 {
			continue
		}
		vb := visitorBytes(snap.arena, snap.vis, num)
		ds := binary.BigEndian.Uint32(vb)
		if w == nil || ds != lastDS {
			if w != nil {
				err, w = w.Close(), nil
				if err != nil {
					return paths, datasets, err
				}
			}
			path := d.fs.PathJoin(d.dir, fmt.Sprintf("visitors-%d-%d.sst", day, ds))
			f, err := d.fs.Create(path, vfs.WriteCategoryUnspecified)
			if err != nil {
				return paths, datasets, err
			}
			paths = append(paths, path)
			datasets = append(datasets, ds)
			f = vfs.NewSyncingFile(f, vfs.SyncingFileOptions{BytesPerSync: visitorTableBytesPerSync})
			w = sstable.NewWriter(objstorageprovider.NewFileWritable(f), d.tableOptions)
			lastDS = ds
		}
		s = sortEntries(s)
		pfx = visitorDayPrefix(pfx[:0], ds, day, vb[6:])
		for i := range s {
			k = append(appendTS(append(k[:0], pfx...), s[i].ts), s[i].id[:]...)
			val = visitorValue(val[:0], s[i].bot(), names[s[i].name])
			if err := w.Set(k, val); err != nil {
				return paths, datasets, err
			}
		}
	}
	if w != nil {
		err, w = w.Close(), nil
	}
	keepLoads(peeked)
	return paths, datasets, err
}

// visitorTableBytesPerSync is how much of a visitor table is written
// before the kernel is asked to write it back (sync_file_range), as Pebble
// does its own tables (Options.BytesPerSync): written back all at the
// table's fsync, a day's tables of 4 M entries held fdatasyncs of another
// file beside them up to 149-210 ms, written back as they go 44-49 ms
// (BenchmarkVisitorTablesBesideSyncs).
const visitorTableBytesPerSync = 1 << 20

// lookAhead is how many visitors writeVisitorTables loads at once.
const lookAhead = 64

// touch loads the places in the arena of visitors nums, then their first
// bytes, and returns their sum (for keepLoads).
func (s daySnapshot) touch(nums []uint32) uint32 {
	var refs [lookAhead]uint32
	for i, num := range nums {
		refs[i] = s.vis[num]
	}
	var sum uint32
	for _, ref := range refs[:len(nums)] {
		sum += uint32(s.arena[ref>>arenaChunkBits][ref&(1<<arenaChunkBits-1)])
	}
	return sum
}

// clearStaleVisitorKeys range-deletes the day's W keys of the datasets
// that have any, before the day's tables go in: Pebble may hold keys of a
// memory day that readers skip (the previous build wrote today's keys; a
// crash after an ingest left its tables), and one of them may belong to an
// event that is gone since (erased, or an unsynced commit lost). It seeks
// once per dataset; there is usually nothing to delete, and then no range
// deletion is written (it would make compactions rewrite the ingested day).
func (d *DB) clearStaleVisitorKeys(day uint32, datasets []uint32) error {
	b := d.db.NewBatch()
	defer b.Close()
	for _, ds := range datasets {
		lo, hi := visitorDayBound(ds, day), prefixEnd(visitorDayBound(ds, day))
		it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return err
		}
		stale := it.First()
		if err := it.Close(); err != nil {
			return err
		}
		if stale {
			_ = b.DeleteRange(lo, hi, nil)
		}
	}
	if b.Empty() {
		return nil
	}
	return d.commit(b, pebble.NoSync)
}

// switchVisitorDay ingests a sealing day's tables and records the day's
// move, with no commit in flight (commitMu: none decides by the old
// records and adds after) and no reader opening (mu). It writes, in one
// synced batch with the new records, as W keys the day's entries that
// neither the tables nor memory will hold. A day that is over leaves
// memory: the entries its part took after the snapshot. A split day (dt
// its frozen part) is held in memory from since (dt.at less the slack)
// on: the entries its new part took dated before since (sent late, or in
// flight at the freeze), which then leave memory.
// It returns how long it held the commits (set by the deferred unlock on
// every return).
func (d *DB) switchVisitorDay(day uint32, over bool, dt dayTables, paths []string, datasets []uint32) (held time.Duration, err error) {
	m := d.vmem
	m.commitMu.Lock()
	start := time.Now()
	defer func() {
		m.commitMu.Unlock()
		held = time.Since(start)
	}()
	m.mu.Lock()
	defer m.mu.Unlock()
	if over && day != m.first {
		return 0, fmt.Errorf("sealing day %d, but the first day in memory is %d", day, m.first)
	}
	if _, split := m.since[day]; !split { // a split day's keys are its earlier parts
		if err := d.clearStaleVisitorKeys(day, datasets); err != nil {
			return 0, err
		}
	}
	if len(paths) > 0 {
		if err := d.apply(func() error { return d.db.Ingest(context.Background(), paths) }); err != nil {
			return 0, err
		}
	}
	first, since := m.first, m.since
	m.since = maps.Clone(since)
	part, from, before := dt.md, dt.snap.n, int64(math.MaxInt64)
	if over {
		m.first = day + 1
		delete(m.since, day)
	} else {
		before = splitSince(dt.at, day)
		m.since[day] = before
		part, from = m.days[day], 0
	}
	b := d.db.NewBatch()
	defer b.Close()
	var late []uint32
	var k, val []byte
	for i := from; i < part.n; i++ {
		e := part.entry(i)
		if e.flags&entryRemoved != 0 || e.ts >= before {
			continue
		}
		ds, vis := part.visitor(e.vis)
		k = visitorKey(k[:0], ds, string(vis), e.ts, e.id)
		val = visitorValue(val[:0], e.bot(), m.names[e.name])
		_ = b.Set(k, val, nil)
		if !over {
			late = append(late, i)
		}
	}
	_ = b.Set(visitorDaysKey, m.encodeDays(), nil)
	_ = b.Set(visitorSplitsKey, m.encodeSplits(), nil)
	if err := d.commit(b, pebble.Sync); err != nil {
		m.first, m.since = first, since
		return 0, err
	}
	if over {
		delete(m.days, day)
	} else {
		for _, i := range late {
			part.entry(i).flags |= entryRemoved
		}
		delete(m.frozen, day)
	}
	m.entries -= int(dt.md.n)
	return 0, nil
}

// splitSince is where the memory part of day starts when it is split at
// now: a little before now, within the day. A day split after its end (an
// import of old events past the bound) keeps nothing more in memory; one
// split before its start (events dated ahead) keeps all its later entries.
func splitSince(now time.Time, day uint32) int64 {
	start := int64(day) * dayMs
	return min(max(now.Add(-visitorSplitSlack).UnixMilli(), start), start+dayMs)
}
