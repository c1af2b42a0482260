// Command eventd-keycost measures what each index key and each Pebble
// setting costs per stored event (issue 12, item 2). In one process it opens
// a storage.DB in a temporary directory, writes events shaped like the
// bench's through storage.Batch in synced commits from a few concurrent
// committers (as the shards do), flushes, waits until Pebble stops
// flushing and compacting on its own (the tail), then compacts everything
// to the bottom level (the drain), and prints per event: the process CPU
// (getrusage user+sys, which includes Pebble's flushes and compactions) of
// the writes, the tail and the drain, the WAL, flushed and compacted bytes,
// the size on disk, and the deepest L0 seen. A variant leaves index
// keys out or changes one Pebble option (see variants); it never runs in
// serve. One JSON line per run goes to --json for the optimisation log.
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eventd/eventd/bench"
	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/storage"
)

// variant is one configuration under measurement.
type variant struct {
	about string
	exp   storage.Experiment
	gen   bool // generate the events but store nothing: the generator's own CPU
	// idem, if set, gives each event an idempotency key (as a Segment
	// message's messageId is) written beside it, as the shards do.
	idem      func(k uint64, ms int64) string
	hashedKey bool // idem's keys stand for the key id too
	// ingestVisitors leaves the visitor index out of the commits and, after
	// the tail, writes it as one sorted sstable ingested into the store:
	// what building each finished day's partition once would cost (the
	// key layout of storage/visitors.go, W ds day len2 visitor ts id).
	ingestVisitors bool
	// displace, if not 0, sets each event's timestamp this many
	// milliseconds before its id's, as clients that send their own do.
	displace int64
	// jitter, if not 0, sets each event's timestamp up to this many
	// milliseconds before its id's, spread evenly: an SDK's queue delay
	// (analytics-node sends every 10 s), so records arrive out of order.
	jitter int64
	// segment adds what a Segment track message is stored with beside
	// the native event's properties ($event_name, $context, $user_id).
	segment bool
	// datasets, if more than 1, spreads the events evenly over that many
	// datasets (projects and environments).
	datasets uint64
	// idemKeys, if more than 1, spreads the idempotency keys evenly over
	// that many API keys (Segment sources).
	idemKeys uint64
}

