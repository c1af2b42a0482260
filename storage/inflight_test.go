package storage

import (
	"math"
	"runtime"
	"testing"
	"time"
)

// TestReadersSettleOnCommitsInFlight holds a commit between Pebble's
// publish and its memory part (derived fold, visitor entries) and checks
// that a total and a visitor's list opened meanwhile wait for it instead of
// missing the event a plain list already shows.
func TestReadersSettleOnCommitsInFlight(t *testing.T) {
	db := openTestDB(t, "")
	published := make(chan struct{})
	release := make(chan struct{})
	db.afterPublish = func() {
		close(published)
		<-release
	}
	now := time.Now().UnixMilli()
	e := &Event{ID: testID(1), Name: "signup", VisitorID: "v", HasVisitor: true, Timestamp: now, CreatedAt: now}
	committed := make(chan error, 1)
	go func() {
		b := db.NewBatch()
		defer b.Close()
		b.AddEvent(1, e)
		committed <- b.Commit(true)
	}()
	<-published

	if _, err := db.GetEvent(1, e.ID); err != nil {
		t.Fatalf("the published event cannot be read yet: %v", err)
	}
	// List without a visitor counts through the derived view; List with
	// one counts the visitor's index (memory for today).
	reads := map[string]func() (int64, error){
		"total": func() (int64, error) { return db.Count(1, "", 0, math.MaxInt64) },
		"visitor total": func() (int64, error) {
			_, n, err := db.List(ListQuery{Dataset: 1, VisitorID: "v", HasVisitor: true, To: math.MaxInt64, Limit: 10})
			return n, err
		},
	}
	type result struct {
		name string
		n    int64
		err  error
	}
	results := make(chan result, len(reads))
	for name, read := range reads {
		go func() {
			n, err := read()
			results <- result{name, n, err}
		}()
	}
	// Release the commit once both readers wait for it. A reader that
	// returns before that did not wait: its count must then already be 1,
	// which it cannot be while the commit is held.
	got := 0
	for waiting := false; !waiting; {
		select {
		case r := <-results:
			got++
			t.Errorf("%s returned while the commit was held: %d, %v", r.name, r.n, r.err)
			if got == len(reads) {
				close(release)
				t.FailNow()
			}
		default:
			db.inflight.mu.Lock()
			waiting = db.inflight.waiters == len(reads)-got
			db.inflight.mu.Unlock()
			runtime.Gosched()
		}
	}
	close(release)
	for ; got < len(reads); got++ {
		r := <-results
		if r.err != nil || r.n != 1 {
			t.Errorf("%s = %d, %v; want 1", r.name, r.n, r.err)
		}
	}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
}
