package actors

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/eventd/eventd/engine/analytics"
	"github.com/eventd/eventd/engine/metrics"
	"github.com/eventd/eventd/storage"
)

// GoalSource tells the goals actor which goals apply to a dataset. The
// engine owns the definitions; both methods must be safe for concurrent use.
type GoalSource interface {
	// Goals are the goals evaluated on ds, nil when there are none.
	Goals(ds uint32) []*analytics.Goal
	// GoalDatasets are the datasets with at least one goal.
	GoalDatasets() []uint32
}

// Goal evaluation limits.
const (
	// GoalCatchUpMargin is how far before its cursor a dataset is evaluated
	// again at start: commits of different shards reach the goals actor out
	// of id order, so the cursor (the highest id evaluated) may pass events
	// committed a little earlier and not evaluated before a crash.
	GoalCatchUpMargin = time.Minute
	// goalHistoryLimit bounds the events of one visitor read to evaluate a sequence goal.
	goalHistoryLimit = 10_000
	// goalCursorEvery is how often a dataset's cursor is saved when nothing completes.
	goalCursorEvery = time.Second
	catchUpChunk    = 4096
)

// goalsActor evaluates goals after commit, off the ingest path: it is sent
// every committed batch by the broadcaster, and at start it catches up from
// storage from each dataset's cursor, so a crash between a commit and its
// evaluation loses no completion. Completions are idempotent writes, so
// evaluating an event twice changes nothing.
type goalsActor struct {
	db  *storage.DB
	src GoalSource
	log *slog.Logger

	cursors   map[uint32]storage.ID
	saved     map[uint32]time.Time
	evaluated *metrics.Counter
	completed *metrics.Counter
}

// NewGoals spawns the goals actor; register it with the broadcaster (AddConsumer) to feed it.
func NewGoals(system *actor.ActorSystem, db *storage.DB, src GoalSource, reg *metrics.Registry, log *slog.Logger) *actor.PID {
	g := &goalsActor{
		db: db, src: src, log: log.With("component", "goals"),
		cursors:   make(map[uint32]storage.ID),
		saved:     make(map[uint32]time.Time),
		evaluated: reg.Counter("eventd_goal_events_evaluated_total", "Events evaluated against goals.", ""),
		completed: reg.Counter("eventd_goal_completions_total", "Goal completions recorded.", ""),
	}
	var mb mailboxHeld
	RegisterMailboxDepth(reg, "goals", mb.depth)
	return system.Root.Spawn(mb.props(func() actor.Actor { return g }))
}

// Receive handles committed batches, one at a time, after the start-up catch-up.
func (g *goalsActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		g.catchUp()
	case *Committed:
		g.evaluate(m.Events, false)
	case *actor.Stopping:
		g.saveCursors()
	}
}

// catchUp evaluates, for each dataset with goals, what was recorded since a
// margin before its cursor.
func (g *goalsActor) catchUp() {
	for _, ds := range g.src.GoalDatasets() {
		cur, ok, err := g.db.GoalCursor(ds)
		if err != nil {
			g.log.Error("read goal cursor", "dataset", ds, "err", err)
			continue
		}
		if !ok {
			continue
		}
		after := storage.IDAt(max(storage.IDTime(cur)-GoalCatchUpMargin.Milliseconds(), 0))
		n := 0
		for {
			var chunk []CommittedEvent
			err := g.db.EventsAfter(ds, after, catchUpChunk, func(e *storage.Event) bool {
				chunk = append(chunk, CommittedEvent{Dataset: ds, Event: e})
				return true
			})
			if err != nil {
				g.log.Error("goal catch-up", "dataset", ds, "err", err)
				break
			}
			if len(chunk) == 0 {
				break
			}
			g.evaluate(chunk, true)
			n += len(chunk)
			after = chunk[len(chunk)-1].Event.ID
			if len(chunk) < catchUpChunk {
				break
			}
		}
		if n > 0 {
			g.log.Info("goal catch-up done", "dataset", ds, "events", n)
		}
	}
}