// splitAtPrefixOnly ends tables only where the key's first byte changes,
// as eventd did before busy datasets and names got tables of their own
// (session 19).
func splitAtPrefixOnly(o *pebble.Options) {
	o.Experimental.SpanPolicyFunc = func(start []byte) (pebble.SpanPolicy, []byte, error) {
		if len(start) == 0 || start[0] == 0xff {
			return pebble.SpanPolicy{}, nil, nil
		}
		return pebble.SpanPolicy{}, []byte{start[0] + 1}, nil
	}
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// idemKeyID is as long as eventd's key ids (key_ and 16 characters).
const idemKeyID = "key_0123456789abcdef"

// segmentMessageID is what analytics-node and analytics.js send:
// node-next-<Unix ms>-<UUID v4>, ordered by time, then random.
func segmentMessageID(k uint64, ms int64) string {
	b := make([]byte, 0, 64)
	b = append(b, "node-next-"...)
	b = strconv.AppendInt(b, ms, 10)
	b = append(b, '-')
	return string(bench.AppendUUID(b, k))
}

// uuidMessageID is what analytics-go and the mobile SDKs send: a UUID v4,
// random from its first character.
func uuidMessageID(k uint64, _ int64) string { return string(bench.AppendUUID(make([]byte, 0, 36), k)) }

// splitAtDatasets ends every flushed or compacted table where the key's
// first byte or the dataset after it changes (eventd splits at the first
// byte only).
func splitAtDatasets(o *pebble.Options) {
	o.Experimental.SpanPolicyFunc = func(start []byte) (pebble.SpanPolicy, []byte, error) {
		if len(start) >= 5 {
			if ds := binary.BigEndian.Uint32(start[1:5]); ds != ^uint32(0) {
				return pebble.SpanPolicy{}, binary.BigEndian.AppendUint32([]byte{start[0]}, ds+1), nil
			}
		}
		if len(start) == 0 || start[0] == 0xff {
			return pebble.SpanPolicy{}, nil, nil
		}
		return pebble.SpanPolicy{}, []byte{start[0] + 1}, nil
	}
}

// compressionOff turns compression off at the first levels and keeps
// Pebble's default (Snappy) on the others:
// a level without its own Compression inherits the one above it, so turning
// compression off at the top levels must set the lower ones explicitly.
func compressionOff(levels int) func(*pebble.Options) {
	return func(o *pebble.Options) {
		for i := range o.Levels {
			p := sstable.SnappyCompression
			if i < levels {
				p = sstable.NoCompression
			}
			o.Levels[i].Compression = func() *sstable.CompressionProfile { return p }
		}
	}
}

var variants = map[string]variant{
	"all":         {about: "today's store: S record, N and W (visitor) index keys, one L entry per commit"},
	"displaced":   {about: "as all, each event with a client timestamp 1.5 s before its id's (the record under Z, the M and J keys through the late memory)", displace: 1500},
	"segShape":    {about: "as all, each event with what a Segment track message adds to its properties", segment: true},
	"jitter":      {about: "as all, each event with a client timestamp 0-10 s before its id's, as an SDK's queue leaves it (as displaced)", jitter: 10_000},
	"jitter5ms":   {about: "as jitter, timestamps 0-5 ms before their ids' (network and queueing of one request)", jitter: 5},
	"jitter100ms": {about: "as jitter, timestamps 0-100 ms before their ids'", jitter: 100},
	"jitter1s":    {about: "as jitter, timestamps 0-1 s before their ids'", jitter: 1000},
	"segJitter":   {about: "as segment, with the client timestamps of jitter", segment: true, jitter: 10_000, idem: segmentMessageID},
	"segment":     {about: "as a Segment track message is stored: its properties, a client timestamp (as displaced) and its messageId (an idempotency record)", segment: true, displace: 1500, idem: segmentMessageID},
	"noV":         {about: "without the visitor index (V)", exp: storage.Experiment{SkipVisitor: true}},
	"noN":         {about: "without the name index (N)", exp: storage.Experiment{SkipName: true}},
	"recordOnly":  {about: "S records and L entries only", exp: storage.Experiment{SkipName: true, SkipVisitor: true}},
	"gen":         {about: "the event generator alone, nothing stored", gen: true},
	"idem":        {about: "today's store, each event with a Segment-style idempotency key (node-next-<ms>-<uuid>)", idem: segmentMessageID},
	"idemHashed": {about: "as idem, the key stored as a 2-byte day and a 128-bit hash of key id and messageId", idem: func(k uint64, ms int64) string {
		id := segmentMessageID(k, ms)
		h1, h2 := fnv64(idemKeyID+id), fnv64(id+idemKeyID)
		var b [18]byte
		binary.BigEndian.PutUint16(b[:], uint16(ms/86_400_000))
		binary.BigEndian.PutUint64(b[2:], h1)
		binary.BigEndian.PutUint64(b[10:], h2)
		return string(b[:])
	}, hashedKey: true},
	"idemUUID": {about: "today's store, each event with a UUID v4 as idempotency key, as analytics-go and the mobile SDKs send (random, not ordered by time)", idem: uuidMessageID},
	"idemUUIDBin": {about: "as idemUUID, each UUID stored as its 16 bytes instead of its 36 characters", idem: func(k uint64, _ int64) string {
		h1, h2 := k*0x9E3779B97F4A7C15, (k+1)*0xC2B2AE3D27D4EB4F
		var b [16]byte
		binary.BigEndian.PutUint64(b[:], h1)
		binary.BigEndian.PutUint64(b[8:], h2)
		return string(b[:])
	}},
	"idemBench":           {about: "today's store, each event with the bench's idempotency key (node-next-1764000000000-<n>)", idem: func(k uint64, _ int64) string { return "node-next-1764000000000-" + strconv.FormatUint(k, 10) }},
	"unsplit":             {about: "flushed and compacted tables not split where the key prefix changes (before session 10)", exp: storage.Experiment{Pebble: func(o *pebble.Options) { o.Experimental.SpanPolicyFunc = nil }}},
	"splitDs":             {about: "tables split where the dataset changes too", exp: storage.Experiment{Pebble: splitAtDatasets}},
	"idemKeys4":           {about: "as idem, the idempotency keys of four API keys (Segment sources)", idem: segmentMessageID, idemKeys: 4},
	"prefixOnly":          {about: "tables split only where the key prefix changes (before session 19: busy datasets and names share tables)", exp: storage.Experiment{Pebble: splitAtPrefixOnly}},
	"datasets4":           {about: "as all, the events spread over four datasets", datasets: 4},
	"datasets4PrefixOnly": {about: "as datasets4, tables split only where the key prefix changes (before session 19)", datasets: 4, exp: storage.Experiment{Pebble: splitAtPrefixOnly}},
	"visIngest":           {about: "the visitor index written once, sorted, as an ingested sstable after the writes instead of in each commit", exp: storage.Experiment{SkipVisitor: true}, ingestVisitors: true},
	"rowblk": {about: "row-oriented sstable blocks (TableFormatPebblev4) instead of Pebble's default columnar ones", exp: storage.Experiment{Pebble: func(o *pebble.Options) {
		o.Experimental.EnableColumnarBlocks = func() bool { return false }
	}}},
	"blk16": {about: "16 KiB data blocks instead of 4 KiB", exp: storage.Experiment{Pebble: func(o *pebble.Options) {
		for i := range o.Levels {
			o.Levels[i].BlockSize = 16 << 10
		}
	}}},
	"lbase256": {about: "LBaseMaxBytes 256 MiB instead of 64 MiB", exp: storage.Experiment{Pebble: func(o *pebble.Options) {
		o.LBaseMaxBytes = 256 << 20
	}}},
	"tfs8": {about: "8 MiB target files at L0 (doubling below) instead of 2 MiB", exp: storage.Experiment{Pebble: func(o *pebble.Options) {
		o.TargetFileSizes[0] = 8 << 20
	}}},
	"nocomp2": {about: "no compression at L0-L1 (Snappy below)", exp: storage.Experiment{Pebble: compressionOff(2)}},
	"nocomp3": {about: "no compression at L0-L2 (Snappy below)", exp: storage.Experiment{Pebble: compressionOff(3)}},
	// On a store of a few GiB the levels in use are L0, L5 and L6 (Pebble
	// sizes levels from the bottom up), so the two above only touch
	// flushes; this one leaves every level but the bottom uncompressed.
	"nocomp6": {about: "no compression at L0-L5 (Snappy at L6 only)", exp: storage.Experiment{Pebble: compressionOff(6)}},
	"minlz": {about: "MinLZ (Pebble's fastest) instead of Snappy on every level", exp: storage.Experiment{Pebble: func(o *pebble.Options) {
		for i := range o.Levels {
			o.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.FastestCompression }
		}
	}}},
	"l0merge": {about: "before session 18: flushes cut into 2 MiB tables, L0 compacted at two sublevels (merged, not moved)", exp: storage.Experiment{Pebble: func(o *pebble.Options) {
		o.TargetFileSizes[0], o.TargetFileSizes[1], o.L0CompactionThreshold = 2<<20, 4<<20, 4
	}}},
	"mem32":  {about: "MemTableSize 32 MiB (64 today)", exp: storage.Experiment{Pebble: func(o *pebble.Options) { o.MemTableSize = 32 << 20 }}},
	"mem128": {about: "MemTableSize 128 MiB (64 today)", exp: storage.Experiment{Pebble: func(o *pebble.Options) { o.MemTableSize = 128 << 20 }}},
	"l0c2":   {about: "L0CompactionThreshold 2 (4 today)", exp: storage.Experiment{Pebble: func(o *pebble.Options) { o.L0CompactionThreshold = 2 }}},
	"l0c8":   {about: "L0CompactionThreshold 8 (4 today)", exp: storage.Experiment{Pebble: func(o *pebble.Options) { o.L0CompactionThreshold = 8 }}},
	"conc2": {about: "CompactionConcurrencyRange 2,2 (1,1 today)", exp: storage.Experiment{Pebble: func(o *pebble.Options) {
		o.CompactionConcurrencyRange = func() (int, int) { return 2, 2 }
	}}},
	"conc12": {about: "CompactionConcurrencyRange 1,2: a second compaction only under debt", exp: storage.Experiment{Pebble: func(o *pebble.Options) {
		o.CompactionConcurrencyRange = func() (int, int) { return 1, 2 }
	}}},
}

