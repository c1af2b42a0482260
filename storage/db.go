package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eventd/eventd/storage/wakeup"
)

// Options configure Open.
type Options struct {
	// FS replaces the real filesystem, e.g. to inject fsync delay in benchmarks.
	FS vfs.FS
	// Logger receives Pebble's messages; nil discards informational ones.
	Logger *slog.Logger
	// ReadOnly opens without writing anything, e.g. to check a backup.
	ReadOnly bool
	// CacheSize is the block cache in bytes (default DefaultCacheSize).
	CacheSize int64
	// OnFatal is called once, on its own goroutine, when Pebble reports an
	// error it cannot go on from (see FatalError); it must end the process.
	// nil exits with ExitFatal at once.
	OnFatal func(error)
	// DerivedInterval is how often counters and rollups held in memory are
	// checkpointed to Pebble (default DefaultDerivedInterval; derived.go).
	DerivedInterval time.Duration
	// WALMinSyncInterval spaces WAL fsyncs at least this far apart, so that
	// commits arriving meanwhile share the next one (Pebble's option; 0:
	// sync as soon as a commit asks).
	WALMinSyncInterval time.Duration
	// Events, if not nil, also receives Pebble's events (e.g. write stalls
	// for the metrics); its callbacks run on Pebble's goroutines and must
	// not block.
	Events *pebble.EventListener
	// VisitorMemory bounds the visitor index entries held in memory
	// (visitormem.go): past it the fullest day is split, what it holds
	// written to Pebble (default DefaultVisitorMemory).
	VisitorMemory int
	// LateMemory bounds the displaced events whose time index keys are
	// held in memory (latemem.go); past it the oldest seconds are written
	// early (default DefaultLateMemory).
	LateMemory int
	// IdempotencyFilterKeys bounds the idempotency keys the filter in
	// memory finds (idemslots.go); past it, keys are kept by day, which
	// look-ups then read too (default DefaultIdempotencyFilterKeys).
	IdempotencyFilterKeys int
	// IdempotencyFilterSave is how often the filter is saved to the
	// store's directory, besides at Close, so that a start reads it and
	// the records since instead of every record (idemsave.go; default
	// DefaultIdempotencyFilterSave, < 0: only at Close).
	IdempotencyFilterSave time.Duration
	// ScanPieces is how many goroutines a where= timeseries or list over a
	// long range reads it with (scanpieces.go; default: the number of
	// CPUs).
	ScanPieces int
	// Experiment is for measurements only (experiment.go); nil is the
	// production store.
	Experiment *Experiment
}

// DefaultWALMinSyncInterval is serve's --wal-min-sync-interval: at 16,667
// requests/s arriving spread out (the enterprise scenario) it cut server CPU
// per request by 11% and left single's closed loop as it was; 1 ms cut
// more CPU but took closed-loop single ingest from 0.32 to 0.19 of the
// no-op. Kept to the microsecond (wakeup), 300 µs did as well in single as
// 150 µs and better than 500 µs, 700 µs and 1 ms (docs/benchmarks.md,
// session 16).
const DefaultWALMinSyncInterval = 300 * time.Microsecond

// wakeMargin puts the wake-up after Pebble's sync timer, which Pebble sets
// just after asking for the interval: woken before it is due, the runtime
// would sleep again for the rounded-up millisecond.
const wakeMargin = 10 * time.Microsecond

// DefaultCacheSize is the block cache when Options.CacheSize is 0. Pebble's
// own default (8 MiB) makes every idempotency check and analytics sum read
// filter and data blocks from the OS: profiles of imports showed 40% of the
// time there.
const DefaultCacheSize = 256 << 20

