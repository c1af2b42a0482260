package storage

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// Batch collects events and idempotency records for one atomic commit.
// What the events add to counters and rollups is summed per minute cell in
// memory and written as one L log entry (derived.go), not as merge operands
// per event and bucket.
type Batch struct {
	db      *DB
	b       *pebble.Batch
	scratch []byte
	events  int
	roll    *rollups // counts, sums and visitor sketches per minute cell (rollup.go)
	// links are the link keys this batch writes and linkGen the link
	// cache's generation when the first was added (linkcache.go).
	links   []string
	linkGen uint64
	// visitors are the batch's visitor index entries; Commit writes those
	// of days in Pebble as W keys and gives the others to memory.
	visitors []pendingVisitor
	vbuf     *[]pendingVisitor // where visitors came from (batchPools)
	// late are the batch's displaced events' M and J keys; Commit writes
	// them or gives them to memory (latemem.go).
	late    []pendingLate
	lbuf    *[]pendingLate // where late came from (batchPools)
	maxIDMs int64          // the latest id millisecond added (DB.idCeil)
	// idemWaited: the batch waited for the idempotency filter's rebuild
	// (waitIdemFilter).
	idemWaited bool
	// keys holds each secondary key family (Z, N, M, J) apart until Commit
	// appends them to b, family after family (keyFamily), the
	// idempotency records (recs) in their place.
	keys [numKeyFamilies]*pebble.Batch
	// idem counts the idempotency keys added per API key (one entry per
	// run of one key id), for the table splits (tablesplit.go).
	idem []idemCount
	// recs are the idempotency records added; appendFamilies writes them
	// sorted by key. From batchPools, nil until the first.
	recs *idemRecords
}

// idemRecords holds a batch's idempotency records: each a key and its
// value in buf.
type idemRecords struct {
	recs []idemRec
	buf  []byte
	// group is scratch for a group's value in the compact form.
	group []byte
}

// idemRec is a record in idemRecords.buf: klen bytes of key at off, then
// vlen of value.
type idemRec struct{ off, klen, vlen int }

// keyFamily is a family of keys that AddEvent and AddIdempotency write
// beside the records. Pebble inserts a batch's keys into the memtable's
// skiplist in batch order and starts each search from the previous key's
// place when the next key is close to it; keys of one family follow each
// other in a batch's events (ids and timestamps grow), so written family
// after family most inserts start next to the last instead of from the
// top of a skiplist of hundreds of thousands of keys (docs/benchmarks.md,
// session 13).
type keyFamily int

const (
	familyDisplaced keyFamily = iota
	familyName
	familyIdem // kept in Batch.recs, not in a batch of its own (appendIdemRecords)
	familyDisplacedMark
	familyDisplacedName
	numKeyFamilies
)

// appendFamilies appends the key families to the batch, one after the
// other. The idempotency records go in sorted: a batch's keys of
// random messageIds (UUIDs, of analytics-go and the mobile SDKs) would
// each be searched for from the top of the skiplist, among the second's
// others in the memtable (a UUID batch's memtable inserts took four
// times an analytics-node one's).
func (b *Batch) appendFamilies() {
	for i, f := range b.keys {
		if keyFamily(i) == familyIdem {
			b.appendIdemRecords()
			continue
		}
		if f != nil && !f.Empty() {
			_ = b.b.Apply(f, nil)
			f.Reset()
		}
	}
}

