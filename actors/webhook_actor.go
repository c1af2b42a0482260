package actors

import (
	"container/heap"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/eventd/eventd/engine/eventjson"
	"github.com/eventd/eventd/storage"
)

// endpoint is the actor's state of one webhook.
type endpoint struct {
	id       string
	buf      []outboxEvent // events waiting to be batched
	bufSince int64         // Unix ms (clock) when buf's oldest entry arrived
	queue    pendHeap
	items    map[storage.ID]*pendItem
	inflight int
	paused   bool // answered 410; wait for the engine to disable it
}

// webhookActor schedules and sends deliveries. All state is its own; HTTP
// requests run in goroutines and report back with attemptDone.
type webhookActor struct {
	w         *Webhooks
	eps       map[string]*endpoint
	stopTimer func() bool
	wakeAt    int64
	timerGen  uint64
	lastSweep int64
	stopped   bool
}

func (a *webhookActor) ep(id string) *endpoint {
	ep := a.eps[id]
	if ep == nil {
		ep = &endpoint{id: id, items: map[storage.ID]*pendItem{}}
		a.eps[id] = ep
	}
	return ep
}

// load rebuilds the schedule from the store: pending deliveries, and outbox
// entries whose events had not joined a delivery yet.
func (a *webhookActor) load() error {
	w := a.w
	set := w.set.Load()
	now := w.opts.Clock.Now().UnixMilli()
	orphans := w.db.NewDeliveryBatch()
	defer orphans.Close()
	err := w.db.ScanPending(func(p storage.PendingDelivery) error {
		if set.byID[p.Webhook] == nil {
			orphans.ClearPending(p.Webhook, p.ID)
			return nil
		}
		a.push(a.ep(p.Webhook), &pendItem{id: p.ID, nextAt: p.NextAt, step: p.Step})
		return nil
	})
	if err != nil {
		return err
	}
	err = w.db.ScanOutbox(func(o storage.OutboxEntry) error {
		if set.byID[o.Webhook] == nil {
			orphans.DeleteOutbox(o)
			return nil
		}
		ev, err := w.db.GetEvent(o.Dataset, o.Event)
		if errors.Is(err, storage.ErrNotFound) {
			orphans.DeleteOutbox(o) // erased since: nothing to announce
			return nil
		}
		if err != nil {
			return err
		}
		ep := a.ep(o.Webhook)
		if len(ep.buf) == 0 {
			ep.bufSince = now
		}
		ep.buf = append(ep.buf, outboxEvent{webhook: o.Webhook, ds: o.Dataset, ev: &ev})
		w.bufferedN.Add(1)
		return nil
	})
	if err != nil {
		return err
	}
	return orphans.Commit(false)
}

func (a *webhookActor) push(ep *endpoint, it *pendItem) {
	if old := ep.items[it.id]; old != nil {
		if old.inflight {
			return // its attempt will settle it
		}
		old.nextAt, old.step = it.nextAt, it.step
		if old.index >= 0 {
			heap.Fix(&ep.queue, old.index)
		} else {
			heap.Push(&ep.queue, old)
		}
		return
	}
	ep.items[it.id] = it
	heap.Push(&ep.queue, it)
	a.w.pendingN.Add(1)
}

func (a *webhookActor) done(ep *endpoint, it *pendItem) {
	if ep.items[it.id] == it {
		delete(ep.items, it.id)
		if it.test == nil {
			a.w.pendingN.Add(-1)
		}
	}
	if it.index >= 0 {
		heap.Remove(&ep.queue, it.index)
	}
}

