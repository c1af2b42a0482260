package http

import (
	"bytes"
	"testing"

	"github.com/eventd/eventd/storage"
)

// TestEventCache: one decoded and encoded event per dataset and id, shared
// by every reader; the oldest entry leaves when the cache is full; a bad
// record is an error and is not kept.
func TestEventCache(t *testing.T) {
	db, err := storage.Open(t.TempDir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	b := db.NewBatch()
	for i := range 3 {
		b.AddEvent(1, &storage.Event{ID: storage.ID{15: byte(i + 1)}, Name: "e", Timestamp: 1, CreatedAt: 1, Properties: []byte(`{"n":1}`)})
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	var ids []storage.ID
	var records [][]byte
	if err := db.RecordsAfter(1, storage.ID{}, 10, func(id storage.ID, rec []byte) bool {
		ids, records = append(ids, id), append(records, bytes.Clone(rec))
		return true
	}); err != nil || len(ids) != 3 {
		t.Fatalf("%d records, %v", len(ids), err)
	}

	c := newEventCache(2)
	first, err := c.load(1, ids[0], records[0])
	if err != nil {
		t.Fatal(err)
	}
	want := appendStreamPayload(nil, &first.ev)
	if first.ev.ID != ids[0] || first.ev.Name != "e" || !bytes.Equal(first.payload, want) {
		t.Fatalf("loaded %+v %s", first.ev, first.payload)
	}
	if again, _ := c.load(1, ids[0], nil); again != first {
		t.Error("a second load decoded again")
	}
	if other, _ := c.load(2, ids[0], records[0]); other == first {
		t.Error("another dataset's event with the same id shared the entry")
	}
	if _, err := c.load(1, ids[1], records[1]); err != nil { // evicts (1, ids[0])
		t.Fatal(err)
	}
	if _, err := c.load(1, ids[0], nil); err == nil {
		t.Error("the oldest entry was not evicted (a nil record decoded)")
	}
	if _, err := c.load(1, ids[2], []byte{0xff}); err == nil {
		t.Error("a corrupt record loaded")
	}
	if len(c.m) != 2 || len(c.ring) != 2 {
		t.Errorf("%d entries, ring %d: the cache grew past its size", len(c.m), len(c.ring))
	}
}
