package actors

import (
	"bytes"
	"runtime"
	"sync"
	"testing"

	"github.com/eventd/eventd/engine/ids"
)

// TestSequencerStamp: a batch takes ids until another shard takes some;
// every new batch gets the next turn.
func TestSequencerStamp(t *testing.T) {
	q := newSequencer(ids.NewGenerator())
	a, b := &shard{}, &shard{}
	_, ta, ok := q.stamp(a, 3, false)
	if !ok || ta == nil || ta.ticket != 1 {
		t.Fatalf("a's new batch: turn %+v, ok %v", ta, ok)
	}
	if _, tt, ok := q.stamp(a, 2, true); !ok || tt != nil {
		t.Fatalf("a's open batch, nobody else stamped: turn %+v, ok %v", tt, ok)
	}
	_, tb, _ := q.stamp(b, 1, false)
	if tb.ticket != 2 {
		t.Fatalf("b's batch has ticket %d, want 2", tb.ticket)
	}
	if _, _, ok := q.stamp(a, 1, true); ok {
		t.Fatal("a's open batch took ids after b's")
	}
	if _, _, ok := q.stamp(b, 1, true); !ok {
		t.Fatal("b's open batch refused ids though b took the last")
	}
}

// TestSequencerOrder plays two shards' protocol (shard.Receive and flush)
// with many writers: every batch reaches the "memtable" after all the ids
// before its own and before all the ids after them.
func TestSequencerOrder(t *testing.T) {
	q := newSequencer(ids.NewGenerator())
	var mu sync.Mutex
	var applied [][16]byte // the "memtable": ids in the order batches were applied
	commit := func(tn *turn, batch [][16]byte) {
		tn.Wait()
		mu.Lock()
		applied = append(applied, batch...)
		mu.Unlock()
		tn.Done()
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s := &shard{}
			var batch [][16]byte
			var tn *turn
			for i := range 2000 {
				n := 1 + i%7
				var block ids.Block
				ok := false
				if tn != nil {
					if block, _, ok = q.stamp(s, n, true); !ok {
						commit(tn, batch)
						batch, tn = nil, nil
					}
				}
				if tn == nil {
					block, tn, _ = q.stamp(s, n, false)
				}
				for range n {
					id, _ := block.Next()
					batch = append(batch, id)
				}
				runtime.Gosched() // let the other shard stamp while this batch is open
				if i%5 == 4 { // the mailbox ran dry
					commit(tn, batch)
					batch, tn = nil, nil
				}
			}
			if tn != nil {
				commit(tn, batch)
			}
		}()
	}
	close(start)
	wg.Wait()
	for i := 1; i < len(applied); i++ {
		if bytes.Compare(applied[i-1][:], applied[i][:]) >= 0 {
			t.Fatalf("id %d applied after a later one (%x after %x)", i, applied[i], applied[i-1])
		}
	}
	want := 0
	for i := range 2000 {
		want += 2 * (1 + i%7)
	}
	if len(applied) != want {
		t.Fatalf("%d ids applied, want %d", len(applied), want)
	}
}
