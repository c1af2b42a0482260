package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	for attempt := range 40 {
		step := min(250*time.Millisecond<<min(attempt, 30), 30*time.Second)
		if attempt > 30 {
			step = 30 * time.Second
		}
		for range 50 {
			d := backoff(250*time.Millisecond, 30*time.Second, attempt)
			if d < step/2 || d > step {
				t.Fatalf("attempt %d: %v outside [%v, %v]", attempt, d, step/2, step)
			}
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                              0,
		"7":                             7 * time.Second,
		" 0 ":                           0,
		"-3":                            0,
		"soon":                          0,
		"Thu, 01 Jan 2026 00:00:30 GMT": 30 * time.Second,
		"Wed, 31 Dec 2025 23:00:00 GMT": 0,
	} {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}

func TestErrorFromBody(t *testing.T) {
	h := http.Header{"Retry-After": {"3"}, "X-Request-Id": {"req_1"}}
	e := newErrorFrom(429, h, []byte(`{"error":"rate_limit_exceeded","message":"Rate limit exceeded","retry_after":3}`))
	if e.Status != 429 || e.Code != "rate_limit_exceeded" || e.RetryAfter != 3*time.Second || e.RequestID != "req_1" ||
		!errors.Is(e, ErrRateLimited) || errors.Is(e, ErrNotFound) {
		t.Fatalf("%+v", e)
	}
	e = newErrorFrom(422, http.Header{}, []byte(`{"error":"validation_error","message":"Validation failed","details":{"b":"x","a":"y"}}`))
	if got := e.Error(); got != "eventd: 422 validation_error: Validation failed (a: y; b: x)" {
		t.Fatalf("Error() = %q", got)
	}
	e = newErrorFrom(502, http.Header{}, []byte("<html>bad gateway</html>"))
	if e.Code != "bad_gateway" || e.Message != "<html>bad gateway</html>" {
		t.Fatalf("non-JSON body: %+v", e)
	}
}

func TestAnchorID(t *testing.T) {
	id := anchorID("Thu, 01 Jan 2026 00:00:30 GMT")
	if got, want := idMillis(t, id), time.Date(2026, 1, 1, 0, 0, 28, 0, time.UTC).UnixMilli(); got != want {
		t.Fatalf("anchor %s at %d, want %d", id, got, want)
	}
	if anchorID("garbage") == "" {
		t.Fatal("no anchor without a Date")
	}
}

// TestFormatEventID pins the text of known ids, so the client's copy of the
// server's id format cannot drift: ids sort by their text, and a resume
// anchor that sorted wrong would replay or skip events.
func TestFormatEventID(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   [16]byte
		want string
	}{
		{"zero", [16]byte{}, "evt_00000000000000000000000000"},
		{"all ones", [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "evt_7ZZZZZZZZZZZZZZZZZZZZZZZZZ"},
		{"low bit", [16]byte{15: 1}, "evt_00000000000000000000000001"},
		{"top bit", [16]byte{0: 0x80}, "evt_40000000000000000000000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatEventID(tc.id); got != tc.want {
				t.Fatalf("formatEventID = %s, want %s", got, tc.want)
			}
		})
	}
}

// idMillis reads the millisecond in the first 48 bits of an event id's text.
func idMillis(t *testing.T, id string) int64 {
	t.Helper()
	text, ok := strings.CutPrefix(id, "evt_")
	if !ok || len(text) != 26 {
		t.Fatalf("malformed id %q", id)
	}
	var hi, lo uint64 // the 128 bits, read 5 at a time
	for i := 0; i < 26; i++ {
		v := strings.IndexByte(crockford, text[i])
		if v < 0 {
			t.Fatalf("malformed id %q", id)
		}
		hi = hi<<5 | lo>>59
		lo = lo<<5 | uint64(v)
	}
	return int64(hi >> 16)
}

// TestRetryHonoursRetryAfter uses a stub server: 503 with Retry-After 1, then 201.
// The retry must wait the second and resend the same idempotency key; a 400 is not retried.
func TestRetryHonoursRetryAfter(t *testing.T) {
	var mu sync.Mutex
	var hits []time.Time
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		hits = append(hits, time.Now())
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n := len(hits)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(string(body), "bad"):
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"error":"bad_request","message":"Invalid request data","details":{"event":"nope"}}`)
		case n == 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
			_, _ = io.WriteString(w, `{"error":"unavailable","message":"The server is overloaded; retry shortly"}`)
		default:
			w.WriteHeader(201)
			_, _ = io.WriteString(w, `{"id":"evt_01M7ZXYKBC0YQVV787K3YZYKF1","event":"x","status":"accepted","timestamp":"2026-01-01T00:00:00.000Z"}`)
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, "sk_test_x", WithBackoff(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cr, err := c.Track(ctx, Event{Name: "x"})
	if err != nil || cr.ID == "" {
		t.Fatalf("%v %+v", err, cr)
	}
	mu.Lock()
	if len(hits) != 2 || hits[1].Sub(hits[0]) < 950*time.Millisecond {
		t.Fatalf("%d attempts, gap %v; want 2, at least the 1 s Retry-After", len(hits), hits[len(hits)-1].Sub(hits[0]))
	}
	if keys[0] == "" || keys[0] != keys[1] {
		t.Fatalf("idempotency keys %q", keys)
	}
	mu.Unlock()

	if _, err := c.Track(ctx, Event{Name: "bad"}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("400: %v", err)
	}
	mu.Lock()
	if len(hits) != 3 {
		t.Fatalf("a 400 was tried %d times", len(hits)-2)
	}
	mu.Unlock()

	// A deadline shorter than Retry-After returns the 503 at once instead of sleeping into a context error.
	mu.Lock()
	hits = hits[:0]
	mu.Unlock()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Track(short, Event{Name: "x"})
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != 503 || time.Since(start) > 250*time.Millisecond {
		t.Fatalf("short deadline: %v after %v", err, time.Since(start))
	}
}

func TestNewValidates(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://x", "http://"} {
		if _, err := New(u, "k"); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
	if _, err := New("http://x", ""); err == nil {
		t.Error("empty key accepted")
	}
	c, err := New("https://events.example.com/base/", "k")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.url("/events", nil); got != "https://events.example.com/base/events" {
		t.Fatalf("url %q", got)
	}
}