// DB is eventd's store.
type DB struct {
	db       *pebble.DB
	wake     *wakeup.Timer // fires Pebble's WAL min-sync timer on time (package wakeup)
	fatal    *fatalState
	readOnly bool
	derived  *derived
	splits   *tableSplits // where flushed and compacted tables end (tablesplit.go)
	skip     skipKeys     // index keys AddEvent leaves out (Experiment only)
	links    linkCache
	// idemSlots finds the idempotency records kept by second
	// (idemslots.go). idemDays is the day partitions look-ups read when
	// they read them (idemDayInUse): while records of that layout written
	// before are left (idemDayLegacy) or when the filter was full.
	// idemLegacy says records of the layout before the days may be left
	// (idempotency.go).
	idemSlots     *idemSlots
	idemSaveStop  chan struct{} // ends the periodic saves (idemsave.go)
	idemSaveDone  chan struct{}
	idemDays      idemDayRange
	idemDayLegacy atomic.Bool
	idemLegacy    atomic.Bool
	// idemSlotLegacy says records by second kept one by one, before the
	// groups (idemgroups.go), may be left.
	idemSlotLegacy atomic.Bool
	// legacyVisitors: opened read-only before the visitor index moved to
	// day partitions, so readers use the old layout (visitors.go).
	legacyVisitors bool
	// oldRecords: opened read-only before the records were keyed by
	// timestamp (records.go); no event reads until a read-write open.
	oldRecords bool
	// vmem holds the visitor index of recent days (visitormem.go); sealer
	// writes finished days to Pebble as ingested tables (visitorseal.go).
	vmem   *visitorMem
	sealer *worker
	// late holds the recent displaced events' M and J keys, which lateW
	// writes to Pebble in time order (latemem.go).
	late  *lateMem
	lateW *worker
	// inflight holds the commits whose in-memory part (derived overlay,
	// visitor memory) is not done yet, for readers (inflight.go).
	inflight     *inflight
	commitHook   atomic.Pointer[func(commitStage)] // a test's: called as a commit passes each stage
	dir          string
	fs           vfs.FS
	tableOptions sstable.WriterOptions // the bottom level's, for ingested tables
	now          func() time.Time
	log          *slog.Logger // Options.Logger; nil: none
	pools        batchPools   // for Batch (batch.go)
	// maxIDMs is the latest id millisecond a batch of this process wrote,
	// raised before its commit (idCeil).
	maxIDMs atomic.Int64
	// scanPieces is Options.ScanPieces; pieceEvents the fewest events a
	// piece is cut to (minPieceEvents; tests lower it).
	scanPieces, pieceEvents int
}

// ErrNotFound is returned by lookups of missing records.
var ErrNotFound = errors.New("storage: not found")