// result is one run, per event where the name says so.
type result struct {
	Variant    string  `json:"variant"`
	Events     int64   `json:"events"`
	Batch      int     `json:"batch"`
	Committers int     `json:"committers"`
	Start      string  `json:"start"`
	Load1      float64 `json:"load1_start"`
	Load1End   float64 `json:"load1_end"`
	WriteSec   float64 `json:"write_s"`
	TailSec    float64 `json:"tail_s"`
	EventsPerS float64 `json:"events_per_s"`

	CPUWriteUS float64 `json:"cpu_write_us"`
	CPUTailUS  float64 `json:"cpu_tail_us"`
	// CPUSealUS is the part of the tail that wrote the visitor index days
	// held in memory as ingested tables (storage.DB.SealVisitorMemory).
	CPUSealUS float64 `json:"cpu_seal_us"`
	// CPUIngestUS is the part of the tail that sorted, wrote and ingested
	// the visitor index (visIngest only).
	CPUIngestUS float64 `json:"cpu_ingest_us,omitempty"`
	CPUTotalUS  float64 `json:"cpu_total_us"`

	WALB       float64 `json:"wal_b"`
	FlushedB   float64 `json:"flushed_b"`
	CompactedB float64 `json:"compacted_b"`
	SSTB       float64 `json:"sst_b"`  // live sstables after the tail
	DiskB      float64 `json:"disk_b"` // the directory's files after the tail
	WriteAmp   float64 `json:"write_amp"`
	L0B        float64 `json:"l0_b"`   // left in L0 after the tail, not yet compacted
	DebtB      float64 `json:"debt_b"` // Pebble's EstimatedDebt after the tail

	// The drain: a manual compaction of the whole key space after the
	// tail, so that every variant ends with its debt paid and its data at
	// the bottom level (without it a variant that leaves L0 full looks cheap).
	CPUDrainUS     float64 `json:"cpu_drain_us"`
	DrainCompacted float64 `json:"drain_compacted_b"`
	SSTDrainedB    float64 `json:"sst_drained_b"` // live sstables after the drain

	L0SublevelsMax int32   `json:"l0_sublevels_max"`
	L0FilesMax     int64   `json:"l0_files_max"`
	Stalls         int64   `json:"stalls"`
	StallSec       float64 `json:"stall_s"`
	Compactions    int64   `json:"compactions"`
	Levels         string  `json:"levels"` // bytes per level after the tail
}

