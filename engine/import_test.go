package engine

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/logtest"
	"github.com/eventd/eventd/storage"
)

// TestImportForgetsKeysPastTheirTTL imports lines whose idempotency keys
// the store remembers, with other content, from 23 hours and from 25 hours
// ago: the first conflicts, the second is a new event, whether or not the
// hourly sweep ran.
func TestImportForgetsKeysPastTheirTTL(t *testing.T) {
	e, proj := openTestEngine(t)
	const line = `{"event":"signup","properties":{}}`
	scope := "import/" + proj.ID + "/" + Live
	now := time.Now()
	b := e.db.NewBatch()
	for key, age := range map[string]time.Duration{"recent": 23 * time.Hour, "old": actors.IdempotencyTTL + time.Hour} {
		created := now.Add(-age).UnixMilli()
		b.AddIdempotency(scope, key, storage.IdemRecord{Hash: 1, ID: storage.IDAt(created), Timestamp: created, CreatedAt: created})
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	for _, tc := range []struct {
		key                       string
		accepted, dups, conflicts int
	}{
		{"recent", 0, 0, 1},
		{"old", 1, 0, 0},
	} {
		body := strings.Replace(line, `"properties"`, `"idempotency_key":"`+tc.key+`","properties"`, 1) + "\n"
		res, err := e.Import(proj.ID, Live, strings.NewReader(body), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Accepted != tc.accepted || res.Duplicates != tc.dups || res.Rejected != tc.conflicts {
			t.Errorf("key %q: %+v; want %d accepted, %d duplicates, %d rejected", tc.key, res, tc.accepted, tc.dups, tc.conflicts)
		}
	}
}

// An import line whose key a build before the xxhash content hash stored
// (its record holds the FNV hash) counts as a duplicate when its content
// is the same, and is rejected when it is not.
func TestImportLegacyHash(t *testing.T) {
	e, proj := openTestEngine(t)
	scope := "import/" + proj.ID + "/" + Live
	created := time.Now().UnixMilli()
	same := event.Content{Name: "signup", Properties: []byte(`{}`)}
	b := e.db.NewBatch()
	b.AddIdempotency(scope, "k", storage.IdemRecord{Hash: event.LegacyContentHash(&same), ID: storage.IDAt(created), Timestamp: created, CreatedAt: created})
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	for _, tc := range []struct {
		line            string
		dups, conflicts int
	}{
		{`{"event":"signup","idempotency_key":"k","properties":{}}`, 1, 0},
		{`{"event":"signup","idempotency_key":"k","properties":{"plan":"pro"}}`, 0, 1},
	} {
		res, err := e.Import(proj.ID, Live, strings.NewReader(tc.line+"\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Accepted != 0 || res.Duplicates != tc.dups || res.Rejected != tc.conflicts {
			t.Errorf("%s: %+v; want %d duplicates, %d rejected", tc.line, res, tc.dups, tc.conflicts)
		}
	}
}

// TestOpenSweepsIdempotencyKeys: the engine sweeps once at start, so a
// store reopened more often than hourly still loses the days of
// idempotency records past their 24 hours.
func TestOpenSweepsIdempotencyKeys(t *testing.T) {
	dir := storeWithOldIdempotencyDay(t)
	e, err := Open(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	// The start's sweep runs beside Open's callers; wait for it, boundedly.
	for deadline := time.Now().Add(30 * time.Second); idempotencyRecords(t, e) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the record of three days ago is still stored 30 s after the start")
		}
	}
}

// TestSweepReadOnly: a read-only engine (a start on a full volume) can
// delete nothing, so its sweep neither tries nor logs an error for it.
func TestSweepReadOnly(t *testing.T) {
	dir := storeWithOldIdempotencyDay(t)
	logs := &logtest.Buffer{}
	e, err := Open(Config{DataDir: dir, ReadOnly: true, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	e.sweep(time.Now())
	if n := idempotencyRecords(t, e); n != 1 {
		t.Errorf("%d idempotency records after a read-only sweep, want the 1 stored", n)
	}
	if l := logs.String(); strings.Contains(l, "level=ERROR") {
		t.Errorf("the read-only sweep logged an error:\n%s", l)
	}
}

// storeWithOldIdempotencyDay is a store, written without an engine (so
// nothing swept it), that holds one idempotency record of three days ago.
func storeWithOldIdempotencyDay(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	db, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	created := time.Now().Add(-3 * 24 * time.Hour).UnixMilli()
	b.AddIdempotency("key", "old", storage.IdemRecord{Hash: 1, ID: storage.IDAt(created), Timestamp: created, CreatedAt: created})
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// idempotencyRecords counts the store's idempotency keys, whatever their
// layout: groups by the 128th of a second (B), one by second (F), by day
// (H) or before the days (I).
func idempotencyRecords(t *testing.T, e *Engine) int {
	t.Helper()
	n := 0
	for _, r := range [][2]byte{{'B', 'C'}, {'F', 'G'}, {'H', 'J'}} {
		it, err := e.db.Pebble().NewIter(&pebble.IterOptions{LowerBound: []byte{r[0]}, UpperBound: []byte{r[1]}})
		if err != nil {
			t.Fatal(err)
		}
		for it.First(); it.Valid(); it.Next() {
			n++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return n
}
