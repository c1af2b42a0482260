package test

import (
	"testing"
)

// TestProfileRoutes: what can be checked of the profile routes before the
// Segment /v1 routes can create profiles over HTTP. GET /profiles/{id}
// answers 404 not_found for an unknown id (ids with '/' and '%' reach the
// handler, not the router's 404), 403 to a public key, 401 without a key,
// and counts in the standard bucket with the rate-limit headers; the admin
// list is empty and pages by cursor, and the admin read answers 404.
func TestProfileRoutes(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "profiles", "", nil)
	secret := s.Key(t, p, "secret", "live")
	public := s.Key(t, p, "public", "live")

	for _, id := range []string{"user_42", "a%2Fb", "50%25%20off", "%C3%A9t%C3%A9"} {
		r := Do(t, "GET", s.Public+"/profiles/"+id, secret, nil)
		wantError(t, r, 404, "not_found", "Profile not found")
		if r.Header.Get("X-RateLimit-Remaining") == "" {
			t.Errorf("%s: no rate-limit headers", id)
		}
	}
	before := Do(t, "GET", s.Public+"/profiles/x", secret, nil).Header.Get("X-RateLimit-Remaining")
	after := Do(t, "GET", s.Public+"/profiles/x", secret, nil).Header.Get("X-RateLimit-Remaining")
	if before == "" || before == after {
		t.Errorf("X-RateLimit-Remaining %q then %q: the read is not counted", before, after)
	}
	wantError(t, Do(t, "GET", s.Public+"/profiles/user_42", public, nil), 403, "forbidden", "API key does not have permission for this resource")
	wantError(t, Do(t, "GET", s.Public+"/profiles/user_42", "", nil), 401, "unauthorized", "Invalid or missing API key")

	base := "/admin/v1/projects/" + p + "/profiles"
	for _, q := range []string{"", "?environment=test", "?environment=live&limit=100&after=user_1"} {
		r := s.AdminDo(t, "GET", base+q, nil)
		wantStatus(t, r, 200)
		m := r.JSON(t)
		if data, ok := m["data"].([]any); !ok || len(data) != 0 {
			t.Errorf("%s: data %v", q, m["data"])
		}
		pg := m["pagination"].(map[string]any)
		if pg["has_more"] != false || pg["next_after"] != nil {
			t.Errorf("%s: pagination %v", q, pg)
		}
	}
	wantError(t, s.AdminDo(t, "GET", base+"?limit=0", nil), 400, "bad_request", "")
	wantError(t, s.AdminDo(t, "GET", base+"?environment=prod", nil), 400, "bad_request", "")
	wantError(t, s.AdminDo(t, "GET", "/admin/v1/projects/proj_nope/profiles", nil), 404, "not_found", "Project not found")
	wantError(t, s.AdminDo(t, "GET", base+"/user_42?environment=live", nil), 404, "not_found", "Profile not found")
	wantError(t, s.AdminDo(t, "GET", base+"/a%2Fb", nil), 404, "not_found", "Profile not found")
	wantError(t, s.AdminDo(t, "GET", "/admin/v1/projects/proj_nope/profiles/user_42", nil), 404, "not_found", "Project not found")
	wantError(t, Do(t, "GET", s.Admin+base, "", nil), 401, "unauthorized", "")
}
