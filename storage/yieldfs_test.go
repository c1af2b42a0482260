package storage

import (
	"io"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Only sstables get the yielding writer, and what is written through it
// arrives whole.
func TestYieldFS(t *testing.T) {
	fs := yieldFS{vfs.NewMem()}
	for _, tc := range []struct {
		name  string
		yield bool
	}{
		{"000012.sst", true},
		{"000013.log", false},
		{"MANIFEST-000001", false},
	} {
		f, err := fs.Create(tc.name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := f.(yieldFile); ok != tc.yield {
			t.Errorf("%s: yielding writer %v, want %v", tc.name, ok, tc.yield)
		}
		if _, err := f.Write([]byte("block one,")); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("block two")); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := fs.Open(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		_ = r.Close()
		if err != nil || string(got) != "block one,block two" {
			t.Errorf("%s: read back %q, %v", tc.name, got, err)
		}
	}
}

// A store's Pebble writes its tables through yieldFS.
func TestOpenYields(t *testing.T) {
	d, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if _, ok := d.fs.(yieldFS); !ok {
		t.Fatalf("store FS is %T, want yieldFS", d.fs)
	}
}
