package http

import (
	"bytes"
	"testing"
	"time"

	"github.com/eventd/eventd/storage"
)

// cacheRecords stores n events of dataset 1 (ids whose time is 0, so
// recent for a cache whose clock says so) and returns their ids and
// records.
func cacheRecords(t *testing.T, props ...string) ([]storage.ID, [][]byte) {
	t.Helper()
	db, err := storage.Open(t.TempDir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	b := db.NewBatch()
	for i, pr := range props {
		b.AddEvent(1, &storage.Event{ID: storage.ID{15: byte(i + 1)}, Name: "e", Timestamp: 1, CreatedAt: 1, Properties: []byte(pr)})
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
	}); err != nil || len(ids) != len(props) {
		t.Fatalf("%d records, %v", len(ids), err)
	}
	return ids, records
}

// TestEventCache: one decoded and encoded event per dataset, id and record,
// shared by every reader; the oldest entries leave past the byte bound;
// old events and changed records are decoded but not served from the
// cache; a bad record is an error.
func TestEventCache(t *testing.T) {
	ids, records := cacheRecords(t, `{"n":1}`, `{"n":2}`, `{"n":3}`)
	c := newEventCache(1<<20, time.Minute)
	c.now = func() time.Time { return time.UnixMilli(0) }
	first, err := c.load(1, ids[0], records[0])
	if err != nil {
		t.Fatal(err)
	}
	want := appendStreamPayload(nil, &first.ev)
	if first.ev.ID != ids[0] || first.ev.Name != "e" || !bytes.Equal(first.payload, want) {
		t.Fatalf("loaded %+v %s", first.ev, first.payload)
	}
	if again, _ := c.load(1, ids[0], records[0]); again != first {
		t.Error("a second load decoded again")
	}
	if other, _ := c.load(2, ids[0], records[0]); other == first {
		t.Error("another dataset's event with the same id shared the entry")
	}
	// The same id with another record (erased, then imported again).
	if changed, err := c.load(1, ids[0], records[1]); err != nil || changed == first || string(changed.ev.Properties) != `{"n":2}` {
		t.Errorf("a changed record was served from the cache: %+v %v", changed, err)
	}
	if _, err := c.load(1, ids[2], []byte{0xff}); err == nil {
		t.Error("a corrupt record loaded")
	}
	// Old events are not kept.
	c.now = func() time.Time { return time.UnixMilli(0).Add(2 * time.Minute) }
	if a, _ := c.load(1, ids[2], records[2]); a == nil {
		t.Fatal("an old event did not load")
	} else if b, _ := c.load(1, ids[2], records[2]); a == b {
		t.Error("an old event was kept")
	}
}

// TestEventCacheBytes: the cache stays within its byte bound and evicts
// the oldest entries first.
func TestEventCacheBytes(t *testing.T) {
	ids, records := cacheRecords(t, `{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`)
	c := newEventCache(1<<20, time.Minute)
	c.now = func() time.Time { return time.UnixMilli(0) }
	se, err := c.load(1, ids[0], records[0])
	if err != nil {
		t.Fatal(err)
	}
	c = newEventCache(se.size()*5/2, time.Minute) // room for two entries
	c.now = func() time.Time { return time.UnixMilli(0) }
	for i := range ids {
		if _, err := c.load(1, ids[i], records[i]); err != nil {
			t.Fatal(err)
		}
		if c.bytes > c.maxBytes {
			t.Fatalf("after %d loads: %d bytes, bound %d", i+1, c.bytes, c.maxBytes)
		}
	}
	if _, ok := c.m[eventCacheKey{1, ids[0]}]; ok {
		t.Error("the oldest entry was not evicted")
	}
	if _, ok := c.m[eventCacheKey{1, ids[3]}]; !ok {
		t.Error("the newest entry was evicted")
	}
	sum := 0
	for _, se := range c.m {
		sum += se.size()
	}
	if sum != c.bytes {
		t.Errorf("accounted %d bytes, entries hold %d", c.bytes, sum)
	}
}
