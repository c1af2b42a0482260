package test

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var pubRateHeaders = []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy", "RateLimit"}

// pubRL reads the X-RateLimit-* headers as integers.
func pubRL(t testing.TB, r *Response) (limit, remaining, reset int64) {
	t.Helper()
	get := func(name string) int64 {
		v := r.Header.Get(name)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("%s %q on a %d: %v (%s)", name, v, r.Status, err, r.Body)
		}
		return n
	}
	return get("X-RateLimit-Limit"), get("X-RateLimit-Remaining"), get("X-RateLimit-Reset")
}

func pubWantRemaining(t testing.TB, r *Response, limit, remaining int64) {
	t.Helper()
	l, rem, _ := pubRL(t, r)
	if l != limit || rem != remaining {
		t.Fatalf("X-RateLimit-Limit %d Remaining %d, want %d and %d (status %d)", l, rem, limit, remaining, r.Status)
	}
}

// pubWant429 checks a rate-limited answer and returns its retry_after.
func pubWant429(t testing.TB, r *Response) int64 {
	t.Helper()
	e := pubWantErr(t, r, 429, "rate_limit_exceeded", "Rate limit exceeded")
	pubWantKeys(t, r.Body, "error", "message", "retry_after")
	n := *e.RetryAfter
	if n < 1 {
		t.Fatalf("retry_after %d", n)
	}
	if h := r.Header.Get("Retry-After"); h != strconv.FormatInt(n, 10) {
		t.Fatalf("Retry-After %q, retry_after %d", h, n)
	}
	if rem := r.Header.Get("X-RateLimit-Remaining"); rem != "0" {
		t.Fatalf("429 with X-RateLimit-Remaining %q", rem)
	}
	if r.Header.Get("X-RateLimit-Reset") == "" || r.Header.Get("X-RateLimit-Limit") == "" {
		t.Fatalf("429 without X-RateLimit-Reset/Limit")
	}
	return n
}