func main() {
	var (
		name       = flag.String("variant", "all", "what to measure: "+strings.Join(variantNames(), ", "))
		n          = flag.Int64("events", 3_000_000, "events to write")
		batch      = flag.Int("batch", 100, "events per synced commit")
		committers = flag.Int("committers", 4, "concurrent committers")
		dir        = flag.String("dir", "", "store directory (default: a temporary one, removed at the end)")
		walSync    = flag.Duration("wal-min-sync-interval", storage.DefaultWALMinSyncInterval, "as serve's flag")
		visitors   = flag.Uint64("visitors", 50_000, "distinct visitor ids (the loaded phase's 50,000)")
		tailMax    = flag.Duration("tail-timeout", 10*time.Minute, "give up waiting for compactions after this")
		jsonOut    = flag.String("json", "", "append the result as one JSON line to this file")
		drain      = flag.Bool("drain", true, "after the tail, compact everything to the bottom level and report that apart")
		visitorMem = flag.Int("visitor-memory", 0, "as serve's flag (0: storage.DefaultVisitorMemory)")
		lateMem    = flag.Int("late-memory", 0, "as serve's flag (0: storage.DefaultLateMemory)")
		idemFilter = flag.Int("idempotency-filter-keys", 0, "as serve's flag (0: storage.DefaultIdempotencyFilterKeys; -1: every key kept by day, as before session 25)")
		lookups    = flag.Bool("lookups", false, "look each idempotency key up before writing it, as the key actor does (one IdemLookup a batch)")
	)
	flag.Parse()
	v, ok := variants[*name]
	if !ok {
		fmt.Fprintf(os.Stderr, "eventd-keycost: unknown variant %q (want one of %s)\n", *name, strings.Join(variantNames(), ", "))
		os.Exit(2)
	}
	store := storage.Options{WALMinSyncInterval: *walSync, VisitorMemory: *visitorMem, LateMemory: *lateMem, IdempotencyFilterKeys: *idemFilter}
	r, err := run(*name, v, *n, *batch, *committers, *dir, store, *visitors, *tailMax, *drain, *lookups)
	if err != nil {
		fmt.Fprintln(os.Stderr, "eventd-keycost:", err)
		os.Exit(1)
	}
	report(r)
	if *jsonOut != "" {
		line, _ := json.Marshal(r)
		f, err := os.OpenFile(*jsonOut, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, err = f.Write(append(line, '\n'))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "eventd-keycost:", err)
			os.Exit(1)
		}
	}
}

