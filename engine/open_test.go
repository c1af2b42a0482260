package engine

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/eventd/eventd/storage"
)

// TestReadOnlyOpenRefusesRecordsByID: a read-only start (a full disk) on
// a store that still keeps its records by id, as eventd did before keying
// them by time, refuses with what to do instead of serving no events.
func TestReadOnlyOpenRefusesRecordsByID(t *testing.T) {
	dir := t.TempDir()
	db, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// E ds id -> record: the layout before records were keyed by time.
	old := append([]byte{'E', 0, 0, 0, 1}, make([]byte, 16)...)
	if err := db.Pebble().Set(old, []byte{1, 0, 0, 1, 'e', 0}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{DataDir: dir, ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "read-only start cannot move them") {
		t.Fatalf("read-only open: %v", err)
	}
	e, err := Open(Config{DataDir: dir})
	if err != nil {
		t.Fatalf("read-write open after: %v", err)
	}
	_ = e.Close()
}
