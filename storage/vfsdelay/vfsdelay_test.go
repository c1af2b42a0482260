package vfsdelay

import (
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// recorder replaces the sleep so the tests count delays instead of timing them.
type recorder struct {
	mu    sync.Mutex
	calls []time.Duration
}

func (r *recorder) sleep(d time.Duration) {
	r.mu.Lock()
	r.calls = append(r.calls, d)
	r.mu.Unlock()
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func wrapped(t *testing.T, d time.Duration) (vfs.FS, *recorder) {
	t.Helper()
	fs := New(vfs.NewMem(), d)
	dfs, ok := fs.(*delayFS)
	if !ok {
		t.Fatalf("New returned %T", fs)
	}
	r := &recorder{}
	dfs.sleep = r.sleep
	return fs, r
}

func TestZeroDelayIsIdentity(t *testing.T) {
	base := vfs.NewMem()
	if New(base, 0) != base || New(base, -time.Millisecond) != base {
		t.Error("a zero or negative delay should return the file system unchanged")
	}
}

func TestSyncsAreDelayedWritesAreNot(t *testing.T) {
	fs, r := wrapped(t, 3*time.Millisecond)
	f, err := fs.Create("wal", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("record")); err != nil {
		t.Fatal(err)
	}
	if r.count() != 0 {
		t.Fatalf("a write was delayed: %v", r.calls)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.SyncData(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, open := range []func() (vfs.File, error){
		func() (vfs.File, error) { return fs.OpenReadWrite("wal", vfs.WriteCategoryUnspecified) },
		func() (vfs.File, error) { return fs.ReuseForWrite("wal", "wal2", vfs.WriteCategoryUnspecified) },
		func() (vfs.File, error) { return fs.OpenDir("") },
	} {
		f, err := open()
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if r.count() != 5 {
		t.Fatalf("%d delayed syncs, want 5", r.count())
	}
	for _, d := range r.calls {
		if d != 3*time.Millisecond {
			t.Errorf("delayed by %v", d)
		}
	}
	if _, err := fs.Create("missing/dir/file", vfs.WriteCategoryUnspecified); err == nil {
		t.Error("an error of the wrapped file system was lost")
	}
}

func TestPebbleSyncCommitsGoThroughTheDelay(t *testing.T) {
	// The delay must sit on the commit path: every Sync commit of a lone
	// writer waits for at least one delayed sync.
	fs, r := wrapped(t, time.Millisecond)
	db, err := pebble.Open("db", &pebble.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before := r.count()
	const commits = 5
	for i := range commits {
		if err := db.Set([]byte{byte(i)}, []byte("v"), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.count() - before; got < commits {
		t.Errorf("%d delayed syncs for %d Sync commits", got, commits)
	}
	before = r.count()
	if err := db.Set([]byte("x"), []byte("v"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if got := r.count() - before; got != 0 {
		t.Errorf("a NoSync commit waited for %d syncs", got)
	}
	if vfs.Root(fs) == fs {
		t.Error("Unwrap does not reach the wrapped file system")
	}
}
