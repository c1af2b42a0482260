package storage

import (
	"encoding/binary"
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

// Webhook outbox, delivery log and usage-alert firings:
//
//	O id len whID                   -> ds      an event waiting to join an event.created delivery
//	P msg len whID                  -> due step a delivery not yet delivered: next attempt (Unix ms) and failed attempts so far
//	D len whID msg                  -> record  the delivery (JSON owned by the webhook actor): body and attempts
//	A len alertID alertID start len keyID keyID -> record  a usage alert that fired for a window period
//
// id and msg are 16-byte time-ordered ids, so the first O and P keys are the
// oldest waiting work, and a webhook's deliveries list newest first by a
// reverse scan. An O entry is written in the same batch as its event: the
// event and the promise to deliver it are durable together. The prefixes
// are declared in keys.go.

func appendLenString(dst []byte, s string) []byte {
	dst = append(dst, byte(len(s)))
	return append(dst, s...)
}

func outboxKey(dst []byte, webhook string, id ID) []byte {
	dst = append(dst, prefixOutbox)
	dst = append(dst, id[:]...)
	return appendLenString(dst, webhook)
}

func pendingKey(webhook string, msg ID) []byte {
	k := append([]byte{prefixPending}, msg[:]...)
	return appendLenString(k, webhook)
}

func deliveryPrefix(webhook string) []byte {
	return appendLenString([]byte{prefixDelivery}, webhook)
}

func deliveryKey(webhook string, msg ID) []byte {
	return append(deliveryPrefix(webhook), msg[:]...)
}

func alertPrefix(alertID string) []byte {
	return appendLenString([]byte{prefixAlert}, alertID)
}

func alertKey(alertID string, periodStart int64, keyID string) []byte {
	return appendLenString(appendTS(alertPrefix(alertID), periodStart), keyID)
}

// splitIDWebhook reads "id len whID" after a one-byte prefix.
func splitIDWebhook(key []byte) (id ID, webhook string, ok bool) {
	if len(key) < 1+16+1 {
		return id, "", false
	}
	copy(id[:], key[1:17])
	n := int(key[17])
	if len(key) != 18+n {
		return id, "", false
	}
	return id, string(key[18:]), true
}

// AddOutbox promises an event.created delivery of event id of ds to a
// webhook, in the same atomic write as the event.
func (b *Batch) AddOutbox(webhook string, ds uint32, id ID) {
	k := outboxKey(b.scratch[:0], webhook, id)
	v := binary.BigEndian.AppendUint32(k[len(k):], ds)
	_ = b.b.Set(k, v, nil)
	b.scratch = v[:0]
}

// OutboxEntry is an event waiting to be put into a delivery.
type OutboxEntry struct {
	Webhook string
	Dataset uint32
	Event   ID
}

// ScanOutbox calls fn for every outbox entry, oldest event first.
func (d *DB) ScanOutbox(fn func(OutboxEntry) error) error {
	return d.scanPrefix([]byte{prefixOutbox}, func(k, v []byte) error {
		id, wh, ok := splitIDWebhook(k)
		if !ok || len(v) != 4 {
			return errCorrupt
		}
		return fn(OutboxEntry{Webhook: wh, Dataset: binary.BigEndian.Uint32(v), Event: id})
	})
}

// PendingDelivery is a delivery that has not succeeded yet and has retries left.
type PendingDelivery struct {
	Webhook string
	ID      ID
	NextAt  int64 // Unix ms of the next attempt
	Step    uint8 // failed attempts so far on the current schedule
}

// ScanPending calls fn for every pending delivery, oldest first.
func (d *DB) ScanPending(fn func(PendingDelivery) error) error {
	return d.scanPrefix([]byte{prefixPending}, func(k, v []byte) error {
		id, wh, ok := splitIDWebhook(k)
		if !ok || len(v) != 9 {
			return errCorrupt
		}
		return fn(PendingDelivery{Webhook: wh, ID: id, NextAt: int64(binary.BigEndian.Uint64(v)), Step: v[8]})
	})
}

// OldestWaiting is the recording time (Unix ms) of the oldest outbox entry
// or pending delivery; ok is false when nothing waits. Both key spaces start
// with a time-ordered id, so this is two seeks.
func (d *DB) OldestWaiting() (ms int64, ok bool, err error) {
	for _, p := range []byte{prefixOutbox, prefixPending} {
		it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: []byte{p}, UpperBound: []byte{p + 1}})
		if err != nil {
			return 0, false, err
		}
		if it.First() && len(it.Key()) >= 17 {
			var id ID
			copy(id[:], it.Key()[1:17])
			if t := IDTime(id); !ok || t < ms {
				ms, ok = t, true
			}
		}
		if err := it.Close(); err != nil {
			return 0, false, err
		}
	}
	return ms, ok, nil
}

// GetDelivery reads one delivery record, ErrNotFound if missing.
func (d *DB) GetDelivery(webhook string, msg ID) ([]byte, error) {
	return d.get(deliveryKey(webhook, msg))
}

