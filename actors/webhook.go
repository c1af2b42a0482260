package actors

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/engine/metrics"
	"github.com/eventd/eventd/storage"
)

// Webhook delivery types.
const (
	KindEventCreated  = "event.created"
	KindGoalCompleted = "goal.completed"
	KindUsageAlert    = "usage.alert"
)

// Delivery states in the log.
const (
	DeliveryPending   = "pending"
	DeliverySucceeded = "succeeded"
	DeliveryFailed    = "failed"
)

// RetrySchedule is the Standard Webhooks schedule: the wait after the first,
// second, ... failed attempt. After the last one fails the delivery is failed.
var RetrySchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour}

// Defaults of WebhookOptions.
const (
	DefaultWebhookConcurrency = 4
	DefaultWebhookBatch       = 100
	DefaultWebhookBatchWait   = time.Second
	DefaultWebhookTimeout     = 10 * time.Second
	DefaultDeliveryRetention  = 7 * 24 * time.Hour
	maxRetryAfter             = 24 * time.Hour
	maxAttemptsKept           = 50
	responseExcerpt           = 1024
	sweepEvery                = time.Hour
)

// ErrDeliveryBusy answers a replay of a delivery whose attempt is under way.
var ErrDeliveryBusy = errors.New("actors: delivery attempt in progress")

