package http

import (
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine/ratelimit"
	"github.com/eventd/eventd/storage"
)

// TestProfileRoute reads a profile written through the engine (as the
// Segment routes will) over GET /profiles/{id} and the admin read, with ids
// that need percent-decoding: the whole rest of the path is the id.
func TestProfileRoute(t *testing.T) {
	eng, projectID, key := testEngine(t)
	p := eng.Authenticate([]byte(key.Key))
	const user, anon = "a/b %x ..", "anon é"
	at := time.Date(2026, 2, 3, 4, 5, 6, 789e6, time.UTC).UnixMilli()
	pe := actors.Pending{
		Event:   storage.Event{Name: "identify", VisitorID: user, HasVisitor: true, Timestamp: at, Properties: []byte("{}")},
		Profile: &storage.ProfileUpdate{ID: user, Traits: []byte(`{"name":"Ada \"A\"","n":1}`), Links: []string{anon}, Timestamp: at},
	}
	rep, err := eng.Submit(p, ratelimit.Standard, actors.SingleWrite(p.Dataset(), at, pe, false), false)
	if err != nil || !rep.Allowed {
		t.Fatalf("submit: %v", err)
	}
	eng.Release(rep)

	s := New(Config{Engine: eng, AdminToken: "t"})
	pub, adm := fasthttputil.NewInmemoryListener(), fasthttputil.NewInmemoryListener()
	go func() { _ = s.ServePublic(pub) }()
	go func() { _ = s.ServeAdmin(adm) }()
	t.Cleanup(func() { _ = s.Shutdown() })
	get := func(ln *fasthttputil.InmemoryListener, path, auth string) (int, map[string]any) {
		t.Helper()
		c := &fasthttp.HostClient{Addr: "eventd", Dial: func(string) (net.Conn, error) { return ln.Dial() }}
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://eventd" + path)
		req.URI().DisablePathNormalizing = true
		req.Header.Set("Authorization", "Bearer "+auth)
		if err := c.Do(req, resp); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(resp.Body(), &m); err != nil {
			t.Fatalf("%s: %s", path, resp.Body())
		}
		return resp.StatusCode(), m
	}
	for _, tc := range []struct {
		ln   *fasthttputil.InmemoryListener
		path string
		auth string
		id   string
		link string
	}{
		{pub, "/profiles/a%2Fb%20%25x%20..", key.Key, user, anon},
		{pub, "/profiles/anon%20%C3%A9", key.Key, anon, user},
		{adm, "/admin/v1/projects/" + projectID + "/profiles/a%2Fb%20%25x%20..?environment=live", "t", user, anon},
	} {
		code, m := get(tc.ln, tc.path, tc.auth)
		if code != 200 || m["id"] != tc.id || m["first_seen"] != "2026-02-03T04:05:06.789Z" || m["last_seen"] != "2026-02-03T04:05:06.789Z" {
			t.Errorf("%s: %d %v", tc.path, code, m)
			continue
		}
		traits, _ := m["traits"].(map[string]any)
		if traits["name"] != `Ada "A"` || traits["n"] != 1.0 {
			t.Errorf("%s: traits %v", tc.path, m["traits"])
		}
		if l, _ := m["linked_ids"].([]any); len(l) != 1 || l[0] != tc.link {
			t.Errorf("%s: linked_ids %v", tc.path, m["linked_ids"])
		}
	}
	if code, m := get(pub, "/profiles/a/b%20%25x%20..", key.Key); code != 200 || m["id"] != user {
		t.Errorf("an unencoded slash: %d %v", code, m)
	}
	if code, m := get(pub, "/profiles/%zz", key.Key); code != 404 || m["message"] != "Profile not found" {
		t.Errorf("bad escape: %d %v", code, m)
	}
	code, m := get(adm, "/admin/v1/projects/"+projectID+"/profiles?limit=1", "t")
	if data, _ := m["data"].([]any); code != 200 || len(data) != 1 || data[0].(map[string]any)["id"] != user {
		t.Errorf("admin list: %d %v", code, m)
	}
}
