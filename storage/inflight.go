package storage

import (
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// inflight tracks the commits Pebble may have published whose in-memory
// part is not done yet: Batch.Commit folds a commit's counters into the
// derived overlay and adds its visitor entries to memory only after
// Pebble's commit returns. Until then a list could show an event that the
// total or the visitor's list does not count yet, and a starved goroutine
// can hold that window open across requests. A reader settles first: it
// waits for the commits in flight whose L entry its Pebble view already
// sees, so whatever it reads from Pebble, the memory it reads holds too.
//
// A commit is named by the sequence number of its L entry: every commit
// that carries events has one, and a checkpoint deletes an L entry only
// after its commit is folded.
type inflight struct {
	mu      sync.Mutex
	done    sync.Cond // signalled when a commit ends while someone waits
	seqs    []uint64
	waiters int
}

func newInflight() *inflight {
	f := &inflight{}
	f.done.L = &f.mu
	return f
}

// begin registers a commit before it goes to Pebble.
func (f *inflight) begin(seq uint64) {
	f.mu.Lock()
	f.seqs = append(f.seqs, seq)
	f.mu.Unlock()
}

// end unregisters a commit once its in-memory part is done or it failed.
func (f *inflight) end(seq uint64) {
	f.mu.Lock()
	if i := slices.Index(f.seqs, seq); i >= 0 {
		f.seqs = slices.Delete(f.seqs, i, i+1)
	}
	if f.waiters > 0 {
		f.done.Broadcast()
	}
	f.mu.Unlock()
}

// settle waits until every commit in flight that r sees has ended. The
// commits r does not see yet are not waited for: what the reader then reads
// of them from memory is newer than its Pebble view, which readers of
// derived data already allow (a view may count a commit it cannot list).
// A key that cannot be read counts as seen: waiting is always safe, as the
// commit ends within its few steps after Pebble's.
func (f *inflight) settle(r pebble.Reader) {
	f.mu.Lock()
	pending := slices.Clone(f.seqs)
	f.mu.Unlock()
	var key []byte
	for _, seq := range pending {
		key = logKey(key[:0], seq)
		_, closer, err := r.Get(key)
		if err == pebble.ErrNotFound {
			continue
		}
		if err == nil {
			_ = closer.Close()
		}
		f.wait(seq)
	}
}

// wait blocks until seq is no longer in flight.
func (f *inflight) wait(seq uint64) {
	f.mu.Lock()
	f.waiters++
	for slices.Contains(f.seqs, seq) {
		f.done.Wait()
	}
	f.waiters--
	f.mu.Unlock()
}