// Clock is the time source of the webhook actor; tests drive the retry schedule with a fake one.
type Clock interface {
	Now() time.Time
	// Schedule calls f once the clock reaches at (at once if it has); stop
	// cancels it if it has not run. An absolute time, so a clock that moves
	// between reading Now and scheduling cannot shift the deadline.
	Schedule(at time.Time, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Schedule(at time.Time, f func()) func() bool {
	return time.AfterFunc(time.Until(at), f).Stop
}

// WebhookOptions configure NewWebhooks; zero values take the contract's numbers.
type WebhookOptions struct {
	Set          *WebhookSet // endpoints at start
	Clock        Clock
	AllowPrivate bool // live endpoints may reach private and loopback addresses
	Concurrency  int  // requests in flight per endpoint
	BatchSize    int  // events per event.created delivery
	BatchWait    time.Duration
	Timeout      time.Duration
	Schedule     []time.Duration
	Retention    time.Duration // finished deliveries are kept this long
	// OnGone is called (in its own goroutine) when an endpoint answers 410: the engine disables it.
	OnGone func(webhookID string)
	// OnAlertFired, if set, is called on the actor's goroutine after a
	// usage alert's firing was recorded (once per key, rule and window
	// period): the engine hands it to /stream subscribers. It must not block.
	OnAlertFired func(UsageAlert)
	Metrics      *metrics.Registry
	Logger       *slog.Logger
}

// Webhooks is the handle of the webhook actor: it owns delivery, retries and
// the delivery log. Shards only write outbox records and tell it after commit.
type Webhooks struct {
	system *actor.ActorSystem
	pid    *actor.PID
	db     *storage.DB
	opts   WebhookOptions
	log    *slog.Logger
	set    atomic.Pointer[WebhookSet]
	gen    *ids.Generator
	live   *http.Client
	test   *http.Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool

	pendingN  atomic.Int64
	bufferedN atomic.Int64
	inflightN atomic.Int64
	outcomes  map[string]*metrics.Counter
	latency   *metrics.Histogram
}

// NewWebhooks loads pending deliveries and outbox entries, then spawns the
// webhook actor. Call it before any shard can commit, so nothing is loaded twice.
func NewWebhooks(system *actor.ActorSystem, db *storage.DB, o WebhookOptions) (*Webhooks, error) {
	if o.Set == nil {
		o.Set = NewWebhookSet(nil)
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultWebhookConcurrency
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultWebhookBatch
	}
	if o.BatchWait <= 0 {
		o.BatchWait = DefaultWebhookBatchWait
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultWebhookTimeout
	}
	if len(o.Schedule) == 0 {
		o.Schedule = RetrySchedule
	}
	if o.Retention <= 0 {
		o.Retention = DefaultDeliveryRetention
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Webhooks{system: system, db: db, opts: o, log: o.Logger.With("component", "webhooks"), gen: ids.NewGenerator()}
	w.set.Store(o.Set)
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.live = newWebhookClient(o.Timeout, func(a netip.Addr) bool { return WebhookAddrAllowed(a, false, o.AllowPrivate) })
	w.test = newWebhookClient(o.Timeout, func(a netip.Addr) bool { return WebhookAddrAllowed(a, true, o.AllowPrivate) })
	reg := o.Metrics
	w.outcomes = map[string]*metrics.Counter{}
	for _, oc := range []string{"success", "retry", "failed", "gone"} {
		w.outcomes[oc] = reg.Counter("eventd_webhook_deliveries_total",
			"Webhook delivery attempts by outcome: success (2xx), retry (failed, will retry), failed (no retries left), gone (410, endpoint disabled).",
			`outcome="`+oc+`"`)
	}
	w.latency = reg.Histogram("eventd_webhook_attempt_duration_seconds", "Time of one webhook HTTP request.", "", metrics.LatencyBuckets)
	reg.GaugeFunc("eventd_webhook_queue_depth", "Webhook deliveries not yet delivered.", "", func() float64 { return float64(w.pendingN.Load()) })
	reg.GaugeFunc("eventd_webhook_outbox_events", "Events waiting to be batched into an event.created delivery.", "", func() float64 { return float64(w.bufferedN.Load()) })
	reg.GaugeFunc("eventd_webhook_inflight", "Webhook requests in flight.", "", func() float64 { return float64(w.inflightN.Load()) })
	reg.GaugeFunc("eventd_webhook_oldest_pending_seconds", "Age of the oldest undelivered webhook work (0 when none).", "", w.oldestAge)

	a := &webhookActor{w: w, eps: map[string]*endpoint{}, lastSweep: o.Clock.Now().UnixMilli()}
	if err := a.load(); err != nil {
		return nil, err
	}
	var mb mailboxHeld
	RegisterMailboxDepth(reg, "webhook", mb.depth)
	w.pid = system.Root.Spawn(mb.props(func() actor.Actor { return a }))
	system.Root.Send(w.pid, wake{})
	return w, nil
}

func (w *Webhooks) oldestAge() float64 {
	if w.closed.Load() {
		return 0
	}
	ms, ok, err := w.db.OldestWaiting()
	if err != nil || !ok {
		return 0
	}
	return max(0, float64(w.opts.Clock.Now().UnixMilli()-ms)/1000)
}

// SetConfig publishes a new set of endpoints to the shards and the actor.
func (w *Webhooks) SetConfig(set *WebhookSet) {
	w.set.Store(set)
	w.system.Root.Send(w.pid, configChanged{})
}

// eventRoutes are the enabled endpoints of ds that want event.created.
func (w *Webhooks) eventRoutes(ds uint32) []*WebhookConfig { return w.set.Load().events[ds] }

// Stop cancels requests in flight and stops the actor; the store may close afterwards.
func (w *Webhooks) Stop() {
	w.cancel()
	_ = w.system.Root.PoisonFuture(w.pid).Wait()
	w.wg.Wait()
	w.closed.Store(true)
}

// EnqueueGoalCompleted durably queues goal.completed deliveries for every
// enabled endpoint of ds that wants them. It is idempotent: the delivery id
// derives from endpoint, goal and event, so announcing a completion twice
// (re-evaluation after a crash) queues nothing new.
func (w *Webhooks) EnqueueGoalCompleted(ds uint32, cs ...GoalCompletion) error {
	if w.closed.Load() {
		return ErrStopped
	}
	var hooks []*WebhookConfig
	for _, c := range w.set.Load().byDS[ds] {
		if c.Enabled && c.GoalCompleted {
			hooks = append(hooks, c)
		}
	}
	if len(hooks) == 0 || len(cs) == 0 {
		return nil
	}
	now := w.opts.Clock.Now()
	b := w.db.NewDeliveryBatch()
	defer b.Close()
	var items []queued
	for _, c := range cs {
		for _, h := range hooks {
			id := derivedID(storage.IDTime(c.EventID), h.ID, c.GoalID, string(c.EventID[:]))
			if _, err := w.db.GetDelivery(h.ID, id); err == nil {
				continue
			} else if !errors.Is(err, storage.ErrNotFound) {
				return err
			}
			items = append(items, w.newDelivery(b, h.ID, id, KindGoalCompleted, GoalCompletedData(c), 0, now))
		}
	}
	if err := b.Commit(true); err != nil {
		return err
	}
	if len(items) > 0 {
		w.system.Root.Send(w.pid, &enqueued{items: items})
	}
	return nil
}

// FireAlert hands a threshold crossing to the actor; it never blocks (key actors call it).
func (w *Webhooks) FireAlert(a UsageAlert) { w.system.Root.Send(w.pid, &a) }

// Replay sends a delivery again with a fresh retry schedule and the same webhook-id.
func (w *Webhooks) Replay(webhookID string, id storage.ID) (Delivery, error) {
	ch := make(chan replyDelivery, 1)
	w.system.Root.Send(w.pid, &replayReq{webhook: webhookID, id: id, reply: ch})
	r := <-ch
	return r.d, r.err
}

// Test sends an event.created delivery with a sample event at once (even to
// a disabled endpoint, without retries) and waits up to wait for its attempt.
func (w *Webhooks) Test(webhookID string, wait time.Duration) (Delivery, bool, error) {
	ch := make(chan replyDelivery, 2)
	w.system.Root.Send(w.pid, &testReq{webhook: webhookID, reply: ch})
	r := <-ch // the queued delivery
	if r.err != nil {
		return r.d, false, r.err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case done := <-ch:
		return done.d, true, done.err
	case <-t.C:
		return r.d, false, nil
	}
}

// Forget drops an endpoint and deletes its outbox, pending marks and delivery log.
func (w *Webhooks) Forget(webhookID string) error {
	ch := make(chan error, 1)
	w.system.Root.Send(w.pid, &forgetReq{webhook: webhookID, reply: ch})
	return <-ch
}

// newDelivery adds a pending delivery (record and pending mark) to b.
func (w *Webhooks) newDelivery(b *storage.DeliveryBatch, webhook string, id storage.ID, kind string, data any, events int, now time.Time) queued {
	msg := FormatMsgID(id)
	body := appendEnvelope(nil, msg, kind, now.UnixMilli())
	raw, _ := json.Marshal(data)
	body = append(append(body, raw...), '}')
	return w.putNew(b, webhook, id, kind, body, events, now)
}

func (w *Webhooks) putNew(b *storage.DeliveryBatch, webhook string, id storage.ID, kind string, body []byte, events int, now time.Time) queued {
	ms := now.UnixMilli()
	next := msText(ms)
	d := deliveryRecord{ID: FormatMsgID(id), WebhookID: webhook, Type: kind, Status: DeliveryPending, CreatedAt: msText(ms),
		EventCount: events, NextAttemptAt: &next, Attempts: []Attempt{}, Payload: body}
	rec, _ := json.Marshal(&d)
	b.PutDelivery(webhook, id, rec)
	b.SetPending(webhook, id, ms, 0)
	return queued{webhook: webhook, id: id, nextAt: ms}
}

// Messages of the webhook actor.
type (
	// outboxAdded: a shard committed events with outbox entries.
	outboxAdded struct{ entries []outboxEvent }
	outboxEvent struct {
		webhook string
		ds      uint32
		ev      *storage.Event
	}
	configChanged struct{}
	wake          struct{ gen uint64 } // gen 0: not from the timer
	enqueued      struct{ items []queued }
	queued        struct {
		webhook string
		id      storage.ID
		nextAt  int64
	}
	attemptDone struct {
		ep         *endpoint
		item       *pendItem
		rec        deliveryRecord
		att        Attempt
		retryAfter time.Duration
		canceled   bool // the service is stopping: the attempt does not count
	}
	replayReq struct {
		webhook string
		id      storage.ID
		reply   chan replyDelivery
	}
	testReq struct {
		webhook string
		reply   chan replyDelivery
	}
	forgetReq struct {
		webhook string
		reply   chan error
	}
	// syncReq is answered once everything sent to the actor before it is handled.
	syncReq       struct{ done chan struct{} }
	replyDelivery struct {
		d   Delivery
		err error
	}
)
