package storage

import (
	"encoding/binary"
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

// Goal records, under G ds:
//
//	G ds 'm' len goal len2 visitor -> ts id   a visitor completed the goal (at most once)
//	G ds 't' len goal ts id        -> visitor every completion by event time ("" = anonymous event)
//	G ds 'c'                       -> id      goal evaluation cursor of the dataset
//
// Every write is a Set keyed by what it records, so evaluating an event twice
// (after a crash, during catch-up) writes the same keys again and counts nothing twice.
const (
	goalMarker = 'm'
	goalTime   = 't'
	goalCursor = 'c'
)

func goalPrefix(dst []byte, ds uint32, kind byte, goal string) []byte {
	dst = appendDataset(dst, prefixGoal, ds)
	dst = append(dst, kind, byte(len(goal)))
	return append(dst, goal...)
}

func goalMarkerKey(ds uint32, goal, visitor string) []byte {
	k := goalPrefix(nil, ds, goalMarker, goal)
	k = binary.BigEndian.AppendUint16(k, uint16(len(visitor)))
	return append(k, visitor...)
}

func goalCursorKey(ds uint32) []byte {
	return append(appendDataset(nil, prefixGoal, ds), goalCursor)
}

// IDAt is the smallest event id recorded at Unix millisecond ms: a position
// in record order, used to resume goal evaluation a margin before a cursor.
func IDAt(ms int64) ID {
	var id ID
	binary.BigEndian.PutUint64(id[:8], uint64(ms)<<16)
	return id
}

// IDTime is the Unix millisecond an event id was recorded at.
func IDTime(id ID) int64 { return int64(binary.BigEndian.Uint64(id[:8]) >> 16) }

// Completion is one goal completion: the goal, the event that completed it and its visitor.
type Completion struct {
	Goal       string
	Visitor    string
	HasVisitor bool
	Timestamp  int64 // event time, Unix ms
	ID         ID
}

// GoalCompletedBy reports whether visitor already completed goal in ds.
func (d *DB) GoalCompletedBy(ds uint32, goal, visitor string) (bool, error) {
	_, err := d.get(goalMarkerKey(ds, goal, visitor))
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// RecordGoals writes completions and evaluation cursors in one atomic batch.
// It is not synced: a crash may lose it, and the evaluator then sees the same
// events again from the older cursor and writes the same keys.
func (d *DB) RecordGoals(cursors map[uint32]ID, completions map[uint32][]Completion) error {
	b := d.db.NewBatch()
	defer b.Close()
	for ds, cs := range completions {
		for _, c := range cs {
			if c.HasVisitor {
				v := binary.BigEndian.AppendUint64(nil, uint64(c.Timestamp))
				_ = b.Set(goalMarkerKey(ds, c.Goal, c.Visitor), append(v, c.ID[:]...), nil)
			}
			k := append(appendTS(goalPrefix(nil, ds, goalTime, c.Goal), c.Timestamp), c.ID[:]...)
			var v []byte
			if c.HasVisitor {
				v = []byte(c.Visitor)
			}
			_ = b.Set(k, v, nil)
		}
	}
	for ds, id := range cursors {
		_ = b.Set(goalCursorKey(ds), id[:], nil)
	}
	if b.Empty() {
		return nil
	}
	return d.commit(b, pebble.NoSync)
}

// GoalCursor reads the evaluation cursor of ds; ok is false if there is none.
func (d *DB) GoalCursor(ds uint32) (id ID, ok bool, err error) {
	v, err := d.get(goalCursorKey(ds))
	if errors.Is(err, ErrNotFound) {
		return id, false, nil
	}
	if err != nil {
		return id, false, err
	}
	if len(v) != len(id) {
		return id, false, errCorrupt
	}
	copy(id[:], v)
	return id, true, nil
}

// InitGoalCursor sets the cursor of ds to id unless it has one, durably: a
// dataset's first goal starts being evaluated from there even across a crash.
func (d *DB) InitGoalCursor(ds uint32, id ID) error {
	if _, ok, err := d.GoalCursor(ds); err != nil || ok {
		return err
	}
	return d.apply(func() error { return d.db.Set(goalCursorKey(ds), id[:], pebble.Sync) })
}

// CountCompletions counts the completions of goal in ds whose event time is
// in [from, to] (inclusive), and how many of them had a visitor (each visitor
// completes once, so that is the number of distinct visitors).
func (d *DB) CountCompletions(ds uint32, goal string, from, to int64) (completions, visitors int64, err error) {
	err = d.scanIndex(goalPrefix(nil, ds, goalTime, goal), max(from, 0), to, func(_ int64, _ ID, v []byte) error {
		completions++
		if len(v) > 0 {
			visitors++
		}
		return nil
	})
	return completions, visitors, err
}

// DeleteGoalData removes every completion of goal in the datasets.
func (d *DB) DeleteGoalData(goal string, ds ...uint32) error {
	b := d.db.NewBatch()
	defer b.Close()
	for _, n := range ds {
		for _, kind := range []byte{goalMarker, goalTime} {
			p := goalPrefix(nil, n, kind, goal)
			if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
				return err
			}
		}
	}
	return d.commit(b, pebble.Sync)
}
