package storage

import (
	"fmt"
	"testing"
)

// BenchmarkAddEventCommit measures one synced commit of a batch of 100
// events: record, three index entries and counter merges each.
func BenchmarkAddEventCommit(b *testing.B) {
	db := openTestDB(b, "")
	const batch = 100
	events := make([]Event, batch)
	for i := range events {
		events[i] = Event{
			Name:       modelNames[i%len(modelNames)],
			VisitorID:  fmt.Sprintf("visitor-%d", i%17),
			HasVisitor: i%5 != 0,
			Properties: []byte(`{"path":"/pricing","amount":12.5}`),
		}
	}
	ts := int64(planDay)
	var n uint64
	b.ReportAllocs()
	for b.Loop() {
		bt := db.NewBatch()
		for i := range events {
			n++
			ts += 37
			events[i].ID = testID(n)
			events[i].Timestamp, events[i].CreatedAt = ts, ts
			bt.AddEvent(1, &events[i])
		}
		if err := bt.Commit(true); err != nil {
			b.Fatal(err)
		}
		bt.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/event")
}
