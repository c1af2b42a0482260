package storage

import (
	"errors"
	"testing"
)

func TestOutboxSurvivesReopenWithItsEvent(t *testing.T) {
	db := openTestDB(t, "")
	b := db.NewBatch()
	e := &Event{ID: IDAt(5000), Name: "signup", Timestamp: 5000, CreatedAt: 5000, Properties: []byte("{}")}
	b.AddEvent(7, e)
	b.AddOutbox("wh_a", 7, e.ID)
	b.AddOutbox("wh_b", 7, e.ID)
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	db = db.reopen(t)

	var got []OutboxEntry
	if err := db.ScanOutbox(func(o OutboxEntry) error { got = append(got, o); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Webhook != "wh_a" || got[1].Webhook != "wh_b" || got[0].Dataset != 7 || got[0].Event != e.ID {
		t.Fatalf("outbox = %+v", got)
	}
	ms, ok, err := db.OldestWaiting()
	if err != nil || !ok || ms != 5000 {
		t.Fatalf("OldestWaiting = %d %v %v, want 5000", ms, ok, err)
	}

	d := db.NewDeliveryBatch()
	d.DeleteOutbox(got[0])
	d.DeleteOutbox(got[1])
	if err := d.Commit(true); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, ok, _ := db.OldestWaiting(); ok {
		t.Fatal("outbox not empty after DeleteOutbox")
	}
}

func TestPendingAndDeliveries(t *testing.T) {
	db := openTestDB(t, "")
	d := db.NewDeliveryBatch()
	for i := int64(1); i <= 5; i++ {
		id := IDAt(i * 1000)
		d.PutDelivery("wh_a", id, []byte{byte('0' + i)})
		if i%2 == 1 {
			d.SetPending("wh_a", id, i*10, uint8(i))
		}
	}
	d.PutDelivery("wh_b", IDAt(500), []byte("other"))
	if err := d.Commit(true); err != nil {
		t.Fatal(err)
	}
	d.Close()

	var pend []PendingDelivery
	if err := db.ScanPending(func(p PendingDelivery) error { pend = append(pend, p); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(pend) != 3 || pend[0].ID != IDAt(1000) || pend[2].NextAt != 50 || pend[2].Step != 5 {
		t.Fatalf("pending = %+v", pend)
	}
	if ms, ok, _ := db.OldestWaiting(); !ok || ms != 1000 {
		t.Fatalf("OldestWaiting = %d", ms)
	}

	var order string
	if err := db.ScanDeliveries("wh_a", nil, func(_ ID, rec []byte) bool { order += string(rec); return true }); err != nil {
		t.Fatal(err)
	}
	if order != "54321" {
		t.Fatalf("newest first = %q", order)
	}
	before := IDAt(4000)
	order = ""
	_ = db.ScanDeliveries("wh_a", &before, func(_ ID, rec []byte) bool { order += string(rec); return len(order) < 2 })
	if order != "32" {
		t.Fatalf("page before 4000 = %q", order)
	}

	// Sweep drops old finished records, keeps pending ones and newer ones.
	n, err := db.SweepDeliveries("wh_a", 4500, func(id ID) bool { return id == IDAt(3000) || id == IDAt(1000) })
	if err != nil || n != 2 {
		t.Fatalf("swept %d %v, want 2", n, err)
	}
	order = ""
	_ = db.ScanDeliveries("wh_a", nil, func(_ ID, rec []byte) bool { order += string(rec); return true })
	if order != "531" {
		t.Fatalf("after sweep = %q", order)
	}

	if err := db.DeleteWebhookData("wh_a"); err != nil {
		t.Fatal(err)
	}
	pend = nil
	_ = db.ScanPending(func(p PendingDelivery) error { pend = append(pend, p); return nil })
	if len(pend) != 0 {
		t.Fatalf("pending after delete: %+v", pend)
	}
	if _, err := db.GetDelivery("wh_a", IDAt(5000)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delivery after delete: %v", err)
	}
	if v, err := db.GetDelivery("wh_b", IDAt(500)); err != nil || string(v) != "other" {
		t.Fatalf("other webhook's delivery: %q %v", v, err)
	}
}

func TestAlertFirings(t *testing.T) {
	db := openTestDB(t, "")
	d := db.NewDeliveryBatch()
	d.PutAlertFiring("al_1", 3600, "key_a", []byte("1"))
	d.PutAlertFiring("al_1", 7200, "key_a", []byte("2"))
	d.PutAlertFiring("al_10", 7200, "key_a", []byte("x")) // a longer id must not leak into al_1
	if err := d.Commit(true); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if ok, _ := db.HasAlertFiring("al_1", 3600, "key_a"); !ok {
		t.Fatal("firing not found")
	}
	if ok, _ := db.HasAlertFiring("al_1", 3600, "key_b"); ok {
		t.Fatal("firing of another key found")
	}
	var got string
	_ = db.ScanAlertFirings("al_1", func(rec []byte) bool { got += string(rec); return true })
	if got != "21" {
		t.Fatalf("firings = %q", got)
	}
	if err := db.DeleteAlertFirings("al_1"); err != nil {
		t.Fatal(err)
	}
	got = ""
	_ = db.ScanAlertFirings("al_1", func(rec []byte) bool { got += string(rec); return true })
	if got != "" {
		t.Fatalf("firings after delete = %q", got)
	}
	if ok, _ := db.HasAlertFiring("al_10", 7200, "key_a"); !ok {
		t.Fatal("deleting al_1 removed al_10")
	}
}