// evaluate checks events against their dataset's goals and records the
// completions and cursors in one write.
func (g *goalsActor) evaluate(events []CommittedEvent, force bool) {
	var completions map[uint32][]storage.Completion
	var done map[string]bool // goal and visitor completed within this call
	now := time.Now()
	touched := map[uint32]bool{}
	for _, ce := range events {
		goals := g.src.Goals(ce.Dataset)
		if len(goals) == 0 {
			continue
		}
		ev := ce.Event
		if cur, ok := g.cursors[ce.Dataset]; !ok || bytes.Compare(ev.ID[:], cur[:]) > 0 {
			g.cursors[ce.Dataset] = ev.ID
		}
		touched[ce.Dataset] = true
		g.evaluated.Inc()
		for _, goal := range goals {
			if ev.CreatedAt < goal.Since {
				continue
			}
			c, ok := g.check(ce.Dataset, goal, ev)
			if !ok {
				continue
			}
			if c.HasVisitor {
				key := goal.ID + "\x00" + c.Visitor
				if done[key] {
					continue
				}
				already, err := g.db.GoalCompletedBy(ce.Dataset, goal.ID, c.Visitor)
				if err != nil {
					g.log.Error("read goal completion", "goal", goal.ID, "err", err)
					continue
				}
				if already {
					continue
				}
				// Once per person: an id linked to the visitor (identify,
				// alias) that completed the goal already counts for it.
				ids, err := g.db.PersonIDs(ce.Dataset, c.Visitor)
				if err != nil {
					g.log.Error("read identity links", "err", err)
					continue
				}
				pkey := goal.ID + "\x00\x00" + storage.PersonOf(ids)
				if len(ids) > 1 {
					if done[pkey] {
						continue
					}
					if already, err = g.completedByAny(ce.Dataset, goal.ID, ids[1:]); err != nil {
						g.log.Error("read goal completion", "goal", goal.ID, "err", err)
						continue
					}
					if already {
						continue
					}
				}
				if done == nil {
					done = make(map[string]bool)
				}
				done[key], done[pkey] = true, true
			}
			if completions == nil {
				completions = make(map[uint32][]storage.Completion)
			}
			completions[ce.Dataset] = append(completions[ce.Dataset], c)
		}
	}
	cursors := map[uint32]storage.ID{}
	for ds := range touched {
		if force || len(completions[ds]) > 0 || now.Sub(g.saved[ds]) >= goalCursorEvery {
			cursors[ds] = g.cursors[ds]
			g.saved[ds] = now
		}
	}
	if len(cursors) == 0 && len(completions) == 0 {
		return
	}
	if err := g.announceGoals(completions); err != nil { // before the cursor passes them: see webhook.go
		g.log.Error("queue goal.completed webhooks", "err", err)
		return
	}
	if err := g.db.RecordGoals(cursors, completions); err != nil {
		g.log.Error("record goal completions", "err", err)
		return
	}
	for _, cs := range completions {
		g.completed.Add(uint64(len(cs)))
	}
}

// check decides whether ev completes goal, and with which event.
func (g *goalsActor) check(ds uint32, goal *analytics.Goal, ev *storage.Event) (storage.Completion, bool) {
	c := storage.Completion{Goal: goal.ID, Visitor: ev.VisitorID, HasVisitor: ev.HasVisitor,
		Timestamp: ev.Timestamp, ID: ev.ID}
	if !goal.Sequence() {
		return c, goal.Matches(ev.Name, ev.Properties)
	}
	if !ev.HasVisitor || !goal.HasStep(ev.Name) {
		return c, false
	}
	// Any completing sequence that includes ev lies within the window on
	// either side of it; looking both ways also catches a sequence whose
	// earlier steps arrived after its last one (backfilled events).
	w := goal.WindowMs()
	// The history is the person's: every id linked to the visitor when
	// the event is evaluated (docs/analytics.md, identity).
	ids, err := g.db.PersonIDs(ds, ev.VisitorID)
	if err != nil {
		g.log.Error("read identity links", "err", err)
		return c, false
	}
	steps := goal.Steps()
	lists := make([][]analytics.Occ, len(steps))
	read := 0
	for _, id := range ids {
		hist, err := g.db.VisitorEvents(ds, id, ev.Timestamp-w, ev.Timestamp+w, goalHistoryLimit-read)
		if err != nil {
			if !errors.Is(err, storage.ErrScanLimit) {
				g.log.Error("read visitor history", "err", err)
			}
			return c, false
		}
		read += len(hist)
		if read >= goalHistoryLimit {
			return c, false
		}
		for _, h := range hist {
			for j, s := range steps {
				if h.Name == s {
					lists[j] = append(lists[j], analytics.Occ{TS: h.Timestamp, ID: h.ID})
				}
			}
		}
	}
	if len(ids) > 1 {
		for j := range lists {
			slices.SortFunc(lists[j], analytics.CompareOcc)
		}
	}
	depth, end := analytics.Deepest(lists, w)
	if depth < len(steps) {
		return c, false
	}
	c.Timestamp, c.ID = end.TS, end.ID
	return c, true
}

// completedByAny reports whether any of ids completed goal already.
func (g *goalsActor) completedByAny(ds uint32, goal string, ids []string) (bool, error) {
	for _, id := range ids {
		done, err := g.db.GoalCompletedBy(ds, goal, id)
		if err != nil || done {
			return done, err
		}
	}
	return false, nil
}

// saveCursors writes every dataset's cursor, at stop.
func (g *goalsActor) saveCursors() {
	if len(g.cursors) == 0 {
		return
	}
	if err := g.db.RecordGoals(g.cursors, nil); err != nil {
		g.log.Error("save goal cursors", "err", err)
	}
}
