package storage

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Derived data (the C counters and U rollups) stays out of the synced
// commit's key count. A commit writes its events plus one L log entry that
// holds what the commit adds to the counters and rollups, summed per minute
// cell (derived_log.go). After the commit the same cells are folded into an
// in-memory overlay of open buckets; every DerivedInterval a checkpoint
// writes the overlay to Pebble as one merge operand per bucket and deletes
// the L entries it covers, in one batch. Reads add the overlay to what
// Pebble holds, so a total costs O(buckets), not O(commits since the last
// memtable flush), and an event costs one key of derived data, not twelve.
//
// A crash loses at most the overlay: the L entries it came from are still
// in Pebble (a checkpoint deletes them in the same atomic batch that writes
// their sums), and Open folds them in again. The log is per commit rather
// than a watermark event id because ids are not committed in id order (the
// shards commit concurrently, imports keep old ids) and because an erased
// record can no longer be re-derived, while its log entry can.
type derived struct {
	db       *DB
	log      *slog.Logger
	interval time.Duration
	seq      atomic.Uint64 // last L sequence number handed out

	// viewMu makes a reader's (snapshot, overlays) pair consistent with the
	// checkpoint: readers hold it shared while they take both; the checkpoint
	// holds it exclusively while it swaps overlays or applies one to Pebble.
	viewMu sync.RWMutex
	// mu guards the cur pointer and the content of every overlay: folds
	// write cur under it, readers read under it.
	mu     sync.Mutex
	cur    *overlay
	frozen *overlay // swapped out and being written; nil when none

	// ckptMu runs one checkpoint at a time; jobs that rewrite derived keys
	// (erasure rebuilds, dataset deletion) hold it so no checkpoint
	// interleaves with their read-then-write.
	ckptMu sync.Mutex
	// settling, when set (tests), is called by compactFrozen after each
	// bucket it settles, with no lock held.
	settling func()
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
}

// maxOverlayBuckets starts a checkpoint early when the overlay grows past
// it, e.g. an import spreading events over years of minutes.
const maxOverlayBuckets = 1 << 16

// DefaultDerivedInterval is how often the overlay is checkpointed when
// Options.DerivedInterval is 0. Each checkpoint's rollup operands span
// every series of a dataset in key order, so the memtable flush that
// carries them merges with every rollup table below, however small the
// operands: in a store holding 30 days of minute cells a 70 KB flushed
// table rewrote 11 MB. Five seconds instead of one made the bench's
// loaded rounds merge 40% fewer bytes (docs/benchmarks.md, session 38);
// a restart replays the commits of up to one interval.
const DefaultDerivedInterval = 5 * time.Second

// seriesKey is one event name (or "" for every event) of one dataset at one level.
type seriesKey struct {
	ds    uint32
	name  string
	level byte
}

// bucket is what the overlay holds of one counter and rollup bucket.
type bucket struct {
	count   int64
	roll    rollupValueMerger
	hasRoll bool
}

// overlay is the derived data of the commits folded since a checkpoint.
type overlay struct {
	series  map[seriesKey]map[int64]*bucket
	seqs    []uint64 // L entries folded in, deleted by its checkpoint
	buckets int
}

func newOverlay() *overlay { return &overlay{series: make(map[seriesKey]map[int64]*bucket)} }

func (o *overlay) empty() bool { return len(o.seqs) == 0 && o.buckets == 0 }

func (o *overlay) bucket(ds uint32, name string, level byte, start int64) *bucket {
	k := seriesKey{ds, name, level}
	s := o.series[k]
	if s == nil {
		s = make(map[int64]*bucket)
		o.series[k] = s
	}
	b := s[start]
	if b == nil {
		b = &bucket{}
		s[start] = b
		o.buckets++
	}
	return b
}

// add folds one minute cell into its minute, hour and day buckets.
func (o *overlay) add(c rollupCell, a *rollupAgg) {
	for _, level := range [...]byte{LevelMinute, LevelHour, LevelDay} {
		b := o.bucket(c.ds, c.name, level, floorTo(c.minute, levelWidth(level)))
		b.count += a.count
		if len(a.hll) == 0 && len(a.props) == 0 {
			continue
		}
		b.hasRoll = true
		for _, e := range a.hll {
			b.roll.sketch.addEntry(e)
		}
		if len(a.hll) > 0 {
			b.roll.hasSketch = true
		}
		for _, p := range a.props {
			addPropTo(&b.roll, p.name, p.v)
		}
	}
}

