package test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ---------------------------------------------------------------------------
// Helpers shared by the public API tests (public_test.go, events_test.go,
// ratelimit_test.go), prefixed pub because other files share the package.

// pubBigLimits keep functional tests far from any rate limit.
var pubBigLimits = map[string]int64{"minute": 1_000_000, "hour": 10_000_000, "day": 100_000_000}

var (
	pubEventIDRE = regexp.MustCompile(`^evt_[0-9A-HJKMNP-TV-Z]{26}$`)
	pubTimeRE    = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)
	pubKeyTextRE = regexp.MustCompile(`^(sk|pk)_(live|test)_[0-9A-Za-z]{32}$`)
)

const (
	pubMsgUnauthorized = "Invalid or missing API key"
	pubMsgForbidden    = "API key does not have permission for this resource"
	pubMsgNotFound     = "Event not found"
	pubMsgSpecName     = "event name must be alphanumeric with underscores only"
	pubMsgPositive     = "must be a positive number"
)

// Response shapes of the public API; decoded strictly (unknown fields fail).
type pubCreateResp struct {
	ID        string `json:"id"`
	Event     string `json:"event"`
	Status    string `json:"status"`
	Timestamp string `json:"timestamp"`
}

type pubBatchResult struct {
	ID      string            `json:"id"`
	Status  string            `json:"status"`
	Error   string            `json:"error"`
	Message string            `json:"message"`
	Details map[string]string `json:"details"`
}

type pubBatchResp struct {
	Accepted int              `json:"accepted"`
	Rejected int              `json:"rejected"`
	Results  []pubBatchResult `json:"results"`
}

type pubEventResp struct {
	ID         string          `json:"id"`
	Event      string          `json:"event"`
	VisitorID  *string         `json:"visitor_id"`
	Properties json.RawMessage `json:"properties"`
	Timestamp  string          `json:"timestamp"`
	CreatedAt  string          `json:"created_at"`
}

type pubListItem struct {
	ID        string  `json:"id"`
	Event     string  `json:"event"`
	VisitorID *string `json:"visitor_id"`
	Timestamp string  `json:"timestamp"`
}

type pubPagination struct {
	Total   int  `json:"total"`
	Limit   int  `json:"limit"`
	Offset  int  `json:"offset"`
	HasMore bool `json:"has_more"`
}

type pubListResp struct {
	Data       []pubListItem `json:"data"`
	Pagination pubPagination `json:"pagination"`
}

type pubErrorResp struct {
	Error      string            `json:"error"`
	Message    string            `json:"message"`
	Details    map[string]string `json:"details"`
	RetryAfter *int64            `json:"retry_after"`
}

