package actors

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/eventd/eventd/engine/metrics"
	"github.com/eventd/eventd/storage"
)

// TestRunPayloadsOnce: however many subscribers ask at once, each event is
// encoded once, and all of them read the same bytes.
func TestRunPayloadsOnce(t *testing.T) {
	evs := make([]CommittedEvent, 50)
	for i := range evs {
		evs[i] = CommittedEvent{Dataset: 1, Event: &storage.Event{Name: string(rune('a' + i%26))}}
	}
	run := NewRun(evs)
	var calls atomic.Int64
	enc := func(dst []byte, e *storage.Event) []byte {
		calls.Add(1)
		return append(append(dst, "<"...), e.Name+">"...)
	}
	const readers = 16
	out := make([][][]byte, readers)
	var wg sync.WaitGroup
	for r := range readers {
		wg.Add(1)
		go func() { defer wg.Done(); out[r] = run.Payloads(enc) }()
	}
	wg.Wait()
	if n := calls.Load(); n != int64(len(evs)) {
		t.Fatalf("encoder called %d times for %d events and %d readers", n, len(evs), readers)
	}
	for r := range readers {
		for i, p := range out[r] {
			if want := "<" + evs[i].Event.Name + ">"; string(p) != want {
				t.Fatalf("reader %d payload %d = %q, want %q", r, i, p, want)
			}
			if &p[0] != &out[0][i][0] {
				t.Fatalf("reader %d payload %d is a different copy", r, i)
			}
		}
	}
}

// TestBroadcasterSharesRuns: every subscriber of a dataset gets the same Run
// per commit, holding only that dataset's events.
func TestBroadcasterSharesRuns(t *testing.T) {
	b := &broadcaster{subs: map[uint32]map[Subscriber]struct{}{}}
	s1, s2, other := &runSink{}, &runSink{}, &runSink{}
	b.subs[1] = map[Subscriber]struct{}{s1: {}, s2: {}}
	b.subs[2] = map[Subscriber]struct{}{other: {}}
	e := func() *storage.Event { return &storage.Event{} }
	b.delivered = metrics.New().Counter("test_offers_total", "", "")
	b.fanOut([]CommittedEvent{{Dataset: 1, Event: e()}, {Dataset: 1, Event: e()}, {Dataset: 2, Event: e()}, {Dataset: 1, Event: e()}})
	if len(s1.runs) != 2 || len(s2.runs) != 2 || len(other.runs) != 1 {
		t.Fatalf("runs: %d, %d, %d; want 2, 2, 1", len(s1.runs), len(s2.runs), len(other.runs))
	}
	for i := range s1.runs {
		if s1.runs[i] != s2.runs[i] {
			t.Fatalf("run %d is not shared by the dataset's subscribers", i)
		}
	}
	if len(s1.runs[0].Events) != 2 || len(s1.runs[1].Events) != 1 || len(other.runs[0].Events) != 1 {
		t.Fatal("runs are not cut at dataset changes")
	}
	if got := b.delivered.Value(); got != 7 {
		t.Fatalf("offers counted %d, want 7 (events × subscribers)", got)
	}
}

type runSink struct{ runs []*Run }

func (s *runSink) Offer(r *Run) { s.runs = append(s.runs, r) }
