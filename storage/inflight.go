package storage

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// inflight tracks the commits whose in-memory part is not done yet.
// Batch.Commit folds a commit's cells into the derived overlay and adds its
// visitor entries to memory after Pebble's commit returns, and Pebble makes
// a batch visible before its WAL sync completes: for up to an fsync, and
// longer on a starved process, a list could show an event that the total
// or the visitor's list did not count yet. A reader instead looks up which
// commits in flight its Pebble view already sees and takes their cells and
// entries from here, without waiting for them.
//
// A commit is named by the sequence number of its L entry: every commit
// that carries events has one, and a checkpoint deletes an L entry only
// after its commit is folded, which Batch.Commit does after it added the
// visitor entries.
type inflight struct {
	mu      sync.Mutex
	commits []*inflightCommit
	// late counts the commits in flight with late memory entries, so that
	// the readers of the time index skip seen when there are none.
	late atomic.Int64
}

// inflightCommit is one commit between Batch.Commit's begin and end. Its
// fields are not changed while it is registered, except into.
type inflightCommit struct {
	seq uint64
	r   *rollups         // its derived cells
	mem []pendingVisitor // its visitor entries of days in memory
	// late are its displaced events' M and J keys that memory takes
	// (latemem.go).
	late []pendingLate
	// into is the overlay its cells were folded into, nil before; written
	// and read under derived.mu.
	into *overlay
	// readers are the readers copying r or mem: end waits for them, so
	// that Batch.Commit does not reuse either while one reads.
	readers sync.WaitGroup
}

// begin registers a commit before it goes to Pebble.
func (f *inflight) begin(c *inflightCommit) {
	f.mu.Lock()
	f.commits = append(f.commits, c)
	f.mu.Unlock()
	if len(c.late) > 0 {
		f.late.Add(1)
	}
}

// end unregisters a commit once its in-memory part is done or it failed,
// and waits for the readers still copying it.
func (f *inflight) end(c *inflightCommit) {
	f.mu.Lock()
	if i := slices.Index(f.commits, c); i >= 0 {
		f.commits = slices.Delete(f.commits, i, i+1)
	}
	f.mu.Unlock()
	if len(c.late) > 0 {
		f.late.Add(-1)
	}
	c.readers.Wait()
}

// seen calls fn for each commit in flight whose L entry r sees, holding the
// commit (end waits) so that fn may read its cells and entries, but not
// the lock that every commit's begin and end take: a view copies the cells
// of a commit of thousands of events. A commit that ended before it was
// held is skipped: it finished its in-memory part first, so a reader that
// takes memory after seen finds it there. A key that cannot be read counts
// as seen: a commit that is not visible yet only adds what the reader may
// count early (readers of memory already do).
func (f *inflight) seen(r pebble.Reader, fn func(c *inflightCommit)) {
	f.mu.Lock()
	if len(f.commits) == 0 {
		f.mu.Unlock()
		return
	}
	pending := slices.Clone(f.commits)
	f.mu.Unlock()
	var key []byte
	visible := pending[:0]
	for _, c := range pending {
		key = logKey(key[:0], c.seq)
		_, closer, err := r.Get(key)
		if err == pebble.ErrNotFound {
			continue
		}
		if err == nil {
			_ = closer.Close()
		}
		visible = append(visible, c)
	}
	if len(visible) == 0 {
		return
	}
	held := visible[:0]
	f.mu.Lock()
	for _, c := range visible {
		if slices.Contains(f.commits, c) {
			c.readers.Add(1)
			held = append(held, c)
		}
	}
	f.mu.Unlock()
	for _, c := range held {
		fn(c)
		c.readers.Done()
	}
}

// commitStage is where a commit is, for DB.commitHook.
type commitStage int

const (
	stagePublished commitStage = iota // Pebble's commit returned
	stageAdded                        // its visitor entries are in memory
	stageFolded                       // its cells are in the overlay too; not ended yet
)

// passStage calls the test hook, if any.
func (d *DB) passStage(s commitStage) {
	if hook := d.commitHook.Load(); hook != nil {
		(*hook)(s)
	}
}