// appendIdemRecords appends the idempotency records to the batch, sorted
// by key: the records kept by slot as one group per slot and API key
// (idemgroups.go), those kept by day one by one.
func (b *Batch) appendIdemRecords() {
	ir := b.recs
	if ir == nil || len(ir.recs) == 0 {
		return
	}
	buf := ir.buf
	key := func(r idemRec) []byte { return buf[r.off : r.off+r.klen] }
	value := func(r idemRec) []byte { return buf[r.off+r.klen : r.off+r.klen+r.vlen] }
	// Stable: of one key twice, the later record stays the last set, or
	// the later entry of a group.
	slices.SortStableFunc(ir.recs, func(x, y idemRec) int { return bytes.Compare(key(x), key(y)) })
	for i := 0; i < len(ir.recs); {
		r := ir.recs[i]
		k := key(r)
		if k[0] != prefixIdemGroup {
			_ = b.b.Set(k, value(r), nil)
			i++
			continue
		}
		// The key ends with the first entry's event id: its record is the
		// entry's last idemRecordLen bytes.
		first := ID(idemRecordID(value(r)[r.vlen-idemRecordLen:]))
		prev := first
		g := append(ir.group[:0], compactGroup)
		j := i
		for ; j < len(ir.recs) && bytes.Equal(key(ir.recs[j]), k); j++ {
			e := value(ir.recs[j])
			n, w := binary.Uvarint(e) // the entry as AddIdempotencyFiled wrote it
			g = appendCompactEntry(g, e[w:w+int(n)], e[w+int(n):], &prev)
		}
		op := b.b.SetDeferred(len(k)+len(first), len(g))
		copy(op.Key[copy(op.Key, k):], first[:])
		copy(op.Value, g)
		_ = op.Finish()
		ir.group = g
		i = j
	}
	ir.recs, ir.buf = ir.recs[:0], buf[:0]
}

// family is the batch of one key family's writes.
func (b *Batch) family(f keyFamily) *pebble.Batch {
	if b.keys[f] == nil {
		b.keys[f] = b.db.db.NewBatch()
	}
	return b.keys[f]
}

// batchPools keep what a closed batch built for the next one: its rollup
// cells, its visitor entries' slice (grown from nothing in every commit,
// those were a ninth of a batch request's allocated bytes), its displaced
// events' slice (168 bytes an event of a Segment batch, session 39), its
// idempotency records' buffers and its scratch buffer (grown from nothing
// to a record's size in every commit, 47 bytes an event).
type batchPools struct {
	rollups  sync.Pool // *rollups
	visitors sync.Pool // *[]pendingVisitor
	late     sync.Pool // *[]pendingLate
	idem     sync.Pool // *idemRecords
	scratch  sync.Pool // *[]byte
}

// maxPooledScratch bounds the scratch buffer a closed batch leaves for the
// next: a record's key and value, about 500 bytes, up to the largest
// records' 64 KiB.
const maxPooledScratch = 64 << 10

// NewBatch starts an empty batch.
func (d *DB) NewBatch() *Batch {
	b := &Batch{db: d, b: d.db.NewBatch()}
	if p, ok := d.pools.scratch.Get().(*[]byte); ok {
		b.scratch = *p
	}
	return b
}

// Len is the number of events added.
func (b *Batch) Len() int { return b.events }

// AddEvent writes the record and its indexes and counts it in the derived data.
func (b *Batch) AddEvent(ds uint32, e *Event) {
	b.events++
	b.maxIDMs = max(b.maxIDMs, IDTime(e.ID))
	skip := b.db.skip
	// A bot's index values carry the bot mark and its derived data goes to
	// the bot series (bots.go); a human event's are unchanged.
	bot := IsBot(e.Properties)
	var k []byte
	switch {
	case displaced(e.Timestamp, e.ID):
		// The record under Z, in the order of commits; its places in the
		// time order and the name index (M and J keys) lag what is being
		// written, and Commit gives them to memory, which writes them in
		// time order later (timeindex.go, latemem.go).
		k = displacedKey(b.scratch[:0], ds, e.ID)
		v := appendRecord(appendTS(k[len(k):], e.Timestamp), e)
		_ = b.family(familyDisplaced).Set(k, v, nil)
		k = v[:0]
		if b.lbuf == nil {
			if b.lbuf, _ = b.db.pools.late.Get().(*[]pendingLate); b.lbuf == nil {
				b.lbuf = new([]pendingLate)
			}
			b.late = (*b.lbuf)[:0]
		}
		b.late = append(b.late, pendingLate{ds: ds, ts: e.Timestamp, id: e.ID, name: e.Name,
			visitor: e.VisitorID, hasVisitor: e.HasVisitor, bot: bot})
	default:
		k = recordKey(b.scratch[:0], ds, e.Timestamp, e.ID)
		v := appendRecord(k[len(k):], e)
		_ = b.b.Set(k, v, nil)
		k = v[:0]
		if !skip.name {
			k = nameKey(k, ds, e.Name, e.Timestamp, e.ID)
			_ = b.family(familyName).Set(k, nameIndexValue(appendBotMark(k[len(k):], bot), e), nil)
		}
	}

	if e.HasVisitor && !skip.visitor {
		p := pendingVisitor{v: memVisitor{ds, e.VisitorID}, e: memEntry{ts: e.Timestamp, id: e.ID}, n: e.Name}
		if bot {
			p.e.flags = entryBot
		}
		if b.vbuf == nil {
			if b.vbuf, _ = b.db.pools.visitors.Get().(*[]pendingVisitor); b.vbuf == nil {
				b.vbuf = new([]pendingVisitor)
			}
			b.visitors = (*b.vbuf)[:0]
		}
		b.visitors = append(b.visitors, p)
	}
	b.scratch = k[:0]
	b.derive(ds, e, bot, 1, true)
}