// ScanDeliveries calls fn with a webhook's deliveries, newest first, starting
// below before (all when before is nil), until fn returns false.
func (d *DB) ScanDeliveries(webhook string, before *ID, fn func(msg ID, rec []byte) bool) error {
	p := deliveryPrefix(webhook)
	upper := prefixEnd(p)
	if before != nil {
		upper = append(append([]byte(nil), p...), before[:]...)
	}
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: upper})
	if err != nil {
		return err
	}
	for it.Last(); it.Valid(); it.Prev() {
		k := it.Key()
		if len(k) != len(p)+16 {
			_ = it.Close()
			return errCorrupt
		}
		var id ID
		copy(id[:], k[len(p):])
		if !fn(id, it.Value()) {
			break
		}
	}
	return it.Close()
}

// SweepDeliveries deletes a webhook's delivery records made before cutoffMs
// unless keep says otherwise (pending ones must stay); it returns how many went.
func (d *DB) SweepDeliveries(webhook string, cutoffMs int64, keep func(ID) bool) (int, error) {
	p := deliveryPrefix(webhook)
	cut := IDAt(cutoffMs)
	upper := append(append([]byte(nil), p...), cut[:]...)
	return d.deleteWhere(p, upper, false, func(k, _ []byte) bool {
		var id ID
		copy(id[:], k[len(p):])
		return !keep(id)
	})
}

// DeleteWebhookData removes every outbox entry, pending mark and delivery of a webhook, durably.
func (d *DB) DeleteWebhookData(webhook string) error {
	b := d.db.NewBatch()
	defer b.Close()
	p := deliveryPrefix(webhook)
	if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
		return err
	}
	for _, pre := range []byte{prefixOutbox, prefixPending} {
		err := d.scanPrefix([]byte{pre}, func(k, _ []byte) error {
			if _, wh, ok := splitIDWebhook(k); ok && wh == webhook {
				return b.Delete(k, nil)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return d.commit(b, pebble.Sync)
}

// HasAlertFiring reports whether an alert already fired for keyID in the window period starting at periodStart.
func (d *DB) HasAlertFiring(alertID string, periodStart int64, keyID string) (bool, error) {
	_, err := d.get(alertKey(alertID, periodStart, keyID))
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// ScanAlertFirings calls fn with an alert's firings, newest period first, until fn returns false.
func (d *DB) ScanAlertFirings(alertID string, fn func(rec []byte) bool) error {
	p := alertPrefix(alertID)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return err
	}
	for it.Last(); it.Valid(); it.Prev() {
		if !fn(it.Value()) {
			break
		}
	}
	return it.Close()
}

// DeleteAlertFirings removes the firing history of an alert, durably.
func (d *DB) DeleteAlertFirings(alertID string) error {
	p := alertPrefix(alertID)
	return d.apply(func() error { return d.db.DeleteRange(p, prefixEnd(p), pebble.Sync) })
}

// DeliveryBatch groups changes to the outbox and the delivery log into one atomic write.
type DeliveryBatch struct {
	db *DB
	b  *pebble.Batch
}

// NewDeliveryBatch starts an empty delivery batch.
func (d *DB) NewDeliveryBatch() *DeliveryBatch { return &DeliveryBatch{db: d, b: d.db.NewBatch()} }

// PutDelivery writes a delivery record.
func (b *DeliveryBatch) PutDelivery(webhook string, msg ID, rec []byte) {
	_ = b.b.Set(deliveryKey(webhook, msg), rec, nil)
}

// SetPending marks a delivery as waiting for an attempt at nextAt (Unix ms).
func (b *DeliveryBatch) SetPending(webhook string, msg ID, nextAt int64, step uint8) {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 9), uint64(nextAt))
	_ = b.b.Set(pendingKey(webhook, msg), append(v, step), nil)
}

// ClearPending removes a delivery's pending mark: it succeeded or gave up.
func (b *DeliveryBatch) ClearPending(webhook string, msg ID) {
	_ = b.b.Delete(pendingKey(webhook, msg), nil)
}

// DeleteOutbox removes an outbox entry that joined a delivery (or whose event is gone).
func (b *DeliveryBatch) DeleteOutbox(e OutboxEntry) {
	_ = b.b.Delete(outboxKey(nil, e.Webhook, e.Event), nil)
}

// PutAlertFiring records that an alert fired for keyID in the window period starting at periodStart.
func (b *DeliveryBatch) PutAlertFiring(alertID string, periodStart int64, keyID string, rec []byte) {
	_ = b.b.Set(alertKey(alertID, periodStart, keyID), rec, nil)
}

// Empty reports whether nothing was added.
func (b *DeliveryBatch) Empty() bool { return b.b.Empty() }

// Commit writes the batch; with sync it returns only after the WAL is fsynced.
func (b *DeliveryBatch) Commit(sync bool) error {
	if b.b.Empty() {
		return nil
	}
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
	}
	return b.db.commit(b.b, opts)
}

// Close releases the batch.
func (b *DeliveryBatch) Close() { _ = b.b.Close() }

// scanPrefix calls fn for every key under prefix; fn must copy what it keeps.
func (d *DB) scanPrefix(prefix []byte, fn func(k, v []byte) error) error {
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			_ = it.Close()
			return err
		}
	}
	return it.Close()
}