func TestRateLimitStatus(t *testing.T) {
	s := Start(t)
	for _, tc := range []struct {
		plan              string
		minute, hour, day int64
	}{
		{"", 100, 5000, 50000},
		{"free", 100, 5000, 50000},
		{"professional", 500, 25000, 250000},
		{"enterprise", 2000, 100000, 1000000},
	} {
		t.Run("plan "+tc.plan, func(t *testing.T) {
			p := s.Project(t, "plan "+tc.plan, tc.plan, nil)
			key := s.Key(t, p, "secret", "live")
			before := time.Now().Unix()
			rs := pubRateStatus(t, s, key)
			after := time.Now().Unix()
			wantPlan := tc.plan
			if wantPlan == "" {
				wantPlan = "free"
			}
			if rs.Plan != wantPlan {
				t.Fatalf("plan %q, want %q", rs.Plan, wantPlan)
			}
			pubCheckWindows(t, "limits", rs.Limits, map[string]int64{"minute": tc.minute, "hour": tc.hour, "day": tc.day}, before, after)
			pubCheckWindows(t, "batch", rs.Buckets["batch"], map[string]int64{"minute": tc.minute / 10, "hour": tc.hour / 10, "day": tc.day / 10}, before, after)
			if w := rs.Buckets["analytics"]["minute"]; w.Limit != 50 || w.Remaining != 50 {
				t.Fatalf("analytics minute %+v", w)
			}
		})
	}

	t.Run("custom limits and changes", func(t *testing.T) {
		p := s.Project(t, "custom", "", map[string]int64{"minute": 5, "hour": 100, "day": 1000})
		key := s.Key(t, p, "secret", "live")
		rs := pubRateStatus(t, s, key)
		now := time.Now().Unix()
		pubCheckWindows(t, "limits", rs.Limits, map[string]int64{"minute": 5, "hour": 100, "day": 1000}, now-1, now+1)
		pubCheckWindows(t, "batch", rs.Buckets["batch"], map[string]int64{"minute": 1, "hour": 10, "day": 100}, now-1, now+1)
		if rs.Plan != "free" {
			t.Fatalf("plan %q", rs.Plan)
		}
		pubPatchProject(t, s, p, map[string]any{"limits": map[string]int64{"minute": 7, "hour": 70, "day": 700}})
		rs = pubRateStatus(t, s, key)
		if rs.Limits["minute"].Limit != 7 || rs.Limits["hour"].Limit != 70 || rs.Limits["day"].Limit != 700 {
			t.Fatalf("after PATCH limits %+v", rs.Limits)
		}
		pubPatchProject(t, s, p, map[string]any{"plan": "professional", "limits": nil})
		rs = pubRateStatus(t, s, key)
		if rs.Plan != "professional" || rs.Limits["minute"].Limit != 500 || rs.Buckets["batch"]["minute"].Limit != 50 {
			t.Fatalf("after plan change %+v", rs)
		}
	})

	t.Run("GET /rate-limit does not count; other requests do", func(t *testing.T) {
		p := s.Project(t, "counting", "", nil)
		key := s.Key(t, p, "secret", "live")
		for i := 0; i < 5; i++ {
			r := Do(t, "GET", s.Public+"/rate-limit", key, nil)
			wantStatus(t, r, 200)
			pubWantRemaining(t, r, 100, 100)
		}
		rs := pubRateStatus(t, s, key)
		if rs.Limits["minute"].Remaining != 100 || rs.Limits["hour"].Remaining != 5000 || rs.Limits["day"].Remaining != 50000 {
			t.Fatalf("limits %+v", rs.Limits)
		}
		pubCreate(t, s, key, map[string]any{"event": "x"})
		pubVerify(t, s, key)
		pubList(t, s, key, "")
		rs = pubRateStatus(t, s, key)
		if rs.Limits["minute"].Remaining != 97 || rs.Limits["hour"].Remaining != 4997 || rs.Limits["day"].Remaining != 49997 {
			t.Fatalf("after 3 requests: %+v", rs.Limits)
		}
		if rs.Buckets["batch"]["minute"].Remaining != 10 {
			t.Fatalf("batch %+v", rs.Buckets["batch"])
		}
		now := time.Now().Unix()
		if m := rs.Limits["minute"]; m.Reset < now || m.Reset > now+61 {
			t.Fatalf("minute reset %d, now %d", m.Reset, now)
		}
		pubPostBatch(t, s, key, map[string]any{"events": []any{map[string]any{"event": "x"}, map[string]any{"event": "y"}}})
		rs = pubRateStatus(t, s, key)
		if rs.Limits["minute"].Remaining != 97 || rs.Buckets["batch"]["minute"].Remaining != 9 || rs.Buckets["batch"]["hour"].Remaining != 499 {
			t.Fatalf("after a batch: %+v %+v", rs.Limits, rs.Buckets["batch"])
		}
		// Keys count apart, even in one project.
		other := s.Key(t, p, "secret", "live")
		if rs := pubRateStatus(t, s, other); rs.Limits["minute"].Remaining != 100 {
			t.Fatalf("other key %+v", rs.Limits)
		}
	})
}

func pubCheckWindows(t testing.TB, what string, got map[string]pubWindow, limits map[string]int64, before, after int64) {
	t.Helper()
	for name, l := range limits {
		w, ok := got[name]
		if !ok {
			t.Fatalf("%s lacks %s: %+v", what, name, got)
		}
		if w.Limit != l || w.Remaining != l {
			t.Fatalf("%s.%s = %+v, want limit and remaining %d", what, name, w, l)
		}
		if w.Reset < before || w.Reset > after+86400 {
			t.Fatalf("%s.%s reset %d not a Unix time near %d", what, name, w.Reset, before)
		}
	}
}