// addLateKeys writes a displaced event's M and J keys in the batch: its
// time is behind what memory takes (latemem.go).
func (b *Batch) addLateKeys(p *pendingLate) {
	k := displacedMarkKey(b.scratch[:0], p.ds, p.ts, p.id)
	v := appendBotMark(k[len(k):], p.bot)
	_ = b.family(familyDisplacedMark).Set(k, v, nil)
	k = displacedNameKey(v[:0], p.ds, p.name, p.ts, p.id)
	v = appendBotMark(k[len(k):], p.bot)
	if p.hasVisitor {
		v = append(v, p.visitor...)
	}
	_ = b.family(familyDisplacedName).Set(k, v, nil)
	b.scratch = v[:0]
}

// AddIdempotency remembers key for keyID in the same atomic write as its
// event, r.ID, which no other commit may write (idemgroups.go), in the
// slot r was created in (idemslots.go), or in its day's partition when
// the filter is full (idempotency.go).
func (b *Batch) AddIdempotency(keyID, key string, r IdemRecord) {
	b.waitIdemFilter() // the hash's seed may be the saved filter's
	slot, filed := b.db.FileIdempotency(b.db.IdempotencyHash(keyID, key), r.CreatedAt)
	b.AddIdempotencyFiled(keyID, key, slot, filed, r)
}

// waitIdemFilter waits, once a batch, for Open's rebuild of the filter.
// A key put in the filter before the rebuild read its committed record
// would be put in again by the rebuild (a table holding it twice, which a
// save keeps); the engine's keyed writes already wait for the rebuild.
func (b *Batch) waitIdemFilter() {
	if !b.idemWaited {
		<-b.db.idemSlots.ready
		b.idemWaited = true
	}
}

// AddIdempotencyFiled is AddIdempotency of a key that DB.FileIdempotency
// filed: in slot's group if the filter took it (filed), in its day's
// partition if not. The filter is not asked again.
func (b *Batch) AddIdempotencyFiled(keyID, key string, slot uint64, filed bool, r IdemRecord) {
	if b.recs == nil {
		if b.recs, _ = b.db.pools.idem.Get().(*idemRecords); b.recs == nil {
			b.recs = new(idemRecords)
		}
	}
	ir := b.recs
	off := len(ir.buf)
	var k, buf []byte
	if filed {
		// The group's prefix, then the entry (idemgroups.go).
		k = idemGroupPrefix(ir.buf, slot, keyID)
		buf = encodeIdemRecord(appendEntryKey(k, key), r)
	} else {
		day := idemDay(r.CreatedAt)
		b.db.idemDays.raise(day)
		k = idemDayKey(ir.buf, keyID, day, key)
		buf = encodeIdemRecord(k, r)
		if n := len(b.idem); n > 0 && b.idem[n-1].keyID == keyID {
			b.idem[n-1].n++
		} else {
			b.idem = append(b.idem, idemCount{keyID, 1})
		}
	}
	klen := len(k) - off
	ir.recs = append(ir.recs, idemRec{off, klen, len(buf) - off - klen})
	ir.buf = buf
}