type pubVerifyResp struct {
	Valid       bool     `json:"valid"`
	KeyType     string   `json:"key_type"`
	Environment string   `json:"environment"`
	Permissions []string `json:"permissions"`
	Project     struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"project"`
}

type pubWindow struct {
	Limit     int64 `json:"limit"`
	Remaining int64 `json:"remaining"`
	Reset     int64 `json:"reset"`
}

type pubRateResp struct {
	Limits  map[string]pubWindow            `json:"limits"`
	Plan    string                          `json:"plan"`
	Buckets map[string]map[string]pubWindow `json:"buckets"`
}

// pubStrictJSON decodes body into v, refusing unknown fields and trailing data.
func pubStrictJSON(t testing.TB, body []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("strict decode into %T: %v\n%s", v, err, body)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("trailing data after JSON body: %s", body)
	}
}

// pubKeysOf returns the sorted member names of a JSON object.
func pubKeysOf(t testing.TB, raw []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, raw)
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// pubWantKeys checks that raw is a JSON object with exactly these members.
func pubWantKeys(t testing.TB, raw []byte, keys ...string) {
	t.Helper()
	want := slices.Clone(keys)
	sort.Strings(want)
	if got := pubKeysOf(t, raw); !slices.Equal(got, want) {
		t.Fatalf("object members %v, want exactly %v\n%s", got, want, raw)
	}
}

func pubWantTime(t testing.TB, what, s string) int64 {
	t.Helper()
	if !pubTimeRE.MatchString(s) {
		t.Fatalf("%s %q is not like 2026-01-15T10:30:00.000Z", what, s)
	}
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("%s %q: %v", what, s, err)
	}
	return tm.UnixMilli()
}

func pubWantEventID(t testing.TB, id string) {
	t.Helper()
	if !pubEventIDRE.MatchString(id) {
		t.Fatalf("event id %q does not match %s", id, pubEventIDRE)
	}
}

// pubMsText formats Unix ms the way the service does.
func pubMsText(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

func pubMustTime(t testing.TB, s string) int64 {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMilli()
}

// pubWantRequestID fails when a response has no X-Request-Id.
func pubWantRequestID(t testing.TB, r *Response) {
	t.Helper()
	if r.Header.Get("X-Request-Id") == "" {
		t.Fatalf("no X-Request-Id (status %d)", r.Status)
	}
}

// pubWantErr checks an error response strictly: status, code, message ("" = any),
// the JSON body shape and X-Request-Id.
func pubWantErr(t testing.TB, r *Response, status int, code, message string) pubErrorResp {
	t.Helper()
	wantError(t, r, status, code, message)
	var e pubErrorResp
	pubStrictJSON(t, r.Body, &e)
	if e.Message == "" {
		t.Fatalf("error body without message: %s", r.Body)
	}
	if status == 429 {
		if e.RetryAfter == nil {
			t.Fatalf("429 without retry_after: %s", r.Body)
		}
	} else if e.RetryAfter != nil {
		t.Fatalf("retry_after on a %d: %s", status, r.Body)
	}
	if e.Details != nil && len(e.Details) == 0 {
		t.Fatalf("empty details object: %s", r.Body)
	}
	return e
}

// pubWantDetail checks an error response and that details[field] contains msg.
func pubWantDetail(t testing.TB, r *Response, status int, code, field, msg string) pubErrorResp {
	t.Helper()
	e := pubWantErr(t, r, status, code, "")
	got, ok := e.Details[field]
	if !ok {
		t.Fatalf("details has no %q: %s", field, r.Body)
	}
	if !strings.Contains(got, msg) {
		t.Fatalf("details[%q] = %q, want it to contain %q", field, got, msg)
	}
	return e
}

// pubWantExactError checks the whole error body against {"error":code,"message":message}.
func pubWantExactError(t testing.TB, r *Response, status int, code, message string) {
	t.Helper()
	pubWantErr(t, r, status, code, message)
	pubWantKeys(t, r.Body, "error", "message")
}

// pubCreate posts one event and checks the 201 answer strictly.
func pubCreate(t testing.TB, s *Server, key string, body any, headers ...string) pubCreateResp {
	t.Helper()
	r := Do(t, "POST", s.Public+"/events", key, body, headers...)
	return pubWantCreated(t, r)
}

func pubWantCreated(t testing.TB, r *Response) pubCreateResp {
	t.Helper()
	wantStatus(t, r, 201)
	pubWantRequestID(t, r)
	var c pubCreateResp
	pubStrictJSON(t, r.Body, &c)
	pubWantKeys(t, r.Body, "id", "event", "status", "timestamp")
	pubWantEventID(t, c.ID)
	pubWantTime(t, "timestamp", c.Timestamp)
	if c.Status != "accepted" {
		t.Fatalf("status %q, want accepted", c.Status)
	}
	return c
}

// pubPostBatch posts a batch and checks the 201 answer strictly.
func pubPostBatch(t testing.TB, s *Server, key string, body any) pubBatchResp {
	t.Helper()
	r := Do(t, "POST", s.Public+"/events/batch", key, body)
	wantStatus(t, r, 201)
	return pubDecodeBatch(t, r)
}

func pubDecodeBatch(t testing.TB, r *Response) pubBatchResp {
	t.Helper()
	var b pubBatchResp
	pubStrictJSON(t, r.Body, &b)
	pubWantKeys(t, r.Body, "accepted", "rejected", "results")
	var raw struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(r.Body, &raw); err != nil {
		t.Fatal(err)
	}
	acc, rej := 0, 0
	for i, res := range b.Results {
		switch res.Status {
		case "accepted":
			acc++
			pubWantKeys(t, raw.Results[i], "id", "status")
			pubWantEventID(t, res.ID)
		case "rejected":
			rej++
			pubWantKeys(t, raw.Results[i], "status", "error", "message", "details")
			if res.Error == "" || res.Message == "" || len(res.Details) == 0 {
				t.Fatalf("rejected entry %d incomplete: %s", i, raw.Results[i])
			}
		default:
			t.Fatalf("result %d has status %q: %s", i, res.Status, r.Body)
		}
	}
	if acc != b.Accepted || rej != b.Rejected {
		t.Fatalf("accepted %d rejected %d, but results hold %d and %d: %s", b.Accepted, b.Rejected, acc, rej, r.Body)
	}
	return b
}

// pubGetEvent reads one event and checks the 200 answer strictly.
func pubGetEvent(t testing.TB, s *Server, key, id string) pubEventResp {
	t.Helper()
	r := Do(t, "GET", s.Public+"/events/"+id, key, nil)
	wantStatus(t, r, 200)
	var e pubEventResp
	pubStrictJSON(t, r.Body, &e)
	if e.VisitorID != nil {
		pubWantKeys(t, r.Body, "id", "event", "visitor_id", "properties", "timestamp", "created_at")
	} else {
		pubWantKeys(t, r.Body, "id", "event", "properties", "timestamp", "created_at")
	}
	pubWantEventID(t, e.ID)
	pubWantTime(t, "timestamp", e.Timestamp)
	pubWantTime(t, "created_at", e.CreatedAt)
	if len(e.Properties) == 0 || e.Properties[0] != '{' {
		t.Fatalf("properties is not an object: %s", r.Body)
	}
	return e
}

// pubList calls GET /events?query and checks the 200 answer strictly.
func pubList(t testing.TB, s *Server, key, query string) pubListResp {
	t.Helper()
	r := Do(t, "GET", s.Public+"/events?"+query, key, nil)
	wantStatus(t, r, 200)
	var l pubListResp
	pubStrictJSON(t, r.Body, &l)
	pubWantKeys(t, r.Body, "data", "pagination")
	var raw struct {
		Data       []json.RawMessage `json:"data"`
		Pagination json.RawMessage   `json:"pagination"`
	}
	if err := json.Unmarshal(r.Body, &raw); err != nil {
		t.Fatal(err)
	}
	if raw.Data == nil {
		t.Fatalf("data is not an array: %s", r.Body)
	}
	pubWantKeys(t, raw.Pagination, "total", "limit", "offset", "has_more")
	for i, it := range raw.Data {
		pubWantKeys(t, it, "id", "event", "visitor_id", "timestamp")
		pubWantEventID(t, l.Data[i].ID)
		pubWantTime(t, "timestamp", l.Data[i].Timestamp)
	}
	p := l.Pagination
	if want := p.Offset+len(l.Data) < p.Total; p.HasMore != want {
		t.Fatalf("has_more %v with offset %d, %d items, total %d", p.HasMore, p.Offset, len(l.Data), p.Total)
	}
	if len(l.Data) > p.Limit {
		t.Fatalf("%d items over limit %d", len(l.Data), p.Limit)
	}
	return l
}

func pubListIDs(l pubListResp) []string {
	out := make([]string, len(l.Data))
	for i, it := range l.Data {
		out[i] = it.ID
	}
	return out
}

func pubVerify(t testing.TB, s *Server, key string) pubVerifyResp {
	t.Helper()
	r := Do(t, "GET", s.Public+"/verify", key, nil)
	wantStatus(t, r, 200)
	var v pubVerifyResp
	pubStrictJSON(t, r.Body, &v)
	pubWantKeys(t, r.Body, "valid", "key_type", "environment", "permissions", "project")
	var raw struct {
		Project json.RawMessage `json:"project"`
	}
	_ = json.Unmarshal(r.Body, &raw)
	pubWantKeys(t, raw.Project, "id", "name")
	return v
}

func pubRateStatus(t testing.TB, s *Server, key string) pubRateResp {
	t.Helper()
	r := Do(t, "GET", s.Public+"/rate-limit", key, nil)
	wantStatus(t, r, 200)
	var rs pubRateResp
	pubStrictJSON(t, r.Body, &rs)
	pubWantKeys(t, r.Body, "limits", "plan", "buckets")
	var raw struct {
		Limits  map[string]json.RawMessage            `json:"limits"`
		Buckets map[string]map[string]json.RawMessage `json:"buckets"`
	}
	_ = json.Unmarshal(r.Body, &raw)
	if got := pubKeysOf(t, pubMarshal(t, raw.Limits)); !slices.Equal(got, []string{"day", "hour", "minute"}) {
		t.Fatalf("limits members %v: %s", got, r.Body)
	}
	for _, w := range raw.Limits {
		pubWantKeys(t, w, "limit", "remaining", "reset")
	}
	if got := pubKeysOf(t, pubMarshal(t, raw.Buckets)); !slices.Equal(got, []string{"analytics", "batch"}) {
		t.Fatalf("buckets members %v: %s", got, r.Body)
	}
	for _, b := range raw.Buckets {
		for _, w := range b {
			pubWantKeys(t, w, "limit", "remaining", "reset")
		}
	}
	return rs
}

func pubMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pubNewKey creates an API key and returns its id and text.
func pubNewKey(t testing.TB, s *Server, projectID, typ, env string) (id, key string) {
	t.Helper()
	r := s.AdminDo(t, "POST", "/admin/v1/projects/"+projectID+"/keys",
		map[string]any{"name": typ + " " + env, "type": typ, "environment": env})
	wantStatus(t, r, 201)
	var k struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	if err := json.Unmarshal(r.Body, &k); err != nil {
		t.Fatal(err)
	}
	return k.ID, k.Key
}

// pubKeyIDOf finds a key's id in the admin key list of its project by its prefix.
func pubKeyIDOf(t testing.TB, s *Server, projectID, key string) string {
	t.Helper()
	r := s.AdminDo(t, "GET", "/admin/v1/projects/"+projectID+"/keys", nil)
	wantStatus(t, r, 200)
	var l struct {
		Data []struct {
			ID        string  `json:"id"`
			Prefix    string  `json:"prefix"`
			RevokedAt *string `json:"revoked_at"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &l); err != nil {
		t.Fatal(err)
	}
	found := ""
	for _, k := range l.Data {
		if k.RevokedAt == nil && k.Prefix != "" && strings.HasPrefix(key, k.Prefix) {
			if found != "" {
				t.Fatalf("two keys with the prefix of %s", key[:12])
			}
			found = k.ID
		}
	}
	if found == "" {
		t.Fatalf("key %s... not in %s", key[:12], r.Body)
	}
	if strings.Contains(string(r.Body), key) {
		t.Fatalf("key list shows the key text")
	}
	return found
}