func (a *webhookActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *outboxAdded:
		a.addOutbox(m.entries)
	case *enqueued:
		for _, q := range m.items {
			a.push(a.ep(q.webhook), &pendItem{id: q.id, nextAt: q.nextAt})
		}
	case *UsageAlert:
		a.fireAlert(m)
	case *attemptDone:
		a.settle(m)
	case *replayReq:
		d, err := a.replay(m.webhook, m.id)
		m.reply <- replyDelivery{d, err}
	case *testReq:
		a.startTest(m)
	case *forgetReq:
		a.forget(m)
	case *syncReq:
		a.pump()
		close(m.done)
		return
	case configChanged:
		for _, ep := range a.eps {
			ep.paused = false
		}
	case wake:
		if m.gen != 0 && m.gen == a.timerGen {
			a.stopTimer = nil // spent
		}
	case *actor.Stopping:
		a.stopped = true
		if a.stopTimer != nil {
			a.stopTimer()
		}
		return
	default:
		return
	}
	if !a.stopped {
		a.pump()
	}
}

func (a *webhookActor) addOutbox(entries []outboxEvent) {
	set := a.w.set.Load()
	now := a.w.opts.Clock.Now().UnixMilli()
	var orphans *storage.DeliveryBatch
	for _, e := range entries {
		if set.byID[e.webhook] == nil { // deleted while the shard committed
			if orphans == nil {
				orphans = a.w.db.NewDeliveryBatch()
			}
			orphans.DeleteOutbox(storage.OutboxEntry{Webhook: e.webhook, Dataset: e.ds, Event: e.ev.ID})
			continue
		}
		ep := a.ep(e.webhook)
		if len(ep.buf) == 0 {
			ep.bufSince = now
		}
		ep.buf = append(ep.buf, e)
		a.w.bufferedN.Add(1)
	}
	if orphans != nil {
		if err := orphans.Commit(false); err != nil {
			a.w.log.Error("delete orphan outbox entries", "err", err)
		}
		orphans.Close()
	}
}

// pump forms due batches, starts due attempts and arms the timer for the next thing to do.
func (a *webhookActor) pump() {
	w := a.w
	set := w.set.Load()
	now := w.opts.Clock.Now().UnixMilli()
	next := int64(math.MaxInt64)
	wait := w.opts.BatchWait.Milliseconds()
	for id, ep := range a.eps {
		cfg := set.byID[id]
		if cfg == nil {
			a.dropMemory(ep)
			continue
		}
		for len(ep.buf) >= w.opts.BatchSize || (len(ep.buf) > 0 && now >= ep.bufSince+wait) {
			if !a.formDelivery(ep, now) {
				ep.bufSince = now // the store failed: try again after another wait
				break
			}
		}
		if len(ep.buf) > 0 {
			next = min(next, ep.bufSince+wait)
		}
		if !cfg.Enabled || ep.paused {
			continue
		}
		for ep.inflight < w.opts.Concurrency && len(ep.queue) > 0 && ep.queue[0].nextAt <= now {
			it := heap.Pop(&ep.queue).(*pendItem)
			a.start(ep, cfg, it)
		}
		if ep.inflight < w.opts.Concurrency && len(ep.queue) > 0 {
			next = min(next, ep.queue[0].nextAt)
		}
		if len(ep.items) == 0 && len(ep.buf) == 0 && ep.inflight == 0 {
			delete(a.eps, id)
		}
	}
	if now-a.lastSweep >= sweepEvery.Milliseconds() {
		a.sweep(now)
	}
	next = min(next, a.lastSweep+sweepEvery.Milliseconds())
	a.arm(next, now)
}

func (a *webhookActor) dropMemory(ep *endpoint) {
	a.w.pendingN.Add(-int64(len(ep.items)))
	a.w.bufferedN.Add(-int64(len(ep.buf)))
	for _, it := range ep.items {
		if it.test != nil {
			a.w.pendingN.Add(1) // test deliveries were never counted
			it.test <- replyDelivery{err: errors.New("webhook deleted")}
		}
	}
	delete(a.eps, ep.id)
}