// Commit writes the batch; with sync it returns only after the WAL is
// fsynced. Its derived data goes in as one L entry and, once committed, into
// the overlay that reads add to Pebble's counters and rollups.
func (b *Batch) Commit(sync bool) error {
	r := b.roll
	var seq uint64
	if r != nil && len(r.cells) > 0 {
		for _, a := range r.cells {
			if len(a.hll) > 1 {
				sortSketchEntries(a.hll, &r.sortBuf)
				a.hll = dedupeEntries(a.hll)
			}
		}
		seq = b.db.derived.seq.Add(1)
		k := logKey(b.scratch[:0], seq)
		v := appendLog(k[len(k):], r)
		_ = b.b.Set(k, v, nil)
		b.scratch = v[:0]
	}
	mem := b.visitors[:0]
	if len(b.visitors) > 0 {
		// Held until the memory entries are added: a day cannot move from
		// memory to Pebble between this decision and the add (visitormem.go).
		m := b.db.vmem
		m.commitMu.RLock()
		defer m.commitMu.RUnlock()
		for _, p := range b.visitors {
			if m.takes(p.e.ts) {
				mem = append(mem, p)
				continue
			}
			k := visitorKey(b.scratch[:0], p.v.ds, p.v.visitor, p.e.ts, p.e.id)
			v := visitorValue(k[len(k):], p.e.bot(), p.n)
			_ = b.b.Set(k, v, nil)
			b.scratch = v[:0]
		}
	}
	late := b.late[:0]
	if len(b.late) > 0 {
		// Held until the entries are added, as for the visitor memory.
		l := b.db.late
		l.commitMu.RLock()
		defer l.commitMu.RUnlock()
		for _, p := range b.late {
			if l.takes(p.ts, p.id) {
				late = append(late, p)
				continue
			}
			b.addLateKeys(&p)
		}
	}
	b.appendFamilies()
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
	}
	// Before Pebble shows the records: a read in id order must not stop
	// short of them (idCeil).
	for old := b.db.maxIDMs.Load(); b.maxIDMs > old && !b.db.maxIDMs.CompareAndSwap(old, b.maxIDMs); {
		old = b.db.maxIDMs.Load()
	}
	var c *inflightCommit
	if seq != 0 { // always when mem or late is not empty: every event adds a count cell
		// Readers that see this commit in Pebble before its memory part is
		// done take its cells and entries from here (inflight.go).
		c = &inflightCommit{seq: seq, r: r, mem: mem, late: late}
		b.db.inflight.begin(c)
	}
	err := b.db.commit(b.b, opts)
	b.db.passStage(stagePublished)
	// The visitor entries first: once folded, a checkpoint may delete the
	// L key by which readers find this commit (inflight.go), and only the
	// derived view keeps counting its cells after that, from the overlay.
	if err == nil && len(mem) > 0 {
		b.db.vmem.add(mem)
	}
	if err == nil && len(late) > 0 {
		b.db.late.add(late)
	}
	b.db.passStage(stageAdded)
	if err == nil && seq != 0 {
		b.db.derived.fold(seq, r, c)
	}
	b.db.passStage(stageFolded)
	if c != nil {
		b.db.inflight.end(c)
	}
	clear(b.visitors) // drop the events' strings
	b.visitors = b.visitors[:0]
	clear(b.late)
	b.late = b.late[:0]
	if err == nil && len(b.links) > 0 {
		b.db.links.add(b.linkGen, b.links)
	}
	b.links = b.links[:0]
	if err == nil && len(b.idem) > 0 {
		b.db.splits.countIdem(b.idem)
	}
	b.idem = b.idem[:0]
	if r != nil {
		r.reset()
	}
	return err
}

// Close releases the batch; it must not be used afterwards.
func (b *Batch) Close() {
	if b.vbuf != nil {
		clear(b.visitors)
		*b.vbuf = b.visitors[:0]
		b.db.pools.visitors.Put(b.vbuf)
		b.vbuf, b.visitors = nil, nil
	}
	if b.lbuf != nil {
		clear(b.late)
		*b.lbuf = b.late[:0]
		b.db.pools.late.Put(b.lbuf)
		b.lbuf, b.late = nil, nil
	}
	if cap(b.scratch) > 0 && cap(b.scratch) <= maxPooledScratch {
		p := b.scratch[:0]
		b.db.pools.scratch.Put(&p)
		b.scratch = nil
	}
	if b.roll != nil {
		b.roll.reset()
		b.db.pools.rollups.Put(b.roll)
		b.roll = nil
	}
	if b.recs != nil {
		b.recs.recs, b.recs.buf = b.recs.recs[:0], b.recs.buf[:0]
		b.db.pools.idem.Put(b.recs)
		b.recs = nil
	}
	for _, f := range b.keys {
		if f != nil {
			_ = f.Close()
		}
	}
	_ = b.b.Close()
}
