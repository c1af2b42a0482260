package actors

import (
	"bytes"
	"container/heap"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/engine/metrics"
	"github.com/eventd/eventd/engine/ratelimit"
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

// Secret is one signing key of an endpoint: the decoded base64 part of its whsec_ text.
type Secret struct {
	Key       []byte
	ExpiresAt int64 // Unix ms after which it no longer signs; 0 never
}

// WebhookConfig is one endpoint as the shards and the webhook actor see it.
// The engine builds it and never changes a published one.
type WebhookConfig struct {
	ID            string
	Dataset       uint32
	URL           string
	Test          bool // test environment: loopback and private addresses are reachable
	EventCreated  bool
	GoalCompleted bool
	UsageAlert    bool
	EventNames    map[string]struct{} // nil: every event name
	Enabled       bool
	Secrets       []Secret
}

func (c *WebhookConfig) matches(name string) bool {
	if c.EventNames == nil {
		return true
	}
	_, ok := c.EventNames[name]
	return ok
}

// WebhookSet is an immutable snapshot of every endpoint, indexed for the shards.
type WebhookSet struct {
	byID   map[string]*WebhookConfig
	byDS   map[uint32][]*WebhookConfig
	events map[uint32][]*WebhookConfig // enabled endpoints that want event.created
}

// NewWebhookSet indexes endpoints; the configs must not change afterwards.
func NewWebhookSet(list []*WebhookConfig) *WebhookSet {
	s := &WebhookSet{byID: map[string]*WebhookConfig{}, byDS: map[uint32][]*WebhookConfig{}, events: map[uint32][]*WebhookConfig{}}
	for _, c := range list {
		s.byID[c.ID] = c
		s.byDS[c.Dataset] = append(s.byDS[c.Dataset], c)
		if c.Enabled && c.EventCreated {
			s.events[c.Dataset] = append(s.events[c.Dataset], c)
		}
	}
	return s
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

// deliveryRecord is a delivery as the log stores it (JSON under the D prefix).
type deliveryRecord struct {
	ID            string          `json:"id"`
	WebhookID     string          `json:"webhook_id"`
	Type          string          `json:"type"`
	Status        string          `json:"status"`
	CreatedAt     string          `json:"created_at"`
	EventCount    int             `json:"event_count,omitempty"`
	NextAttemptAt *string         `json:"next_attempt_at"`
	Attempts      []Attempt       `json:"attempts"`
	Test          bool            `json:"test,omitempty"` // a test send: one attempt, no retries
	Payload       json.RawMessage `json:"payload"`
}

// Delivery is one delivery as the admin API shows it: the last attempt's
// outcome in short, and every attempt in AttemptLog.
type Delivery struct {
	ID             string    `json:"id"`
	WebhookID      string    `json:"webhook_id"`
	Type           string    `json:"type"`
	Status         string    `json:"status"`
	Attempts       int       `json:"attempts"`
	ResponseStatus *int      `json:"response_status"`
	Error          *string   `json:"error"`
	CreatedAt      string    `json:"created_at"`
	LastAttemptAt  *string   `json:"last_attempt_at"`
	NextAttemptAt  *string   `json:"next_attempt_at"`
	EventCount     int       `json:"event_count,omitempty"`
	Test           bool      `json:"test,omitempty"`
	AttemptLog     []Attempt `json:"attempt_log"`
}

func (r *deliveryRecord) view() Delivery {
	d := Delivery{ID: r.ID, WebhookID: r.WebhookID, Type: r.Type, Status: r.Status, Attempts: len(r.Attempts),
		CreatedAt: r.CreatedAt, NextAttemptAt: r.NextAttemptAt, EventCount: r.EventCount, Test: r.Test, AttemptLog: r.Attempts}
	if d.AttemptLog == nil {
		d.AttemptLog = []Attempt{}
	}
	if n := len(r.Attempts); n > 0 {
		last := r.Attempts[n-1]
		d.LastAttemptAt = &last.At
		if last.Status != 0 {
			d.ResponseStatus = &last.Status
		}
		if last.Error != "" {
			d.Error = &last.Error
		}
	}
	return d
}

// Attempt is one HTTP request of a delivery.
type Attempt struct {
	At        string `json:"at"`
	Status    int    `json:"status"` // HTTP status; 0 when no response came
	LatencyMs int64  `json:"latency_ms"`
	Response  string `json:"response"` // first KiB of the response body
	Error     string `json:"error,omitempty"`
}

// DecodeDelivery reads a stored delivery record into its admin view.
func DecodeDelivery(rec []byte) (Delivery, error) {
	r, err := decodeRecord(rec)
	return r.view(), err
}

func decodeRecord(rec []byte) (deliveryRecord, error) {
	var r deliveryRecord
	err := json.Unmarshal(rec, &r)
	return r, err
}

// FormatMsgID renders a delivery id: "msg_" and 26 Crockford base32 characters.
func FormatMsgID(id storage.ID) string { return "msg_" + ids.FormatEvent(id)[len(ids.EventPrefix):] }

// ParseMsgID reads a delivery id.
func ParseMsgID(s string) (storage.ID, error) {
	rest, ok := strings.CutPrefix(s, "msg_")
	if !ok {
		return storage.ID{}, ids.ErrMalformed
	}
	return ids.ParseEvent(ids.EventPrefix + rest)
}

// SignWebhook computes the Standard Webhooks webhook-signature header: one
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per key, space-separated.
func SignWebhook(keys [][]byte, msgID, timestamp string, body []byte) string {
	var b strings.Builder
	for i, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(msgID))
		m.Write([]byte{'.'})
		m.Write([]byte(timestamp))
		m.Write([]byte{'.'})
		m.Write(body)
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	return b.String()
}

// GoalCompletion is one goal completion to announce as goal.completed.
type GoalCompletion struct {
	GoalID     string
	Name       string
	VisitorID  string
	HasVisitor bool
	EventID    storage.ID
}

// GoalCompletedData is the data of a goal.completed message, the same for
// a webhook delivery and a /stream message: {goal_id, name, visitor_id, event_id}.
func GoalCompletedData(c GoalCompletion) map[string]any {
	data := map[string]any{"goal_id": c.GoalID, "name": c.Name, "visitor_id": nil, "event_id": ids.FormatEvent(c.EventID)}
	if c.HasVisitor {
		data["visitor_id"] = c.VisitorID
	}
	return data
}

// UsageAlertData is the data of a usage.alert message, the same for a
// webhook delivery and a /stream message: {alert_id, key_id, window, limit, used, threshold}.
func UsageAlertData(u *UsageAlert) map[string]any {
	return map[string]any{"alert_id": u.AlertID, "key_id": u.KeyID, "window": u.Window, "limit": u.Limit,
		"used": u.Used, "threshold": u.Threshold}
}

// AlertRule is a usage alert as a key actor checks it.
type AlertRule struct {
	ID      string
	KeyID   string  // "" applies to every key of the project
	Window  string  // minute, hour or day
	Percent float64 // threshold in percent of the window's limit, in (0, 100]
}

// UsageAlert is a threshold crossing, reported by a key actor.
type UsageAlert struct {
	AlertID     string
	KeyID       string
	Dataset     uint32 // the key's dataset: its endpoints receive the alert
	Window      string
	Limit       int64
	Used        int64
	Threshold   float64
	PeriodStart int64 // Unix second where the window period began
	At          time.Time
}

// AlertFiring is what the store remembers of a fired alert.
type AlertFiring struct {
	AlertID     string  `json:"alert_id"`
	KeyID       string  `json:"key_id"`
	Window      string  `json:"window"`
	Limit       int64   `json:"limit"`
	Used        int64   `json:"used"`
	Threshold   float64 `json:"threshold"`
	PeriodStart string  `json:"period_start"`
	FiredAt     string  `json:"fired_at"`
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

// derivedID is a delivery id that is the same whenever the same thing is
// announced: ms as its time part, a hash of parts as the rest.
func derivedID(ms int64, parts ...string) storage.ID {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	id := storage.IDAt(ms)
	copy(id[6:], sum[:10])
	return id
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

// appendEnvelope writes {"id":..,"type":..,"created_at":..,"data": and leaves the object open.
func appendEnvelope(dst []byte, msg, kind string, ms int64) []byte {
	dst = append(dst, `{"id":`...)
	dst = event.AppendString(dst, msg)
	dst = append(dst, `,"type":`...)
	dst = event.AppendString(dst, kind)
	dst = append(dst, `,"created_at":"`...)
	dst = event.AppendTime(dst, ms)
	return append(dst, `","data":`...)
}

// appendEventJSON renders an event as GET /events/{id} does.
func appendEventJSON(dst []byte, e *storage.Event) []byte {
	dst = append(dst, `{"id":"`...)
	dst = ids.AppendEvent(dst, e.ID)
	dst = append(dst, `","event":`...)
	dst = event.AppendString(dst, e.Name)
	if e.HasVisitor {
		dst = append(dst, `,"visitor_id":`...)
		dst = event.AppendString(dst, e.VisitorID)
	}
	dst = append(dst, `,"properties":`...)
	if len(e.Properties) == 0 {
		dst = append(dst, `{}`...)
	} else {
		dst = append(dst, e.Properties...)
	}
	dst = append(dst, `,"timestamp":"`...)
	dst = event.AppendTime(dst, e.Timestamp)
	dst = append(dst, `","created_at":"`...)
	dst = event.AppendTime(dst, e.CreatedAt)
	return append(dst, `"}`...)
}

func msText(ms int64) string { return string(event.AppendTime(nil, ms)) }

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

// pendItem is a delivery waiting for, or in, an attempt.
type pendItem struct {
	id       storage.ID
	nextAt   int64
	step     uint8
	index    int // in the endpoint's heap; -1 when not queued
	inflight bool
	test     chan replyDelivery // test deliveries: told of their single attempt
}

type pendHeap []*pendItem

func (h pendHeap) Len() int { return len(h) }
func (h pendHeap) Less(i, j int) bool {
	if h[i].nextAt != h[j].nextAt {
		return h[i].nextAt < h[j].nextAt
	}
	return bytes.Compare(h[i].id[:], h[j].id[:]) < 0
}
func (h pendHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *pendHeap) Push(x any)   { it := x.(*pendItem); it.index = len(*h); *h = append(*h, it) }
func (h *pendHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	it.index = -1
	return it
}

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
		body = appendEventJSON(body, e.ev)
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

// send makes one signed request; it follows no redirect.
func (w *Webhooks) send(client *http.Client, url string, keys [][]byte, msgID string, body []byte, now time.Time) (Attempt, time.Duration) {
	att := Attempt{At: msText(now.UnixMilli())}
	req, err := http.NewRequestWithContext(w.ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		att.Error = err.Error()
		return att, 0
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	// Lower-case names, as the Standard Webhooks spec writes them.
	req.Header["webhook-id"] = []string{msgID}
	req.Header["webhook-timestamp"] = []string{ts}
	req.Header["webhook-signature"] = []string{SignWebhook(keys, msgID, ts, body)}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "eventd-webhooks/1")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		att.LatencyMs = time.Since(start).Milliseconds()
		att.Error = sendError(err)
		w.latency.Observe(time.Since(start).Seconds())
		return att, 0
	}
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, responseExcerpt))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	_ = resp.Body.Close()
	att.LatencyMs = time.Since(start).Milliseconds()
	w.latency.Observe(time.Since(start).Seconds())
	att.Status = resp.StatusCode
	att.Response = strings.ToValidUTF8(string(excerpt), "\uFFFD")
	return att, parseRetryAfter(resp.Header.Get("Retry-After"), now)
}

