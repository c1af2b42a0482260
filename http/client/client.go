package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Version is sent in the User-Agent so server logs can tell client releases apart.
const Version = "0.1.0"

// Client is a connection to one eventd server with one API key.
type Client struct {
	base      *url.URL
	key       string
	hc        *http.Client
	userAgent string

	retries       int
	minWait       time.Duration
	maxWait       time.Duration
	maxRetryAfter time.Duration

	batchSize  int
	queueSize  int
	flushEvery time.Duration
	onError    func(error, []Event)

	bmu sync.Mutex
	b   *batcher
}

// Option configures a Client in New.
type Option func(*Client)

// WithHTTPClient replaces the default http.Client (30 s timeout), e.g. for a proxy or custom TLS.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetries sets how many times a failed request is retried (default 5; 0 disables retries).
func WithRetries(n int) Option { return func(c *Client) { c.retries = max(n, 0) } }

// WithBackoff sets the first retry delay and the cap of the exponential backoff (default 250 ms and 30 s).
func WithBackoff(first, limit time.Duration) Option {
	return func(c *Client) { c.minWait, c.maxWait = first, max(limit, first) }
}

// WithMaxRetryAfter sets the longest Retry-After the client waits out; a longer one (an
// exhausted hour or day window) is returned as the error at once. Default 65 s, one minute window.
func WithMaxRetryAfter(d time.Duration) Option { return func(c *Client) { c.maxRetryAfter = d } }

// WithBatchSize sets how many queued events go in one batch request (1-100, default 100).
func WithBatchSize(n int) Option { return func(c *Client) { c.batchSize = min(max(n, 1), MaxBatch) } }

// WithQueueSize bounds the background queue (default 10000); Enqueue past it returns ErrQueueFull.
func WithQueueSize(n int) Option { return func(c *Client) { c.queueSize = max(n, 1) } }

// WithFlushInterval sets how often the background queue is sent when it holds fewer than a batch (default 5 s).
func WithFlushInterval(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.flushEvery = d
		}
	}
}

// WithErrorHandler receives the events the background batcher could not store, with the reason:
// a request that failed after every retry, or an entry the server rejected. The default logs with slog.
func WithErrorHandler(f func(err error, events []Event)) Option {
	return func(c *Client) { c.onError = f }
}

// WithUserAgent prefixes the User-Agent header, e.g. with your service's name.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua + " " + c.userAgent }
}

