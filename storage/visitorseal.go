package storage

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
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

// visitorSealer writes memory days to Pebble in the background.
type visitorSealer struct {
	stop chan struct{}
	done chan struct{}
}

// runVisitorSealer seals each day once it is over and, when memory passes
// its bound, the fullest day early; failures are logged and retried.
func (d *DB) runVisitorSealer(log *slog.Logger) *visitorSealer {
	s := &visitorSealer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(visitorSealCheck)
		defer t.Stop()
		for {
			if err := d.sealDue(d.now()); err != nil && log != nil {
				log.Error("seal the visitor index of a day", "err", err)
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			case <-d.vmem.kick:
			}
		}
	}()
	return s
}

func (s *visitorSealer) close() {
	close(s.stop)
	<-s.done
}

// sealDue seals the days that are over at now, then, while memory holds
// more than its bound, the fullest day.
func (d *DB) sealDue(now time.Time) error {
	m := d.vmem
	for {
		m.mu.Lock()
		day, due := m.first, m.first < visitorDay(now.Add(-VisitorSealGrace).UnixMilli())
		if !due && m.entries > m.max {
			day, due = m.fullestDay(), true
		}
		m.mu.Unlock()
		if !due {
			return nil
		}
		if err := d.sealVisitorDay(day); err != nil {
			return err
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
	best, n := m.first, -1
	for day, md := range m.days {
		if md.entries > n || md.entries == n && day < best {
			best, n = day, md.entries
		}
	}
	return best
}

// sealVisitorDay writes one memory day to Pebble: its entries as sorted
// sstables (one per dataset, so that each covers a key range no other file
// touches and Pebble places it in the bottom level), ingested, and then, in
// one synced batch, the entries that commits added while the tables were
// written and the new visitorDaysKey record. Until that batch commits the
// day stays in memory, and readers use the memory (the ingested keys are
// the same), so a crash at any point leaves a consistent store.
func (d *DB) sealVisitorDay(day uint32) error {
	m := d.vmem
	m.sealMu.Lock()
	defer m.sealMu.Unlock()
	m.mu.Lock()
	if !m.inMemory(day) {
		m.mu.Unlock()
		return nil
	}
	md := m.days[day]
	if md == nil {
		md = &memDay{visitors: map[memVisitor][]memEntry{}}
		m.days[day] = md
	}
	md.sealing = true
	names := m.names
	m.mu.Unlock()

	paths, err := d.writeVisitorTables(day, md, names)
	if err == nil {
		err = d.switchVisitorDay(day, md, paths)
	}
	for _, p := range paths {
		_ = d.fs.Remove(p) // ingested files are linked into the store; what is left is ours
	}
	if err != nil {
		m.mu.Lock()
		m.unseal(md)
		m.mu.Unlock()
	}
	return err
}

// unseal puts a day whose sealing failed back to normal: the entries that
// arrived meanwhile join its visitors; callers hold mu.
func (m *visitorMem) unseal(md *memDay) {
	md.sealing = false
	late := md.late
	md.late = nil
	md.entries -= len(late)
	m.entries -= len(late)
	for _, l := range late {
		m.insert(l.v, l.e)
	}
}

// writeVisitorTables writes a sealing day's frozen entries as one sstable
// per dataset in key order and returns their paths.
func (d *DB) writeVisitorTables(day uint32, md *memDay, names []string) (paths []string, err error) {
	keys := make([]memVisitor, 0, len(md.visitors))
	for v := range md.visitors {
		keys = append(keys, v)
	}
	// Key order: dataset, visitor length, visitor (visitorDayPrefix).
	slices.SortFunc(keys, func(a, b memVisitor) int {
		return cmp.Or(cmp.Compare(a.ds, b.ds), cmp.Compare(len(a.visitor), len(b.visitor)), strings.Compare(a.visitor, b.visitor))
	})
	var w *sstable.Writer
	finish := func() error {
		if w == nil {
			return nil
		}
		err := w.Close()
		w = nil
		return err
	}
	defer func() {
		if w != nil {
			_ = w.Close()
		}
	}()
	var k, val []byte
	for i, v := range keys {
		if i == 0 || v.ds != keys[i-1].ds {
			if err := finish(); err != nil {
				return paths, err
			}
			p := d.fs.PathJoin(d.dir, fmt.Sprintf("visitors-%d-%d.sst", day, v.ds))
			f, err := d.fs.Create(p, vfs.WriteCategoryUnspecified)
			if err != nil {
				return paths, err
			}
			paths = append(paths, p)
			w = sstable.NewWriter(objstorageprovider.NewFileWritable(f), d.tableOptions)
		}
		for _, e := range md.visitors[v] {
			k = visitorKey(k[:0], v.ds, v.visitor, e.ts, e.id)
			val = append(appendBotMark(val[:0], e.bot), names[e.name]...)
			if err := w.Set(k, val); err != nil {
				return paths, err
			}
		}
	}
	return paths, finish()
}

// switchVisitorDay ingests a sealing day's tables and moves the day to
// Pebble: with no commit in flight (commitMu) and no reader opening
// (mu), the late entries and the new record go in one synced batch, then
// the day leaves memory.
func (d *DB) switchVisitorDay(day uint32, md *memDay, paths []string) error {
	m := d.vmem
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(paths) > 0 {
		if err := d.apply(func() error { return d.db.Ingest(context.Background(), paths) }); err != nil {
			return err
		}
	}
	first, sealed := m.first, m.sealed
	m.sealed = make(map[uint32]bool, len(sealed))
	for s := range sealed {
		m.sealed[s] = true
	}
	if day == m.first {
		for m.first++; m.sealed[m.first]; m.first++ {
			delete(m.sealed, m.first)
		}
	} else {
		m.sealed[day] = true
	}
	b := d.db.NewBatch()
	defer b.Close()
	var k, val []byte
	for _, l := range md.late {
		k = visitorKey(k[:0], l.v.ds, l.v.visitor, l.e.ts, l.e.id)
		val = append(appendBotMark(val[:0], l.e.bot), m.names[l.e.name]...)
		_ = b.Set(k, val, nil)
	}
	_ = b.Set(visitorDaysKey, m.encodeDays(), nil)
	if err := d.commit(b, pebble.Sync); err != nil {
		m.first, m.sealed = first, sealed
		return err
	}
	delete(m.days, day)
	m.entries -= md.entries
	return nil
}
