package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eventd/eventd/storage/vfsdelay"
)

// PebbleOptions opens the storage baseline.
type PebbleOptions struct {
	// Dir holds the store; empty means a fresh temporary directory, removed
	// by Close.
	Dir string
	// FsyncDelay is added to every file sync, to show what group commit buys
	// on disks slower than the development machine's (cloud disks: 0.5-2 ms).
	FsyncDelay time.Duration
}

// PebbleBaseline is the storage ceiling: raw Pebble batch commits with
// pebble.Sync of records shaped like eventd's, with none of its other work.
// Keep one open for a whole bench run so every round writes into a store of
// the same age as eventd's.
type PebbleBaseline struct {
	db     *pebble.DB
	dir    string
	ownDir bool
	seq    atomic.Uint64
	done   atomic.Uint64
	ok     atomic.Uint64
}

// OpenPebbleBaseline creates the store.
func OpenPebbleBaseline(o PebbleOptions) (*PebbleBaseline, error) {
	b := &PebbleBaseline{dir: o.Dir}
	if b.dir == "" {
		d, err := os.MkdirTemp("", "eventd-bench-pebble-")
		if err != nil {
			return nil, err
		}
		b.dir, b.ownDir = d, true
	}
	var fs vfs.FS = vfs.Default
	if o.FsyncDelay > 0 {
		fs = vfsdelay.New(fs, o.FsyncDelay)
	}
	// The same memtable and stall tuning as eventd's storage (storage/db.go,
	// not imported: the bench is a client), so both stores stall alike.
	// Not eventd's L0 settings (one table per prefix per flush, L0
	// compacted at once): they serve eventd's tables split by key prefix,
	// and this store's tables hold every family. With them it ran at the
	// same rate for 35-65% more CPU (docs/benchmarks.md, session 18).
	db, err := pebble.Open(b.dir, &pebble.Options{
		FS:                          fs,
		Logger:                      quietLogger{},
		MemTableSize:                64 << 20,
		MemTableStopWritesThreshold: 4,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       24,
		FormatMajorVersion:          pebble.FormatNewest,
	})
	if err != nil {
		if b.ownDir {
			os.RemoveAll(b.dir)
		}
		return nil, err
	}
	b.db = db
	return b, nil
}

// Dir is where the store lives.
func (b *PebbleBaseline) Dir() string { return b.dir }

// Close closes the store and removes it if it was a temporary one.
func (b *PebbleBaseline) Close() error {
	err := b.db.Close()
	if b.ownDir {
		if rerr := os.RemoveAll(b.dir); err == nil {
			err = rerr
		}
	}
	return err
}