// compact settles every sketch, so that the overlay is only read from then on.
func (o *overlay) compact() {
	for _, s := range o.series {
		for _, b := range s {
			b.roll.sketch.compact()
		}
	}
}

// compactFrozen settles the frozen overlay's sketches one at a time, each
// on a copy taken and installed under mu: every commit's fold takes mu, so
// settling the whole overlay under it held every shard's next commit for
// 10 ms and more (docs/benchmarks.md, session 41). A reader that settles a
// sketch meanwhile (under mu) makes the install a no-op, as nothing adds
// to a frozen sketch. Folds and dropDatasets write only cur's maps, so
// walking frozen's needs no lock.
func (dv *derived) compactFrozen() {
	var buf []uint32
	for _, s := range dv.frozen.series {
		for _, b := range s {
			sk := &b.roll.sketch
			dv.mu.Lock()
			if len(sk.pending) == 0 {
				dv.mu.Unlock()
				continue
			}
			buf = append(buf[:0], sk.pending...)
			c := Sketch{sparse: sk.sparse, pending: buf, dense: sk.dense}
			dv.mu.Unlock()
			c.compact() // allocates what it keeps; sparse is not written
			c.pending = nil
			dv.mu.Lock()
			if len(sk.pending) != 0 { // else a reader settled it meanwhile
				*sk = c
			}
			dv.mu.Unlock()
			if dv.settling != nil {
				dv.settling()
			}
		}
	}
}

