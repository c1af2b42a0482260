package engine

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/engine/ids"
	"github.com/eventd/eventd/storage"
)

// Config record kinds of webhooks and usage alerts.
const (
	kindWebhook = "webhook"
	kindAlert   = "alert"
)

// Limits on webhook configuration.
const (
	maxWebhooksPerProject = 50
	maxWebhookURL         = 2048
	maxEventNameFilters   = 100
	// SecretOverlap is how long a rotated-out secret keeps signing next to the new one.
	SecretOverlap = 24 * time.Hour
	// testSendWait bounds how long POST .../test waits for its attempt (10 s timeout and a margin).
	testSendWait = 12 * time.Second
)

// WebhookKinds are the delivery types an endpoint can subscribe to.
var WebhookKinds = []string{actors.KindEventCreated, actors.KindGoalCompleted, actors.KindUsageAlert}

// hookState is the engine's side of webhooks and usage alerts.
type hookState struct {
	wh *actors.Webhooks // set in Open before any request

	mu       sync.RWMutex // guards the maps; writers also hold Engine.adminMu
	webhooks map[string]*webhookRecord
	alerts   map[string]*alertRecord
	rules    atomic.Pointer[map[string][]actors.AlertRule] // by project, read by key actors
}

func newHookState() *hookState {
	h := &hookState{webhooks: map[string]*webhookRecord{}, alerts: map[string]*alertRecord{}}
	h.rules.Store(&map[string][]actors.AlertRule{})
	return h
}

// webhookRecord is the stored form of an endpoint. Secrets are kept in clear:
// signing needs them, unlike API keys which are only ever compared.
type webhookRecord struct {
	ID             string         `json:"id"`
	ProjectID      string         `json:"project_id"`
	URL            string         `json:"url"`
	Environment    string         `json:"environment"`
	Kinds          []string       `json:"kinds"`
	EventNames     []string       `json:"event_names,omitempty"`
	Enabled        bool           `json:"enabled"`
	DisabledReason string         `json:"disabled_reason,omitempty"`
	Secrets        []secretRecord `json:"secrets"` // newest first
	CreatedAt      string         `json:"created_at"`
	UpdatedAt      string         `json:"updated_at"`
}

type secretRecord struct {
	Secret    string `json:"secret"`
	ExpiresAt int64  `json:"expires_at,omitempty"` // Unix ms; 0 never
}

// Webhook is an endpoint as the admin API shows it; the secret is never shown again.
type Webhook struct {
	ID             string   `json:"id"`
	URL            string   `json:"url"`
	Environment    string   `json:"environment"`
	Kinds          []string `json:"kinds"`
	EventNames     []string `json:"event_names"`
	Enabled        bool     `json:"enabled"`
	DisabledReason *string  `json:"disabled_reason"`
	CreatedAt      string   `json:"created_at"`
	UpdatedAt      string   `json:"updated_at"`
}

// CreatedWebhook is a new endpoint with its signing secret, shown only once.
type CreatedWebhook struct {
	Webhook
	Secret string `json:"secret"`
}

// RotatedSecret is the answer to a rotation: the new secret, shown once.
type RotatedSecret struct {
	ID                      string `json:"id"`
	Secret                  string `json:"secret"`
	PreviousSecretExpiresAt string `json:"previous_secret_expires_at"`
}

// WebhookInput is the body of webhook create and update; nil fields are unchanged.
type WebhookInput struct {
	URL         *string   `json:"url"`
	Environment *string   `json:"environment"`
	Kinds       *[]string `json:"kinds"`
	EventNames  *[]string `json:"event_names"`
	Enabled     *bool     `json:"enabled"`
}

func (r *webhookRecord) view() Webhook {
	w := Webhook{ID: r.ID, URL: r.URL, Environment: r.Environment, Kinds: r.Kinds, EventNames: r.EventNames,
		Enabled: r.Enabled, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if w.EventNames == nil {
		w.EventNames = []string{}
	}
	if r.DisabledReason != "" {
		reason := r.DisabledReason
		w.DisabledReason = &reason
	}
	return w
}

func newWebhookSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return "whsec_" + base64.StdEncoding.EncodeToString(b[:])
}