func variantNames() []string {
	var out []string
	for k := range variants {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// run writes n events of variant v into a store opened with store's
// options (its Experiment is v's).
func run(name string, v variant, n int64, batch, committers int, dir string, store storage.Options, visitors uint64, tailMax time.Duration, drain, lookups bool) (*result, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "eventd-keycost-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	r := &result{Variant: name, Events: n, Batch: batch, Committers: committers,
		Start: time.Now().UTC().Format(time.RFC3339), Load1: load1()}
	var stalls atomic.Int64
	var stallNs atomic.Int64
	var stallAt atomic.Int64
	exp := v.exp
	tune := exp.Pebble
	exp.Pebble = func(o *pebble.Options) {
		if tune != nil {
			tune(o)
		}
		// Count write stalls beside eventd's own listener.
		o.EventListener.WriteStallBegin = func(pebble.WriteStallBeginInfo) {
			stalls.Add(1)
			stallAt.Store(time.Now().UnixNano())
		}
		o.EventListener.WriteStallEnd = func() {
			if at := stallAt.Swap(0); at != 0 {
				stallNs.Add(time.Now().UnixNano() - at)
			}
		}
	}
	store.Experiment = &exp
	db, err := storage.Open(dir, store)
	if err != nil {
		return nil, err
	}
	defer db.Close()

	// Watch L0 while writing: its depth is what stalls writes and slows reads.
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				m := db.Metrics()
				r.L0SublevelsMax = max(r.L0SublevelsMax, m.Levels[0].Sublevels)
				r.L0FilesMax = max(r.L0FilesMax, m.Levels[0].TablesCount)
			}
		}
	}()

	var entries []kv
	if v.ingestVisitors {
		entries = make([]kv, n)
	}
	gen := ids.NewGenerator()
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	cpu0 := cpuNow()
	t0 := time.Now()
	var wg sync.WaitGroup
	for range committers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var props []byte
			events := make([]storage.Event, batch)
			for {
				end := next.Add(int64(batch))
				start := end - int64(batch)
				if start >= n {
					return
				}
				end = min(end, n)
				var b *storage.Batch
				var look *storage.IdemLookup
				if !v.gen {
					b = db.NewBatch()
					if lookups && v.idem != nil {
						var err error
						if look, err = db.NewIdemLookup(); err != nil {
							errOnce.Do(func() { firstErr = err })
							return
						}
					}
				}
				for k := start; k < end; k++ {
					e := &events[k-start]
					id, ms := gen.Next()
					props = shape(e, props, uint64(k), visitors)
					if v.segment {
						props = segmentShape(props, e.VisitorID)
						e.Properties = props
					}
					e.ID, e.Timestamp, e.CreatedAt = id, ms-v.displace, ms
					if v.jitter > 0 {
						e.Timestamp -= int64((uint64(k)*0x9E3779B97F4A7C15)>>33) % v.jitter
					}
					if v.ingestVisitors && e.HasVisitor {
						entries[k] = visitorEntry(e)
					}
					if b != nil {
						ds := uint32(1)
						if v.datasets > 1 {
							ds += uint32(uint64(k) % v.datasets)
						}
						b.AddEvent(ds, e)
						if v.idem != nil {
							keyID := idemKeyID
							if v.hashedKey {
								keyID = ""
							}
							if v.idemKeys > 1 {
								keyID = idemKeyID[:len(idemKeyID)-1] + strconv.FormatUint(uint64(k)%v.idemKeys, 10)
							}
							key := v.idem(uint64(k), ms)
							if look != nil {
								if _, err := look.Get(keyID, key); err != storage.ErrNotFound {
									errOnce.Do(func() { firstErr = fmt.Errorf("look-up of a new key: %v", err) })
									return
								}
							}
							b.AddIdempotency(keyID, key, storage.IdemRecord{Hash: uint64(k) * 0x9E3779B97F4A7C15, ID: id, Timestamp: ms, CreatedAt: ms})
						}
					}
				}
				if b == nil {
					continue
				}
				if look != nil {
					_ = look.Close()
				}
				err := b.Commit(true)
				b.Close()
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	t1 := time.Now()
	cpu1 := cpuNow()
	if !v.gen {
		// So does writing the visitor index days held in memory, which
		// eventd does when each day is over, and the displaced events'
		// time index keys still in memory, which it writes 30 s on.
		cpuB := cpuNow()
		if err := db.WriteLateMemory(); err != nil {
			return nil, err
		}
		if err := db.SealVisitorMemory(); err != nil {
			return nil, err
		}
		r.CPUSealUS = float64((cpuNow() - cpuB).Microseconds()) / float64(n)
		// The last memtable's flush belongs to the events' cost too.
		if err := db.Pebble().Flush(); err != nil {
			return nil, err
		}
		if err := settle(db.Pebble(), tailMax); err != nil {
			return nil, err
		}
	}
	if v.ingestVisitors {
		cpuB := cpuNow()
		if err := ingestSorted(db.Pebble(), dir, entries); err != nil {
			return nil, err
		}
		entries = nil
		if err := settle(db.Pebble(), tailMax); err != nil {
			return nil, err
		}
		r.CPUIngestUS = float64((cpuNow() - cpuB).Microseconds()) / float64(n)
	}
	t2 := time.Now()
	cpu2 := cpuNow()
	close(stop)
	watch.Wait()

	m := db.Metrics()
	per := func(x float64) float64 { return x / float64(n) }
	r.WriteSec = t1.Sub(t0).Seconds()
	r.TailSec = t2.Sub(t1).Seconds()
	r.EventsPerS = float64(n) / r.WriteSec
	r.CPUWriteUS = per(float64((cpu1 - cpu0).Microseconds()))
	r.CPUTailUS = per(float64((cpu2 - cpu1).Microseconds()))
	r.CPUTotalUS = r.CPUWriteUS + r.CPUTailUS
	var flushed, compacted, sst uint64
	var levels []string
	for i, l := range m.Levels {
		flushed += l.TableBytesFlushed
		compacted += l.TableBytesCompacted
		sst += uint64(l.TablesSize)
		if l.TablesSize > 0 {
			levels = append(levels, fmt.Sprintf("L%d %.0fM", i, float64(l.TablesSize)/(1<<20)))
		}
	}
	r.WALB = per(float64(m.WAL.BytesWritten))
	r.FlushedB = per(float64(flushed))
	r.CompactedB = per(float64(compacted))
	r.SSTB = per(float64(sst))
	r.L0B = per(float64(m.Levels[0].TablesSize))
	r.DebtB = per(float64(m.Compact.EstimatedDebt))
	r.DiskB = per(float64(dirSize(dir)))
	if m.WAL.BytesWritten > 0 {
		r.WriteAmp = float64(m.WAL.BytesWritten+flushed+compacted) / float64(m.WAL.BytesWritten)
	}
	r.Stalls = stalls.Load()
	r.StallSec = time.Duration(stallNs.Load()).Seconds()
	r.Compactions = m.Compact.Count
	r.Levels = strings.Join(levels, ", ")
	if drain && !v.gen {
		if err := db.Pebble().Compact(context.Background(), []byte{0}, []byte{0xff}, false); err != nil {
			return nil, err
		}
		r.CPUDrainUS = per(float64((cpuNow() - cpu2).Microseconds()))
		d := db.Metrics()
		var after, drained uint64
		for _, l := range d.Levels {
			after += l.TableBytesCompacted
			drained += uint64(l.TablesSize)
		}
		r.DrainCompacted = per(float64(after - compacted))
		r.SSTDrainedB = per(float64(drained))
	}
	r.Load1End = load1()
	return r, nil
}