var (
	pubPolicyRE    = regexp.MustCompile(`^"minute";q=(\d+);w=60, "hour";q=(\d+);w=3600, "day";q=(\d+);w=86400$`)
	pubRateLimitRE = regexp.MustCompile(`^"(minute|hour|day)";r=(\d+);t=(\d+)$`)
)

func TestRateLimitHeaders(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "headers", "", nil)
	key := s.Key(t, p, "secret", "live")
	pub := s.Key(t, p, "public", "live")

	t.Run("exact header names on the wire", func(t *testing.T) {
		before := time.Now().Unix()
		r := pubRawDo(t, s, "GET", "/verify", key, "")
		after := time.Now().Unix()
		if r.status(t) != 200 {
			t.Fatalf("%s\n%s", r.StatusLine, r.Body)
		}
		for _, name := range append(pubRateHeaders, "X-Request-Id") {
			if _, ok := r.header(name); !ok {
				t.Fatalf("no header line spelt %q in %q", name, r.Lines)
			}
		}
		lim, _ := r.header("X-RateLimit-Limit")
		rem, _ := r.header("X-RateLimit-Remaining")
		reset, _ := r.header("X-RateLimit-Reset")
		if lim != "100" || rem != "99" {
			t.Fatalf("X-RateLimit-Limit %s Remaining %s, want 100 and 99", lim, rem)
		}
		if n, err := strconv.ParseInt(reset, 10, 64); err != nil || n < before+60 || n > after+60 {
			t.Fatalf("X-RateLimit-Reset %q, want the Unix second one minute after the request (%d..%d)", reset, before+60, after+60)
		}
		pol, _ := r.header("RateLimit-Policy")
		if m := pubPolicyRE.FindStringSubmatch(pol); m == nil || m[1] != "100" || m[2] != "5000" || m[3] != "50000" {
			t.Fatalf("RateLimit-Policy %q", pol)
		}
		rlv, _ := r.header("RateLimit")
		if m := pubRateLimitRE.FindStringSubmatch(rlv); m == nil || m[1] != "minute" || m[2] != "99" {
			t.Fatalf("RateLimit %q", rlv)
		} else if tt, _ := strconv.Atoi(m[3]); tt < 59 || tt > 60 {
			t.Fatalf("RateLimit t=%d, want about 60", tt)
		}

		// The literal names on other answers too.
		for _, tc := range []struct {
			method, path, key, body string
			headers                 []string
			status                  int
		}{
			{"POST", "/events", key, `{"event":"raw"}`, nil, 201},
			{"POST", "/events", key, `{"event":"raw"}`, []string{"Idempotency-Key: raw-1"}, 201},
			{"POST", "/events", key, `{"event":"bad-name"}`, nil, 400},
			{"GET", "/events/evt_nope", key, "", nil, 404},
			{"GET", "/events", pub, "", nil, 403},
			{"GET", "/rate-limit", key, "", nil, 200},
			{"POST", "/events/batch", key, `{"events":[{"event":"raw"}]}`, nil, 201},
		} {
			r := pubRawDo(t, s, tc.method, tc.path, tc.key, tc.body, tc.headers...)
			if got := r.status(t); got != tc.status {
				t.Fatalf("%s %s: %s", tc.method, tc.path, r.StatusLine)
			}
			for _, name := range append(pubRateHeaders, "X-Request-Id") {
				if _, ok := r.header(name); !ok {
					t.Fatalf("%s %s: no header line spelt %q in %q", tc.method, tc.path, name, r.Lines)
				}
			}
		}
		r = pubRawDo(t, s, "POST", "/events", key, `{"event":"raw"}`, "Idempotency-Key: raw-1")
		if v, ok := r.header("Idempotent-Replayed"); !ok || v != "true" {
			t.Fatalf("no header line spelt Idempotent-Replayed: true in %q", r.Lines)
		}
		// 401: no rate-limit headers in any spelling.
		r = pubRawDo(t, s, "GET", "/verify", "", "")
		if r.status(t) != 401 {
			t.Fatalf("%s", r.StatusLine)
		}
		for _, name := range pubRateHeaders {
			if r.hasHeaderFold(name) {
				t.Fatalf("401 carries %s: %q", name, r.Lines)
			}
		}
		if _, ok := r.header("X-Request-Id"); !ok {
			t.Fatalf("401 without X-Request-Id line: %q", r.Lines)
		}
	})

	t.Run("on every authenticated answer", func(t *testing.T) {
		c := pubCreate(t, s, key, map[string]any{"event": "h"})
		for _, tc := range []struct {
			name   string
			r      *Response
			status int
		}{
			{"201 create", Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "h"}), 201},
			{"201 batch", Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": []any{map[string]any{"event": "h"}}}), 201},
			{"200 get", Do(t, "GET", s.Public+"/events/"+c.ID, key, nil), 200},
			{"200 list", Do(t, "GET", s.Public+"/events", key, nil), 200},
			{"200 verify", Do(t, "GET", s.Public+"/verify", pub, nil), 200},
			{"200 rate-limit", Do(t, "GET", s.Public+"/rate-limit", key, nil), 200},
			{"400 create", Do(t, "POST", s.Public+"/events", key, `{"event":1}`), 400},
			{"400 batch", Do(t, "POST", s.Public+"/events/batch", key, `{"events":[]}`), 400},
			{"400 list", Do(t, "GET", s.Public+"/events?limit=0", key, nil), 400},
			{"403 list", Do(t, "GET", s.Public+"/events", pub, nil), 403},
			{"403 get", Do(t, "GET", s.Public+"/events/"+c.ID, pub, nil), 403},
			{"404 get", Do(t, "GET", s.Public+"/events/evt_"+strings.Repeat("0", 26), key, nil), 404},
			{"409", Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "h2"}, "Idempotency-Key: raw-1"), 409},
			{"415", pubMustDo(t, "POST", s.Public+"/events", key, []byte(`{"event":"h"}`), "Content-Type: text/xml"), 415},
			{"422", Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "h", "properties": map[string]any{"amount": 0}}), 422},
		} {
			t.Run(tc.name, func(t *testing.T) {
				wantStatus(t, tc.r, tc.status)
				pubRL(t, tc.r)
				if m := pubPolicyRE.FindStringSubmatch(tc.r.Header.Get("RateLimit-Policy")); m == nil {
					t.Fatalf("RateLimit-Policy %q", tc.r.Header.Get("RateLimit-Policy"))
				}
				if m := pubRateLimitRE.FindStringSubmatch(tc.r.Header.Get("RateLimit")); m == nil {
					t.Fatalf("RateLimit %q", tc.r.Header.Get("RateLimit"))
				}
			})
		}
		// The batch route describes the batch bucket.
		r := Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": []any{map[string]any{"event": "h"}}})
		if l, _, _ := pubRL(t, r); l != 10 {
			t.Fatalf("batch X-RateLimit-Limit %d, want 10", l)
		}
		if m := pubPolicyRE.FindStringSubmatch(r.Header.Get("RateLimit-Policy")); m == nil || m[1] != "10" || m[2] != "500" || m[3] != "5000" {
			t.Fatalf("batch RateLimit-Policy %q", r.Header.Get("RateLimit-Policy"))
		}
	})

	t.Run("tightest window", func(t *testing.T) {
		// hour has fewer left than minute: the headers describe the hour.
		q := s.Project(t, "tight", "", map[string]int64{"minute": 10, "hour": 3, "day": 1000})
		k := s.Key(t, q, "secret", "live")
		r := Do(t, "GET", s.Public+"/verify", k, nil)
		pubWantRemaining(t, r, 3, 2)
		if m := pubRateLimitRE.FindStringSubmatch(r.Header.Get("RateLimit")); m == nil || m[1] != "hour" || m[2] != "2" {
			t.Fatalf("RateLimit %q", r.Header.Get("RateLimit"))
		}
		_, _, reset := pubRL(t, r)
		// The hour window counts in one-minute slots: back to full one hour after this minute's slot began.
		if now := time.Now().Unix(); reset < now-now%60+3600-60 || reset > now+3600 {
			t.Fatalf("hour reset %d, now %d", reset, now)
		}
		Do(t, "GET", s.Public+"/verify", k, nil)
		Do(t, "GET", s.Public+"/verify", k, nil)
		r = Do(t, "GET", s.Public+"/verify", k, nil)
		n := pubWant429(t, r)
		if n < 3000 || n > 3600 {
			t.Fatalf("retry_after %d for the hour window", n)
		}
	})
}

