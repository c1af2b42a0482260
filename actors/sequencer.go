package actors

import (
	"sync"

	"github.com/eventd/eventd/engine/ids"
)

// sequencer makes the shards' batches reach Pebble's memtable in the order
// of their ids. Records and name-index keys are keyed by time, so a flushed
// table of them overlaps nothing below and Pebble moves it down whole
// (storage/tablesplit.go). A shard stamped its events when it took them
// and committed them once its mailbox ran dry, so a batch stamped before
// the other shard's could reach the memtable after it, and after a
// memtable switch: the next flush then overlapped the table moved down
// before it and Pebble merged the two, for half the flushes
// (docs/benchmarks.md, session 19).
//
// A batch takes a ticket when it takes its first ids, and takes ids only
// while no other shard has taken any since: a shard whose batch another
// shard has overtaken commits it before it stamps more. Batches are
// applied in ticket order (storage.Turn); each one's fsync overlaps the
// next one's apply, as before.
type sequencer struct {
	gen *ids.Generator

	mu      sync.Mutex
	turns   sync.Cond
	holder  *shard // the shard whose open batch took the latest ids
	tickets uint64 // tickets handed out
	applied uint64 // tickets whose batches are in the memtable, all of those below too
}

func newSequencer(gen *ids.Generator) *sequencer {
	q := &sequencer{gen: gen}
	q.turns.L = &q.mu
	return q
}

// stamp reserves n ids for s's batch. With open set, s has a batch open
// and gets ids for it only if no other shard has taken any since (ok
// false: commit it first). Otherwise a new batch starts and gets its turn.
func (q *sequencer) stamp(s *shard, n int, open bool) (block ids.Block, t *turn, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if open {
		if q.holder != s {
			return ids.Block{}, nil, false
		}
		return q.gen.Reserve(n), nil, true
	}
	q.holder = s
	q.tickets++
	return q.gen.Reserve(n), &turn{q: q, ticket: q.tickets}, true
}

// turn is one batch's place in the sequencer's order (storage.Turn).
type turn struct {
	q      *sequencer
	ticket uint64
}

// Wait returns once every earlier batch is in the memtable.
func (t *turn) Wait() {
	t.q.mu.Lock()
	for t.q.applied != t.ticket-1 {
		t.q.turns.Wait()
	}
	t.q.mu.Unlock()
}

// Done lets the next batch go.
func (t *turn) Done() {
	t.q.mu.Lock()
	t.q.applied = t.ticket
	t.q.mu.Unlock()
	t.q.turns.Broadcast()
}
