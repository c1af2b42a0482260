package storage

import (
	"slices"
	"sync"

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
}

// inflightCommit is one commit between Batch.Commit's begin and end. Its
// fields are not changed while it is registered, except into.
type inflightCommit struct {
	seq uint64
	r   *rollups         // its derived cells
	mem []pendingVisitor // its visitor entries of days in memory
	// into is the overlay its cells were folded into, nil before; written
	// and read under derived.mu.
	into *overlay
}

// begin registers a commit before it goes to Pebble.
func (f *inflight) begin(c *inflightCommit) {
	f.mu.Lock()
	f.commits = append(f.commits, c)
	f.mu.Unlock()
}

// end unregisters a commit once its in-memory part is done or it failed.
func (f *inflight) end(c *inflightCommit) {
	f.mu.Lock()
	if i := slices.Index(f.commits, c); i >= 0 {
		f.commits = slices.Delete(f.commits, i, i+1)
	}
	f.mu.Unlock()
}

// seen calls fn for each commit in flight whose L entry r sees, while the
// commit is still registered, so fn may read its cells and entries. A
// commit that ended meanwhile is skipped: it finished its in-memory part
// first, so a reader that takes memory after seen finds it there. A key
// that cannot be read counts as seen: a commit that is not visible yet only
// adds what the reader may count early (readers of memory already do).
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
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range visible {
		if slices.Contains(f.commits, c) {
			fn(c)
		}
	}
}

// commitStage is where a commit is, for DB.commitHook.
type commitStage int

const (
	stagePublished commitStage = iota // Pebble's commit returned
	stageFolded                       // memory holds its entries and cells; not ended yet
)

// passStage calls the test hook, if any.
func (d *DB) passStage(s commitStage) {
	if hook := d.commitHook.Load(); hook != nil {
		(*hook)(s)
	}
}
