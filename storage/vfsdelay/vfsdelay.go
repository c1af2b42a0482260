// Package vfsdelay wraps a Pebble file system so that every durable sync
// takes longer, to emulate a disk slower than the one at hand (cloud block
// storage syncs in 0.5-2 ms where a local NVMe takes tens of microseconds).
//
// eventd's `serve --fsync-delay` and the bench's raw Pebble ceiling both use
// it, so the server and its storage ceiling see the same slow disk. It is a
// leaf package: it imports Pebble's vfs and nothing of eventd.
package vfsdelay

import (
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// New wraps fs so that every Sync and SyncData of a file opened through it
// sleeps d first. With group commit, throughput should fall far less than
// 1/(fsync time) per committer. d <= 0 returns fs unchanged.
func New(fs vfs.FS, d time.Duration) vfs.FS {
	if d <= 0 {
		return fs
	}
	return &delayFS{FS: fs, d: d, sleep: time.Sleep}
}

type delayFS struct {
	vfs.FS
	d     time.Duration
	sleep func(time.Duration) // time.Sleep; tests count calls instead
}

func (fs *delayFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.Create(name, c))
}

func (fs *delayFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs *delayFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname, c))
}

func (fs *delayFS) OpenDir(name string) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenDir(name))
}

// Unwrap lets vfs.Root and friends see the real file system.
func (fs *delayFS) Unwrap() vfs.FS { return fs.FS }

func (fs *delayFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &delayFile{File: f, fs: fs}, nil
}

// delayFile delays the durable syncs a commit waits for (the WAL's, the
// directory's, the manifest's); SyncTo, which only starts write-back of
// sstables in the background, keeps its speed.
type delayFile struct {
	vfs.File
	fs *delayFS
}

func (f *delayFile) Sync() error {
	f.fs.sleep(f.fs.d)
	return f.File.Sync()
}

func (f *delayFile) SyncData() error {
	f.fs.sleep(f.fs.d)
	return f.File.SyncData()
}
