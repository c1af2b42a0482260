package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// MaxBatch is the server's limit of events per batch request.
const MaxBatch = 100

// Event is an event to send.
type Event struct {
	Name       string         // event name: 1-128 letters, digits and underscores
	VisitorID  string         // optional
	Properties map[string]any // optional, free-form; "amount", when present, must be a positive number
	// Timestamp is when it happened; zero means "when the server receives it"
	// for Track and TrackBatch, and "when Enqueue was called" for Enqueue.
	Timestamp time.Time
	// IdempotencyKey makes retries safe; empty means the client generates one.
	// Set your own (an order id, say) to make your own retries safe too.
	IdempotencyKey string
}

// wireEvent is Event as a batch entry; the single route takes the key as a header instead.
type wireEvent struct {
	Event          string         `json:"event"`
	VisitorID      string         `json:"visitor_id,omitempty"`
	Properties     map[string]any `json:"properties,omitempty"`
	Timestamp      string         `json:"timestamp,omitempty"`
	IdempotencyKey string         `json:"idempotency_key,omitempty"`
}

func (e *Event) wire(withKey bool) wireEvent {
	w := wireEvent{Event: e.Name, VisitorID: e.VisitorID, Properties: e.Properties}
	if !e.Timestamp.IsZero() {
		w.Timestamp = e.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	if withKey {
		w.IdempotencyKey = e.IdempotencyKey
	}
	return w
}

// Created is the answer to Track.
type Created struct {
	ID        string    `json:"id"`
	Name      string    `json:"event"`
	Status    string    `json:"status"` // "accepted"
	Timestamp time.Time `json:"timestamp"`
	// Replayed is true when the idempotency key had been used before: nothing
	// new was stored and ID is the original event's.
	Replayed bool `json:"-"`
}

// BatchResult is the answer to TrackBatch.
type BatchResult struct {
	Accepted int         `json:"accepted"`
	Rejected int         `json:"rejected"`
	Results  []BatchItem `json:"results"` // one per event, in input order
}

// BatchItem is the outcome of one batch entry.
type BatchItem struct {
	ID      string            `json:"id"`     // set when accepted
	Status  string            `json:"status"` // "accepted" or "rejected"
	Code    string            `json:"error"`  // set when rejected
	Message string            `json:"message"`
	Details map[string]string `json:"details"`
}

// Err is nil for an accepted entry and the rejection as an *Error otherwise.
func (it BatchItem) Err() error {
	if it.Status != "rejected" {
		return nil
	}
	status := http.StatusBadRequest
	switch it.Code {
	case "validation_error":
		status = http.StatusUnprocessableEntity
	case "idempotency_conflict":
		status = http.StatusConflict
	}
	return &Error{Status: status, Code: it.Code, Message: it.Message, Details: it.Details}
}

// StoredEvent is an event as the server returns it. List leaves Properties
// and CreatedAt empty; Get and Stream fill them.
type StoredEvent struct {
	ID         string         `json:"id"`
	Name       string         `json:"event"`
	VisitorID  string         `json:"visitor_id"`
	Properties map[string]any `json:"properties"`
	Timestamp  time.Time      `json:"timestamp"`
	CreatedAt  time.Time      `json:"created_at"`
}

// ListParams filters and pages List and All; zero values are "not set".
type ListParams struct {
	Event     string
	VisitorID string
	From, To  time.Time // both inclusive
	Limit     int       // 1-100; server default 20 (All uses 100)
	Offset    int
}

func (p ListParams) query() url.Values {
	q := url.Values{}
	if p.Event != "" {
		q.Set("event", p.Event)
	}
	if p.VisitorID != "" {
		q.Set("visitor_id", p.VisitorID)
	}
	if !p.From.IsZero() {
		q.Set("from", p.From.UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	if !p.To.IsZero() {
		q.Set("to", p.To.UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Offset != 0 {
		q.Set("offset", strconv.Itoa(p.Offset))
	}
	return q
}

// Page is one answer of List.
type Page struct {
	Data       []StoredEvent `json:"data"` // newest timestamp first
	Pagination Pagination    `json:"pagination"`
}

// Pagination describes where a Page sits in the whole result.
type Pagination struct {
	Total   int64 `json:"total"`
	Limit   int   `json:"limit"`
	Offset  int   `json:"offset"`
	HasMore bool  `json:"has_more"`
}

// KeyInfo is the answer to Verify.
type KeyInfo struct {
	Valid       bool     `json:"valid"`
	KeyType     string   `json:"key_type"`    // "secret" or "public"
	Environment string   `json:"environment"` // "live" or "test"
	Permissions []string `json:"permissions"` // "read", "write"
	Project     struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"project"`
}

// RateLimitStatus is the answer to RateLimit.
type RateLimitStatus struct {
	Limits  Windows            `json:"limits"` // the standard bucket
	Plan    string             `json:"plan"`
	Buckets map[string]Windows `json:"buckets"` // "batch" and "analytics"
}

// Windows holds a bucket's windows; a window the plan does not limit is nil.
type Windows struct {
	Minute *Window `json:"minute"`
	Hour   *Window `json:"hour"`
	Day    *Window `json:"day"`
}

// Window is one sliding window of a bucket.
type Window struct {
	Limit     int64 `json:"limit"`
	Remaining int64 `json:"remaining"`
	Reset     int64 `json:"reset"` // Unix second at which the window is back to its full limit
}

// ResetTime is Reset as a time.
func (w *Window) ResetTime() time.Time { return time.Unix(w.Reset, 0) }

func (c *Client) getJSON(ctx context.Context, path string, q url.Values, out any) error {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: path, query: q})
	if err != nil {
		return err
	}
	return decode(resp, out)
}

func decode(resp *response, out any) error {
	if err := json.Unmarshal(resp.body, out); err != nil {
		return fmt.Errorf("eventd: decoding a %d response: %w", resp.status, err)
	}
	return nil
}

// Track stores one event now and returns its id; see Enqueue for fire-and-forget.
func (c *Client) Track(ctx context.Context, e Event) (*Created, error) {
	if e.IdempotencyKey == "" {
		e.IdempotencyKey = newKey()
	}
	body, err := json.Marshal(e.wire(false))
	if err != nil {
		return nil, fmt.Errorf("eventd: encoding event: %w", err)
	}
	resp, err := c.do(ctx, request{method: http.MethodPost, path: "/events", body: body,
		header: http.Header{"Idempotency-Key": {e.IdempotencyKey}}})
	if err != nil {
		return nil, err
	}
	var out Created
	if err := decode(resp, &out); err != nil {
		return nil, err
	}
	out.Replayed = resp.header.Get("Idempotent-Replayed") == "true"
	return &out, nil
}

// TrackBatch stores events now, MaxBatch per request. Each entry is accepted
// or rejected on its own (see BatchItem.Err); an error means a request failed,
// and the result then covers the requests that succeeded before it.
func (c *Client) TrackBatch(ctx context.Context, events []Event) (*BatchResult, error) {
	out := &BatchResult{Results: make([]BatchItem, 0, len(events))}
	for start := 0; start < len(events); start += MaxBatch {
		chunk := events[start:min(start+MaxBatch, len(events))]
		wire := make([]wireEvent, len(chunk))
		for i := range chunk {
			wire[i] = chunk[i].wire(true)
			if wire[i].IdempotencyKey == "" {
				wire[i].IdempotencyKey = newKey()
			}
		}
		body, err := json.Marshal(map[string]any{"events": wire})
		if err != nil {
			return out, fmt.Errorf("eventd: encoding events: %w", err)
		}
		resp, err := c.do(ctx, request{method: http.MethodPost, path: "/events/batch", body: body})
		if err != nil {
			return out, err
		}
		var r BatchResult
		if err := decode(resp, &r); err != nil {
			return out, err
		}
		out.Accepted += r.Accepted
		out.Rejected += r.Rejected
		out.Results = append(out.Results, r.Results...)
	}
	return out, nil
}

// Get reads one event; an unknown id is ErrNotFound. Needs a secret key.
func (c *Client) Get(ctx context.Context, id string) (*StoredEvent, error) {
	var e StoredEvent
	if err := c.getJSON(ctx, "/events/"+url.PathEscape(id), nil, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// List reads one page of events, newest first. Needs a secret key.
func (c *Client) List(ctx context.Context, p ListParams) (*Page, error) {
	var page Page
	if err := c.getJSON(ctx, "/events", p.query(), &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// All iterates over every event matching p, fetching pages of p.Limit
// (default 100) from p.Offset on; it stops after the first error.
//
// Pages are offsets into a list that may grow while it is read: an event
// stored meanwhile with a timestamp inside the range pushes older ones down
// a place. The iterator skips what the previous page already yielded, so such
// inserts cause no repeats; deletions during the walk can still skip events.
func (c *Client) All(ctx context.Context, p ListParams) iter.Seq2[StoredEvent, error] {
	return func(yield func(StoredEvent, error) bool) {
		if p.Limit <= 0 {
			p.Limit = MaxBatch
		}
		var prev map[string]struct{}
		for {
			page, err := c.List(ctx, p)
			if err != nil {
				yield(StoredEvent{}, err)
				return
			}
			seen := make(map[string]struct{}, len(page.Data))
			for _, e := range page.Data {
				seen[e.ID] = struct{}{}
				if _, dup := prev[e.ID]; dup {
					continue
				}
				if !yield(e, nil) {
					return
				}
			}
			if !page.Pagination.HasMore || len(page.Data) == 0 {
				return
			}
			prev = seen
			p.Offset += len(page.Data)
		}
	}
}

// Verify reports which key this is, its environment, permissions and project.
func (c *Client) Verify(ctx context.Context) (*KeyInfo, error) {
	var k KeyInfo
	if err := c.getJSON(ctx, "/verify", nil, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// RateLimit reports the key's remaining requests per window; it counts against no limit.
func (c *Client) RateLimit(ctx context.Context) (*RateLimitStatus, error) {
	var r RateLimitStatus
	if err := c.getJSON(ctx, "/rate-limit", nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