// shape fills e as the bench's events look (bench.EventTemplate: about 170
// bytes of properties), reusing props; the id and times are the caller's.
func shape(e *storage.Event, props []byte, k, visitors uint64) []byte {
	h := k * 0x9E3779B97F4A7C15
	e.Name = bench.BackfillName(k) // page_view half the events, click a quarter, and so on
	e.VisitorID = "v_" + strconv.FormatUint(h%visitors, 10)
	e.HasVisitor = true
	p := append(props[:0], `{"amount":`...)
	p = strconv.AppendUint(p, 1+k%200, 10)
	p = append(p, `.5,"currency":"EUR","sku":"sku_`...)
	p = strconv.AppendUint(p, k, 10)
	p = append(p, `","quantity":2,"page":"/checkout/confirm","referrer":"https://www.example.com/products/sku_`...)
	p = strconv.AppendUint(p, k, 10)
	p = append(p, `","campaign":"spring_sale"}`...)
	// The batch keeps the bytes it was given only until AddEvent returns.
	e.Properties = p
	return p
}

// segmentShape adds to props what eventd stores a Segment track message's
// event with (engine/event/segment_map.go), for analytics-node's message.
func segmentShape(props []byte, user string) []byte {
	props = append(props[:len(props)-1], `,"$event_name":"Order Completed","$context":{"library":{"name":"@segment/analytics-node","version":"3.1.0"}},"$user_id":"`...)
	props = append(props, user...)
	return append(props, `"}`...)
}

