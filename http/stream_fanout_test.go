package http

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine/eventjson"
	"github.com/eventd/eventd/engine/metrics"
	"github.com/eventd/eventd/storage"
)

// perSubscriberPayload is the encoding each subscriber's writer did for
// itself before payloads were shared: the reference the shared one must match.
func perSubscriberPayload(e *storage.Event) []byte {
	buf := append([]byte(nil), `{"type":"event","data":`...)
	buf = eventjson.Append(buf, e, true)
	return append(buf, '}')
}

func fanoutEvents() []storage.Event {
	id := func(b byte) storage.ID { var x storage.ID; x[0], x[len(x)-1] = 1, b; return x }
	return []storage.Event{
		{ID: id(1), Name: "purchase", VisitorID: "v_1", HasVisitor: true, Timestamp: 1768473000000, CreatedAt: 1768473000123,
			Properties: []byte(`{"amount":12.5,"currency":"EUR"}`)},
		{ID: id(2), Name: "page_view", Timestamp: 1768473000001, CreatedAt: 1768473000002, Properties: []byte(`{}`)}, // no visitor
		{ID: id(3), Name: "signup", VisitorID: "quote\" back\\slash\nnewline\ttab\x01ctl", HasVisitor: true,
			Timestamp: 0, CreatedAt: 1, Properties: []byte(`{"s":"a\"b\\c\u2028","n":null,"nested":{"x":[1,2,{"y":"z"}]}}`)},
		{ID: id(4), Name: "x", VisitorID: "</script><b>&amp;</b> é 漢字 \u2028\u2029 😀", HasVisitor: true,
			Timestamp: 253402300799999, CreatedAt: 253402300799999, Properties: []byte(`{"html":"<a href=\"x\">"}`)},
		{ID: id(5), Name: "A_very_long_event_name_0123456789", Timestamp: 1, CreatedAt: 1768473000000,
			Properties: []byte(`{"big":"` + string(bytes.Repeat([]byte("p"), 3000)) + `"}`)},
	}
}

// TestStreamSharedPayloadMatchesPerSubscriber: the payload encoded once per
// run is byte for byte what each subscriber sent before, for every event, and
// one payload cannot be extended into the next.
func TestStreamSharedPayloadMatchesPerSubscriber(t *testing.T) {
	evs := fanoutEvents()
	ces := make([]actors.CommittedEvent, len(evs))
	for i := range evs {
		ces[i] = actors.CommittedEvent{Dataset: 7, Event: &evs[i]}
	}
	run := actors.NewRun(ces)
	got := run.Payloads(appendStreamPayload)
	if len(got) != len(evs) {
		t.Fatalf("%d payloads for %d events", len(got), len(evs))
	}
	for i := range evs {
		want := perSubscriberPayload(&evs[i])
		if !bytes.Equal(got[i], want) {
			t.Errorf("event %d:\n got %s\nwant %s", i, got[i], want)
		}
		if cap(got[i]) != len(got[i]) {
			t.Errorf("event %d: payload cap %d > len %d: a writer's append would overwrite the next payload", i, cap(got[i]), len(got[i]))
		}
		var m struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(got[i], &m); err != nil || m.Type != "event" {
			t.Fatalf("event %d: not an event message (%v): %s", i, err, got[i])
		}
		v, has := m.Data["visitor_id"]
		if has != evs[i].HasVisitor || (has && v != evs[i].VisitorID) {
			t.Errorf("event %d: visitor_id %v (present %v), want %q (present %v)", i, v, has, evs[i].VisitorID, evs[i].HasVisitor)
		}
	}
	// A second subscriber gets the very same bytes, not a new encoding.
	again := run.Payloads(func([]byte, *storage.Event) []byte { t.Fatal("encoded twice"); return nil })
	for i := range got {
		if &again[i][0] != &got[i][0] {
			t.Fatalf("payload %d encoded again for the second subscriber", i)
		}
	}
}

func newTestSubscriber(limit int, f *streamFilter) *subscriber {
	sub := &subscriber{
		st:       newStreams(metrics.New()),
		queue:    make(chan streamItem, limit),
		limit:    int64(limit),
		overflow: make(chan struct{}),
		shutdown: make(chan struct{}),
		kinds:    kindEvent,
	}
	sub.filter.Store(f)
	return sub
}

func testRun(names ...string) *actors.Run {
	ces := make([]actors.CommittedEvent, len(names))
	for i, n := range names {
		ces[i] = actors.CommittedEvent{Dataset: 1, Event: &storage.Event{Name: n, Properties: []byte(`{}`)}}
	}
	return actors.NewRun(ces)
}

func overflowed(sub *subscriber) bool {
	select {
	case <-sub.overflow:
		return true
	default:
		return false
	}
}