func (a *webhookActor) arm(next, now int64) {
	if next == a.wakeAt && a.stopTimer != nil {
		return
	}
	if a.stopTimer != nil {
		a.stopTimer()
		a.stopTimer = nil
	}
	a.wakeAt = next
	a.timerGen++
	at := time.UnixMilli(min(next, now+sweepEvery.Milliseconds()))
	sys, pid, gen := a.w.system, a.w.pid, a.timerGen
	a.stopTimer = a.w.opts.Clock.Schedule(at, func() { sys.Root.Send(pid, wake{gen: gen}) })
}

// formDelivery turns up to BatchSize buffered events into one durable
// event.created delivery and removes their outbox entries in the same write.
// It is synced before the first attempt so that a crash cannot make the same
// events go out again under another webhook-id.
func (a *webhookActor) formDelivery(ep *endpoint, now int64) bool {
	w := a.w
	n := min(len(ep.buf), w.opts.BatchSize)
	take := ep.buf[:n]
	idb, _ := w.gen.Next()
	id := storage.ID(idb)
	body := appendEnvelope(make([]byte, 0, 256*n), FormatMsgID(id), KindEventCreated, now)
	body = append(body, `{"events":[`...)
	for i, e := range take {
		if i > 0 {
			body = append(body, ',')
		}
		body = eventjson.Append(body, e.ev, true)
	}
	body = append(body, "]}}"...)
	b := w.db.NewDeliveryBatch()
	defer b.Close()
	q := w.putNew(b, ep.id, id, KindEventCreated, body, n, time.UnixMilli(now))
	for _, e := range take {
		b.DeleteOutbox(storage.OutboxEntry{Webhook: e.webhook, Dataset: e.ds, Event: e.ev.ID})
	}
	if err := b.Commit(true); err != nil {
		w.log.Error("write webhook delivery", "webhook", ep.id, "err", err)
		return false
	}
	clear(take)
	ep.buf = ep.buf[n:]
	if len(ep.buf) == 0 {
		ep.buf = nil
	}
	w.bufferedN.Add(-int64(n))
	a.push(ep, &pendItem{id: q.id, nextAt: q.nextAt})
	return true
}

// start sends one attempt in a goroutine.
func (a *webhookActor) start(ep *endpoint, cfg *WebhookConfig, it *pendItem) {
	w := a.w
	raw, err := w.db.GetDelivery(ep.id, it.id)
	var rec deliveryRecord
	if err == nil {
		rec, err = decodeRecord(raw)
	}
	if err != nil {
		w.log.Error("read webhook delivery", "webhook", ep.id, "delivery", FormatMsgID(it.id), "err", err)
		b := w.db.NewDeliveryBatch()
		b.ClearPending(ep.id, it.id)
		_ = b.Commit(false)
		b.Close()
		a.done(ep, it)
		return
	}
	it.inflight = true
	ep.inflight++
	w.inflightN.Add(1)
	var keys [][]byte
	now := w.opts.Clock.Now()
	for _, s := range cfg.Secrets {
		if s.ExpiresAt == 0 || s.ExpiresAt > now.UnixMilli() {
			keys = append(keys, s.Key)
		}
	}
	client := w.live
	if cfg.Test {
		client = w.test
	}
	url := cfg.URL
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		att, retryAfter := w.send(client, url, keys, rec.ID, rec.Payload, now)
		w.system.Root.Send(w.pid, &attemptDone{ep: ep, item: it, rec: rec, att: att, retryAfter: retryAfter,
			canceled: w.ctx.Err() != nil})
	}()
}