func TestRateLimitExceeded(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "limited", "", map[string]int64{"minute": 5, "hour": 100, "day": 1000})
	key := s.Key(t, p, "secret", "live")

	for i := 0; i < 5; i++ {
		r := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "limited"})
		pubWantCreated(t, r)
		pubWantRemaining(t, r, 5, int64(4-i))
	}
	var first int64
	for i := 0; i < 4; i++ {
		r := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "limited"})
		n := pubWant429(t, r)
		if n > 60 {
			t.Fatalf("retry_after %d for the minute window", n)
		}
		if i == 0 {
			first = n
		}
		pubWantRemaining(t, r, 5, 0)
	}
	_ = first
	// The standard bucket is shared by every standard route, and a bad body
	// is refused with 429 too when over the limit.
	for _, r := range []*Response{
		Do(t, "GET", s.Public+"/events", key, nil),
		Do(t, "GET", s.Public+"/verify", key, nil),
		Do(t, "GET", s.Public+"/events/evt_"+strings.Repeat("0", 26), key, nil),
		Do(t, "POST", s.Public+"/events", key, `{"event":"bad-name"}`),
	} {
		pubWant429(t, r)
	}
	// The literal header names of a 429 on the wire.
	raw := pubRawDo(t, s, "POST", "/events", key, `{"event":"limited"}`)
	if raw.status(t) != 429 {
		t.Fatalf("%s %s", raw.StatusLine, raw.Body)
	}
	ra, ok := raw.header("Retry-After")
	if n, err := strconv.Atoi(ra); !ok || err != nil || n < 1 || n > 60 {
		t.Fatalf("no Retry-After line with 1..60 seconds in %q", raw.Lines)
	}
	if !strings.Contains(raw.Body, `"retry_after":`+ra+`}`) {
		t.Fatalf("body %s does not carry retry_after %s", raw.Body, ra)
	}
	for _, name := range append(pubRateHeaders, "X-Request-Id") {
		if _, ok := raw.header(name); !ok {
			t.Fatalf("429: no header line spelt %q in %q", name, raw.Lines)
		}
	}
	if v, _ := raw.header("X-RateLimit-Remaining"); v != "0" {
		t.Fatalf("429 X-RateLimit-Remaining %q", v)
	}
	// GET /rate-limit still answers, and 429s were not counted.
	rs := pubRateStatus(t, s, key)
	if rs.Limits["minute"].Remaining != 0 || rs.Limits["hour"].Remaining != 95 || rs.Limits["day"].Remaining != 995 {
		t.Fatalf("limits %+v", rs.Limits)
	}
	// Batches have their own bucket (a tenth of 5 is 1).
	b := Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": []any{map[string]any{"event": "limited"}}})
	wantStatus(t, b, 201)
	pubWantRemaining(t, b, 1, 0)
	pubWant429(t, Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": []any{map[string]any{"event": "limited"}}}))

	// Nothing refused was stored; other keys are not limited by this one.
	other := s.Key(t, p, "secret", "live")
	if l := pubList(t, s, other, "event=limited"); l.Pagination.Total != 6 {
		t.Fatalf("%d events stored, want 6", l.Pagination.Total)
	}

	t.Run("concurrent requests: exactly the limit passes", func(t *testing.T) {
		k := s.Key(t, p, "secret", "live")
		const n = 20
		var wg sync.WaitGroup
		var mu sync.Mutex
		statuses := map[int]int{}
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := pubDoRaw("POST", s.Public+"/events", k, []byte(`{"event":"limited_race"}`), "Content-Type: application/json")
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					statuses[-1]++
					return
				}
				statuses[r.Status]++
			}()
		}
		wg.Wait()
		if statuses[201] != 5 || statuses[429] != n-5 {
			t.Fatalf("statuses %v, want five 201 and %d 429", statuses, n-5)
		}
		if l := pubList(t, s, other, "event=limited_race"); l.Pagination.Total != 5 {
			t.Fatalf("%d stored, want 5", l.Pagination.Total)
		}
	})

	t.Run("4xx count", func(t *testing.T) {
		k := s.Key(t, p, "secret", "live")
		pub := s.Key(t, p, "public", "live")
		wantStatus(t, Do(t, "POST", s.Public+"/events", k, `{"event":"bad-name"}`), 400)
		wantStatus(t, Do(t, "GET", s.Public+"/events?limit=0", k, nil), 400)
		wantStatus(t, Do(t, "GET", s.Public+"/events/evt_nope", k, nil), 404)
		wantStatus(t, Do(t, "POST", s.Public+"/events", k, map[string]any{"event": "x", "properties": map[string]any{"amount": -1}}), 422)
		r := Do(t, "GET", s.Public+"/verify", k, nil)
		pubWantRemaining(t, r, 5, 0)
		pubWant429(t, Do(t, "GET", s.Public+"/verify", k, nil))
		// 403s of a public key count too.
		for i := 0; i < 5; i++ {
			r := Do(t, "GET", s.Public+"/events", pub, nil)
			pubWantErr(t, r, 403, "forbidden", pubMsgForbidden)
			pubWantRemaining(t, r, 5, int64(4-i))
		}
		pubWant429(t, Do(t, "GET", s.Public+"/events", pub, nil))
		pubWant429(t, Do(t, "POST", s.Public+"/events", pub, map[string]any{"event": "click"}))
	})
}