func newDerived(d *DB, log *slog.Logger, interval time.Duration) *derived {
	if interval <= 0 {
		interval = DefaultDerivedInterval
	}
	return &derived{db: d, log: log, interval: interval, cur: newOverlay(),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// fold adds a committed batch's cells (logged as L entry seq) to the
// overlay, and records which overlay took them in c (nil at replay).
func (dv *derived) fold(seq uint64, r *rollups, c *inflightCommit) {
	dv.mu.Lock()
	for cell, a := range r.cells {
		dv.cur.add(cell, a)
	}
	dv.cur.seqs = append(dv.cur.seqs, seq)
	if c != nil {
		c.into = dv.cur
	}
	big := dv.cur.buckets > maxOverlayBuckets
	dv.mu.Unlock()
	if big {
		select {
		case dv.kick <- struct{}{}:
		default:
		}
	}
}

// run checkpoints every interval, early when kicked, and once more at stop.
func (dv *derived) run() {
	defer close(dv.done)
	t := time.NewTicker(dv.interval)
	defer t.Stop()
	for {
		select {
		case <-dv.stop:
			dv.checkpoint()
			return
		case <-t.C:
		case <-dv.kick:
		}
		dv.checkpoint()
	}
}

// close stops the checkpoint loop after a last checkpoint.
func (dv *derived) close() {
	close(dv.stop)
	<-dv.done
}

// checkpoint writes the overlay to Pebble; failures are logged and retried
// at the next tick (the L entries keep the data safe meanwhile).
func (dv *derived) checkpoint() {
	dv.ckptMu.Lock()
	defer dv.ckptMu.Unlock()
	if err := dv.checkpointLocked(); err != nil && dv.log != nil {
		dv.log.Error("derived checkpoint", "err", err)
	}
}

// checkpointLocked freezes the overlay (unless a failed attempt left one
// frozen), settles its sketches and writes it: one merge operand per
// counter and rollup bucket and the deletion of its L entries, in one
// unsynced batch. Unsynced is enough: a crash that loses the batch loses
// its deletions too, and the L entries are folded in again at the next
// start.
func (dv *derived) checkpointLocked() error {
	if dv.db.readOnly {
		return nil
	}
	if dv.frozen == nil {
		dv.viewMu.Lock()
		dv.mu.Lock()
		if dv.cur.empty() {
			dv.mu.Unlock()
			dv.viewMu.Unlock()
			return nil
		}
		dv.frozen, dv.cur = dv.cur, newOverlay()
		dv.mu.Unlock()
		dv.viewMu.Unlock()
		dv.compactFrozen()
		dv.db.splits.observe(dv.frozen, time.Now())
	}
	b := dv.db.db.NewBatch()
	defer b.Close()
	o := dv.frozen
	var key, val []byte
	for sk, s := range o.series {
		for start, bk := range s {
			if bk.count != 0 {
				key = appendTS(counterPrefix(key[:0], sk.ds, sk.name, sk.level), start)
				val = appendCount(val[:0], bk.count)
				_ = b.Merge(key, val, nil)
			}
			if bk.hasRoll {
				key = appendTS(rollupPrefix(key[:0], sk.ds, sk.name, sk.level), start)
				val = bk.roll.appendValue(val[:0])
				_ = b.Merge(key, val, nil)
			}
		}
	}
	for _, seq := range o.seqs {
		_ = b.Delete(logKey(key[:0], seq), nil)
	}
	dv.viewMu.Lock()
	defer dv.viewMu.Unlock()
	if err := dv.db.commit(b, pebble.NoSync); err != nil {
		return err
	}
	dv.frozen = nil
	return nil
}

// dropDatasets forgets the overlay's buckets of deleted datasets; their L
// entries are still deleted by the next checkpoint.
func (dv *derived) dropDatasets(ds []uint32) {
	dv.mu.Lock()
	defer dv.mu.Unlock()
	for k, s := range dv.cur.series {
		if slices.Contains(ds, k.ds) {
			dv.cur.buckets -= len(s)
			delete(dv.cur.series, k)
		}
	}
}

// view is a consistent read of derived data: a Pebble snapshot plus the
// overlays not in it. Deltas folded into those overlays after the snapshot
// are included too, so a view never misses what was acknowledged before it
// was opened, and never counts a bucket's delta twice.
type view struct {
	dv    *derived
	snap  *pebble.Snapshot
	gens  [2]*overlay // frozen (may be nil) and current at the snapshot
	extra []seenCommit
}

// seenCommit is a commit the snapshot sees that was not folded when the
// view was opened (inflight.go), with its cells as a private overlay. It
// counts until it is folded into one of the view's gens.
type seenCommit struct {
	c *inflightCommit
	o *overlay
}

// view opens a consistent read; close it when done.
func (dv *derived) view() *view {
	dv.viewMu.RLock()
	defer dv.viewMu.RUnlock()
	v := &view{dv: dv, snap: dv.db.db.NewSnapshot()}
	// Under viewMu, before the gens are taken: a commit seen skips
	// because it ended was folded into cur first, and no checkpoint can
	// swap cur out before the gens below are taken.
	dv.db.inflight.seen(v.snap, func(c *inflightCommit) {
		o := newOverlay()
		for cell, a := range c.r.cells {
			o.add(cell, a)
		}
		o.compact()
		v.extra = append(v.extra, seenCommit{c, o})
	})
	dv.mu.Lock()
	v.gens = [2]*overlay{dv.frozen, dv.cur}
	dv.mu.Unlock()
	return v
}

// overlays calls fn with each overlay the view reads, under derived.mu: its
// gens and the commits not folded into either of them yet.
func (v *view) overlays(fn func(o *overlay)) {
	for _, o := range v.gens {
		if o != nil {
			fn(o)
		}
	}
	for _, x := range v.extra {
		if into := x.c.into; into == nil || (into != v.gens[0] && into != v.gens[1]) {
			fn(x.o)
		}
	}
}

func (v *view) close() { _ = v.snap.Close() }

// eachBucket calls fn for the overlay buckets of one series with start in
// [from, to), under the overlay lock: fn must not keep b.
func (v *view) eachBucket(ds uint32, name string, level byte, from, to int64, fn func(b *bucket)) {
	k := seriesKey{ds, name, level}
	v.dv.mu.Lock()
	defer v.dv.mu.Unlock()
	v.overlays(func(o *overlay) {
		for start, b := range o.series[k] {
			if start >= from && start < to {
				fn(b)
			}
		}
	})
}

// count is the overlay's part of the count of one series over [from, to).
func (v *view) count(ds uint32, name string, level byte, from, to int64) int64 {
	var n int64
	v.eachBucket(ds, name, level, from, to, func(b *bucket) { n += b.count })
	return n
}

// names adds to set the event names of ds the overlay has buckets for.
func (v *view) names(ds uint32, set map[string]bool) {
	v.dv.mu.Lock()
	defer v.dv.mu.Unlock()
	v.overlays(func(o *overlay) {
		for k := range o.series {
			if name, _ := splitBot([]byte(k.name)); k.ds == ds && len(name) > 0 {
				set[string(name)] = true
			}
		}
	})
}

// DerivedBacklog is the number of counter and rollup buckets and of commits
// held in memory since the last checkpoint (a crash replays those commits).
func (d *DB) DerivedBacklog() (buckets, commits int) {
	dv := d.derived
	dv.mu.Lock()
	defer dv.mu.Unlock()
	return dv.cur.buckets, len(dv.cur.seqs)
}