// settle records an attempt and decides what happens next.
func (a *webhookActor) settle(m *attemptDone) {
	w := a.w
	w.inflightN.Add(-1)
	ep := m.ep
	if a.eps[ep.id] != ep {
		return // the endpoint was forgotten meanwhile
	}
	ep.inflight--
	it := m.item
	if ep.items[it.id] != it {
		return
	}
	it.inflight = false
	if m.canceled {
		if it.test == nil {
			heap.Push(&ep.queue, it) // still pending in the store, at its old time
		}
		return
	}
	now := w.opts.Clock.Now().UnixMilli()
	rec := m.rec
	rec.Attempts = append(rec.Attempts, m.att)
	if len(rec.Attempts) > maxAttemptsKept {
		rec.Attempts = rec.Attempts[len(rec.Attempts)-maxAttemptsKept:]
	}
	b := w.db.NewDeliveryBatch()
	defer b.Close()
	st := m.att.Status
	finished := true
	switch {
	case st >= 200 && st < 300:
		rec.Status = DeliverySucceeded
		w.outcomes["success"].Inc()
	case st == http.StatusGone:
		rec.Status = DeliveryFailed
		w.outcomes["gone"].Inc()
		ep.paused = true
		w.log.Warn("webhook endpoint answered 410: disabling it", "webhook", ep.id)
		if w.opts.OnGone != nil {
			w.wg.Add(1) // Stop waits for it: it writes to the store
			go func(id string) {
				defer w.wg.Done()
				w.opts.OnGone(id)
			}(ep.id)
		}
	case it.test != nil || int(it.step) >= len(w.opts.Schedule):
		rec.Status = DeliveryFailed
		w.outcomes["failed"].Inc()
	default:
		finished = false
		delay := w.opts.Schedule[it.step]
		if m.retryAfter > delay {
			delay = m.retryAfter
		}
		it.step++
		it.nextAt = now + delay.Milliseconds()
		rec.Status = DeliveryPending
		next := msText(it.nextAt)
		rec.NextAttemptAt = &next
		b.SetPending(ep.id, it.id, it.nextAt, it.step)
		heap.Push(&ep.queue, it)
		w.outcomes["retry"].Inc()
	}
	if finished {
		rec.NextAttemptAt = nil
		b.ClearPending(ep.id, it.id)
		a.done(ep, it)
	}
	raw, _ := json.Marshal(&rec)
	b.PutDelivery(ep.id, it.id, raw)
	if err := b.Commit(false); err != nil {
		w.log.Error("record webhook attempt", "webhook", ep.id, "err", err)
	}
	if it.test != nil {
		it.test <- replyDelivery{d: rec.view()}
	}
}

func (a *webhookActor) replay(webhook string, id storage.ID) (Delivery, error) {
	w := a.w
	if w.set.Load().byID[webhook] == nil {
		return Delivery{}, storage.ErrNotFound
	}
	raw, err := w.db.GetDelivery(webhook, id)
	if err != nil {
		return Delivery{}, err
	}
	rec, err := decodeRecord(raw)
	if err != nil {
		return Delivery{}, err
	}
	ep := a.ep(webhook)
	if it := ep.items[id]; it != nil && it.inflight {
		return rec.view(), ErrDeliveryBusy
	}
	now := w.opts.Clock.Now().UnixMilli()
	rec.Status = DeliveryPending
	rec.Test = false // a replayed test send is retried like any delivery
	next := msText(now)
	rec.NextAttemptAt = &next
	b := w.db.NewDeliveryBatch()
	defer b.Close()
	raw, _ = json.Marshal(&rec)
	b.PutDelivery(webhook, id, raw)
	b.SetPending(webhook, id, now, 0)
	if err := b.Commit(true); err != nil {
		return Delivery{}, err
	}
	a.push(ep, &pendItem{id: id, nextAt: now})
	return rec.view(), nil
}

