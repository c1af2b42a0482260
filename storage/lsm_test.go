package storage

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// compactionLog records the compactions a store ends.
type compactionLog struct {
	mu   sync.Mutex
	done []pebble.CompactionInfo
}

func (l *compactionLog) listener() *pebble.EventListener {
	return &pebble.EventListener{CompactionEnd: func(ci pebble.CompactionInfo) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.done = append(l.done, ci)
	}}
}

// mark is where the compactions ended from now on begin in the log.
func (l *compactionLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.done)
}

// fromL0 waits for the compaction, ended after mark, that takes the L0 table
// of keys starting with prefix out of L0 and returns its kind ("move",
// "default", ...) and whether it rewrote tables of a level below too. It
// fails the test if none has ended after a minute: Pebble schedules it on
// its own.
func (l *compactionLog) fromL0(t *testing.T, mark int, prefix []byte) (kind string, below bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		l.mu.Lock()
		for _, ci := range l.done[mark:] {
			for _, in := range ci.Input {
				if in.Level != 0 {
					continue
				}
				for _, tb := range in.Tables {
					if bytes.HasPrefix(tb.Smallest.UserKey, prefix) {
						for _, in := range ci.Input {
							below = below || (in.Level > 0 && len(in.Tables) > 0)
						}
						l.mu.Unlock()
						return ci.Reason, below
					}
				}
			}
		}
		l.mu.Unlock()
	}
	t.Fatalf("no compaction took the flushed %q table out of L0 within a minute", prefix)
	return "", false
}

// TestFlushedTablesMoved: once the LSM holds data, a flush of records and
// name-index keys later than everything below them is moved down, not
// rewritten, although it is larger than Pebble's default 2 MiB table (which
// it would cut into pieces that a compaction then merges). The events
// belong to two datasets and two names, interleaved in every commit: each
// dataset's records and each name's index keys get tables of their own
// (tablesplit.go), or every flushed table would overlap the last of each
// below. Two API keys write idempotency keys, kept by the 128th of a
// second they were created in, a group per commit and API key
// (idemgroups.go), so a flush of them lies after everything below too.
// The first flush goes down in one compaction with every other prefix.
func TestFlushedTablesMoved(t *testing.T) {
	var log compactionLog
	db := openTestDBWith(t, Options{Events: log.listener()})
	pad := make([]byte, 100)
	n := uint64(0)
	names := []string{"e", "f"}
	var groups [][]byte
	for ds := uint32(1); ds <= 2; ds++ {
		groups = append(groups, appendDataset(nil, prefixRecord, ds))
		for _, name := range names {
			groups = append(groups, namePrefix(nil, ds, name))
		}
	}
	keyIDs := []string{"key_a", "key_b"}
	groups = append(groups, []byte{prefixIdemGroup})
	for round := range 3 {
		// About 4 MB of records in one flush, more than 2 MB compressed
		// (their padding is random hex).
		for range 10 {
			for ds := uint32(1); ds <= 2; ds++ {
				events := make([]*Event, 0, 1000)
				for i := range 1000 {
					n++
					_, _ = rand.Read(pad)
					id := testID(n << 20) // the id's millisecond is n
					events = append(events, &Event{ID: id, Name: names[i%2], Timestamp: IDTime(id),
						Properties: fmt.Appendf(nil, `{"pad":"%s"}`, hex.EncodeToString(pad))})
				}
				commitEvents(t, db.DB, ds, events...)
			}
			// Two API keys' time-ordered idempotency keys, as Segment
			// SDKs send their messageIds, interleaved in one commit.
			b := db.NewBatch()
			for i := range 2000 {
				b.AddIdempotency(keyIDs[i%2], fmt.Sprintf("node-next-%013d-%s", n*10+uint64(i), hex.EncodeToString(pad[:16])), IdemRecord{ID: testID(n), CreatedAt: int64(n)})
			}
			if err := b.Commit(true); err != nil {
				t.Fatal(err)
			}
			b.Close()
		}
		db.derived.checkpoint() // as the derived loop does every second: the groups' shares
		mark := log.mark()
		if err := db.Pebble().Flush(); err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			kind, below := log.fromL0(t, mark, g)
			switch {
			case round == 0:
			case g[0] == prefixIdemGroup && below:
				// Pebble may take a small table out of L0 with its
				// neighbour (the derived log's), but nothing below.
				t.Errorf("flush %d: the %q table left L0 with tables below it (a %q compaction)", round+1, g, kind)
			case g[0] != prefixIdemGroup && kind != "move":
				t.Errorf("flush %d: the %q table left L0 by a %q compaction, want a move", round+1, g, kind)
			}
		}
	}
}