func TestBatchBucket(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "batch-bucket", "", map[string]int64{"minute": 50, "hour": 5000, "day": 50000})
	key := s.Key(t, p, "secret", "live")
	one := map[string]any{"events": []any{map[string]any{"event": "bb"}}}
	var hundred []any
	for i := 0; i < 100; i++ {
		hundred = append(hundred, map[string]any{"event": "bb"})
	}
	for i := 0; i < 5; i++ {
		body := any(one)
		switch i {
		case 1:
			body = map[string]any{"events": hundred} // one count per request, whatever its size
		case 3:
			body = `{"events":[]}` // a refused batch counts too
		}
		r := Do(t, "POST", s.Public+"/events/batch", key, body)
		if i == 3 {
			wantStatus(t, r, 400)
		} else {
			wantStatus(t, r, 201)
		}
		pubWantRemaining(t, r, 5, int64(4-i))
	}
	r := Do(t, "POST", s.Public+"/events/batch", key, one)
	pubWant429(t, r)
	pubWantRemaining(t, r, 5, 0)
	// The standard bucket is untouched.
	rs := pubRateStatus(t, s, key)
	if rs.Limits["minute"].Remaining != 50 || rs.Buckets["batch"]["minute"].Remaining != 0 || rs.Buckets["batch"]["hour"].Remaining != 495 {
		t.Fatalf("after 5 batches: %+v %+v", rs.Limits, rs.Buckets["batch"])
	}
	c := pubCreate(t, s, key, map[string]any{"event": "bb_single"})
	_ = c
	if l := pubList(t, s, key, "event=bb"); l.Pagination.Total != 103 {
		t.Fatalf("%d stored, want 103", l.Pagination.Total)
	}
}