func pubPatchProject(t testing.TB, s *Server, projectID string, body any) {
	t.Helper()
	r := s.AdminDo(t, "PATCH", "/admin/v1/projects/"+projectID, body)
	wantStatus(t, r, 200)
}

// pubDoRaw sends a request with only the given headers (Do always sets a JSON
// Content-Type with a body).
// It returns an error instead of failing, so goroutines can use it.
func pubDoRaw(method, url, key string, body []byte, headers ...string) (*Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

func pubMustDo(t testing.TB, method, url, key string, body []byte, headers ...string) *Response {
	t.Helper()
	r, err := pubDoRaw(method, url, key, body, headers...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

func pubGzip(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pubRawResponse is an HTTP response read from a raw TCP connection, header
// names exactly as the server wrote them.
type pubRawResponse struct {
	StatusLine string
	Lines      []string // header lines, "Name: value"
	Body       string
}

// header returns the value of the header line whose name is exactly name
// (case-sensitive), and whether there is one.
func (r *pubRawResponse) header(name string) (string, bool) {
	for _, l := range r.Lines {
		if n, v, ok := strings.Cut(l, ":"); ok && n == name {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// hasHeaderFold reports a header line of that name in any case.
func (r *pubRawResponse) hasHeaderFold(name string) bool {
	for _, l := range r.Lines {
		if n, _, ok := strings.Cut(l, ":"); ok && strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// pubRawDo sends one request over a fresh TCP connection and reads the raw answer.
func pubRawDo(t testing.TB, s *Server, method, path, key string, body string, headers ...string) *pubRawResponse {
	t.Helper()
	addr := strings.TrimPrefix(s.Public, "http://")
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, path, addr)
	if key != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", key)
	}
	if body != "" {
		fmt.Fprintf(&b, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	}
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	status, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("read status line: %v", err)
	}
	out := &pubRawResponse{StatusLine: strings.TrimRight(status, "\r\n")}
	length := -1
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read header: %v", err)
		}
		l = strings.TrimRight(l, "\r\n")
		if l == "" {
			break
		}
		out.Lines = append(out.Lines, l)
		if n, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(n, "Content-Length") {
			length, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	var rest []byte
	if length >= 0 {
		rest = make([]byte, length)
		_, err = io.ReadFull(br, rest)
	} else {
		rest, err = io.ReadAll(br)
	}
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	out.Body = string(rest)
	return out
}

func (r *pubRawResponse) status(t testing.TB) int {
	t.Helper()
	f := strings.Fields(r.StatusLine)
	if len(f) < 2 {
		t.Fatalf("status line %q", r.StatusLine)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("status line %q", r.StatusLine)
	}
	return n
}

// ---------------------------------------------------------------------------
// Authentication, permissions, isolation, verify, errors, CORS.

func TestAuth(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "auth", "", pubBigLimits)
	secret := s.Key(t, p, "secret", "live")
	public := s.Key(t, p, "public", "live")
	for _, k := range []string{secret, public} {
		if !pubKeyTextRE.MatchString(k) {
			t.Fatalf("key text %q does not match %s", k, pubKeyTextRE)
		}
	}
	ev := pubCreate(t, s, secret, map[string]any{"event": "auth_probe"})

	routes := []struct {
		method, path string
		body         any
	}{
		{"POST", "/events", map[string]any{"event": "x"}},
		{"POST", "/events/batch", map[string]any{"events": []any{map[string]any{"event": "x"}}}},
		{"GET", "/events", nil},
		{"GET", "/events/" + ev.ID, nil},
		{"GET", "/verify", nil},
		{"GET", "/rate-limit", nil},
	}
	badKeys := []struct{ name, header string }{
		{"missing", ""},
		{"garbage", "Authorization: Bearer nope"},
		{"well-formed unknown", "Authorization: Bearer sk_live_" + strings.Repeat("A", 32)},
		{"secret with one char changed", "Authorization: Bearer " + secret[:len(secret)-1] + pubFlip(secret[len(secret)-1])},
		{"empty bearer", "Authorization: Bearer "},
		{"basic scheme", "Authorization: Basic " + secret},
		{"raw key without scheme", "Authorization: " + secret},
	}
	for _, rt := range routes {
		for _, bk := range badKeys {
			t.Run(rt.method+" "+strings.SplitN(rt.path, "/evt_", 2)[0]+"/"+bk.name, func(t *testing.T) {
				var hs []string
				if bk.header != "" {
					hs = append(hs, bk.header)
				}
				r := Do(t, rt.method, s.Public+rt.path, "", rt.body, hs...)
				pubWantExactError(t, r, 401, "unauthorized", pubMsgUnauthorized)
				for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy", "RateLimit"} {
					if v := r.Header.Get(h); v != "" {
						t.Fatalf("401 carries %s: %s", h, v)
					}
				}
			})
		}
	}

	t.Run("api_key query parameter", func(t *testing.T) {
		v := pubVerifyOK(t, Do(t, "GET", s.Public+"/verify?api_key="+secret, "", nil))
		if v.KeyType != "secret" {
			t.Fatalf("key_type %q", v.KeyType)
		}
		pubWantCreated(t, Do(t, "POST", s.Public+"/events?api_key="+public, "", map[string]any{"event": "by_query"}))
		l := pubList(t, s, "", "api_key="+secret+"&event=by_query")
		if l.Pagination.Total != 1 {
			t.Fatalf("total %d", l.Pagination.Total)
		}
		pubWantExactError(t, Do(t, "GET", s.Public+"/verify?api_key=nope", "", nil), 401, "unauthorized", pubMsgUnauthorized)
	})

	t.Run("bearer scheme is case-insensitive", func(t *testing.T) {
		pubVerifyOK(t, Do(t, "GET", s.Public+"/verify", "", nil, "Authorization: bearer "+secret))
	})

	t.Run("public key forbidden on reads", func(t *testing.T) {
		for _, path := range []string{"/events", "/events?event=auth_probe", "/events/" + ev.ID, "/events/evt_" + strings.Repeat("0", 26)} {
			r := Do(t, "GET", s.Public+path, public, nil)
			pubWantExactError(t, r, 403, "forbidden", pubMsgForbidden)
			if r.Header.Get("X-RateLimit-Limit") == "" {
				t.Fatalf("403 without X-RateLimit-Limit")
			}
		}
	})

	t.Run("public key allowed routes", func(t *testing.T) {
		pubCreate(t, s, public, map[string]any{"event": "from_browser"})
		b := pubPostBatch(t, s, public, map[string]any{"events": []any{map[string]any{"event": "from_browser"}}})
		if b.Accepted != 1 {
			t.Fatalf("batch %+v", b)
		}
		v := pubVerify(t, s, public)
		if v.KeyType != "public" || !slices.Equal(v.Permissions, []string{"write"}) {
			t.Fatalf("verify %+v", v)
		}
		pubRateStatus(t, s, public)
		if l := pubList(t, s, secret, "event=from_browser"); l.Pagination.Total != 2 {
			t.Fatalf("public writes stored %d, want 2", l.Pagination.Total)
		}
	})

	t.Run("revoked key answers 401 within 1 s", func(t *testing.T) {
		kid, victim := pubNewKey(t, s, p, "secret", "live")
		_, victimPub := pubNewKey(t, s, p, "public", "live")
		pubVerify(t, s, victim)
		if got := pubKeyIDOf(t, s, p, victim); got != kid {
			t.Fatalf("key list id %s, created id %s", got, kid)
		}
		r := s.AdminDo(t, "DELETE", "/admin/v1/keys/"+kid, nil)
		wantStatus(t, r, 204)
		deadline := time.Now().Add(time.Second)
		for {
			r := Do(t, "GET", s.Public+"/verify", victim, nil)
			if r.Status == 401 {
				pubWantExactError(t, r, 401, "unauthorized", pubMsgUnauthorized)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("revoked key still answers %d after 1 s", r.Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
		pubWantExactError(t, Do(t, "POST", s.Public+"/events", victim, map[string]any{"event": "x"}), 401, "unauthorized", pubMsgUnauthorized)
		pubWantExactError(t, Do(t, "GET", s.Public+"/events?api_key="+victim, "", nil), 401, "unauthorized", pubMsgUnauthorized)
		// Revoking twice is a 404; the other keys keep working.
		wantStatus(t, s.AdminDo(t, "DELETE", "/admin/v1/keys/"+kid, nil), 404)
		pubVerify(t, s, victimPub)
		pubVerify(t, s, secret)
		// Still revoked after a restart.
		s.Restart()
		pubWantExactError(t, Do(t, "GET", s.Public+"/verify", victim, nil), 401, "unauthorized", pubMsgUnauthorized)
		pubVerify(t, s, secret)
	})

	t.Run("keys of a deleted project answer 401", func(t *testing.T) {
		q := s.Project(t, "doomed", "", nil)
		sk := s.Key(t, q, "secret", "live")
		pk := s.Key(t, q, "public", "test")
		pubCreate(t, s, sk, map[string]any{"event": "x"})
		wantStatus(t, s.AdminDo(t, "DELETE", "/admin/v1/projects/"+q, nil), 204)
		for _, k := range []string{sk, pk} {
			pubWantExactError(t, Do(t, "GET", s.Public+"/verify", k, nil), 401, "unauthorized", pubMsgUnauthorized)
			pubWantExactError(t, Do(t, "POST", s.Public+"/events", k, map[string]any{"event": "x"}), 401, "unauthorized", pubMsgUnauthorized)
		}
		pubVerify(t, s, secret)
	})
}

func pubFlip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

func pubVerifyOK(t testing.TB, r *Response) pubVerifyResp {
	t.Helper()
	wantStatus(t, r, 200)
	var v pubVerifyResp
	pubStrictJSON(t, r.Body, &v)
	return v
}

func TestVerify(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "Verify Project", "professional", nil)
	for _, tc := range []struct {
		typ, env string
		perms    []string
	}{
		{"secret", "live", []string{"read", "write"}},
		{"secret", "test", []string{"read", "write"}},
		{"public", "live", []string{"write"}},
		{"public", "test", []string{"write"}},
	} {
		t.Run(tc.typ+"_"+tc.env, func(t *testing.T) {
			key := s.Key(t, p, tc.typ, tc.env)
			wantPrefix := map[string]string{"secret": "sk_", "public": "pk_"}[tc.typ] + tc.env + "_"
			if !strings.HasPrefix(key, wantPrefix) {
				t.Fatalf("key %q does not start with %s", key, wantPrefix)
			}
			v := pubVerify(t, s, key)
			if !v.Valid || v.KeyType != tc.typ || v.Environment != tc.env || !slices.Equal(v.Permissions, tc.perms) ||
				v.Project.ID != p || v.Project.Name != "Verify Project" {
				t.Fatalf("verify = %+v", v)
			}
		})
	}
	t.Run("name change shows", func(t *testing.T) {
		key := s.Key(t, p, "public", "live")
		pubPatchProject(t, s, p, map[string]any{"name": "Renamed"})
		if v := pubVerify(t, s, key); v.Project.Name != "Renamed" {
			t.Fatalf("project name %q after rename", v.Project.Name)
		}
	})
}

func TestIsolation(t *testing.T) {
	s := Start(t)
	a := s.Project(t, "a", "", pubBigLimits)
	b := s.Project(t, "b", "", pubBigLimits)
	keys := map[string]string{
		"a_live": s.Key(t, a, "secret", "live"),
		"a_test": s.Key(t, a, "secret", "test"),
		"b_live": s.Key(t, b, "secret", "live"),
		"b_test": s.Key(t, b, "secret", "test"),
	}
	pubs := map[string]string{
		"a_live": s.Key(t, a, "public", "live"),
		"a_test": s.Key(t, a, "public", "test"),
		"b_live": s.Key(t, b, "public", "live"),
		"b_test": s.Key(t, b, "public", "test"),
	}
	names := []string{"a_live", "a_test", "b_live", "b_test"}
	ids := map[string][]string{}
	for _, n := range names {
		// Same event name and visitor everywhere: only the dataset differs.
		c := pubCreate(t, s, keys[n], map[string]any{"event": "iso", "visitor_id": "shared_visitor"})
		ids[n] = append(ids[n], c.ID)
		c = pubCreate(t, s, pubs[n], map[string]any{"event": "iso", "visitor_id": "shared_visitor"})
		ids[n] = append(ids[n], c.ID)
		bt := pubPostBatch(t, s, keys[n], map[string]any{"events": []any{map[string]any{"event": "iso", "visitor_id": "shared_visitor"}}})
		ids[n] = append(ids[n], bt.Results[0].ID)
	}
	for _, reader := range names {
		for _, q := range []string{"", "event=iso", "visitor_id=shared_visitor", "event=iso&visitor_id=shared_visitor", "from=2000-01-01"} {
			l := pubList(t, s, keys[reader], q)
			got := pubListIDs(l)
			sort.Strings(got)
			want := slices.Clone(ids[reader])
			sort.Strings(want)
			if !slices.Equal(got, want) || l.Pagination.Total != len(want) {
				t.Fatalf("%s lists %v (total %d) for %q, want %v", reader, got, l.Pagination.Total, q, want)
			}
		}
		for _, owner := range names {
			for _, id := range ids[owner] {
				r := Do(t, "GET", s.Public+"/events/"+id, keys[reader], nil)
				if owner == reader {
					pubGetEvent(t, s, keys[reader], id)
					continue
				}
				pubWantExactError(t, r, 404, "not_found", pubMsgNotFound)
			}
		}
	}
}

func TestErrorsAndRouting(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "errors", "", pubBigLimits)
	key := s.Key(t, p, "secret", "live")

	t.Run("unknown route", func(t *testing.T) {
		for _, path := range []string{"/nope", "/events/evt_x/extra", "/v1/events", "/"} {
			for _, k := range []string{"", key} {
				r := Do(t, "GET", s.Public+path, k, nil)
				pubWantErr(t, r, 404, "not_found", "")
			}
		}
		pubWantErr(t, Do(t, "POST", s.Public+"/nope", key, map[string]any{"event": "x"}), 404, "not_found", "")
	})

	t.Run("wrong method", func(t *testing.T) {
		for _, tc := range []struct {
			method, path string
			allow        []string
		}{
			{"DELETE", "/events", []string{"GET", "POST"}},
			{"PUT", "/events", []string{"GET", "POST"}},
			{"PATCH", "/events/evt_" + strings.Repeat("0", 26), []string{"GET"}},
			{"DELETE", "/events/evt_" + strings.Repeat("0", 26), []string{"GET"}},
			{"POST", "/verify", []string{"GET"}},
			{"POST", "/rate-limit", []string{"GET"}},
		} {
			t.Run(tc.method+" "+tc.path, func(t *testing.T) {
				r := Do(t, tc.method, s.Public+tc.path, key, nil)
				pubWantErr(t, r, 405, "method_not_allowed", "")
				allow := r.Header.Get("Allow")
				if allow == "" {
					t.Fatalf("405 without Allow")
				}
				for _, m := range tc.allow {
					if !slices.Contains(pubSplitList(allow), m) {
						t.Fatalf("Allow %q lacks %s", allow, m)
					}
				}
				if slices.Contains(pubSplitList(allow), tc.method) {
					t.Fatalf("Allow %q lists the refused method %s", allow, tc.method)
				}
			})
		}
	})

	t.Run("X-Request-Id on every response", func(t *testing.T) {
		ev := pubCreate(t, s, key, map[string]any{"event": "rid"})
		seen := map[string]bool{}
		for _, r := range []*Response{
			Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "rid"}),
			Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "bad-name"}),
			Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "rid", "properties": map[string]any{"amount": 0}}),
			Do(t, "POST", s.Public+"/events", "", map[string]any{"event": "rid"}),
			Do(t, "GET", s.Public+"/events", key, nil),
			Do(t, "GET", s.Public+"/events/"+ev.ID, key, nil),
			Do(t, "GET", s.Public+"/events/evt_nope", key, nil),
			Do(t, "GET", s.Public+"/verify", key, nil),
			Do(t, "GET", s.Public+"/rate-limit", key, nil),
			Do(t, "GET", s.Public+"/healthz", "", nil),
			Do(t, "GET", s.Public+"/nope", "", nil),
			Do(t, "DELETE", s.Public+"/events", key, nil),
			Do(t, "OPTIONS", s.Public+"/events", "", nil, "Origin: https://x.example", "Access-Control-Request-Method: POST"),
			Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": []any{}}),
		} {
			id := r.Header.Get("X-Request-Id")
			if id == "" {
				t.Fatalf("status %d response without X-Request-Id", r.Status)
			}
			if seen[id] {
				t.Fatalf("X-Request-Id %q repeated", id)
			}
			seen[id] = true
		}
	})

	t.Run("client X-Request-Id", func(t *testing.T) {
		for _, id := range []string{"req-abc_123", "0f8fad5b-d9cb-469f-a165-70867728950e", strings.Repeat("a", 128)} {
			r := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "rid"}, "X-Request-Id: "+id)
			wantStatus(t, r, 201)
			if got := r.Header.Get("X-Request-Id"); got != id {
				t.Fatalf("X-Request-Id %q, want echo of %q", got, id)
			}
			r = Do(t, "GET", s.Public+"/verify", "", nil, "X-Request-Id: "+id)
			if got := r.Header.Get("X-Request-Id"); got != id {
				t.Fatalf("401: X-Request-Id %q, want echo of %q", got, id)
			}
		}
		for _, id := range []string{strings.Repeat("a", 129), "has space", "tab\there"} {
			r := Do(t, "GET", s.Public+"/verify", key, nil, "X-Request-Id: "+id)
			got := r.Header.Get("X-Request-Id")
			if got == "" || got == id {
				t.Fatalf("unsafe X-Request-Id %q answered with %q", id, got)
			}
		}
	})

	t.Run("healthz", func(t *testing.T) {
		for _, hs := range [][]string{nil, {"Authorization: Bearer garbage"}} {
			r := Do(t, "GET", s.Public+"/healthz", "", nil, hs...)
			wantStatus(t, r, 200)
			if string(r.Body) != `{"status":"ok"}` {
				t.Fatalf("healthz body %s", r.Body)
			}
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("healthz Content-Type %q", ct)
			}
			pubWantRequestID(t, r)
		}
	})
}

func pubSplitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		out = append(out, strings.TrimSpace(p))
	}
	return out
}

func TestCORS(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "cors", "", pubBigLimits)
	pub := s.Key(t, p, "public", "live")
	secret := s.Key(t, p, "secret", "live")
	const good, evil = "https://shop.example.com", "https://evil.example.net"

	t.Run("preflight", func(t *testing.T) {
		for _, path := range []string{"/events", "/events/batch", "/verify", "/events/evt_" + strings.Repeat("1", 26)} {
			r := Do(t, "OPTIONS", s.Public+path, "", nil, "Origin: "+good,
				"Access-Control-Request-Method: POST", "Access-Control-Request-Headers: authorization, content-type, idempotency-key")
			wantStatus(t, r, 204)
			if len(r.Body) != 0 {
				t.Fatalf("preflight body %q", r.Body)
			}
			if got := r.Header.Get("Access-Control-Allow-Origin"); got != good {
				t.Fatalf("ACAO %q, want %q", got, good)
			}
			allowH := strings.ToLower(r.Header.Get("Access-Control-Allow-Headers"))
			for _, h := range []string{"authorization", "content-type", "idempotency-key"} {
				if !slices.Contains(pubSplitList(allowH), h) {
					t.Fatalf("Access-Control-Allow-Headers %q lacks %s", allowH, h)
				}
			}
			allowM := r.Header.Get("Access-Control-Allow-Methods")
			for _, m := range []string{"GET", "POST"} {
				if !slices.Contains(pubSplitList(allowM), m) {
					t.Fatalf("Access-Control-Allow-Methods %q lacks %s", allowM, m)
				}
			}
			pubWantRequestID(t, r)
		}
	})

	exposes := func(t *testing.T, r *Response) {
		t.Helper()
		exp := pubSplitList(r.Header.Get("Access-Control-Expose-Headers"))
		for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After", "X-Request-Id"} {
			if !slices.Contains(exp, h) {
				t.Fatalf("Access-Control-Expose-Headers %v lacks %s", exp, h)
			}
		}
	}

	t.Run("any origin while allowed_origins is empty", func(t *testing.T) {
		for _, o := range []string{good, evil} {
			r := Do(t, "POST", s.Public+"/events", pub, map[string]any{"event": "cors"}, "Origin: "+o)
			pubWantCreated(t, r)
			if got := r.Header.Get("Access-Control-Allow-Origin"); got != o {
				t.Fatalf("ACAO %q, want %q", got, o)
			}
			exposes(t, r)
			if !slices.Contains(pubSplitList(strings.Join(r.Header.Values("Vary"), ",")), "Origin") {
				t.Fatalf("Vary %q lacks Origin", r.Header.Values("Vary"))
			}
		}
		// No Origin, no CORS headers needed.
		r := Do(t, "POST", s.Public+"/events", pub, map[string]any{"event": "cors"})
		pubWantCreated(t, r)
		if got := r.Header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Fatalf("ACAO %q without Origin", got)
		}
	})

	pubPatchProject(t, s, p, map[string]any{"allowed_origins": []string{good, "http://localhost:3000"}})

	t.Run("listed origin allowed", func(t *testing.T) {
		for _, o := range []string{good, "http://localhost:3000"} {
			r := Do(t, "POST", s.Public+"/events", pub, map[string]any{"event": "cors"}, "Origin: "+o)
			pubWantCreated(t, r)
			if got := r.Header.Get("Access-Control-Allow-Origin"); got != o {
				t.Fatalf("ACAO %q, want %q", got, o)
			}
			exposes(t, r)
			b := Do(t, "POST", s.Public+"/events/batch", pub, map[string]any{"events": []any{map[string]any{"event": "cors"}}}, "Origin: "+o)
			wantStatus(t, b, 201)
			if got := b.Header.Get("Access-Control-Allow-Origin"); got != o {
				t.Fatalf("batch ACAO %q, want %q", got, o)
			}
		}
	})

	t.Run("other origin refused", func(t *testing.T) {
		for _, tc := range []struct {
			method, path, key string
			body              any
		}{
			{"POST", "/events", pub, map[string]any{"event": "cors_evil"}},
			{"POST", "/events/batch", pub, map[string]any{"events": []any{map[string]any{"event": "cors_evil"}}}},
			{"GET", "/verify", pub, nil},
			{"GET", "/events", secret, nil},
		} {
			for _, o := range []string{evil, "https://shop.example.com.evil.net", "http://shop.example.com"} {
				r := Do(t, tc.method, s.Public+tc.path, tc.key, tc.body, "Origin: "+o)
				pubWantErr(t, r, 403, "forbidden", "")
				if got := r.Header.Get("Access-Control-Allow-Origin"); got == o || got == "*" {
					t.Fatalf("refused origin got ACAO %q", got)
				}
			}
		}
		if l := pubList(t, s, secret, "event=cors_evil"); l.Pagination.Total != 0 {
			t.Fatalf("refused origin stored %d events", l.Pagination.Total)
		}
		// Server-side calls (no Origin) are not affected.
		pubCreate(t, s, secret, map[string]any{"event": "server_side"})
	})

	pubPatchProject(t, s, p, map[string]any{"allowed_origins": []string{}})
	t.Run("emptied list allows again", func(t *testing.T) {
		r := Do(t, "POST", s.Public+"/events", pub, map[string]any{"event": "cors"}, "Origin: "+evil)
		pubWantCreated(t, r)
	})
}