// Open opens or creates the store in dir.
func Open(dir string, o Options) (*DB, error) {
	fatal := &fatalState{log: o.Logger, onFatal: o.OnFatal}
	bg := &backgroundErrors{log: o.Logger, sleep: time.Second}
	events := &pebble.EventListener{BackgroundError: bg.handle}
	if o.Events != nil {
		tee := pebble.TeeEventListener(*events, *o.Events)
		events = &tee
	}
	opts := &pebble.Options{
		Merger:        merger,
		Logger:        pebbleLogger{l: o.Logger, fatal: fatal},
		EventListener: events,
		FS:            o.FS,
		// Concurrent Sync commits from several shards share one fsync; a
		// larger memtable keeps write stalls away under sustained ingest.
		MemTableSize:                memTableSize,
		MemTableStopWritesThreshold: 4,
		// L0 is compacted as soon as it holds a table (see TargetFileSizes).
		L0CompactionThreshold: 1,
		L0StopWritesThreshold: 24,
		FormatMajorVersion:    pebble.FormatNewest,
		ReadOnly:              o.ReadOnly,
	}
	// A flush writes one table per key prefix, however large (Pebble's
	// default cuts it into 2 MiB pieces), and L0 is compacted as soon as it
	// holds one. The records and the name index grow at their ends, so a
	// flushed table of them overlaps nothing below and Pebble moves it down
	// as it is; a compaction of several pieces or of several flushes
	// rewrote them all once more. Lbase and below keep Pebble's sizes.
	// (docs/benchmarks.md, session 18: 19% less CPU per event in the
	// loaded batch.)
	opts.TargetFileSizes[0] = 2 * memTableSize
	opts.TargetFileSizes[1] = 4 << 20
	// One prefix per table (records, name index, log, idempotency keys...):
	// the records and the name index grow at their ends, so a flushed
	// table of them overlaps little below it, and compactions rewrite
	// 40% fewer bytes (docs/benchmarks.md, session 10). Busy datasets and
	// event names get tables of their own too (tablesplit.go).
	splits := newTableSplits()
	opts.Experimental.SpanPolicyFunc = splits.policy
	var wake *wakeup.Timer
	if o.WALMinSyncInterval > 0 && !o.ReadOnly {
		interval := o.WALMinSyncInterval
		var err error
		if wake, err = wakeup.New(); err != nil && o.Logger != nil {
			o.Logger.Warn("WAL syncs may wait up to 1 ms longer than --wal-min-sync-interval", "err", err)
		}
		// Pebble calls this after each sync and then sets a runtime timer
		// for the interval; the wake-up, due just after it, makes it fire on
		// time in a process that is otherwise idle (package wakeup).
		opts.WALMinSyncInterval = func() time.Duration {
			wake.Arm(interval + wakeMargin)
			return interval
		}
	}
	opened := false
	defer func() {
		if !opened {
			_ = wake.Close()
		}
	}()
	// Bloom filters: idempotency checks and import dedupe are point lookups
	// that mostly miss, and without a filter each miss reads an index and a
	// data block per level. They hold only the keys point look-ups read, in
	// the last level those of the idempotency seeks (filter.go).
	setFilters(opts)
	size := o.CacheSize
	if size <= 0 {
		size = DefaultCacheSize
	}
	cache := pebble.NewCache(size)
	defer cache.Unref() // Open takes its own reference
	opts.Cache = cache
	if o.Experiment != nil && o.Experiment.Pebble != nil {
		o.Experiment.Pebble(opts)
	}
	opts.EnsureDefaults() // as Open does to its copy: the ingested tables' writer options come from opts
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open pebble at %s: %w", dir, err)
	}
	commits := &inflight{}
	d := &DB{db: db, wake: wake, fatal: fatal, splits: splits, readOnly: o.ReadOnly, skip: o.Experiment.skip(),
		idemSlots: newIdemSlots(o.IdempotencyFilterKeys, o.Logger), vmem: newVisitorMem(o.VisitorMemory, commits), late: newLateMem(o.LateMemory), inflight: commits, dir: dir, fs: opts.FS, now: time.Now, log: o.Logger,
		tableOptions: opts.MakeWriterOptions(numLevels-1, db.TableFormat()), scanPieces: o.ScanPieces, pieceEvents: minPieceEvents}
	if d.scanPieces <= 0 {
		d.scanPieces = runtime.NumCPU()
	}
	if err := d.openRecords(o); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("key the event records of %s by timestamp: %w", dir, err)
	}
	if err := d.initIDCeil(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("read the latest record time of %s: %w", dir, err)
	}
	if err := d.openIdempotency(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("read the idempotency records of %s: %w", dir, err)
	}
	if err := d.openVisitorIndex(o); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("move the visitor index of %s to day partitions: %w", dir, err)
	}
	start := time.Now()
	n, err := d.loadLateMem()
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("rebuild the recent displaced events' time index of %s: %w", dir, err)
	}
	if n > 0 && o.Logger != nil {
		o.Logger.Info("recent displaced events' time index rebuilt in memory", "entries", n, "took", time.Since(start).Round(time.Millisecond))
	}
	start = time.Now()
	n, err = d.loadVisitorMem(start)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("rebuild the visitor index of recent days of %s: %w", dir, err)
	}
	d.lateVisitors() // their J keys are not in Pebble yet
	if n > 0 && o.Logger != nil {
		o.Logger.Info("visitor index of recent days rebuilt in memory", "entries", n, "took", time.Since(start).Round(time.Millisecond))
	}
	d.derived = newDerived(d, o.Logger, o.DerivedInterval)
	n, err = d.derived.replayLog()
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("replay the derived log of %s: %w", dir, err)
	}
	if n > 0 && o.Logger != nil {
		o.Logger.Info("derived log replayed", "commits", n)
	}
	// The idempotency filter is rebuilt while the store serves: look-ups
	// of idempotency keys wait for it (idemslots.go). It starts only now,
	// so that the visitor memory's rebuild, which the store waits for, has
	// both cores: beside it, a start after kill -9 took up to twice as
	// long (docs/benchmarks.md, session 29).
	go d.rebuildIdemSlots(d.now())
	every := o.IdempotencyFilterSave
	if every == 0 {
		every = DefaultIdempotencyFilterSave
	}
	if !o.ReadOnly && d.idemSlots.filter != nil && every > 0 {
		d.idemSaveStop, d.idemSaveDone = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(d.idemSaveDone)
			d.saveIdemSlotsEvery(every, d.idemSaveStop)
		}()
	}
	if !o.ReadOnly {
		d.derived.checkpoint()
		go d.derived.run()
		if err := d.removeVisitorTables(); err != nil {
			d.derived.close()
			<-d.idemSlots.ready // its rebuild reads Pebble
			d.stopSavingIdemSlots()
			_ = db.Close()
			return nil, fmt.Errorf("remove unfinished visitor index tables of %s: %w", dir, err)
		}
		d.sealer = d.runVisitorSealer()
		d.lateW = d.runLateWriter()
	}
	opened = true
	return d, nil
}

