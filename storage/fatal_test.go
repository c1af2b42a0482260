package storage

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// fullFS makes writes to the WAL fail with ENOSPC once full is set, as a
// full disk does.
type fullFS struct {
	vfs.FS
	full atomic.Bool
}

func (fs *fullFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *fullFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

func (fs *fullFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &fullFile{File: f, fs: fs, name: name}, nil
}

type fullFile struct {
	vfs.File
	fs   *fullFS
	name string
}

func (f *fullFile) Write(p []byte) (int, error) {
	if f.fs.full.Load() {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

// TestWALNoSpaceIsAnError checks what a full disk under the WAL does: Pebble
// calls Fatalf("fatal commit error") in the committing goroutine; the commit
// returns a FatalError that says no space (the request gets 507, no panic),
// OnFatal is told once, and every later write fails the same way at once.
func TestWALNoSpaceIsAnError(t *testing.T) {
	fs := &fullFS{FS: vfs.NewMem()}
	fatal := make(chan error, 4)
	db, err := Open("db", Options{FS: fs, OnFatal: func(err error) { fatal <- err }})
	if err != nil {
		t.Fatal(err)
	}
	// No Close: Pebble's commit pipeline is broken after a WAL failure and
	// the process is meant to exit; the test leaves the store as it is.
	if err := db.PutConfig("t", "a", []byte("1")); err != nil {
		t.Fatalf("healthy write: %v", err)
	}
	fs.full.Store(true)

	b := db.NewBatch()
	b.AddEvent(1, &Event{ID: ID{1}, Name: "e", Timestamp: 1, CreatedAt: 1, Properties: []byte("{}")})
	err = b.Commit(true)
	var fe *FatalError
	if !errors.As(err, &fe) || !NoSpace(err) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("commit on a full WAL: %v (%T), want a FatalError wrapping ENOSPC", err, err)
	}
	select {
	case got := <-fatal:
		if got != err {
			t.Errorf("OnFatal got %v, want %v", got, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnFatal not called")
	}
	if db.Failed() == nil {
		t.Error("Failed() is nil after the fatal error")
	}
	for name, write := range map[string]func() error{
		"PutConfig": func() error { return db.PutConfig("t", "b", []byte("2")) },
		"Flush":     db.Flush,
		"Batch":     func() error { return db.NewBatch().Commit(true) },
		"Windows":   func() error { return db.PutWindows("k", []byte("x")) },
	} {
		if err := write(); !errors.As(err, &fe) {
			t.Errorf("%s after the failure: %v, want the FatalError", name, err)
		}
	}
	select {
	case got := <-fatal:
		t.Errorf("OnFatal called twice (%v)", got)
	default:
	}
	// Reads still work.
	if v, err := db.GetConfig("t", "a"); err != nil || string(v) != "1" {
		t.Errorf("read after the failure: %q, %v", v, err)
	}
}

func TestNoSpace(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("boom"), false},
		{&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, true},
		{errors.New("write 000002.log: no space left on device"), true},
		{&FatalError{Msg: "m", cause: syscall.ENOSPC}, true},
	} {
		if got := NoSpace(tc.err); got != tc.want {
			t.Errorf("NoSpace(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A commit that finds Pebble's WAL writer broken panics with the error
// itself; that too becomes the fatal error, not a crash.
func TestRecoverFatalErrorPanic(t *testing.T) {
	fatal := make(chan error, 1)
	s := &fatalState{onFatal: func(err error) { fatal <- err }}
	cause := &os.PathError{Op: "write", Path: "000002.log", Err: syscall.ENOSPC}
	err := func() (err error) {
		defer s.recoverFatal(&err)
		panic(cause)
	}()
	if !errors.Is(err, syscall.ENOSPC) || s.failed() == nil {
		t.Fatalf("err %v, failed %v", err, s.failed())
	}
	<-fatal
	// A programming error still panics.
	defer func() {
		if r := recover(); r != "bug" {
			t.Fatalf("recovered %v, want the original panic", r)
		}
	}()
	s2 := &fatalState{onFatal: func(error) {}}
	func() (err error) {
		defer s2.recoverFatal(&err)
		panic("bug")
	}()
}
