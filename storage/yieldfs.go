package storage

import (
	"runtime"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// yieldFS gives the goroutine that writes an sstable (a memtable flush, a
// compaction, a visitor day's seal) a scheduling point before every write.
// Pebble writes a table 4 KiB at a time, so a flush or compaction lets the
// request goroutines waiting for its P run every few tens of microseconds,
// instead of holding the P for Go's 10 ms time slice while requests queue:
// on two cores that slice was the open loop's p99 right after a burst of
// writes (docs/benchmarks.md, session 14). When nothing waits, Gosched
// returns at once.
type yieldFS struct{ vfs.FS }

// Create wraps the sstables it creates; WAL and manifest writes are on the
// commit path and stay as they are.
func (fs yieldFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	return yieldFile{f}, nil
}

// yieldFile is an sstable being written.
type yieldFile struct{ vfs.File }

func (f yieldFile) Write(p []byte) (int, error) {
	runtime.Gosched()
	return f.File.Write(p)
}