// memTableSize is the size of each of Pebble's memtables.
const memTableSize = 64 << 20

// numLevels is Pebble's number of LSM levels.
const numLevels = 7

// Close checkpoints the derived data, then flushes and closes the store.
// The visitor index days in memory need nothing: Open rebuilds them. The
// displaced events' keys in memory are written, so that Open need not read
// their records again.
func (d *DB) Close() error {
	<-d.idemSlots.ready // its rebuild reads Pebble
	d.stopSavingIdemSlots()
	var err error
	if !d.readOnly {
		d.lateW.close()
		d.sealer.close()
		err = d.writeLate(true)
		d.derived.close()
		if d.idemSlots.loadErr == nil {
			// So that the next start reads it instead of every record.
			if serr := d.saveIdemSlots(); serr != nil && d.log != nil {
				d.log.Warn("save the idempotency filter", "err", serr)
			}
		}
	}
	if cerr := d.db.Close(); err == nil {
		err = cerr
	}
	_ = d.wake.Close() // after Pebble: it arms the timer until its WAL is closed
	return err
}

// Pebble exposes the underlying database for checkpoints and metrics.
func (d *DB) Pebble() *pebble.DB { return d.db }

// Metrics is Pebble's snapshot of its internals (LSM shape, flushes,
// compactions, WAL, fsync latency), read at scrape time: it takes Pebble's
// locks briefly, so it must not be called per request.
func (d *DB) Metrics() *pebble.Metrics { return d.db.Metrics() }

// Flush makes the WAL durable: used at shutdown and after non-synced writes.
func (d *DB) Flush() error {
	if d.readOnly {
		return nil // nothing was written
	}
	return d.apply(func() error { return d.db.LogData(nil, pebble.Sync) })
}

func (d *DB) get(key []byte) ([]byte, error) {
	v, closer, err := d.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), v...)
	return out, closer.Close()
}

// has reports whether key is set, without copying its value.
func (d *DB) has(key []byte) (bool, error) {
	_, closer, err := d.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, closer.Close()
}

// PutConfig stores a configuration record durably.
func (d *DB) PutConfig(kind, id string, value []byte) error {
	return d.apply(func() error { return d.db.Set(configKey(kind, id), value, pebble.Sync) })
}

// GetConfig reads a configuration record, ErrNotFound if missing.
func (d *DB) GetConfig(kind, id string) ([]byte, error) { return d.get(configKey(kind, id)) }

// DeleteConfig removes a configuration record durably.
func (d *DB) DeleteConfig(kind, id string) error {
	return d.apply(func() error { return d.db.Delete(configKey(kind, id), pebble.Sync) })
}

// ScanConfig calls fn for every record of kind, in id order; fn must copy what it keeps.
func (d *DB) ScanConfig(kind string, fn func(id string, value []byte) error) error {
	prefix := configKey(kind, "")
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		if err := fn(string(it.Key()[len(prefix):]), it.Value()); err != nil {
			_ = it.Close()
			return err
		}
	}
	return it.Close()
}

// PutWindows stores a key's rate-limit state. It is not synced on its own:
// the next synced commit (at most a moment later) or Flush makes it durable,
// and losing a few seconds of counts after a crash is acceptable.
func (d *DB) PutWindows(keyID string, state []byte) error {
	if d.readOnly {
		return nil // a store opened read-only (full disk) keeps the counts in memory only
	}
	return d.apply(func() error { return d.db.Set(windowsKey(keyID), state, pebble.NoSync) })
}

// GetWindows reads a key's rate-limit state, ErrNotFound if none.
func (d *DB) GetWindows(keyID string) ([]byte, error) { return d.get(windowsKey(keyID)) }