// settle waits until Pebble has stopped flushing and compacting on its own:
// nothing running for two seconds in a row (a finished flush or compaction
// can make the next one due a moment later). Pebble's EstimatedDebt cannot
// be the test: it counts every byte in L0 while Lbase has data, and L0 keeps
// up to L0CompactionThreshold sublevels without compacting them, so the
// debt left over is reported instead (result.DebtB, result.L0B).
func settle(db *pebble.DB, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	quiet := 0
	for quiet < 10 {
		if time.Now().After(deadline) {
			return fmt.Errorf("compactions still running after %s", limit)
		}
		time.Sleep(200 * time.Millisecond)
		m := db.Metrics()
		if m.Compact.NumInProgress == 0 && m.Flush.NumInProgress == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	return nil
}

// cpuNow is the process's user plus system CPU so far, Pebble's background
// goroutines included.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// load1 is the one-minute load average, 0 where /proc/loadavg is missing.
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}

// dirSize is the total size of the files under dir.
func dirSize(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

func report(r *result) {
	fmt.Printf("variant %s: %d events, commits of %d by %d committers, load %.2f -> %.2f\n",
		r.Variant, r.Events, r.Batch, r.Committers, r.Load1, r.Load1End)
	fmt.Printf("  writes %.1f s (%.0f events/s), tail %.1f s\n", r.WriteSec, r.EventsPerS, r.TailSec)
	fmt.Printf("  CPU per event: %.2f µs writing + %.2f µs tail (of which %.2f writing the visitor index days held in memory) = %.2f µs\n", r.CPUWriteUS, r.CPUTailUS, r.CPUSealUS, r.CPUTotalUS)
	fmt.Printf("  bytes per event: WAL %.1f, flushed %.1f, compacted %.1f, sstables %.1f, directory %.1f; write amp %.2f\n",
		r.WALB, r.FlushedB, r.CompactedB, r.SSTB, r.DiskB, r.WriteAmp)
	fmt.Printf("  left after the tail: %.1f bytes per event in L0, compaction debt %.1f\n", r.L0B, r.DebtB)
	fmt.Printf("  drain (everything compacted to the bottom): %.2f µs, %.1f bytes compacted, %.1f bytes of sstables per event\n",
		r.CPUDrainUS, r.DrainCompacted, r.SSTDrainedB)
	fmt.Printf("  L0: %d sublevels, %d files at most; %d stalls (%.2f s); %d compactions; %s\n",
		r.L0SublevelsMax, r.L0FilesMax, r.Stalls, r.StallSec, r.Compactions, r.Levels)
}

// kv is one visitor index entry of the visIngest variant.
type kv struct{ k, v []byte }

// visitorEntry is e's visitor index entry in storage's layout
// (storage/visitors.go: W ds day len2 visitor ts id -> name), dataset 1.
func visitorEntry(e *storage.Event) kv {
	k := make([]byte, 0, 1+4+4+2+len(e.VisitorID)+8+16)
	k = append(k, 'W')
	k = binary.BigEndian.AppendUint32(k, 1)
	k = binary.BigEndian.AppendUint32(k, uint32(e.Timestamp/86_400_000))
	k = binary.BigEndian.AppendUint16(k, uint16(len(e.VisitorID)))
	k = append(k, e.VisitorID...)
	k = binary.BigEndian.AppendUint64(k, uint64(e.Timestamp))
	k = append(k, e.ID[:]...)
	return kv{k, []byte(e.Name)}
}

// ingestSorted sorts the entries, writes them as one sstable in the store's
// table format and ingests it.
func ingestSorted(db *pebble.DB, dir string, entries []kv) error {
	entries = slices.DeleteFunc(entries, func(e kv) bool { return e.k == nil }) // events without a visitor
	slices.SortFunc(entries, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	path := filepath.Join(dir, "visitors.sst")
	f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{TableFormat: db.TableFormat(), MergerName: "eventd.merge.v1"})
	for _, e := range entries {
		if err := w.Set(e.k, e.v); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return db.Ingest(context.Background(), []string{path})
}
