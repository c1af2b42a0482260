package storage

import (
	"bytes"
	"encoding/binary"
	"github.com/cockroachdb/pebble/v2"
	"sync"
	"testing"
)

// testDB is a DB opened in a test directory that is closed at cleanup unless
// the test closed it first (Pebble panics on a second Close).
type testDB struct {
	*DB
	dir  string
	opts Options
	once *sync.Once
}

// openTestDB opens a store in dir (a fresh t.TempDir when dir is "").
func openTestDB(t testing.TB, dir string) testDB {
	t.Helper()
	return openTestDBIn(t, dir, Options{})
}

// openTestDBWith opens a store with options in a fresh t.TempDir.
func openTestDBWith(t testing.TB, o Options) testDB {
	t.Helper()
	return openTestDBIn(t, "", o)
}

func openTestDBIn(t testing.TB, dir string, o Options) testDB {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	db, err := Open(dir, o)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	tdb := testDB{DB: db, dir: dir, opts: o, once: new(sync.Once)}
	t.Cleanup(func() { tdb.close(t) })
	if !o.ReadOnly {
		lateFromZero(t, db)
	}
	return tdb
}

// lateFromZero makes the late memory (latemem.go) take every displaced
// event committed from now on, whatever its time and id: the storage
// tests' ids (testID) and times are long before the id clock, which would
// send their keys straight to Pebble. It records the watermark as the
// writer does, so that a crash rebuilds what memory holds.
func lateFromZero(t testing.TB, d *DB) {
	t.Helper()
	l := d.late
	l.commitMu.Lock()
	l.mu.Lock()
	l.cut, l.floor, l.recorded = 0, 0, 0
	l.mu.Unlock()
	l.commitMu.Unlock()
	b := d.db.NewBatch()
	defer b.Close()
	_ = b.Set(configKey(lateWatermarkKind, ""), lateWatermark(0, 0), nil)
	if err := d.commit(b, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// close closes the store once; later calls do nothing.
func (d testDB) close(t testing.TB) {
	t.Helper()
	d.once.Do(func() {
		if err := d.DB.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

// reopen closes the store and opens it again in the same directory, with
// the same options.
func (d testDB) reopen(t testing.TB) testDB {
	t.Helper()
	d.close(t)
	return openTestDBIn(t, d.dir, d.opts)
}

// testID is an id whose first 8 bytes are n big-endian, so ids order as n.
func testID(n uint64) ID {
	var id ID
	binary.BigEndian.PutUint64(id[:8], n)
	id[15] = byte(n) // something in the tail too, to catch truncation
	return id
}

// commitEvents writes events of dataset ds in one synced batch.
func commitEvents(t testing.TB, db *DB, ds uint32, events ...*Event) {
	t.Helper()
	b := db.NewBatch()
	defer b.Close()
	for _, e := range events {
		b.AddEvent(ds, e)
	}
	if b.Len() != len(events) {
		t.Fatalf("Batch.Len = %d, want %d", b.Len(), len(events))
	}
	if err := b.Commit(true); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// sameEvent reports whether a and b are equal; nil and empty properties are equal.
func sameEvent(a, b *Event) bool {
	return a.ID == b.ID && a.Name == b.Name && a.VisitorID == b.VisitorID &&
		a.HasVisitor == b.HasVisitor && a.Timestamp == b.Timestamp &&
		a.CreatedAt == b.CreatedAt && bytes.Equal(a.Properties, b.Properties)
}

// countKeys counts the raw keys in [lo, hi).
func countKeys(t testing.TB, db *DB, lo, hi []byte) int {
	t.Helper()
	it, err := db.Pebble().NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for it.SeekGE(lo); it.Valid() && (hi == nil || bytes.Compare(it.Key(), hi) < 0); it.Next() {
		n++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return n
}

// indexKey is prefix ts id, the layout of the T and N index keys (and of a
// visitor index key after its day prefix).
func indexKey(prefix []byte, ts int64, id ID) []byte {
	return append(appendTS(append([]byte(nil), prefix...), ts), id[:]...)
}

// untilStopped runs step in a goroutine of wg until stop closes or step
// fails, and then sends its error to errs.
func untilStopped(wg *sync.WaitGroup, stop <-chan struct{}, errs chan<- error, step func() error) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := step(); err != nil {
				errs <- err
				return
			}
		}
	}()
}