// New returns a client of the server at baseURL (e.g. "https://events.example.com") using key.
func New(baseURL, key string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("eventd: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("eventd: base URL %q must be http:// or https:// with a host", baseURL)
	}
	if key == "" {
		return nil, errors.New("eventd: empty API key")
	}
	c := &Client{
		base:          u,
		key:           key,
		hc:            &http.Client{Timeout: 30 * time.Second},
		userAgent:     "eventd-go/" + Version,
		retries:       5,
		minWait:       250 * time.Millisecond,
		maxWait:       30 * time.Second,
		maxRetryAfter: 65 * time.Second,
		batchSize:     MaxBatch,
		queueSize:     10000,
		flushEvery:    5 * time.Second,
	}
	c.onError = func(err error, evs []Event) {
		slog.Warn("eventd: events not stored", "count", len(evs), "err", err)
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Error is a failed request: the HTTP status and the server's JSON error body.
type Error struct {
	Status     int               // HTTP status; for a rejected batch entry, the status the single route would give
	Code       string            // the body's "error": bad_request, unauthorized, rate_limit_exceeded, ...
	Message    string            // the body's "message", for humans
	Details    map[string]string // the body's "details": field name to problem
	RetryAfter time.Duration     // from Retry-After (429, 503); zero when absent
	RequestID  string            // X-Request-Id, to quote when asking for help
}

// Error formats status, code, message and details, sorted, for logs.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "eventd: %d %s: %s", e.Status, e.Code, e.Message)
	if len(e.Details) > 0 {
		keys := make([]string, 0, len(e.Details))
		for k := range e.Details {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString(" (")
		for i, k := range keys {
			if i > 0 {
				b.WriteString("; ")
			}
			b.WriteString(k + ": " + e.Details[k])
		}
		b.WriteString(")")
	}
	return b.String()
}

// Is matches another *Error by Code, so errors.Is(err, client.ErrNotFound) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code != "" && t.Code == e.Code
}

// Errors to match with errors.Is; only Code is compared.
var (
	// ErrBadRequest: malformed input (400); Details names the field.
	ErrBadRequest = &Error{Code: "bad_request"}
	// ErrUnauthorized: missing, unknown or revoked key (401).
	ErrUnauthorized = &Error{Code: "unauthorized"}
	// ErrForbidden: the key lacks the permission, or the Origin is not allowed (403).
	ErrForbidden = &Error{Code: "forbidden"}
	// ErrNotFound: no such event in this key's dataset, or no such route (404).
	ErrNotFound = &Error{Code: "not_found"}
	// ErrConflict: an idempotency key reused with a different event (409).
	ErrConflict = &Error{Code: "idempotency_conflict"}
	// ErrValidation: a property or event definition check failed (422).
	ErrValidation = &Error{Code: "validation_error"}
	// ErrRateLimited: over the key's limit, still after the retries (429).
	ErrRateLimited = &Error{Code: "rate_limit_exceeded"}
)

// retryable tells whether a status may succeed when repeated. Writes carry
// idempotency keys, so repeating one that was in fact stored is harmless.
func retryable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// backoff is "equal jitter": half the exponential step plus a random half, so
// clients that failed together do not retry together, yet never retry at once.
func backoff(first, limit time.Duration, attempt int) time.Duration {
	d := first << min(attempt, 30)
	if d <= 0 || d > limit {
		d = limit
	}
	return d/2 + rand.N(d/2+1)
}

// parseRetryAfter reads delta-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(max(n, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func newErrorFrom(status int, h http.Header, body []byte) *Error {
	e := &Error{Status: status, RequestID: h.Get("X-Request-Id"), RetryAfter: parseRetryAfter(h.Get("Retry-After"), time.Now())}
	var b struct {
		Error      string            `json:"error"`
		Message    string            `json:"message"`
		Details    map[string]string `json:"details"`
		RetryAfter *int64            `json:"retry_after"`
	}
	if json.Unmarshal(body, &b) == nil && b.Error != "" {
		e.Code, e.Message, e.Details = b.Error, b.Message, b.Details
		if e.RetryAfter == 0 && b.RetryAfter != nil {
			e.RetryAfter = time.Duration(*b.RetryAfter) * time.Second
		}
		return e
	}
	// Not eventd's JSON (a proxy's page, say): keep a short excerpt for the message.
	e.Code = strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_")
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	e.Message = msg
	return e
}

// request is one API call, re-sendable because the body is bytes.
type request struct {
	method string
	path   string
	query  url.Values
	body   []byte
	header http.Header
}

// response is a 2xx answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (c *Client) url(path string, q url.Values) string {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawQuery = q.Encode()
	return u.String()
}

// do sends r until it succeeds, fails for good, or runs out of retries or
// context, sleeping between attempts as backoff and Retry-After say.
func (c *Client) do(ctx context.Context, r request) (*response, error) {
	target := c.url(r.path, r.query)
	var lastErr error
	for attempt := 0; ; attempt++ {
		var body io.Reader
		if r.body != nil {
			body = bytes.NewReader(r.body)
		}
		req, err := http.NewRequestWithContext(ctx, r.method, target, body)
		if err != nil {
			return nil, err
		}
		if r.body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+c.key)
		req.Header.Set("Accept", "application/json")
		req.Header.Set("User-Agent", c.userAgent)
		for k, v := range r.header {
			req.Header[k] = v
		}
		wait := backoff(c.minWait, c.maxWait, attempt)
		resp, err := c.hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			lastErr = fmt.Errorf("eventd: %s %s: %w", r.method, r.path, err)
		} else {
			body, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
			_ = resp.Body.Close()
			switch {
			case rerr != nil:
				// The status arrived but not the whole body: for a write the event may be stored; retry.
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				lastErr = fmt.Errorf("eventd: %s %s: reading response: %w", r.method, r.path, rerr)
			case resp.StatusCode < 300:
				return &response{status: resp.StatusCode, header: resp.Header, body: body}, nil
			default:
				apiErr := newErrorFrom(resp.StatusCode, resp.Header, body)
				if !retryable(resp.StatusCode) || apiErr.RetryAfter > c.maxRetryAfter {
					return nil, apiErr
				}
				lastErr = apiErr
				wait = max(wait, apiErr.RetryAfter)
			}
		}
		if attempt >= c.retries {
			return nil, lastErr
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, lastErr // sleeping past the deadline would only turn lastErr into a context error
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, lastErr
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newKey returns a random idempotency key: 128 bits, so keys of different
// processes never collide within the server's 24 h memory.
func newKey() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return "idem_" + hex.EncodeToString(b[:])
}
