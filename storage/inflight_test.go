package storage

import (
	"math"
	"slices"
	"testing"
	"time"
)

// holdNextCommit makes the next commit stop at stage (after Pebble's part,
// or after its memory part but before it ends) until release is called; it
// returns once that commit is visible in Pebble. done gives its error.
func holdNextCommit(t *testing.T, db testDB, ds uint32, e *Event, stage commitStage) (release func(), done <-chan error) {
	t.Helper()
	reached := make(chan struct{})
	held := make(chan struct{})
	hook := func(s commitStage) {
		if s == stage {
			db.commitHook.Store(nil) // this commit only
			close(reached)
			<-held
		}
	}
	db.commitHook.Store(&hook)
	var once bool
	release = func() {
		if !once {
			once = true
			close(held)
		}
	}
	t.Cleanup(release) // before anything can fail: the held commit keeps Close waiting
	errc := make(chan error, 1)
	go func() {
		b := db.NewBatch()
		defer b.Close()
		b.AddEvent(ds, e)
		errc <- b.Commit(true)
	}()
	<-reached
	if _, err := db.GetEvent(ds, e.ID); err != nil {
		t.Fatalf("the held commit's event is not in Pebble: %v", err)
	}
	return release, errc
}

func newTestEvent(n uint64, name, visitor string) *Event {
	now := time.Now().UnixMilli()
	return &Event{ID: testID(n), Name: name, VisitorID: visitor, HasVisitor: true, Timestamp: now, CreatedAt: now}
}

// TestReadersSeeCommitsInFlight holds a commit that Pebble already shows
// and checks that every reader of memory counts it too: the total, the
// visitor's list and total, the visitors' events and the event names.
func TestReadersSeeCommitsInFlight(t *testing.T) {
	db := openTestDB(t, "")
	e := newTestEvent(1, "signup", "v")
	release, done := holdNextCommit(t, db, 1, e, stagePublished)

	if n, err := db.Count(1, "", 0, math.MaxInt64); err != nil || n != 1 {
		t.Errorf("Count = %d, %v; want 1", n, err)
	}
	if evs, n, err := db.List(ListQuery{Dataset: 1, To: math.MaxInt64, Limit: 10}); err != nil || n != 1 || len(evs) != 1 {
		t.Errorf("List: %d events, total %d, %v; want 1, 1", len(evs), n, err)
	}
	if evs, n, err := db.List(ListQuery{Dataset: 1, VisitorID: "v", HasVisitor: true, To: math.MaxInt64, Limit: 10}); err != nil || n != 1 || len(evs) != 1 {
		t.Errorf("List by visitor: %d events, total %d, %v; want 1, 1", len(evs), n, err)
	}
	if got, err := db.VisitorsEvents(1, []string{"v", "w"}, 0, math.MaxInt64, 0); err != nil || len(got["v"]) != 1 || len(got["w"]) != 0 {
		t.Errorf("VisitorsEvents = %v, %v; want one event of v", got, err)
	}
	if names, err := db.EventNames(1); err != nil || !slices.Equal(names, []string{"signup"}) {
		t.Errorf("EventNames = %v, %v; want [signup]", names, err)
	}

	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Folded and added: counted once, not once from memory and once more.
	if n, err := db.Count(1, "", 0, math.MaxInt64); err != nil || n != 1 {
		t.Errorf("Count after the commit = %d, %v; want 1", n, err)
	}
	if _, n, err := db.List(ListQuery{Dataset: 1, VisitorID: "v", HasVisitor: true, To: math.MaxInt64, Limit: 10}); err != nil || n != 1 {
		t.Errorf("List by visitor after the commit: total %d, %v; want 1", n, err)
	}
}

// TestViewCountsACommitInFlightOnce opens a view while a commit is held and
// checks the view's count as the commit is folded: into an overlay the view
// holds (then its own copy no longer counts), or into one made by a
// checkpoint after the view was opened (then only its copy counts).
func TestViewCountsACommitInFlightOnce(t *testing.T) {
	for _, checkpoint := range []bool{false, true} {
		name := "folded into the view's overlay"
		if checkpoint {
			name = "folded after a checkpoint swapped the overlay"
		}
		t.Run(name, func(t *testing.T) {
			db := openTestDBWith(t, Options{DerivedInterval: time.Hour}) // no checkpoint but the test's
			commitEvents(t, db.DB, 1, newTestEvent(1, "a", "v"))         // in cur
			release, done := holdNextCommit(t, db, 1, newTestEvent(2, "a", "w"), stagePublished)
			v := db.derived.view()
			defer v.close()
			count := func() int64 { return v.count(1, "", LevelDay, 0, math.MaxInt64) }
			if n := count(); n != 2 {
				t.Fatalf("view count while held = %d, want 2", n)
			}
			if checkpoint {
				db.derived.checkpoint() // the first event goes to Pebble, after the view's snapshot
			}
			release()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if n := count(); n != 2 {
				t.Errorf("view count after the fold = %d, want 2", n)
			}
			if n, err := db.Count(1, "", 0, math.MaxInt64); err != nil || n != 2 {
				t.Errorf("Count = %d, %v; want 2", n, err)
			}
		})
	}
}