func TestRateLimitSurvivesRestart(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "restart", "", map[string]int64{"minute": 5, "hour": 100, "day": 1000})
	key := s.Key(t, p, "secret", "live")
	for i := 0; i < 3; i++ {
		pubCreate(t, s, key, map[string]any{"event": "r"})
	}
	wantStatus(t, Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": []any{map[string]any{"event": "r"}}}), 201)
	if err := s.Stop(); err != nil {
		t.Fatalf("SIGTERM exit: %v", err)
	}
	s.Restart()
	rs := pubRateStatus(t, s, key)
	if rs.Limits["minute"].Remaining != 2 || rs.Limits["hour"].Remaining != 97 || rs.Limits["day"].Remaining != 997 {
		t.Fatalf("after restart: %+v", rs.Limits)
	}
	if rs.Buckets["batch"]["minute"].Remaining != 0 {
		t.Fatalf("batch after restart: %+v", rs.Buckets["batch"])
	}
	for i := 0; i < 2; i++ {
		r := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "r"})
		pubWantCreated(t, r)
		pubWantRemaining(t, r, 5, int64(1-i))
	}
	pubWant429(t, Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "r"}))
	pubWant429(t, Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": []any{map[string]any{"event": "r"}}}))
}

func TestPageviewsFree(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "pageviews", "", map[string]int64{"minute": 5, "hour": 100, "day": 1000})
	pub := s.Key(t, p, "public", "live")
	secret := s.Key(t, p, "secret", "live")
	for i := 0; i < 12; i++ {
		pubCreate(t, s, pub, map[string]any{"event": "pageview", "properties": map[string]any{"path": "/p"}})
	}
	for i := 0; i < 3; i++ {
		b := pubPostBatch(t, s, pub, map[string]any{"events": []any{map[string]any{"event": "pageview"}, map[string]any{"event": "pageview"}}})
		if b.Accepted != 2 {
			t.Fatalf("batch %+v", b)
		}
	}
	rs := pubRateStatus(t, s, pub)
	if rs.Limits["minute"].Remaining != 5 || rs.Buckets["batch"]["minute"].Remaining != 1 {
		t.Fatalf("pageviews counted: %+v %+v", rs.Limits, rs.Buckets["batch"])
	}
	// Other events of a public key count.
	r := Do(t, "POST", s.Public+"/events", pub, map[string]any{"event": "click"})
	pubWantCreated(t, r)
	pubWantRemaining(t, r, 5, 4)
	// A batch mixing pageviews with other events counts in the batch bucket.
	r = Do(t, "POST", s.Public+"/events/batch", pub, map[string]any{"events": []any{map[string]any{"event": "pageview"}, map[string]any{"event": "click"}}})
	wantStatus(t, r, 201)
	pubWantRemaining(t, r, 1, 0)
	// A secret key's pageviews are ordinary events.
	r = Do(t, "POST", s.Public+"/events", secret, map[string]any{"event": "pageview"})
	pubWantCreated(t, r)
	pubWantRemaining(t, r, 5, 4)
	// Pageviews still pass for the public key when its buckets are exhausted.
	for i := 0; i < 4; i++ {
		pubWantCreated(t, Do(t, "POST", s.Public+"/events", pub, map[string]any{"event": "click"}))
	}
	pubWant429(t, Do(t, "POST", s.Public+"/events", pub, map[string]any{"event": "click"}))
	pubCreate(t, s, pub, map[string]any{"event": "pageview"})
	b := pubPostBatch(t, s, pub, map[string]any{"events": []any{map[string]any{"event": "pageview"}}})
	if b.Accepted != 1 {
		t.Fatalf("batch %+v", b)
	}
	if l := pubList(t, s, secret, "event=pageview"); l.Pagination.Total != 12+6+1+1+1+1 {
		t.Fatalf("%d pageviews stored", l.Pagination.Total)
	}
}