// TestSubscriberQueueCountsEvents: one channel item per run, but the queue's
// bound (--stream-queue) counts events, matching ones only, and a run that
// does not fit marks the subscriber slow without queueing any of it.
func TestSubscriberQueueCountsEvents(t *testing.T) {
	sub := newTestSubscriber(5, &streamFilter{})
	sub.Offer(testRun("a", "b"))
	sub.Offer(testRun("c", "d", "e"))
	if q, n := sub.queued.Load(), len(sub.queue); q != 5 || n != 2 {
		t.Fatalf("queued %d events in %d items, want 5 in 2", q, n)
	}
	if overflowed(sub) {
		t.Fatal("a queue filled exactly to its limit overflowed")
	}
	sub.Offer(testRun("f"))
	if !overflowed(sub) {
		t.Fatal("the 6th event did not overflow a queue of 5")
	}
	if q, n, d := sub.queued.Load(), len(sub.queue), sub.st.drops.Value(); q != 5 || n != 2 || d != 1 {
		t.Fatalf("after overflow: queued %d in %d items, drops %d; want 5, 2, 1", q, n, d)
	}
	for it := range len(sub.queue) {
		if item := <-sub.queue; item.f != nil {
			t.Fatalf("item %d carries a filter although the subscriber takes every event", it)
		}
	}

	// A filter counts only what it lets through, and a run with nothing for
	// the subscriber is not queued at all.
	f := &streamFilter{events: map[string]struct{}{"keep": {}}}
	sub = newTestSubscriber(3, f)
	sub.Offer(testRun("drop", "keep", "drop", "keep", "drop"))
	sub.Offer(testRun("drop", "drop"))
	if q, n := sub.queued.Load(), len(sub.queue); q != 2 || n != 1 {
		t.Fatalf("filtered: queued %d events in %d items, want 2 in 1", q, n)
	}
	// A run that only partly fits is refused whole.
	sub.Offer(testRun("keep", "keep"))
	if !overflowed(sub) || sub.queued.Load() != 2 || sub.st.drops.Value() != 2 {
		t.Fatalf("2 more matching events on 2 queued of 3: overflow %v, queued %d, drops %d; want true, 2, 2",
			overflowed(sub), sub.queued.Load(), sub.st.drops.Value())
	}
	// The item keeps the filter of commit time, even if the client changes it later.
	sub.filter.Store(&streamFilter{})
	if item := <-sub.queue; item.f != f {
		t.Fatal("the queued run lost the filter it was offered under")
	}
}

// TestSubscriberOfferConcurrentWithWriter: the broadcaster offering while a
// writer takes items keeps the event count exact (run with -race).
func TestSubscriberOfferConcurrentWithWriter(t *testing.T) {
	const runs, per = 2000, 3
	sub := newTestSubscriber(runs*per, &streamFilter{})
	var wg sync.WaitGroup
	wg.Add(1)
	got := 0
	go func() {
		defer wg.Done()
		for got < runs*per {
			it := <-sub.queue
			got += len(it.run.Events)
			sub.queued.Add(-int64(len(it.run.Events)))
		}
	}()
	for range runs {
		sub.Offer(testRun("a", "b", "c"))
	}
	wg.Wait()
	if overflowed(sub) || sub.queued.Load() != 0 || got != runs*per {
		t.Fatalf("overflow %v, queued %d, taken %d; want false, 0, %d", overflowed(sub), sub.queued.Load(), got, runs*per)
	}
}

// BenchmarkStreamFanoutEncode is the user-space part of fanning one commit
// of 10 events out to 100 subscribers: the old per-subscriber encoding
// against the shared one. Both frame into each subscriber's buffer; the
// write(2) that follows is the same for both and not measured.
func BenchmarkStreamFanoutEncode(b *testing.B) {
	const subs, per = 100, 10
	evs := make([]storage.Event, per)
	for i := range evs {
		evs[i] = fanoutEvents()[0]
		evs[i].ID[5] = byte(i)
		evs[i].Properties = []byte(`{"sent_ns":"1768473000000000000","seq":12345,"amount":12.5,"currency":"EUR","page":"/checkout/confirm","referrer":"https://www.example.com/products/sku_12345"}`)
	}
	ces := make([]actors.CommittedEvent, per)
	for i := range evs {
		ces[i] = actors.CommittedEvent{Dataset: 1, Event: &evs[i]}
	}
	writers := make([]*frameWriter, subs)
	for i := range writers {
		writers[i] = &frameWriter{buf: make([]byte, 0, 64<<10)}
	}
	b.Run("per-subscriber", func(b *testing.B) {
		bufs := make([][]byte, subs)
		for b.Loop() {
			for s, fw := range writers {
				fw.buf = fw.buf[:0]
				for i := range evs {
					bufs[s] = appendStreamPayload(bufs[s][:0], &evs[i])
					fw.frame(1, bufs[s])
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*subs*per), "ns/delivery")
	})
	b.Run("shared", func(b *testing.B) {
		for b.Loop() {
			run := actors.NewRun(ces)
			for _, fw := range writers {
				fw.buf = fw.buf[:0]
				for _, p := range run.Payloads(appendStreamPayload) {
					fw.frame(1, p)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*subs*per), "ns/delivery")
	})
}