// TestReadersAfterACheckpointOfACommitInFlight holds a commit after its
// memory part, lets a checkpoint delete the L key by which readers find
// commits in flight, and checks that every reader still counts it: the
// visitor entries went to memory before the fold made the checkpoint
// possible.
func TestReadersAfterACheckpointOfACommitInFlight(t *testing.T) {
	db := openTestDB(t, "")
	release, done := holdNextCommit(t, db, 1, newTestEvent(1, "signup", "v"), stageFolded)
	db.derived.checkpoint()
	if n, err := db.Count(1, "", 0, math.MaxInt64); err != nil || n != 1 {
		t.Errorf("Count = %d, %v; want 1", n, err)
	}
	if _, n, err := db.List(ListQuery{Dataset: 1, VisitorID: "v", HasVisitor: true, To: math.MaxInt64, Limit: 10}); err != nil || n != 1 {
		t.Errorf("List by visitor: total %d, %v; want 1", n, err)
	}
	if got, err := db.VisitorsEvents(1, []string{"v"}, 0, math.MaxInt64, 0); err != nil || len(got["v"]) != 1 {
		t.Errorf("VisitorsEvents = %v, %v; want one event", got, err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestViewOverlays checks which overlays a view reads: its gens, and a
// commit's own copy only while the commit is not folded into one of them.
func TestViewOverlays(t *testing.T) {
	frozen, cur, later := newOverlay(), newOverlay(), newOverlay()
	for _, tc := range []struct {
		name  string
		into  *overlay
		extra bool
	}{
		{"not folded", nil, true},
		{"folded into the frozen overlay", frozen, false},
		{"folded into the current overlay", cur, false},
		{"folded into an overlay made after the view", later, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own := newOverlay()
			v := &view{gens: [2]*overlay{frozen, cur}, extra: []seenCommit{{c: &inflightCommit{into: tc.into}, o: own}}}
			var got []*overlay
			v.overlays(func(o *overlay) { got = append(got, o) })
			want := []*overlay{frozen, cur}
			if tc.extra {
				want = append(want, own)
			}
			if !slices.Equal(got, want) {
				t.Errorf("read %d overlays, want %d (%v)", len(got), len(want), tc.extra)
			}
		})
	}
}

// TestCommitStagesInOrder checks that a commit adds its visitor entries to
// memory before it folds its cells: once folded, a checkpoint may delete
// the L key by which readers find a commit still in flight.
func TestCommitStagesInOrder(t *testing.T) {
	db := openTestDB(t, "")
	var stages []commitStage
	hook := func(s commitStage) { stages = append(stages, s) }
	db.commitHook.Store(&hook)
	commitEvents(t, db.DB, 1, newTestEvent(1, "signup", "v"))
	db.commitHook.Store(nil)
	if want := []commitStage{stagePublished, stageAdded, stageFolded}; !slices.Equal(stages, want) {
		t.Errorf("stages %v, want %v", stages, want)
	}
}

// TestReadersCountACommitInMemoryAndInFlightOnce holds a commit whose
// entries memory already holds while it is still in flight: a reader finds
// them twice and must count them once.
func TestReadersCountACommitInMemoryAndInFlightOnce(t *testing.T) {
	db := openTestDB(t, "")
	release, done := holdNextCommit(t, db, 1, newTestEvent(1, "signup", "v"), stageAdded)
	if _, n, err := db.List(ListQuery{Dataset: 1, VisitorID: "v", HasVisitor: true, To: math.MaxInt64, Limit: 10}); err != nil || n != 1 {
		t.Errorf("List by visitor: total %d, %v; want 1", n, err)
	}
	if got, err := db.VisitorsEvents(1, []string{"v"}, 0, math.MaxInt64, 0); err != nil || len(got["v"]) != 1 {
		t.Errorf("VisitorsEvents = %v, %v; want one event", got, err)
	}
	if n, err := db.Count(1, "", 0, math.MaxInt64); err != nil || n != 1 {
		t.Errorf("Count = %d, %v; want 1", n, err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