// Quiesce waits, at most max, until the store has no flush or compaction
// running, so that the background work a round left behind does not eat into
// the next subject's round (eventd's own compactions stay in its figures:
// they are its cost). It reports how long it waited.
func (b *PebbleBaseline) Quiesce(ctx context.Context, max time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < max && ctx.Err() == nil {
		m := b.db.Metrics()
		if m.Compact.NumInProgress == 0 && m.Flush.NumInProgress == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// Compact pays the store's compaction debt: it flushes the memtable and
// compacts every key down to the last level, and reports how long that took.
// Waiting for the debt is not enough after a bulk load: nearly all the
// ceiling's keys grow at their ends, so its flushed tables hardly overlap,
// L0 stayed one sublevel (340 tables after a load of 5 M), and Pebble
// schedules no compaction then until 500 tables have piled up, while its
// estimated debt stays above zero. The store would carry that debt into the
// loaded rounds without paying any of it there.
func (b *PebbleBaseline) Compact(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	err := b.db.Compact(ctx, []byte{0}, []byte{0xff}, true)
	return time.Since(start), err
}

// State reads the store's size and LSM shape (for the loaded phase).
func (b *PebbleBaseline) State() StoreState {
	m := b.db.Metrics()
	return StoreState{DiskBytes: DirSize(b.dir), HasLSM: true, L0Tables: m.Levels[0].TablesCount,
		L0Sublevels: m.Levels[0].Sublevels, Compactions: m.Compact.NumInProgress, CompactionDebt: m.Compact.EstimatedDebt}
}

// Progress reports commits done and succeeded so far, cumulative over runs,
// for a live progress line.
func (b *PebbleBaseline) Progress() (done, ok uint64) { return b.done.Load(), b.ok.Load() }

// PebbleRun is one measurement: Committers goroutines, each committing
// batches of EventsPerCommit events with Sync, as eventd's shards do.
type PebbleRun struct {
	Committers      int
	EventsPerCommit int
	Duration        time.Duration
	// MaxEvents bounds the run by count; 0 means no count bound.
	MaxEvents uint64
}

// Run commits until Duration or MaxEvents, and reports commits as requests
// and their latency, so the result reads like a closed-loop HTTP run.
func (b *PebbleBaseline) Run(ctx context.Context, r PebbleRun) (*Result, error) {
	if r.Committers <= 0 || r.EventsPerCommit <= 0 {
		return nil, errors.New("bench: PebbleRun needs Committers and EventsPerCommit")
	}
	if r.Duration <= 0 && r.MaxEvents == 0 {
		return nil, errors.New("bench: set PebbleRun.Duration or PebbleRun.MaxEvents")
	}
	var stop atomic.Bool
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		stop.Store(true)
	}()
	start := time.Now()
	var end time.Time
	if r.Duration > 0 {
		end = start.Add(r.Duration)
	}
	var claimed atomic.Uint64
	stats := make([]*workerStats, r.Committers)
	var wg sync.WaitGroup
	for w := range stats {
		st := &workerStats{}
		stats[w] = st
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.committer(start, end, r, &claimed, &stop, st)
		}()
	}
	wg.Wait()
	res := &Result{
		Mode:     ClosedLoop,
		Conns:    r.Committers,
		Elapsed:  time.Since(start),
		Started:  start,
		Statuses: map[int]uint64{},
		Errors:   map[string]uint64{},
	}
	for _, st := range stats {
		res.Latency.Merge(&st.lat)
		res.Service.Merge(&st.svc)
		res.Requests += st.requests
		res.OK += st.ok
		res.Events += st.events
		for k, n := range st.errs {
			res.Errors[k] += n
		}
		for len(res.PerSecond) < len(st.perSec) {
			res.PerSecond = append(res.PerSecond, Sample{Second: len(res.PerSecond)})
		}
		for i, s := range st.perSec {
			res.PerSecond[i].Requests += s.Requests
			res.PerSecond[i].OK += s.OK
			res.PerSecond[i].Events += s.Events
		}
	}
	return res, ctx.Err()
}

func (b *PebbleBaseline) committer(start, end time.Time, r PebbleRun, claimed *atomic.Uint64, stop *atomic.Bool, st *workerStats) {
	batch := b.db.NewBatch()
	defer batch.Close()
	var rec pebbleRecord
	var ids [][26]byte
	per := uint64(r.EventsPerCommit)
	for !stop.Load() {
		now := time.Now()
		if !end.IsZero() && !now.Before(end) {
			return
		}
		if r.MaxEvents > 0 && claimed.Add(per) > r.MaxEvents {
			return
		}
		batch.Reset()
		ms := uint64(now.UnixMilli())
		first := b.seq.Add(per) - per
		// Key family after family, as eventd's storage.Batch writes them:
		// Pebble's memtable inserts then start next to the previous key.
		ids = ids[:0]
		for n := first; n < first+per; n++ {
			ids = append(ids, rec.id(n))
		}
		for f := range pebbleFamilies {
			for i := range ids {
				rec.add(batch, f, first+uint64(i), ms, &ids[i])
			}
		}
		rec.counters(batch, ms, per)
		t0 := time.Now()
		err := batch.Commit(pebble.Sync)
		t1 := time.Now()
		st.lat.Record(t1.Sub(t0))
		st.svc.Record(t1.Sub(t0))
		st.requests++
		s := st.second(int(t1.Sub(start) / time.Second))
		s.Requests++
		b.done.Add(1)
		if err != nil {
			st.fail(err.Error())
			continue
		}
		st.ok++
		st.events += per
		s.OK++
		s.Events += per
		b.ok.Add(1)
	}
}

