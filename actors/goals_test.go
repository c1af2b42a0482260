package actors

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/eventd/eventd/engine/analytics"
	"github.com/eventd/eventd/engine/metrics"
	"github.com/eventd/eventd/storage"
)

// fixedGoals is a GoalSource of one dataset.
type fixedGoals struct {
	ds    uint32
	goals []*analytics.Goal
}

func (f *fixedGoals) Goals(ds uint32) []*analytics.Goal {
	if ds == f.ds {
		return f.goals
	}
	return nil
}

func (f *fixedGoals) GoalDatasets() []uint32 { return []uint32{f.ds} }

func compileGoal(t *testing.T, id, js string) *analytics.Goal {
	t.Helper()
	var spec analytics.GoalSpec
	if err := json.Unmarshal([]byte(js), &spec); err != nil {
		t.Fatal(err)
	}
	if d := spec.Check(); d != nil {
		t.Fatalf("goal %s: %v", js, d)
	}
	return analytics.Compile(id, spec)
}

// goalEvent is an event recorded at ms (its id carries that time) with timestamp ts.
func goalEvent(ms int64, n byte, name, visitor string, ts int64) *storage.Event {
	id := storage.IDAt(ms)
	id[15] = n
	return &storage.Event{ID: id, Name: name, VisitorID: visitor, HasVisitor: visitor != "", Timestamp: ts, CreatedAt: ms, Properties: []byte(`{}`)}
}

func writeEvents(t *testing.T, db *storage.DB, ds uint32, evs ...*storage.Event) {
	t.Helper()
	b := db.NewBatch()
	defer b.Close()
	for _, e := range evs {
		b.AddEvent(ds, e)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
}

func waitCompletions(t *testing.T, db *storage.DB, ds uint32, goal string, want, wantVisitors int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, v, err := db.CountCompletions(ds, goal, 0, 1<<50)
		if err != nil {
			t.Fatal(err)
		}
		if c == want && v == wantVisitors {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goal %s: %d completions (%d visitors), want %d (%d)", goal, c, v, want, wantVisitors)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestGoalsActorCatchesUpFromCursor(t *testing.T) {
	db, err := storage.Open(t.TempDir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const ds = 7
	now := time.Now().UnixMilli()
	// Cursor now; an event recorded 2 minutes before it (outside the margin)
	// was evaluated long ago and must not be looked at again.
	if err := db.InitGoalCursor(ds, storage.IDAt(now)); err != nil {
		t.Fatal(err)
	}
	old := goalEvent(now-2*time.Minute.Milliseconds(), 1, "signup", "old", now)
	// Events committed but never handed to the actor (a crash after commit).
	missed := []*storage.Event{
		goalEvent(now-10_000, 2, "signup", "margin", now), // within the margin before the cursor
		goalEvent(now+1, 3, "signup", "alice", now),
		goalEvent(now+2, 4, "signup", "alice", now), // a repeat: once per visitor
		goalEvent(now+3, 5, "signup", "", now),      // anonymous
		// A sequence whose first step has the later id (arrived later, backfilled).
		goalEvent(now+4, 6, "buy", "bob", now),
		goalEvent(now+5, 7, "signup", "bob", now-1000),
	}
	writeEvents(t, db, ds, old)
	writeEvents(t, db, ds, missed...)

	// A goal created after some of the missed events were received counts
	// only the later ones, though the catch-up evaluates them all.
	newGoal := compileGoal(t, "g_new", `{"name":"n","environment":"live","type":"occurrence","event":"signup"}`)
	newGoal.Since = now + 3
	src := &fixedGoals{ds: ds, goals: []*analytics.Goal{
		compileGoal(t, "g_signup", `{"name":"s","environment":"live","type":"occurrence","event":"signup"}`),
		compileGoal(t, "g_seq", `{"name":"q","environment":"live","type":"sequence","steps":["signup","buy"],"window":60}`),
		newGoal,
	}}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	pid := NewGoals(system, db, src, metrics.New(), slog.New(slog.DiscardHandler))
	// margin, alice, anonymous, bob: four completions, three visitors.
	waitCompletions(t, db, ds, "g_signup", 4, 3)
	waitCompletions(t, db, ds, "g_seq", 1, 1)
	waitCompletions(t, db, ds, "g_new", 2, 1) // the anonymous one and bob's, not margin's or alice's
	if done, _ := db.GoalCompletedBy(ds, "g_signup", "old"); done {
		t.Errorf("an event before the cursor's margin was evaluated again")
	}

	// Live batches, delivered twice (a catch-up overlapping live delivery):
	// idempotent, nothing counts twice.
	live := []*storage.Event{goalEvent(now+10, 8, "signup", "carol", now), goalEvent(now+11, 9, "signup", "", now)}
	writeEvents(t, db, ds, live...)
	msg := &Committed{Events: []CommittedEvent{{Dataset: ds, Event: live[0]}, {Dataset: ds, Event: live[1]}}}
	system.Root.Send(pid, msg)
	system.Root.Send(pid, msg)
	_ = system.Root.PoisonFuture(pid).Wait()
	waitCompletions(t, db, ds, "g_signup", 6, 4)
	cur, ok, err := db.GoalCursor(ds)
	if err != nil || !ok || cur != live[1].ID {
		t.Errorf("cursor after stop: %x %v %v, want the last event's id", cur, ok, err)
	}
}

// TestGoalsResolveLinkedIDs: a sequence goal started by an anonymous id and
// finished by the user id it is linked to completes, once for the person;
// an occurrence goal counts the person once although both ids did it; ids
// linked only after evaluation still count apart.
func TestGoalsResolveLinkedIDs(t *testing.T) {
	db, err := storage.Open(t.TempDir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const ds = 3
	now := time.Now().UnixMilli()
	if err := db.InitGoalCursor(ds, storage.IDAt(now)); err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	b.AddProfile(ds, &storage.ProfileUpdate{ID: "user_1", Links: []string{"anon_1"}, Timestamp: now})
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	writeEvents(t, db, ds,
		goalEvent(now+1, 1, "view_pricing", "anon_1", now),
		goalEvent(now+2, 2, "signup", "anon_1", now+1000),
		goalEvent(now+3, 3, "purchase", "user_1", now+2000),
		goalEvent(now+4, 4, "signup", "user_1", now+3000),
		// Not linked: two visitors.
		goalEvent(now+5, 5, "signup", "anon_2", now),
		goalEvent(now+6, 6, "signup", "user_2", now),
		goalEvent(now+7, 7, "purchase", "user_2", now+1000),
	)
	src := &fixedGoals{ds: ds, goals: []*analytics.Goal{
		compileGoal(t, "g_seq", `{"name":"q","environment":"live","type":"sequence","steps":["view_pricing","signup","purchase"],"window":60}`),
		compileGoal(t, "g_signup", `{"name":"s","environment":"live","type":"occurrence","event":"signup"}`),
	}}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	pid := NewGoals(system, db, src, metrics.New(), slog.New(slog.DiscardHandler))
	defer func() { _ = system.Root.PoisonFuture(pid).Wait() }()
	waitCompletions(t, db, ds, "g_seq", 1, 1)
	// anon_1/user_1 once, anon_2, user_2.
	waitCompletions(t, db, ds, "g_signup", 3, 3)
}
