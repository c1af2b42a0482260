// Package uringsync wraps a Pebble file system so that its files' durable
// syncs go through io_uring instead of a blocking fsync(2).
//
// A blocking fsync keeps a thread in the kernel for 100-200 µs. Go's
// system monitor notices, hands the thread's P to another thread and,
// since it keeps finding such Ps, polls every 20 µs: 12% of eventd's CPU on
// single-event ingest (docs/benchmarks.md, "The WAL's fsync without a
// blocking system call"). Through io_uring the kernel syncs on its own
// worker and signals an eventfd that Go's netpoller watches, so the
// waiting goroutine parks like one waiting for a socket.
//
// The result is the kernel's fsync result either way, so durability and
// errors (ENOSPC, EIO) are unchanged. It is a leaf package: it imports
// Pebble's vfs and nothing of eventd.
package uringsync

import (
	"github.com/cockroachdb/pebble/v2/vfs"
)

// New wraps fs so that Sync and SyncData of the files it opens for writing
// go through io_uring. Where the kernel refuses a ring (not Linux,
// io_uring disabled, a seccomp filter), it returns fs itself and the
// reason; the caller logs it and goes on with blocking syncs. close stops
// the ring after the store using fs is closed.
func New(fs vfs.FS) (wrapped vfs.FS, close func() error, err error) {
	r, err := newRing()
	if err != nil {
		return fs, func() error { return nil }, err
	}
	return &uringFS{FS: fs, r: r}, r.close, nil
}

type uringFS struct {
	vfs.FS
	r *ring
}

func (fs *uringFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.Create(name, c))
}

func (fs *uringFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs *uringFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname, c))
}

// Unwrap lets vfs.Root and friends see the real file system.
func (fs *uringFS) Unwrap() vfs.FS { return fs.FS }

func (fs *uringFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &uringFile{File: f, r: fs.r}, nil
}

// uringFile syncs through the ring. SyncTo, which Pebble uses to start
// write-back of tables in the background, keeps its own path.
type uringFile struct {
	vfs.File
	r *ring
}

func (f *uringFile) Sync() error { return f.r.fsync(f.Fd(), false) }

func (f *uringFile) SyncData() error { return f.r.fsync(f.Fd(), true) }