// pebbleRecord builds one event's writes in eventd's shape: the record under
// its id with a ~200-byte value, then time, name and visitor index entries,
// all keys of about 40 bytes; per commit, the six counter buckets (all events
// and the name, per minute, hour and day) that make list totals exact.
type pebbleRecord struct {
	key [PebbleKeySize]byte
	val [PebbleValueSize]byte
	cnt [8]byte
}

const pebbleDataset = 1

var pebbleName = []byte("purchase")

// pebbleFamilies are the key families of an event: record, time, name and
// visitor index.
const pebbleFamilies = 4

// add writes event n's key of family f (0 to pebbleFamilies-1); id is
// p.id(n).
func (p *pebbleRecord) add(b *pebble.Batch, f int, n, ms uint64, id *[26]byte) {
	k := p.key[:0]
	switch f {
	case 0: // E | dataset | id -> record
		k = append(k, 'E')
		k = binary.BigEndian.AppendUint32(k, pebbleDataset)
		k = appendID(k, id)
		v := p.val[:0]
		v = append(v, pebbleName...)
		v = append(v, "|v_"...)
		v = binary.BigEndian.AppendUint64(v, n)
		for len(v) < PebbleValueSize {
			v = append(v, byte('a'+len(v)%26))
		}
		_ = b.Set(k, v, nil)
	case 1: // T | dataset | ts | id
		k = append(k, 'T')
		k = binary.BigEndian.AppendUint32(k, pebbleDataset)
		k = binary.BigEndian.AppendUint64(k, ms)
		k = appendID(k, id)
		_ = b.Set(k, nil, nil)
	case 2: // N | dataset | name | ts | id
		k = append(k, 'N')
		k = binary.BigEndian.AppendUint32(k, pebbleDataset)
		k = append(k, pebbleName...)
		k = binary.BigEndian.AppendUint64(k, ms)
		k = appendID(k, id)
		_ = b.Set(k, nil, nil)
	default: // V | dataset | visitor | ts | id -> name
		k = append(k, 'V')
		k = binary.BigEndian.AppendUint32(k, pebbleDataset)
		k = binary.BigEndian.AppendUint64(k, n)
		k = binary.BigEndian.AppendUint64(k, ms)
		k = appendID(k, id)
		_ = b.Set(k, pebbleName, nil)
	}
}

// appendID ends a key with as much of the id as fits in PebbleKeySize,
// keeping its unique (low) end.
func appendID(k []byte, id *[26]byte) []byte {
	m := min(len(id), PebbleKeySize-len(k))
	return append(k, id[len(id)-m:]...)
}

// counters writes one commit's counter buckets, summed as eventd sums them.
func (p *pebbleRecord) counters(b *pebble.Batch, ms, n uint64) {
	for _, width := range [...]uint64{60_000, 3_600_000, 86_400_000} {
		for _, name := range [...][]byte{nil, pebbleName} {
			k := p.key[:0]
			k = append(k, 'C')
			k = binary.BigEndian.AppendUint32(k, pebbleDataset)
			k = append(k, name...)
			k = binary.BigEndian.AppendUint64(k, ms-ms%width)
			binary.BigEndian.PutUint64(p.cnt[:], n)
			_ = b.Set(k, p.cnt[:], nil)
		}
	}
}

// id makes a 26-character, time-sortable-looking id, the length of eventd's.
func (p *pebbleRecord) id(n uint64) (id [26]byte) {
	for i := range id {
		id[i] = '0'
	}
	for i := len(id) - 1; n > 0 && i >= 0; i-- {
		id[i] = byte('0' + n%10)
		n /= 10
	}
	return id
}

// quietLogger keeps Pebble's informational lines out of the bench's table
// but still surfaces errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}

func (quietLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
}

func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