// validEventName is the contract's rule for event names: 1-128 of [A-Za-z0-9_].
func validEventName(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// checkWebhook validates the record an input would produce.
func (e *Engine) checkWebhook(r *webhookRecord) error {
	d := map[string]string{}
	if msg := e.checkWebhookURL(r.URL, r.Environment); msg != "" {
		d["url"] = msg
	}
	if r.Environment != Live && r.Environment != Test {
		d["environment"] = "must be live or test"
	}
	if len(r.Kinds) == 0 {
		d["kinds"] = "must list at least one of event.created, goal.completed, usage.alert"
	}
	for _, k := range r.Kinds {
		if !slices.Contains(WebhookKinds, k) {
			d["kinds"] = "each kind must be one of event.created, goal.completed, usage.alert"
		}
	}
	if len(r.EventNames) > maxEventNameFilters {
		d["event_names"] = "at most 100 event names"
	}
	for _, n := range r.EventNames {
		if !validEventName(n) {
			d["event_names"] = "each event name must be 1-128 characters of A-Z, a-z, 0-9 and _"
		}
	}
	if len(d) > 0 {
		return &InputError{Details: d}
	}
	return nil
}

// checkWebhookURL refuses what can never be delivered; addresses behind a
// hostname are checked again at every connection.
func (e *Engine) checkWebhookURL(raw, env string) string {
	if raw == "" {
		return "is required"
	}
	if len(raw) > maxWebhookURL {
		return "must be at most 2048 characters"
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Opaque != "" {
		return "must be an absolute http or https URL"
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	a, err := netip.ParseAddr(host)
	if err != nil && numericHost(host) {
		return "host must be a DNS name or an IP address in standard form (numeric forms such as 2130706433, 0x7f.1 or 0177.0.0.1 are refused)"
	}
	private := ""
	if err == nil {
		if !actors.WebhookAddrAllowed(a, env == Test, e.cfg.WebhooksAllowPrivate) {
			private = "x"
		}
	} else if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		if env != Test && !e.cfg.WebhooksAllowPrivate {
			private = "x"
		}
	}
	if private != "" {
		if env == Test {
			return "this address can never be reached (unspecified, multicast, link-local or another special-purpose range)"
		}
		return "live webhooks may only reach public addresses (start eventd with --webhooks-allow-private to allow others)"
	}
	return ""
}

// numericHost reports a host name that URL parsers and resolvers disagree
// on: one whose last label is a number (decimal, 0x hex or octal), which the
// WHATWG URL standard, curl and getaddrinfo read as an IPv4 address in a
// legacy form (2130706433, 0x7f.1, 0177.0.0.1, 127.1 are all 127.0.0.1). No
// real top-level domain is numeric, so refusing them costs nothing and keeps
// the guard's view of the host the same as the dialer's.
func numericHost(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if h, ok := strings.CutPrefix(last, "0x"); ok {
		last = strings.TrimLeft(h, "0123456789abcdef")
		return last == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

// normaliseKinds keeps the documented order and drops repeats.
func normaliseKinds(in []string) []string {
	out := []string{}
	for _, k := range WebhookKinds {
		if slices.Contains(in, k) {
			out = append(out, k)
		}
	}
	for _, k := range in {
		if !slices.Contains(WebhookKinds, k) {
			out = append(out, k) // kept so validation reports it
		}
	}
	return out
}

func uniqueSorted(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := slices.Clone(in)
	sort.Strings(out)
	return slices.Compact(out)
}

// applyTo sets the fields the input carries; absent ones stay as they are.
// Enabling clears why an endpoint was disabled.
func (in *WebhookInput) applyTo(r *webhookRecord) {
	if in.URL != nil {
		r.URL = *in.URL
	}
	if in.Environment != nil {
		r.Environment = *in.Environment
	}
	if in.Kinds != nil {
		r.Kinds = normaliseKinds(*in.Kinds)
	}
	if in.EventNames != nil {
		r.EventNames = uniqueSorted(*in.EventNames)
	}
	if in.Enabled != nil {
		r.Enabled = *in.Enabled
		if r.Enabled {
			r.DisabledReason = ""
		}
	}
}

// CreateWebhook adds an endpoint; its secret is in the answer and nowhere else.
func (e *Engine) CreateWebhook(projectID string, in WebhookInput) (CreatedWebhook, error) {
	now := nowText()
	r := &webhookRecord{ID: ids.Random("wh_", 16), ProjectID: projectID, Environment: Live, Enabled: true,
		CreatedAt: now, UpdatedAt: now}
	in.applyTo(r)
	if err := e.checkWebhook(r); err != nil {
		return CreatedWebhook{}, err
	}
	r.Secrets = []secretRecord{{Secret: newWebhookSecret()}}
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if _, err := e.project(projectID); err != nil {
		return CreatedWebhook{}, err
	}
	if len(e.webhooksOf(projectID)) >= maxWebhooksPerProject {
		return CreatedWebhook{}, invalid("url", "a project can have at most 50 webhooks")
	}
	if err := e.putJSON(kindWebhook, r.ID, r); err != nil {
		return CreatedWebhook{}, err
	}
	e.hooks.mu.Lock()
	e.hooks.webhooks[r.ID] = r
	e.hooks.mu.Unlock()
	e.publishWebhooks()
	return CreatedWebhook{Webhook: r.view(), Secret: r.Secrets[0].Secret}, nil
}

// webhooksOf lists a project's endpoint records, oldest first.
func (e *Engine) webhooksOf(projectID string) []*webhookRecord {
	e.hooks.mu.RLock()
	defer e.hooks.mu.RUnlock()
	return ofProject(e.hooks.webhooks, projectID)
}

// webhook finds an endpoint of a project; another project's is not found.
func (e *Engine) webhook(projectID, id string) (*webhookRecord, error) {
	if _, err := e.project(projectID); err != nil {
		return nil, err
	}
	e.hooks.mu.RLock()
	r := e.hooks.webhooks[id]
	e.hooks.mu.RUnlock()
	if r == nil || r.ProjectID != projectID {
		return nil, ErrNotFound
	}
	return r, nil
}

// Webhooks lists a project's endpoints, oldest first.
func (e *Engine) Webhooks(projectID string) ([]Webhook, error) {
	if _, err := e.project(projectID); err != nil {
		return nil, err
	}
	recs := e.webhooksOf(projectID)
	out := make([]Webhook, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.view())
	}
	return out, nil
}

// GetWebhook reads one endpoint.
func (e *Engine) GetWebhook(projectID, id string) (Webhook, error) {
	r, err := e.webhook(projectID, id)
	if err != nil {
		return Webhook{}, err
	}
	return r.view(), nil
}

// UpdateWebhook changes url, environment, kinds, event names or the enabled
// flag; enabling clears the reason it was disabled, and deliveries held
// while it was disabled resume.
func (e *Engine) UpdateWebhook(projectID, id string, in WebhookInput) (Webhook, error) {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	old, err := e.webhook(projectID, id)
	if err != nil {
		return Webhook{}, err
	}
	r := *old
	in.applyTo(&r)
	if in.Enabled != nil && !r.Enabled && old.Enabled {
		r.DisabledReason = "disabled through the admin API"
	}
	if err := e.checkWebhook(&r); err != nil {
		return Webhook{}, err
	}
	r.UpdatedAt = nowText()
	if err := e.putJSON(kindWebhook, r.ID, &r); err != nil {
		return Webhook{}, err
	}
	e.hooks.mu.Lock()
	e.hooks.webhooks[r.ID] = &r
	e.hooks.mu.Unlock()
	e.publishWebhooks()
	return r.view(), nil
}

// DeleteWebhook removes an endpoint with its pending deliveries and log.
func (e *Engine) DeleteWebhook(projectID, id string) error {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	if _, err := e.webhook(projectID, id); err != nil {
		return err
	}
	if err := e.db.DeleteConfig(kindWebhook, id); err != nil {
		return err
	}
	e.hooks.mu.Lock()
	delete(e.hooks.webhooks, id)
	e.hooks.mu.Unlock()
	e.publishWebhooks()
	return e.hooks.wh.Forget(id)
}

// RotateWebhookSecret makes a new secret; the ones in use keep signing for
// SecretOverlap, so receivers can switch without missing a delivery.
func (e *Engine) RotateWebhookSecret(projectID, id string) (RotatedSecret, error) {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	old, err := e.webhook(projectID, id)
	if err != nil {
		return RotatedSecret{}, err
	}
	now := time.Now()
	expires := now.Add(SecretOverlap).UnixMilli()
	r := *old
	r.Secrets = []secretRecord{{Secret: newWebhookSecret()}}
	for _, s := range old.Secrets {
		switch {
		case s.ExpiresAt == 0:
			s.ExpiresAt = expires
		case s.ExpiresAt <= now.UnixMilli():
			continue // expired: forget it
		}
		r.Secrets = append(r.Secrets, s)
	}
	r.UpdatedAt = msText(now.UnixMilli())
	if err := e.putJSON(kindWebhook, r.ID, &r); err != nil {
		return RotatedSecret{}, err
	}
	e.hooks.mu.Lock()
	e.hooks.webhooks[r.ID] = &r
	e.hooks.mu.Unlock()
	e.publishWebhooks()
	return RotatedSecret{ID: r.ID, Secret: r.Secrets[0].Secret, PreviousSecretExpiresAt: msText(expires)}, nil
}

// disableGone is the webhook actor's OnGone: the receiver said 410 Gone.
func (e *Engine) disableGone(id string) {
	e.adminMu.Lock()
	defer e.adminMu.Unlock()
	e.hooks.mu.RLock()
	old := e.hooks.webhooks[id]
	e.hooks.mu.RUnlock()
	if old == nil || !old.Enabled {
		return
	}
	r := *old
	r.Enabled = false
	r.DisabledReason = "the endpoint answered 410 Gone at " + nowText()
	r.UpdatedAt = nowText()
	if err := e.putJSON(kindWebhook, r.ID, &r); err != nil {
		e.log.Error("disable webhook", "webhook", id, "err", err)
		return
	}
	e.hooks.mu.Lock()
	e.hooks.webhooks[r.ID] = &r
	e.hooks.mu.Unlock()
	e.publishWebhooks()
	e.log.Warn("webhook disabled: the endpoint answered 410 Gone", "webhook", id, "url", r.URL)
}

// forgetProjectHooks deletes a project's webhooks (with their queues and
// logs) and usage alerts (with their firings). DeleteProject calls it while
// holding adminMu.
func (e *Engine) forgetProjectHooks(projectID string) error {
	hooks := e.webhooksOf(projectID)
	alerts := e.alertsOf(projectID)
	e.hooks.mu.Lock()
	for _, r := range hooks {
		delete(e.hooks.webhooks, r.ID)
	}
	for _, r := range alerts {
		delete(e.hooks.alerts, r.ID)
	}
	e.hooks.mu.Unlock()
	e.publishWebhooks()
	e.publishAlerts()
	for _, r := range hooks {
		if err := e.db.DeleteConfig(kindWebhook, r.ID); err != nil {
			return err
		}
		if e.hooks.wh != nil {
			if err := e.hooks.wh.Forget(r.ID); err != nil {
				return err
			}
		}
	}
	for _, r := range alerts {
		if err := e.db.DeleteConfig(kindAlert, r.ID); err != nil {
			return err
		}
		if err := e.db.DeleteAlertFirings(r.ID); err != nil {
			return err
		}
	}
	return nil
}

// webhookSet builds the snapshot the shards and the webhook actor use.
func (e *Engine) webhookSet() *actors.WebhookSet {
	e.hooks.mu.RLock()
	recs := make([]*webhookRecord, 0, len(e.hooks.webhooks))
	for _, r := range e.hooks.webhooks {
		recs = append(recs, r)
	}
	e.hooks.mu.RUnlock()
	list := make([]*actors.WebhookConfig, 0, len(recs))
	for _, r := range recs {
		ps, err := e.project(r.ProjectID)
		if err != nil {
			continue // the project is gone
		}
		ds := ps.rec.Load().Datasets[0]
		if r.Environment == Test {
			ds = ps.rec.Load().Datasets[1]
		}
		c := &actors.WebhookConfig{ID: r.ID, Dataset: ds, URL: r.URL, Test: r.Environment == Test, Enabled: r.Enabled,
			EventCreated:  slices.Contains(r.Kinds, actors.KindEventCreated),
			GoalCompleted: slices.Contains(r.Kinds, actors.KindGoalCompleted),
			UsageAlert:    slices.Contains(r.Kinds, actors.KindUsageAlert)}
		if len(r.EventNames) > 0 {
			c.EventNames = make(map[string]struct{}, len(r.EventNames))
			for _, n := range r.EventNames {
				c.EventNames[n] = struct{}{}
			}
		}
		for _, s := range r.Secrets {
			key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s.Secret, "whsec_"))
			if err == nil {
				c.Secrets = append(c.Secrets, actors.Secret{Key: key, ExpiresAt: s.ExpiresAt})
			}
		}
		list = append(list, c)
	}
	return actors.NewWebhookSet(list)
}

func (e *Engine) publishWebhooks() {
	if e.hooks.wh != nil {
		e.hooks.wh.SetConfig(e.webhookSet())
	}
}

// loadHooks reads webhook and alert records; records of deleted projects are dropped.
func (e *Engine) loadHooks() error {
	var orphans []string
	err := e.db.ScanConfig(kindWebhook, func(id string, v []byte) error {
		var r webhookRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		if e.projects[r.ProjectID] == nil {
			orphans = append(orphans, id)
			return nil
		}
		e.hooks.webhooks[r.ID] = &r
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range orphans {
		if err := e.db.DeleteConfig(kindWebhook, id); err != nil {
			return err
		}
		if err := e.db.DeleteWebhookData(id); err != nil {
			return err
		}
	}
	return e.loadAlerts()
}

// startWebhooks loads webhook and alert records and spawns the webhook
// actor; the shards are connected to it as soon as they exist.
func (e *Engine) startWebhooks() error {
	if err := e.loadHooks(); err != nil {
		return err
	}
	wh, err := actors.NewWebhooks(e.system, e.db, actors.WebhookOptions{
		Set:          e.webhookSet(),
		AllowPrivate: e.cfg.WebhooksAllowPrivate,
		OnGone:       e.disableGone,
		OnAlertFired: func(u actors.UsageAlert) {
			e.publishNotice(u.Dataset, actors.KindUsageAlert, actors.UsageAlertData(&u), "", false)
		},
		Metrics: e.metrics,
		Logger:  e.log,
	})
	if err != nil {
		return err
	}
	e.hooks.wh = wh
	return nil
}

// stopWebhooks stops the webhook actor; it must run before the store closes.
func (e *Engine) stopWebhooks() {
	if e.hooks.wh != nil {
		e.hooks.wh.Stop()
	}
}

// DeliveryPage is one page of a webhook's delivery log, newest first.
type DeliveryPage struct {
	Data       []actors.Delivery `json:"data"`
	Pagination Pagination        `json:"pagination"`
}

// Pagination describes an offset page, as GET /events does.
type Pagination struct {
	Total   int  `json:"total"`
	Limit   int  `json:"limit"`
	Offset  int  `json:"offset"`
	HasMore bool `json:"has_more"`
}

// Deliveries lists an endpoint's delivery log, newest first: limit (1-100)
// deliveries from offset, with status pending, succeeded, failed or "" for
// all. The log is bounded by its retention, so counting it is a scan.
func (e *Engine) Deliveries(projectID, webhookID string, limit, offset int, status string) (DeliveryPage, error) {
	if _, err := e.webhook(projectID, webhookID); err != nil {
		return DeliveryPage{}, err
	}
	d := map[string]string{}
	if limit < 1 || limit > 100 {
		d["limit"] = "must be an integer from 1 to 100"
	}
	if offset < 0 {
		d["offset"] = "must be an integer >= 0"
	}
	if status != "" && status != actors.DeliveryPending && status != actors.DeliverySucceeded && status != actors.DeliveryFailed {
		d["status"] = "must be pending, succeeded or failed"
	}
	if len(d) > 0 {
		return DeliveryPage{}, &InputError{Details: d}
	}
	page := DeliveryPage{Data: []actors.Delivery{}, Pagination: Pagination{Limit: limit, Offset: offset}}
	var decodeErr error
	n := 0
	err := e.db.ScanDeliveries(webhookID, nil, func(_ storage.ID, rec []byte) bool {
		inPage := n >= offset && n < offset+limit
		if status == "" && !inPage {
			n++
			return true
		}
		dl, err := actors.DecodeDelivery(rec)
		if err != nil {
			decodeErr = err
			return false
		}
		if status != "" && dl.Status != status {
			return true
		}
		if n >= offset && n < offset+limit {
			page.Data = append(page.Data, dl)
		}
		n++
		return true
	})
	if err == nil {
		err = decodeErr
	}
	page.Pagination.Total = n
	page.Pagination.HasMore = offset+len(page.Data) < n
	return page, err
}

// ReplayDelivery sends a delivery again now, with a fresh retry schedule
// and the same webhook-id; ErrConflict while an attempt is under way.
func (e *Engine) ReplayDelivery(projectID, webhookID, deliveryID string) (actors.Delivery, error) {
	if _, err := e.webhook(projectID, webhookID); err != nil {
		return actors.Delivery{}, err
	}
	id, err := actors.ParseMsgID(deliveryID)
	if err != nil {
		return actors.Delivery{}, ErrNotFound
	}
	d, err := e.hooks.wh.Replay(webhookID, id)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return d, ErrNotFound
	case errors.Is(err, actors.ErrDeliveryBusy):
		return d, ErrConflict
	}
	return d, err
}

// TestWebhook sends an event.created delivery with a sample event now, without retries, and waits
// for its attempt; finished is false if it took longer than the wait.
func (e *Engine) TestWebhook(projectID, webhookID string) (d actors.Delivery, finished bool, err error) {
	if _, err := e.webhook(projectID, webhookID); err != nil {
		return d, false, err
	}
	d, finished, err = e.hooks.wh.Test(webhookID, testSendWait)
	if errors.Is(err, storage.ErrNotFound) {
		err = ErrNotFound
	}
	return d, finished, err
}

// goalHooks is the goals actor's goal source with goal.completed announcements (actors.GoalAnnouncer).
type goalHooks struct {
	*analyticsState
	hooks *hookState
	e     *Engine
}

// AnnounceGoals hands new completions to /stream subscribers and queues
// goal.completed deliveries for them.
func (g goalHooks) AnnounceGoals(ds uint32, cs []actors.GoalCompletion) error {
	for _, c := range cs {
		g.e.publishNotice(ds, actors.KindGoalCompleted, actors.GoalCompletedData(c), c.VisitorID, c.HasVisitor)
	}
	if g.hooks.wh == nil {
		return nil
	}
	return g.hooks.wh.EnqueueGoalCompleted(ds, cs...)
}

// EnqueueGoalCompleted durably queues goal.completed deliveries for the
// enabled endpoints of dataset ds that subscribe to them. It is idempotent
// per (endpoint, goal, event), so call it for every completion found
// before the evaluation cursor that covers it is saved; a re-evaluation
// after a crash then announces nothing twice. One call is one fsync.
func (e *Engine) EnqueueGoalCompleted(ds uint32, cs ...actors.GoalCompletion) error {
	if e.hooks.wh == nil {
		return nil
	}
	return e.hooks.wh.EnqueueGoalCompleted(ds, cs...)
}

// publishNotice hands a goal.completed or usage.alert message to the
// dataset's /stream subscribers that asked for the kind: live only, never
// stored (docs/decisions.md). Nothing is published once Close began: the
// broadcaster is stopping.
func (e *Engine) publishNotice(ds uint32, kind string, data map[string]any, visitor string, hasVisitor bool) {
	select {
	case <-e.stop:
		return
	default:
	}
	e.system.Root.Send(e.bcast, &actors.Notice{Dataset: ds, Kind: kind, VisitorID: visitor, HasVisitor: hasVisitor,
		Payload: NoticePayload(kind, time.Now(), data)})
}

// NoticePayload is the /stream message of a goal.completed or usage.alert:
// {"type":kind,"created_at":"...","data":{...}}, the data as in the webhook body.
func NoticePayload(kind string, at time.Time, data map[string]any) []byte {
	b := append([]byte(`{"type":`), event.AppendString(nil, kind)...)
	b = append(b, `,"created_at":"`...)
	b = event.AppendTime(b, at.UnixMilli())
	b = append(b, `","data":`...)
	d, _ := json.Marshal(data) // strings, numbers and null: cannot fail
	b = append(b, d...)
	return append(b, '}')
}

func (r *webhookRecord) owner() string                 { return r.ProjectID }
func (r *webhookRecord) order() (createdAt, id string) { return r.CreatedAt, r.ID }