// TestStrictShapes decodes each kind of public response strictly: any member
// beyond the documented ones fails.
func TestStrictShapes(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "shapes", "", pubBigLimits)
	key := s.Key(t, p, "secret", "live")
	pub := s.Key(t, p, "public", "live")

	c := pubCreate(t, s, key, map[string]any{"event": "shape", "visitor_id": "v1", "properties": map[string]any{"a": 1}})
	pubCreate(t, s, key, map[string]any{"event": "shape"})
	pubGetEvent(t, s, key, c.ID)
	pubList(t, s, key, "")
	pubList(t, s, key, "event=none_such")
	pubPostBatch(t, s, key, map[string]any{"events": []any{map[string]any{"event": "shape"}, map[string]any{"event": "bad name"}}})
	pubVerify(t, s, key)
	pubVerify(t, s, pub)
	pubRateStatus(t, s, key)
	pubRateStatus(t, s, pub)

	// The create response is exactly {id, event, status, timestamp}, also on replay.
	r := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "shape"}, "Idempotency-Key: shape-1")
	pubWantCreated(t, r)
	r = Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "shape"}, "Idempotency-Key: shape-1")
	pubWantCreated(t, r)

	for _, tc := range []struct {
		r      *Response
		status int
		code   string
		fields []string
	}{
		{Do(t, "GET", s.Public+"/verify", "", nil), 401, "unauthorized", []string{"error", "message"}},
		{Do(t, "GET", s.Public+"/events", pub, nil), 403, "forbidden", []string{"error", "message"}},
		{Do(t, "GET", s.Public+"/events/evt_x", key, nil), 404, "not_found", []string{"error", "message"}},
		{Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "a-b"}), 400, "bad_request", []string{"error", "message", "details"}},
		{Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "a", "properties": map[string]any{"amount": -1}}), 422, "validation_error", []string{"error", "message", "details"}},
		{Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "other"}, "Idempotency-Key: shape-1"), 409, "idempotency_conflict", []string{"error", "message"}},
		{Do(t, "GET", s.Public+"/events?limit=0", key, nil), 400, "bad_request", []string{"error", "message", "details"}},
	} {
		pubWantErr(t, tc.r, tc.status, tc.code, "")
		pubWantKeys(t, tc.r.Body, tc.fields...)
	}
}
