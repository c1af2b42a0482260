package uringsync

import (
	"errors"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// newFS wraps the real file system, skipping where the kernel has no ring.
func newFS(t *testing.T) vfs.FS {
	t.Helper()
	fs, closeRing, err := New(vfs.Default)
	if err != nil {
		t.Skipf("io_uring unavailable here: %v", err)
	}
	t.Cleanup(func() {
		if err := closeRing(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return fs
}

func TestSyncs(t *testing.T) {
	fs := newFS(t)
	f, err := fs.Create(filepath.Join(t.TempDir(), "000001.log"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range 100 {
		if _, err := f.Write([]byte("record\n")); err != nil {
			t.Fatal(err)
		}
		sync := f.SyncData
		if i%2 == 1 {
			sync = f.Sync
		}
		if err := sync(); err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
	}
}

// TestConcurrentSyncs: more syncs in flight than the ring has entries each
// get their own file's result.
func TestConcurrentSyncs(t *testing.T) {
	fs := newFS(t)
	dir := t.TempDir()
	var wg sync.WaitGroup
	for g := range 2 * entries {
		wg.Go(func() {
			f, err := fs.Create(filepath.Join(dir, string(rune('a'+g%26))+string(rune('a'+g/26))), vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for range 20 {
				if _, err := f.Write([]byte("x")); err != nil {
					t.Error(err)
					return
				}
				if err := f.SyncData(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestSyncError: the kernel's error comes back as fsync(2)'s would, an
// errno that errors.Is recognises.
func TestSyncError(t *testing.T) {
	fs := newFS(t)
	r := fs.(*uringFS).r
	if err := r.fsync(^uintptr(0)>>33, true); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("fsync of a closed descriptor: %v, want EBADF", err)
	}
}
