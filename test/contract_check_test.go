package test

import (
	"net/http"
	"strings"
	"testing"
)

// TestContractCheckCatches runs the contract check on made-up answers, so a
// check that silently stopped catching anything (a validator upgrade, a
// document that no longer loads) is noticed: the rest of the suite only
// ever shows that good answers pass.
func TestContractCheckCatches(t *testing.T) {
	if err := loadContract(); err != nil {
		t.Fatal(err)
	}
	// Two made-up listeners; no server is needed, nothing is sent.
	const public, admin = "127.0.0.1:1", "127.0.0.1:2"
	listenerIsAdmin.Store(public, false)
	listenerIsAdmin.Store(admin, true)
	t.Cleanup(func() { listenerIsAdmin.Delete(public); listenerIsAdmin.Delete(admin) })

	jsonHeader := func(extra ...string) http.Header {
		h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req_1_1"}}
		for _, kv := range extra {
			k, v, _ := strings.Cut(kv, ": ")
			h.Set(k, v)
		}
		return h
	}
	rate := []string{"X-RateLimit-Limit: 100", "X-RateLimit-Remaining: 99", "X-RateLimit-Reset: 1700000000",
		"RateLimit-Policy: 100;w=60", "RateLimit: limit=100, remaining=99, reset=60"}
	tests := []struct {
		name   string
		method string
		url    string
		status int
		header http.Header
		body   string
		want   string // "" passes; else a piece of the expected complaint
	}{
		{"health ok", "GET", "http://" + public + "/healthz", 200, jsonHeader(), `{"status":"ok"}`, ""},
		{"health body off schema", "GET", "http://" + public + "/healthz", 200, jsonHeader(), `{"status":"fine"}`, "status"},
		{"undocumented status", "GET", "http://" + public + "/healthz", 418, jsonHeader(), `{"error":"x","message":"y"}`, "418"},
		{"undocumented content type", "GET", "http://" + public + "/healthz", 200, http.Header{"Content-Type": {"text/html"}, "X-Request-Id": {"r"}}, `<p>ok</p>`, "text/html"},
		{"unknown path answers NotFound", "GET", "http://" + public + "/nope", 404, jsonHeader(), `{"error":"not_found","message":"Not found"}`, ""},
		{"unknown path answered 200", "GET", "http://" + public + "/nope", 200, jsonHeader(), `{}`, "must be 404"},
		{"admin route on the public listener", "GET", "http://" + public + "/admin/v1/projects", 200, jsonHeader(), `{"data":[]}`, "must be 404"},
		{"wrong method without Allow", "PUT", "http://" + public + "/verify", 405, jsonHeader(), `{"error":"method_not_allowed","message":"Method not allowed"}`, "Allow"},
		{"error body without message", "GET", "http://" + public + "/verify", 401, jsonHeader(), `{"error":"unauthorized"}`, "message"},
		{"required header off schema", "GET", "http://" + public + "/verify", 429, jsonHeader(append(rate, "Retry-After: soon")...),
			`{"error":"rate_limit_exceeded","message":"Rate limit exceeded","retry_after":1}`, "retry-after"},
		{"optional header", "POST", "http://" + public + "/events", 201, jsonHeader(append(rate, "Idempotent-Replayed: true")...),
			`{"id":"evt_01M86G2G1KF48R88E6BD7X4XMR","event":"a","status":"accepted","timestamp":"2026-11-24T10:01:55.506Z"}`, ""},
		{"optional header off schema", "POST", "http://" + public + "/events", 201, jsonHeader(append(rate, "Idempotent-Replayed: yes")...),
			`{"id":"evt_01M86G2G1KF48R88E6BD7X4XMR","event":"a","status":"accepted","timestamp":"2026-11-24T10:01:55.506Z"}`, "Idempotent-Replayed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			errs := strings.Join(contractErrors(req, tc.status, tc.header, []byte(tc.body)), "\n")
			switch {
			case tc.want == "" && errs != "":
				t.Fatalf("a conforming answer was refused:\n%s", errs)
			case tc.want != "" && !strings.Contains(strings.ToLower(errs), strings.ToLower(tc.want)):
				t.Fatalf("want a complaint about %q, got:\n%s", tc.want, errs)
			}
		})
	}
}