// sendError keeps the useful part of a client error for the log.
func sendError(err error) string {
	var ue interface{ Unwrap() error }
	msg := err.Error()
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			msg = inner.Error()
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(msg, "Client.Timeout") {
		return "timeout"
	}
	return msg
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or unusable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return min(time.Duration(n)*time.Second, maxRetryAfter)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
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
	body = append(appendEventJSON(body, &sample), "]}}"...)
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

// GoalAnnouncer is a GoalSource that also announces completions as
// goal.completed webhooks; the engine's source does.
type GoalAnnouncer interface {
	AnnounceGoals(ds uint32, cs []GoalCompletion) error
}

// announceGoals hands an evaluation's new completions to the source's
// announcer. The goals actor calls it before RecordGoals moves the cursor
// past them: if the process dies in between, catch-up finds them again and
// the repeated announcement is a no-op (delivery ids derive from endpoint,
// goal and event); the other order could lose the webhook.
func (g *goalsActor) announceGoals(completions map[uint32][]storage.Completion) error {
	an, ok := g.src.(GoalAnnouncer)
	if !ok {
		return nil
	}
	for ds, cs := range completions {
		names := map[string]string{}
		for _, goal := range g.src.Goals(ds) {
			names[goal.ID] = goal.Spec.Name
		}
		out := make([]GoalCompletion, 0, len(cs))
		for _, c := range cs {
			out = append(out, GoalCompletion{GoalID: c.Goal, Name: names[c.Goal], VisitorID: c.Visitor,
				HasVisitor: c.HasVisitor, EventID: c.ID})
		}
		if err := an.AnnounceGoals(ds, out); err != nil {
			return err
		}
	}
	return nil
}

// SetWebhooks makes the shards write outbox entries for endpoints of w; call it before traffic.
func (s *Shards) SetWebhooks(w *Webhooks) {
	for _, sh := range s.shards {
		sh.hooks = w
	}
}

// addOutbox writes the outbox entries of one event into the open batch.
func (s *shard) addOutbox(routes []*WebhookConfig, ds uint32, e *storage.Event) {
	for _, r := range routes {
		if r.matches(e.Name) {
			s.batch.AddOutbox(r.ID, ds, e.ID)
			s.outbox = append(s.outbox, outboxEvent{webhook: r.ID, ds: ds, ev: e})
		}
	}
}

// sendOutbox tells the webhook actor of the outbox entries just committed;
// after a failed commit they do not exist and are dropped.
func (s *shard) sendOutbox(failed bool) {
	if len(s.outbox) == 0 {
		return
	}
	if failed {
		clear(s.outbox)
		s.outbox = s.outbox[:0]
		return
	}
	s.system.Root.Send(s.hooks.pid, &outboxAdded{entries: s.outbox})
	s.outbox = nil
}

// checkAlerts fires each usage alert whose threshold the standard bucket's
// windows reach, at most once per rule and window period (UTC-aligned
// minute, hour or day). ws is the bucket's status after the admitted request.
func (k *keyActor) checkAlerts(now time.Time, ws []ratelimit.WindowStatus) {
	rules := k.cfg.Alerts()
	if len(rules) == 0 {
		return
	}
	for i := range rules {
		r := &rules[i]
		if r.KeyID != "" && r.KeyID != k.cfg.ID {
			continue
		}
		for _, w := range ws {
			if w.Name != r.Window || w.Limit <= 0 {
				continue
			}
			used := w.Limit - w.Remaining
			if float64(used)*100 < float64(w.Limit)*r.Percent {
				break
			}
			sec := now.Unix()
			period := sec - ((sec%w.Seconds)+w.Seconds)%w.Seconds
			if k.fired == nil {
				k.fired = map[string]int64{}
			}
			if last, ok := k.fired[r.ID]; ok && last == period {
				break
			}
			k.fired[r.ID] = period
			k.cfg.OnAlert(UsageAlert{AlertID: r.ID, KeyID: k.cfg.ID, Window: r.Window, Limit: w.Limit, Used: used,
				Threshold: r.Percent, PeriodStart: period, At: now})
			break
		}
	}
}

// WebhookAddrAllowed is the SSRF guard: may an endpoint reach addr? Live
// endpoints reach public addresses only, unless allowPrivate; test
// endpoints also reach loopback and private networks (RFC 1918, ULA, shared
// 100.64/10). Unspecified, broadcast and multicast addresses are never
// reachable; link-local (cloud metadata) and the other special-purpose ranges
// (see publicAddr) only with allowPrivate.
func WebhookAddrAllowed(addr netip.Addr, test, allowPrivate bool) bool {
	addr = addr.Unmap()
	if !addr.IsValid() || addr.IsUnspecified() || addr.IsMulticast() || addr.IsInterfaceLocalMulticast() {
		return false
	}
	if addr.Is4() && (addr.As4()[0] == 0 || addr == netip.AddrFrom4([4]byte{255, 255, 255, 255})) {
		return false
	}
	if publicAddr(addr) {
		return true
	}
	if allowPrivate {
		return true
	}
	if test && !addr.IsLinkLocalUnicast() {
		return addr.IsLoopback() || addr.IsPrivate() || cgnat.Contains(addr)
	}
	return false
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// publicAddr reports a globally reachable unicast address. The special
// ranges come from code.dny.dev/ssrf, generated from the IANA special-purpose
// registries: IPv4 private, shared, loopback, link-local, documentation,
// benchmarking, 6to4-relay anycast, AS112, reserved and multicast ranges; for
// IPv6 everything outside 2000::/3 (so ::/96 IPv4-compatible addresses such
// as ::127.0.0.1, NAT64, ULA and link-local) plus the special ranges inside
// it (2001::/23 with Teredo, 6to4 2002::/16, documentation).
func publicAddr(a netip.Addr) bool {
	if a.Is4() {
		for _, p := range ssrf.IPv4DeniedPrefixes {
			if p.Contains(a) {
				return false
			}
		}
		return true
	}
	if !ssrf.IPv6GlobalUnicast.Contains(a) {
		return false
	}
	for _, p := range ssrf.IPv6DeniedPrefixes {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// errBlockedAddr refuses a connection to an address the SSRF guard forbids.
var errBlockedAddr = errors.New("address not allowed for webhooks")

// newWebhookClient checks every address at dial time, after DNS resolution,
// so a hostname that resolves (or re-resolves) to a private address is
// refused; it uses no proxy and follows no redirect.
func newWebhookClient(timeout time.Duration, allowed func(netip.Addr) bool) *http.Client {
	dialer := &net.Dialer{
		Timeout: timeout,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s", errBlockedAddr, address)
			}
			if !allowed(ap.Addr()) {
				return fmt.Errorf("%w: %s", errBlockedAddr, ap.Addr())
			}
			return nil
		},
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   DefaultWebhookConcurrency,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