func (a *webhookActor) startTest(m *testReq) {
	w := a.w
	cfg := w.set.Load().byID[m.webhook]
	if cfg == nil {
		m.reply <- replyDelivery{err: storage.ErrNotFound}
		return
	}
	now := w.opts.Clock.Now()
	idb, _ := w.gen.Next()
	id := storage.ID(idb)
	ms := now.UnixMilli()
	// A sample event in the real shape, so the receiver's parsing is exercised too.
	evID, _ := w.gen.Next()
	sample := storage.Event{ID: evID, Name: "eventd_test", VisitorID: "visitor_test", HasVisitor: true,
		Timestamp: ms, CreatedAt: ms, Properties: []byte(`{"test":true}`)}
	body := appendEnvelope(nil, FormatMsgID(id), KindEventCreated, ms)
	body = append(body, `{"events":[`...)
	body = append(eventjson.Append(body, &sample, true), "]}}"...)
	rec := deliveryRecord{ID: FormatMsgID(id), WebhookID: m.webhook, Type: KindEventCreated, Status: DeliveryPending,
		CreatedAt: msText(ms), EventCount: 1, Attempts: []Attempt{}, Test: true, Payload: body}
	raw, _ := json.Marshal(&rec)
	b := w.db.NewDeliveryBatch()
	defer b.Close()
	b.PutDelivery(m.webhook, id, raw) // no pending mark: a test send is never retried
	if err := b.Commit(false); err != nil {
		m.reply <- replyDelivery{err: err}
		return
	}
	ep := a.ep(m.webhook)
	it := &pendItem{id: id, nextAt: ms, index: -1, test: m.reply}
	ep.items[id] = it
	m.reply <- replyDelivery{d: rec.view()}
	a.start(ep, cfg, it) // now, whatever the endpoint's state or load: an operator is waiting
}

func (a *webhookActor) forget(m *forgetReq) {
	if ep := a.eps[m.webhook]; ep != nil {
		a.dropMemory(ep)
	}
	m.reply <- a.w.db.DeleteWebhookData(m.webhook)
}

// fireAlert records a usage alert once per key, rule and window period and
// queues usage.alert deliveries for the endpoints of the key's dataset.
func (a *webhookActor) fireAlert(u *UsageAlert) {
	w := a.w
	seen, err := w.db.HasAlertFiring(u.AlertID, u.PeriodStart, u.KeyID)
	if err != nil || seen {
		return
	}
	firing := AlertFiring{AlertID: u.AlertID, KeyID: u.KeyID, Window: u.Window, Limit: u.Limit, Used: u.Used,
		Threshold: u.Threshold, PeriodStart: msText(u.PeriodStart * 1000), FiredAt: msText(u.At.UnixMilli())}
	rec, _ := json.Marshal(&firing)
	b := w.db.NewDeliveryBatch()
	defer b.Close()
	b.PutAlertFiring(u.AlertID, u.PeriodStart, u.KeyID, rec)
	now := w.opts.Clock.Now()
	var items []queued
	for _, c := range w.set.Load().byDS[u.Dataset] {
		if !c.Enabled || !c.UsageAlert {
			continue
		}
		id := derivedID(now.UnixMilli(), c.ID, u.AlertID, u.KeyID, strconv.FormatInt(u.PeriodStart, 10))
		items = append(items, w.newDelivery(b, c.ID, id, KindUsageAlert, UsageAlertData(u), 0, now))
	}
	if err := b.Commit(true); err != nil {
		w.log.Error("record usage alert", "alert", u.AlertID, "err", err)
		return
	}
	if w.opts.OnAlertFired != nil {
		w.opts.OnAlertFired(*u) // once per key, rule and period, as the webhooks: the firing is recorded
	}
	w.log.Info("usage alert", "alert", u.AlertID, "key", u.KeyID, "window", u.Window, "used", u.Used, "limit", u.Limit)
	for _, q := range items {
		a.push(a.ep(q.webhook), &pendItem{id: q.id, nextAt: q.nextAt})
	}
}

// sweep forgets finished deliveries older than the retention.
func (a *webhookActor) sweep(now int64) {
	a.lastSweep = now
	cutoff := now - a.w.opts.Retention.Milliseconds()
	for id := range a.w.set.Load().byID {
		ep := a.eps[id]
		n, err := a.w.db.SweepDeliveries(id, cutoff, func(d storage.ID) bool { return ep != nil && ep.items[d] != nil })
		if err != nil {
			a.w.log.Error("sweep webhook deliveries", "webhook", id, "err", err)
		} else if n > 0 {
			a.w.log.Debug("swept webhook deliveries", "webhook", id, "count", n)
		}
	}
}