// DeleteDatasets removes every event, index entry and counter of the datasets.
func (d *DB) DeleteDatasets(ds ...uint32) error {
	m := d.vmem
	m.sealMu.Lock() // no day of these datasets is being written meanwhile
	defer m.sealMu.Unlock()
	// Checkpoint first, so no overlay bucket or L entry of these datasets
	// is written back after the range deletions.
	dv := d.derived
	dv.ckptMu.Lock()
	defer dv.ckptMu.Unlock()
	if err := dv.checkpointLocked(); err != nil {
		return err
	}
	defer dv.dropDatasets(ds)
	defer d.links.clear()
	b := d.db.NewBatch()
	defer b.Close()
	for _, n := range ds {
		for _, p := range datasetPrefixes {
			lo := appendDataset(nil, p, n)
			hi := appendDataset(nil, p, n+1)
			if err := b.DeleteRange(lo, hi, nil); err != nil {
				return err
			}
		}
	}
	l := d.late
	m.commitMu.Lock() // no commit between its write and its memory add
	defer m.commitMu.Unlock()
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := d.commit(b, pebble.Sync); err != nil {
		return err
	}
	m.dropDatasets(ds)
	l.dropDatasets(ds)
	return nil
}

// deleteChunk bounds the deletions deleteWhere commits at once: an hourly
// sweep of a busy store's idempotency records would otherwise build one
// batch of every record of the hour (tens of millions, gigabytes).
const deleteChunk = 8192

// deleteWhere deletes the keys of [lower, upper) for which drop says so, in
// batches of at most deleteChunk (synced or not), and returns how many went.
// The deletions are not atomic as a whole: its callers delete what has
// expired or must go, and repeat the whole pass if it stops half way. Each
// candidate is read again just before its batch is committed: the scan
// sees the store as of its start, and a key written again since (an
// expired idempotency key used anew) must not go.
func (d *DB) deleteWhere(lower, upper []byte, sync bool, drop func(key, value []byte) bool) (int, error) {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	b := d.db.NewBatch()
	defer b.Close()
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
	}
	var keys []byte // the candidates' keys, back to back
	var ends []int  // where each ends in keys
	n := 0
	flush := func() error {
		start := 0
		for _, end := range ends {
			k := keys[start:end]
			start = end
			v, closer, err := d.db.Get(k)
			if err == pebble.ErrNotFound {
				continue
			}
			if err != nil {
				return err
			}
			again := drop(k, v)
			_ = closer.Close()
			if again {
				_ = b.Delete(k, nil)
			}
		}
		keys, ends = keys[:0], ends[:0]
		if b.Empty() {
			return nil
		}
		count := int(b.Count())
		if err := d.commit(b, opts); err != nil {
			return err
		}
		n += count
		b.Reset()
		return nil
	}
	for it.First(); it.Valid(); it.Next() {
		if !drop(it.Key(), it.Value()) {
			continue
		}
		keys = append(keys, it.Key()...)
		ends = append(ends, len(keys))
		if len(ends) == deleteChunk {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := it.Error(); err != nil {
		return n, err
	}
	return n, flush()
}

// openIndex opens the index a dataset query walks over timestamps [from,
// to]: the visitor's, the name's, or the records of every event.
func (d *DB) openIndex(ds uint32, name, visitor string, hasVisitor bool, from, to int64) (indexIter, error) {
	if hasVisitor {
		return openVisitor(d.db, d.vmem, d.legacyVisitors, ds, visitor, from, to)
	}
	its, err := d.openPieces(ds, name, from, to, nil)
	if err != nil {
		return nil, err
	}
	return its[0], nil
}

// openPieces is openIndex without a visitor, cut at the times in cuts
// (increasing, in (from, to]) into one iterator per piece, all on one
// view (openTimes).
func (d *DB) openPieces(ds uint32, name string, from, to int64, cuts []int64) ([]indexIter, error) {
	prefix := appendDataset(nil, prefixRecord, ds)
	if name != "" {
		prefix = namePrefix(nil, ds, name)
	}
	lower, upper := rangeBounds(prefix, from, to)
	bounds := append(make([][]byte, 0, len(cuts)+2), lower)
	for _, c := range cuts {
		lo, _ := rangeBounds(prefix, c, c)
		bounds = append(bounds, lo)
	}
	ts, err := d.openTimes(append(bounds, upper))
	if err != nil {
		return nil, err
	}
	its := make([]indexIter, len(ts))
	for i, t := range ts {
		if its[i] = t; name == "" {
			its[i] = &recordIndex{timeIter: t}
		}
	}
	return its, nil
}
