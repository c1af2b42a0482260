package test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventd/eventd/storage"
)

var adminTimeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// jobj and jarr read nested JSON values of a decoded body.
func jobj(t testing.TB, v any, path ...string) map[string]any {
	t.Helper()
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%v is not an object at %q", v, p)
		}
		v = m[p]
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%v at %v is not an object", v, path)
	}
	return m
}

func jarr(t testing.TB, v any) []any {
	t.Helper()
	a, ok := v.([]any)
	if !ok {
		t.Fatalf("%v is not an array", v)
	}
	return a
}

// wantDetails checks that an error body names each field in details.
func wantDetails(t testing.TB, body map[string]any, fields ...string) {
	t.Helper()
	d, _ := body["details"].(map[string]any)
	for _, f := range fields {
		if _, ok := d[f]; !ok {
			t.Errorf("details lack %q: %v", f, body)
		}
	}
}

// rateLimits reads GET /rate-limit of key: plan and the standard minute limit.
func rateLimits(t testing.TB, s *Server, key string) (string, float64) {
	t.Helper()
	r := Do(t, "GET", s.Public+"/rate-limit", key, nil)
	wantStatus(t, r, 200)
	m := r.JSON(t)
	plan, _ := m["plan"].(string)
	return plan, jobj(t, m, "limits", "minute")["limit"].(float64)
}

func TestAdminAuth(t *testing.T) {
	t.Parallel()
	s := Start(t)
	cases := []struct {
		name   string
		header string
	}{
		{"no token", ""},
		{"wrong token", "Authorization: Bearer adm_wrong"},
		{"token prefix", "Authorization: Bearer " + s.Token[:len(s.Token)-1]},
		{"token plus a byte", "Authorization: Bearer " + s.Token + "x"},
		{"basic scheme", "Authorization: Basic " + s.Token},
		{"bare token", "Authorization: " + s.Token},
	}
	routes := []struct{ method, path string }{
		{"GET", "/admin/v1/projects"},
		{"POST", "/admin/v1/projects"},
		{"GET", "/admin/v1/projects/proj_x/keys"},
		{"DELETE", "/admin/v1/keys/key_x"},
		{"GET", "/admin/v1/projects/proj_x/usage"},
	}
	for _, tc := range cases {
		for _, rt := range routes {
			var headers []string
			if tc.header != "" {
				headers = append(headers, tc.header)
			}
			r := Do(t, rt.method, s.Admin+rt.path, "", `{"name":"x"}`, headers...)
			wantError(t, r, 401, "unauthorized", "")
			// A success resets the failed-attempt throttle (6th failure: 429).
			wantStatus(t, s.AdminDo(t, "GET", "/admin/v1/projects", nil), 200)
		}
	}
	// The token in the query string is not accepted on the admin API.
	wantError(t, Do(t, "GET", s.Admin+"/admin/v1/projects?api_key="+s.Token, "", nil), 401, "unauthorized", "")
	// The auth scheme is case-insensitive (RFC 9110).
	wantStatus(t, Do(t, "GET", s.Admin+"/admin/v1/projects", "", nil, "Authorization: bearer "+s.Token), 200)
	// An API key is not an admin token.
	p := s.Project(t, "auth", "", nil)
	key := s.Key(t, p, "secret", "live")
	wantError(t, Do(t, "GET", s.Admin+"/admin/v1/projects", key, nil), 401, "unauthorized", "")
	// Nothing was created by the refused POSTs.
	r := s.AdminDo(t, "GET", "/admin/v1/projects", nil)
	wantStatus(t, r, 200)
	if n := len(jarr(t, r.JSON(t)["data"])); n != 2 {
		t.Errorf("%d projects, want 2 (default, auth)", n)
	}
}

func TestAdminProjectCreate(t *testing.T) {
	t.Parallel()
	s := Start(t)
	t.Run("valid", func(t *testing.T) {
		cases := []struct {
			name string
			body map[string]any
			plan string
			lim  [3]float64
		}{
			{"default plan", map[string]any{"name": "Acme"}, "free", [3]float64{100, 5000, 50000}},
			{"professional", map[string]any{"name": "Pro", "plan": "professional"}, "professional", [3]float64{500, 25000, 250000}},
			{"enterprise", map[string]any{"name": "Big", "plan": "enterprise"}, "enterprise", [3]float64{2000, 100000, 1000000}},
			{"custom limits", map[string]any{"name": "Custom", "plan": "enterprise", "limits": map[string]int{"minute": 7, "hour": 70, "day": 700}},
				"enterprise", [3]float64{7, 70, 700}},
			{"origins and unknown fields", map[string]any{"name": "Web", "allowed_origins": []string{"https://a.example", "http://localhost:3000"}, "color": "blue"},
				"free", [3]float64{100, 5000, 50000}},
		}
		for _, tc := range cases {
			r := s.AdminDo(t, "POST", "/admin/v1/projects", tc.body)
			wantStatus(t, r, 201)
			m := r.JSON(t)
			if id, _ := m["id"].(string); !strings.HasPrefix(id, "proj_") {
				t.Errorf("%s: id %v", tc.name, m["id"])
			}
			if m["name"] != tc.body["name"] || m["plan"] != tc.plan {
				t.Errorf("%s: %s", tc.name, r.Body)
			}
			l := jobj(t, m, "limits")
			if got := [3]float64{l["minute"].(float64), l["hour"].(float64), l["day"].(float64)}; got != tc.lim {
				t.Errorf("%s: limits %v, want %v", tc.name, got, tc.lim)
			}
			if c, _ := m["created_at"].(string); !adminTimeRE.MatchString(c) {
				t.Errorf("%s: created_at %v", tc.name, m["created_at"])
			}
			// GET one answers the same object.
			g := s.AdminDo(t, "GET", "/admin/v1/projects/"+m["id"].(string), nil)
			wantStatus(t, g, 200)
			if !bytes.Equal(g.Body, r.Body) {
				t.Errorf("%s: GET %s\nPOST %s", tc.name, g.Body, r.Body)
			}
		}
		r := s.AdminDo(t, "GET", "/admin/v1/projects", nil)
		wantStatus(t, r, 200)
		var names []string
		for _, p := range jarr(t, r.JSON(t)["data"]) {
			names = append(names, p.(map[string]any)["name"].(string))
		}
		if want := []string{"default", "Acme", "Pro", "Big", "Custom", "Web"}; fmt.Sprint(names) != fmt.Sprint(want) {
			t.Errorf("list names %v, want %v (oldest first)", names, want)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		cases := []struct {
			name   string
			body   string
			fields []string
		}{
			{"empty object", `{}`, []string{"name"}},
			{"empty name", `{"name":""}`, []string{"name"}},
			{"long name", `{"name":"` + strings.Repeat("n", 201) + `"}`, []string{"name"}},
			{"bad plan", `{"name":"x","plan":"gold"}`, []string{"plan"}},
			{"plan case", `{"name":"x","plan":"Free"}`, []string{"plan"}},
			{"missing name and bad plan", `{"plan":"gold"}`, []string{"name", "plan"}},
			{"zero limit", `{"name":"x","limits":{"minute":0,"hour":10,"day":100}}`, []string{"limits"}},
			{"negative limit", `{"name":"x","limits":{"minute":-5,"hour":10,"day":100}}`, []string{"limits"}},
			{"partial limits", `{"name":"x","limits":{"minute":5}}`, []string{"limits"}},
			{"limits not an object", `{"name":"x","limits":"many"}`, []string{"body"}},
			{"fractional limit", `{"name":"x","limits":{"minute":1.5,"hour":10,"day":100}}`, []string{"body"}},
			{"origin without scheme", `{"name":"x","allowed_origins":["example.com"]}`, []string{"allowed_origins"}},
			{"origin with path", `{"name":"x","allowed_origins":["https://example.com/app"]}`, []string{"allowed_origins"}},
			{"origin ftp", `{"name":"x","allowed_origins":["ftp://example.com"]}`, []string{"allowed_origins"}},
			{"origins not a list", `{"name":"x","allowed_origins":"https://example.com"}`, []string{"body"}},
			{"name not a string", `{"name":5}`, []string{"body"}},
			{"invalid JSON", `{"name":`, []string{"body"}},
			{"empty body", ``, []string{"body"}},
			{"array", `[{"name":"x"}]`, []string{"body"}},
		}
		for _, tc := range cases {
			r := Do(t, "POST", s.Admin+"/admin/v1/projects", s.Token, tc.body)
			if r.Status != 400 {
				t.Errorf("%s: status %d, want 400; %s", tc.name, r.Status, r.Body)
				continue
			}
			wantDetails(t, wantError(t, r, 400, "bad_request", ""), tc.fields...)
		}
		r := s.AdminDo(t, "GET", "/admin/v1/projects", nil)
		if n := len(jarr(t, r.JSON(t)["data"])); n != 6 {
			t.Errorf("%d projects after invalid creates, want 6", n)
		}
	})
}

func TestAdminProjectUpdate(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := s.Project(t, "Before", "", nil)
	key := s.Key(t, p, "secret", "live")
	patch := func(body string) map[string]any {
		t.Helper()
		r := Do(t, "PATCH", s.Admin+"/admin/v1/projects/"+p, s.Token, body)
		wantStatus(t, r, 200)
		g := s.AdminDo(t, "GET", "/admin/v1/projects/"+p, nil)
		wantStatus(t, g, 200)
		if !bytes.Equal(g.Body, r.Body) {
			t.Errorf("PATCH answered %s but GET shows %s", r.Body, g.Body)
		}
		return r.JSON(t)
	}
	steps := []struct {
		body      string
		name      string
		plan      string
		minute    float64 // project limits.minute and GET /rate-limit of a key
		custom    bool
		checkName bool
	}{
		{`{"name":"After"}`, "After", "free", 100, false, true},
		{`{}`, "After", "free", 100, false, true},
		{`{"plan":"professional"}`, "After", "professional", 500, false, true},
		{`{"limits":{"minute":7,"hour":70,"day":700}}`, "After", "professional", 7, true, true},
		{`{"plan":"enterprise"}`, "After", "enterprise", 7, true, true}, // custom limits win over the plan
		{`{"limits":null}`, "After", "enterprise", 2000, false, true},
		{`{"name":"Both","plan":"free","limits":{"minute":3,"hour":30,"day":300}}`, "Both", "free", 3, true, true},
	}
	for _, st := range steps {
		m := patch(st.body)
		if m["name"] != st.name || m["plan"] != st.plan {
			t.Errorf("PATCH %s: name %v plan %v, want %s %s", st.body, m["name"], m["plan"], st.name, st.plan)
		}
		if got := jobj(t, m, "limits")["minute"]; got != st.minute {
			t.Errorf("PATCH %s: limits.minute %v, want %v", st.body, got, st.minute)
		}
		if (m["custom_limits"] != nil) != st.custom {
			t.Errorf("PATCH %s: custom_limits %v", st.body, m["custom_limits"])
		}
		// The key sees the change at once.
		plan, minute := rateLimits(t, s, key)
		if plan != st.plan || minute != st.minute {
			t.Errorf("after PATCH %s: GET /rate-limit plan %s minute %v, want %s %v", st.body, plan, minute, st.plan, st.minute)
		}
	}

	// allowed_origins drive CORS on the public API.
	m := patch(`{"allowed_origins":["https://app.example.com"]}`)
	if fmt.Sprint(m["allowed_origins"]) != "[https://app.example.com]" {
		t.Errorf("allowed_origins %v", m["allowed_origins"])
	}
	ev := map[string]any{"event": "cors"}
	r := Do(t, "POST", s.Public+"/events", key, ev, "Origin: https://app.example.com")
	wantStatus(t, r, 201)
	if got := r.Header.Get("Access-Control-Allow-Origin"); got != "https://app.example.com" {
		t.Errorf("listed origin: Access-Control-Allow-Origin %q", got)
	}
	r = Do(t, "POST", s.Public+"/events", key, ev, "Origin: https://evil.example.com")
	if r.Header.Get("Access-Control-Allow-Origin") != "" || r.Status == 201 {
		t.Errorf("unlisted origin: status %d, Access-Control-Allow-Origin %q", r.Status, r.Header.Get("Access-Control-Allow-Origin"))
	}
	patch(`{"allowed_origins":[]}`)
	r = Do(t, "POST", s.Public+"/events", key, ev, "Origin: https://evil.example.com")
	wantStatus(t, r, 201)
	if got := r.Header.Get("Access-Control-Allow-Origin"); got != "https://evil.example.com" {
		t.Errorf("empty allowed_origins: Access-Control-Allow-Origin %q", got)
	}

	// Invalid changes change nothing.
	for _, body := range []string{`{"plan":"gold"}`, `{"name":""}`, `{"limits":{"minute":0,"hour":1,"day":1}}`,
		`{"allowed_origins":["nope"]}`, `{"name":`, `{"limits":"x"}`} {
		r := Do(t, "PATCH", s.Admin+"/admin/v1/projects/"+p, s.Token, body)
		if r.Status != 400 {
			t.Errorf("PATCH %s: status %d, want 400; %s", body, r.Status, r.Body)
			continue
		}
		wantError(t, r, 400, "bad_request", "")
	}
	if m := s.AdminDo(t, "GET", "/admin/v1/projects/"+p, nil).JSON(t); m["name"] != "Both" || m["plan"] != "free" {
		t.Errorf("after invalid PATCHes: %v", m)
	}
	wantError(t, Do(t, "PATCH", s.Admin+"/admin/v1/projects/proj_missing", s.Token, `{"name":"x"}`), 404, "not_found", "")

	// Changes survive a restart.
	s.Restart()
	if m := s.AdminDo(t, "GET", "/admin/v1/projects/"+p, nil).JSON(t); m["name"] != "Both" || jobj(t, m, "limits")["minute"] != 3.0 {
		t.Errorf("after restart: %v", m)
	}
	if plan, minute := rateLimits(t, s, key); plan != "free" || minute != 3 {
		t.Errorf("after restart: GET /rate-limit plan %s minute %v", plan, minute)
	}
}

func TestAdminProjectDelete(t *testing.T) {
	t.Parallel()
	s := Start(t)
	doomed := s.Project(t, "doomed", "", nil)
	kept := s.Project(t, "kept", "", nil)
	keys := []string{s.Key(t, doomed, "secret", "live"), s.Key(t, doomed, "public", "test"), s.Key(t, doomed, "secret", "test")}
	keptKey := s.Key(t, kept, "secret", "live")
	r := s.AdminDo(t, "POST", "/admin/v1/projects/"+doomed+"/event-definitions", map[string]any{"name": "doomed_def"})
	wantStatus(t, r, 201)
	for i, k := range keys {
		wantStatus(t, Do(t, "POST", s.Public+"/events", k, map[string]any{"event": "gone", "visitor_id": fmt.Sprintf("visitor_doomed_%d", i)}), 201)
	}
	wantStatus(t, Do(t, "POST", s.Public+"/events", keptKey, map[string]any{"event": "stays", "visitor_id": "visitor_kept"}), 201)
	keyList := s.AdminDo(t, "GET", "/admin/v1/projects/"+doomed+"/keys", nil)
	wantStatus(t, keyList, 200)
	firstKeyID := jarr(t, keyList.JSON(t)["data"])[0].(map[string]any)["id"].(string)

	r = s.AdminDo(t, "DELETE", "/admin/v1/projects/"+doomed, nil)
	wantStatus(t, r, 204)
	if len(r.Body) != 0 {
		t.Errorf("204 with a body: %s", r.Body)
	}
	for _, k := range keys {
		wantError(t, Do(t, "GET", s.Public+"/verify", k, nil), 401, "unauthorized", "Invalid or missing API key")
		wantError(t, Do(t, "POST", s.Public+"/events", k, map[string]any{"event": "late"}), 401, "unauthorized", "")
	}
	gone := []struct{ method, path string }{
		{"GET", "/admin/v1/projects/" + doomed},
		{"DELETE", "/admin/v1/projects/" + doomed},
		{"PATCH", "/admin/v1/projects/" + doomed},
		{"GET", "/admin/v1/projects/" + doomed + "/keys"},
		{"POST", "/admin/v1/projects/" + doomed + "/keys"},
		{"GET", "/admin/v1/projects/" + doomed + "/usage"},
		{"GET", "/admin/v1/projects/" + doomed + "/event-definitions"},
		{"GET", "/admin/v1/projects/" + doomed + "/event-definitions/doomed_def"},
		{"DELETE", "/admin/v1/keys/" + firstKeyID},
	}
	for _, g := range gone {
		var body any
		if g.method == "POST" || g.method == "PATCH" {
			body = map[string]any{"name": "n", "type": "secret", "environment": "live"}
		}
		wantError(t, s.AdminDo(t, g.method, g.path, body), 404, "not_found", "")
	}
	for _, p := range jarr(t, s.AdminDo(t, "GET", "/admin/v1/projects", nil).JSON(t)["data"]) {
		if p.(map[string]any)["id"] == doomed {
			t.Errorf("deleted project still listed")
		}
	}
	// The other project is untouched.
	wantStatus(t, Do(t, "GET", s.Public+"/verify", keptKey, nil), 200)

	// The events are gone from the store: no key or value mentions the
	// deleted project's visitors any more, while the kept one is there.
	stopOK(t, s)
	db, err := storage.Open(filepath.Join(s.Dir, "pebble"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	it, err := db.Pebble().NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	keptSeen := false
	for it.First(); it.Valid(); it.Next() {
		for _, b := range [][]byte{it.Key(), it.Value()} {
			if bytes.Contains(b, []byte("visitor_doomed_")) || bytes.Contains(b, []byte("doomed_def")) {
				t.Errorf("deleted project's data still in the store: key %q value %q", it.Key(), it.Value())
			}
			keptSeen = keptSeen || bytes.Contains(b, []byte("visitor_kept"))
		}
	}
	_ = it.Close()
	_ = db.Close()
	if !keptSeen {
		t.Errorf("control: the kept project's visitor is not in the store either; the scan sees nothing")
	}
	s.Restart()
	wantError(t, Do(t, "GET", s.Public+"/verify", keys[0], nil), 401, "unauthorized", "")
	wantError(t, s.AdminDo(t, "GET", "/admin/v1/projects/"+doomed, nil), 404, "not_found", "")
	wantStatus(t, Do(t, "GET", s.Public+"/verify", keptKey, nil), 200)
}

func TestAdminKeys(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := s.Project(t, "keys", "", nil)
	cases := []struct {
		typ, env, prefix string
		perms            string
	}{
		{"secret", "live", "sk_live_", `["read","write"]`},
		{"secret", "test", "sk_test_", `["read","write"]`},
		{"public", "live", "pk_live_", `["write"]`},
		{"public", "test", "pk_test_", `["write"]`},
	}
	created := map[string]map[string]any{} // key id -> create answer
	var texts []string
	for _, tc := range cases {
		name := "ctrl name " + tc.typ + " " + tc.env
		r := s.AdminDo(t, "POST", "/admin/v1/projects/"+p+"/keys", map[string]any{"name": name, "type": tc.typ, "environment": tc.env})
		wantStatus(t, r, 201)
		m := r.JSON(t)
		id, _ := m["id"].(string)
		key, _ := m["key"].(string)
		if !strings.HasPrefix(id, "key_") || m["name"] != name || m["type"] != tc.typ || m["environment"] != tc.env {
			t.Errorf("%s %s: %s", tc.typ, tc.env, r.Body)
		}
		if !regexp.MustCompile(`^` + tc.prefix + `[0-9A-Za-z]{32}$`).MatchString(key) {
			t.Errorf("%s %s: key %q, want %s + 32 base62 characters", tc.typ, tc.env, key, tc.prefix)
		}
		if c, _ := m["created_at"].(string); !adminTimeRE.MatchString(c) {
			t.Errorf("created_at %v", m["created_at"])
		}
		v := Do(t, "GET", s.Public+"/verify", key, nil)
		wantStatus(t, v, 200)
		vm := v.JSON(t)
		if vm["key_type"] != tc.typ || vm["environment"] != tc.env || mustJSON(t, vm["permissions"]) != tc.perms {
			t.Errorf("verify %s %s: %s", tc.typ, tc.env, v.Body)
		}
		created[id] = m
		texts = append(texts, key)
	}
	// Each key is different.
	seen := map[string]bool{}
	for _, k := range texts {
		if seen[k] {
			t.Errorf("duplicate key text %s", k)
		}
		seen[k] = true
	}

	list := func() (map[string]map[string]any, []byte) {
		t.Helper()
		r := s.AdminDo(t, "GET", "/admin/v1/projects/"+p+"/keys", nil)
		wantStatus(t, r, 200)
		for _, k := range texts {
			if bytes.Contains(r.Body, []byte(k)) {
				t.Errorf("key list contains a key's text: %s", r.Body)
			}
			if bytes.Contains(r.Body, []byte(k[8:])) {
				t.Errorf("key list contains the secret part of a key")
			}
		}
		out := map[string]map[string]any{}
		for _, e := range jarr(t, r.JSON(t)["data"]) {
			m := e.(map[string]any)
			out[m["id"].(string)] = m
			if _, ok := m["key"]; ok {
				t.Errorf("key list entry has a key field: %v", m)
			}
			for _, f := range []string{"id", "name", "type", "environment", "prefix", "created_at", "last_used_at", "revoked_at"} {
				if _, ok := m[f]; !ok {
					t.Errorf("key list entry lacks %s: %v", f, m)
				}
			}
		}
		return out, r.Body
	}
	keysByID, _ := list()
	if len(keysByID) != len(cases) {
		t.Fatalf("%d keys listed, want %d", len(keysByID), len(cases))
	}
	for id, c := range created {
		l := keysByID[id]
		if l == nil {
			t.Fatalf("key %s not listed", id)
		}
		prefix, _ := l["prefix"].(string)
		key := c["key"].(string)
		if len(prefix) < 8 || len(prefix) > 16 || !strings.HasPrefix(key, prefix) {
			t.Errorf("prefix %q of key %s", prefix, key)
		}
		if l["created_at"] != c["created_at"] || l["name"] != c["name"] || l["type"] != c["type"] || l["environment"] != c["environment"] {
			t.Errorf("listed %v, created %v", l, c)
		}
	}

	// last_used_at: null before any request, set after one.
	fresh := s.AdminDo(t, "POST", "/admin/v1/projects/"+p+"/keys", map[string]any{"name": "fresh", "type": "secret", "environment": "live"}).JSON(t)
	freshID, freshKey := fresh["id"].(string), fresh["key"].(string)
	texts = append(texts, freshKey)
	keysByID, _ = list()
	if keysByID[freshID]["last_used_at"] != nil || keysByID[freshID]["revoked_at"] != nil {
		t.Errorf("unused key: %v", keysByID[freshID])
	}
	before := time.Now().UTC().Add(-time.Second).Format("2006-01-02T15:04:05")
	wantStatus(t, Do(t, "POST", s.Public+"/events", freshKey, map[string]any{"event": "use"}), 201)
	keysByID, _ = list()
	last, _ := keysByID[freshID]["last_used_at"].(string)
	if !adminTimeRE.MatchString(last) || last < before {
		t.Errorf("last_used_at %q after a request (at or after %s)", last, before)
	}

	// Revoke: 204, then 401 within 1 s, then 404 for a second revoke.
	r := s.AdminDo(t, "DELETE", "/admin/v1/keys/"+freshID, nil)
	wantStatus(t, r, 204)
	revokedAt := time.Now()
	for {
		v := Do(t, "GET", s.Public+"/verify", freshKey, nil)
		if v.Status == 401 {
			wantError(t, v, 401, "unauthorized", "Invalid or missing API key")
			break
		}
		if time.Since(revokedAt) > time.Second {
			t.Fatalf("revoked key still answers %d after 1 s", v.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantError(t, Do(t, "POST", s.Public+"/events", freshKey, map[string]any{"event": "after_revoke"}), 401, "unauthorized", "")
	wantError(t, Do(t, "GET", s.Public+"/events?api_key="+freshKey, "", nil), 401, "unauthorized", "")
	wantError(t, s.AdminDo(t, "DELETE", "/admin/v1/keys/"+freshID, nil), 404, "not_found", "")
	wantError(t, s.AdminDo(t, "DELETE", "/admin/v1/keys/key_doesnotexist", nil), 404, "not_found", "")
	keysByID, _ = list()
	if ra, _ := keysByID[freshID]["revoked_at"].(string); !adminTimeRE.MatchString(ra) {
		t.Errorf("revoked_at %v after revoke", keysByID[freshID]["revoked_at"])
	}
	if keysByID[freshID]["last_used_at"] == nil {
		t.Errorf("revoked key lost last_used_at")
	}
	// Other keys still work.
	for _, k := range texts[:len(texts)-1] {
		wantStatus(t, Do(t, "GET", s.Public+"/verify", k, nil), 200)
	}

	// Invalid key requests.
	bad := []struct {
		name   string
		body   string
		fields []string
	}{
		{"missing everything", `{}`, []string{"name", "type", "environment"}},
		{"bad type", `{"name":"k","type":"admin","environment":"live"}`, []string{"type"}},
		{"bad environment", `{"name":"k","type":"secret","environment":"prod"}`, []string{"environment"}},
		{"empty name", `{"name":"","type":"secret","environment":"live"}`, []string{"name"}},
		{"long name", `{"name":"` + strings.Repeat("k", 201) + `","type":"secret","environment":"live"}`, []string{"name"}},
		{"type case", `{"name":"k","type":"Secret","environment":"live"}`, []string{"type"}},
		{"invalid JSON", `{"name":"k",`, []string{"body"}},
		{"wrong types", `{"name":1,"type":"secret","environment":"live"}`, []string{"body"}},
	}
	for _, tc := range bad {
		r := Do(t, "POST", s.Admin+"/admin/v1/projects/"+p+"/keys", s.Token, tc.body)
		if r.Status != 400 {
			t.Errorf("%s: status %d, want 400; %s", tc.name, r.Status, r.Body)
			continue
		}
		wantDetails(t, wantError(t, r, 400, "bad_request", ""), tc.fields...)
	}
	wantError(t, s.AdminDo(t, "POST", "/admin/v1/projects/proj_missing/keys", map[string]any{"name": "k", "type": "secret", "environment": "live"}), 404, "not_found", "")
	wantError(t, s.AdminDo(t, "GET", "/admin/v1/projects/proj_missing/keys", nil), 404, "not_found", "")
	if n, _ := list(); len(n) != len(cases)+1 {
		t.Errorf("%d keys after invalid creates, want %d", len(n), len(cases)+1)
	}

	// The data dir never holds a key's text, only its SHA-256.
	checkDataDir := func(when string, wantHashes bool) {
		t.Helper()
		var all [][]byte
		err := filepath.Walk(s.Dir, func(path string, fi os.FileInfo, err error) error {
			if err != nil || fi.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			all = append(all, b)
			for _, k := range texts {
				if bytes.Contains(b, []byte(k)) || bytes.Contains(b, []byte(k[8:])) {
					t.Errorf("%s: %s contains the text of key %s...", when, path, k[:12])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !wantHashes {
			return
		}
		for _, k := range texts {
			sum := sha256.Sum256([]byte(k))
			h := []byte(hex.EncodeToString(sum[:]))
			found := false
			for _, b := range all {
				found = found || bytes.Contains(b, h)
			}
			if !found {
				t.Errorf("%s: control: the SHA-256 of key %s... is in no file either", when, k[:12])
			}
		}
	}
	checkDataDir("while running", true)
	stopOK(t, s)
	checkDataDir("after stop", false)
	// And the keys still work after the restart (the hash is all it needs).
	s.Restart()
	for _, k := range texts[:len(texts)-1] {
		wantStatus(t, Do(t, "GET", s.Public+"/verify", k, nil), 200)
	}
	wantError(t, Do(t, "GET", s.Public+"/verify", freshKey, nil), 401, "unauthorized", "")
	checkDataDir("after restart", false)
}

func TestAdminEventDefinitions(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := s.Project(t, "defs", "", nil)
	key := s.Key(t, p, "secret", "live")
	base := "/admin/v1/projects/" + p + "/event-definitions"
	post := func(props any) *Response {
		t.Helper()
		body := map[string]any{"event": "purchase"}
		if props != nil {
			body["properties"] = props
		}
		return Do(t, "POST", s.Public+"/events", key, body)
	}

	// Before any definition, anything goes (but amount must still be positive).
	wantStatus(t, post(map[string]any{"currency": 5}), 201)

	def := map[string]any{
		"name": "purchase", "display_name": "Purchase", "category": "commerce",
		"properties": []map[string]any{
			{"name": "price", "type": "number", "required": true},
			{"name": "currency", "type": "string", "required": false},
		},
	}
	r := s.AdminDo(t, "POST", base, def)
	wantStatus(t, r, 201)
	if got, want := canonJSON(t, r.Body), mustJSON(t, def); got != want {
		t.Errorf("create answered %s, want %s", got, want)
	}
	r = s.AdminDo(t, "POST", base, def)
	if r.Status != 409 {
		t.Errorf("duplicate definition: status %d, want 409; %s", r.Status, r.Body)
	} else {
		wantError(t, r, 409, "conflict", "")
	}
	wantStatus(t, s.AdminDo(t, "POST", base, map[string]any{"name": "signup"}), 201)

	r = s.AdminDo(t, "GET", base, nil)
	wantStatus(t, r, 200)
	var names []string
	for _, d := range jarr(t, r.JSON(t)["data"]) {
		names = append(names, d.(map[string]any)["name"].(string))
	}
	if fmt.Sprint(names) != "[purchase signup]" {
		t.Errorf("definitions %v", names)
	}
	r = s.AdminDo(t, "GET", base+"/purchase", nil)
	wantStatus(t, r, 200)
	if canonJSON(t, r.Body) != mustJSON(t, def) {
		t.Errorf("GET one: %s", r.Body)
	}
	if m := s.AdminDo(t, "GET", base+"/signup", nil).JSON(t); mustJSON(t, m["properties"]) != "[]" {
		t.Errorf("definition without properties: %v", m)
	}
	wantError(t, s.AdminDo(t, "GET", base+"/nothing", nil), 404, "not_found", "")

	// Ingest checks the definition right away.
	ingest := []struct {
		props  any
		status int
		field  string
	}{
		{map[string]any{"price": 10, "currency": "EUR"}, 201, ""},
		{map[string]any{"price": 10, "extra": true}, 201, ""},
		{map[string]any{"currency": "EUR"}, 422, "properties.price"},
		{nil, 422, "properties.price"},
		{map[string]any{"price": nil}, 422, "properties.price"},
		{map[string]any{"price": "10"}, 422, "properties.price"},
		{map[string]any{"price": 1, "currency": 3}, 422, "properties.currency"},
	}
	for _, tc := range ingest {
		r := post(tc.props)
		if r.Status != tc.status {
			t.Errorf("purchase %v: status %d, want %d; %s", tc.props, r.Status, tc.status, r.Body)
			continue
		}
		if tc.status == 422 {
			wantDetails(t, wantError(t, r, 422, "validation_error", ""), tc.field)
		}
	}

	// PUT replaces the definition, and ingest uses the new one at once.
	put := map[string]any{
		"display_name": "Purchase v2", "category": "",
		"properties": []map[string]any{
			{"name": "plan", "type": "string", "required": true},
			{"name": "at", "type": "datetime", "required": false},
			{"name": "page", "type": "url", "required": false},
			{"name": "trial", "type": "boolean", "required": false},
		},
	}
	r = s.AdminDo(t, "PUT", base+"/purchase", put)
	wantStatus(t, r, 200)
	if m := r.JSON(t); m["name"] != "purchase" || m["display_name"] != "Purchase v2" || len(jarr(t, m["properties"])) != 4 {
		t.Errorf("PUT answered %s", r.Body)
	}
	ingest = []struct {
		props  any
		status int
		field  string
	}{
		{map[string]any{"price": 10}, 422, "properties.plan"}, // price is no longer required; plan is
		{map[string]any{"plan": "pro"}, 201, ""},
		{map[string]any{"plan": 1}, 422, "properties.plan"},
		{map[string]any{"plan": "pro", "at": "2026-01-15T10:30:00Z", "page": "https://example.com/x", "trial": false}, 201, ""},
		{map[string]any{"plan": "pro", "at": "yesterday"}, 422, "properties.at"},
		{map[string]any{"plan": "pro", "page": "example.com"}, 422, "properties.page"},
		{map[string]any{"plan": "pro", "page": "ftp://example.com/"}, 422, "properties.page"},
		{map[string]any{"plan": "pro", "trial": "no"}, 422, "properties.trial"},
	}
	for _, tc := range ingest {
		r := post(tc.props)
		if r.Status != tc.status {
			t.Errorf("after PUT, purchase %v: status %d, want %d; %s", tc.props, r.Status, tc.status, r.Body)
			continue
		}
		if tc.status == 422 {
			wantDetails(t, wantError(t, r, 422, "validation_error", ""), tc.field)
		}
	}
	// A batch entry is checked the same way.
	r = Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": []map[string]any{
		{"event": "purchase", "properties": map[string]any{"plan": "pro"}},
		{"event": "purchase", "properties": map[string]any{"price": 1}},
	}})
	wantStatus(t, r, 201)
	if m := r.JSON(t); m["accepted"] != 1.0 || m["rejected"] != 1.0 {
		t.Errorf("batch with one entry violating the definition: %s", r.Body)
	}

	// Definitions survive a restart.
	s.Restart()
	r = post(map[string]any{"price": 10})
	if r.Status != 422 {
		t.Errorf("after restart, the definition is not applied: %d %s", r.Status, r.Body)
	}
	wantStatus(t, s.AdminDo(t, "GET", base+"/purchase", nil), 200)

	// PUT errors.
	wantError(t, s.AdminDo(t, "PUT", base+"/unknown_def", map[string]any{"properties": []any{}}), 404, "not_found", "")
	r = s.AdminDo(t, "PUT", base+"/purchase", map[string]any{"name": "other"})
	wantDetails(t, wantError(t, r, 400, "bad_request", ""), "name")

	// DELETE: 204, then ingest no longer checks; a second delete is 404.
	r = s.AdminDo(t, "DELETE", base+"/purchase", nil)
	wantStatus(t, r, 204)
	wantStatus(t, post(map[string]any{"price": "not a number"}), 201)
	wantError(t, s.AdminDo(t, "DELETE", base+"/purchase", nil), 404, "not_found", "")
	wantError(t, s.AdminDo(t, "GET", base+"/purchase", nil), 404, "not_found", "")

	// Invalid definitions.
	bad := []struct {
		name   string
		body   string
		fields []string
	}{
		{"missing name", `{"display_name":"x"}`, []string{"name"}},
		{"name with a space", `{"name":"bad name"}`, []string{"name"}},
		{"name with a dash", `{"name":"bad-name"}`, []string{"name"}},
		{"long name", `{"name":"` + strings.Repeat("a", 129) + `"}`, []string{"name"}},
		{"long category", `{"name":"cat","category":"` + strings.Repeat("c", 65) + `"}`, []string{"category"}},
		{"bad type", `{"name":"typed","properties":[{"name":"p","type":"integer"}]}`, []string{"properties[0].type"}},
		{"second property bad", `{"name":"typed","properties":[{"name":"p","type":"string"},{"name":"q","type":"date"}]}`, []string{"properties[1].type"}},
		{"property without name", `{"name":"typed","properties":[{"type":"string"}]}`, []string{"properties[0].name"}},
		{"duplicate property", `{"name":"typed","properties":[{"name":"p","type":"string"},{"name":"p","type":"number"}]}`, []string{"properties[1].name"}},
		{"properties not a list", `{"name":"typed","properties":{"p":"string"}}`, []string{"body"}},
		{"invalid JSON", `{"name":`, []string{"body"}},
	}
	for _, tc := range bad {
		r := Do(t, "POST", s.Admin+base, s.Token, tc.body)
		if r.Status != 400 {
			t.Errorf("%s: status %d, want 400; %s", tc.name, r.Status, r.Body)
			continue
		}
		wantDetails(t, wantError(t, r, 400, "bad_request", ""), tc.fields...)
	}
	// 64 characters of category are fine; so are the five types.
	r = s.AdminDo(t, "POST", base, map[string]any{"name": "cat64", "category": strings.Repeat("é", 64), "properties": []map[string]any{
		{"name": "a", "type": "string"}, {"name": "b", "type": "number"}, {"name": "c", "type": "boolean"},
		{"name": "d", "type": "datetime"}, {"name": "e", "type": "url"},
	}})
	wantStatus(t, r, 201)
	wantError(t, s.AdminDo(t, "GET", "/admin/v1/projects/proj_missing/event-definitions", nil), 404, "not_found", "")
	wantError(t, s.AdminDo(t, "POST", "/admin/v1/projects/proj_missing/event-definitions", map[string]any{"name": "x"}), 404, "not_found", "")
}

func TestAdminUsage(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := s.Project(t, "usage", "", map[string]int64{"minute": 100, "hour": 1000, "day": 10000})
	a := s.Key(t, p, "secret", "live")
	b := s.Key(t, p, "public", "test")
	idle := s.Key(t, p, "secret", "test")
	_ = idle
	for i := 0; i < 3; i++ {
		wantStatus(t, Do(t, "POST", s.Public+"/events", a, map[string]any{"event": "a"}), 201)
	}
	wantStatus(t, Do(t, "GET", s.Public+"/events", a, nil), 200)
	wantStatus(t, Do(t, "POST", s.Public+"/events/batch", a, map[string]any{"events": []map[string]any{{"event": "x"}, {"event": "y"}}}), 201)
	wantStatus(t, Do(t, "GET", s.Public+"/rate-limit", a, nil), 200) // counts in no bucket
	for i := 0; i < 2; i++ {
		wantStatus(t, Do(t, "POST", s.Public+"/events", b, map[string]any{"event": "b"}), 201)
	}

	keys := s.AdminDo(t, "GET", "/admin/v1/projects/"+p+"/keys", nil).JSON(t)
	ids := map[string]string{} // name -> id
	for _, k := range jarr(t, keys["data"]) {
		m := k.(map[string]any)
		ids[m["name"].(string)] = m["id"].(string)
	}
	usage := func() map[string]map[string]any {
		t.Helper()
		r := s.AdminDo(t, "GET", "/admin/v1/projects/"+p+"/usage", nil)
		wantStatus(t, r, 200)
		out := map[string]map[string]any{}
		for _, e := range jarr(t, r.JSON(t)["data"]) {
			m := e.(map[string]any)
			out[m["key_id"].(string)] = m
		}
		return out
	}
	// An empty window's reset is the second of the request (bucket.go):
	// compared with the clock before the request, not after it, which may
	// have passed into the next second.
	asked := time.Now().Unix()
	u := usage()
	if len(u) != 3 {
		t.Fatalf("usage lists %d keys, want 3: %v", len(u), u)
	}
	want := []struct {
		key            string
		bucket, window string
		limit, used    float64
	}{
		{"secret live", "standard", "minute", 100, 4},
		{"secret live", "standard", "hour", 1000, 4},
		{"secret live", "standard", "day", 10000, 4},
		{"secret live", "batch", "minute", 10, 1},
		{"secret live", "batch", "day", 1000, 1},
		{"secret live", "analytics", "minute", 50, 0},
		{"public test", "standard", "minute", 100, 2},
		{"public test", "batch", "minute", 10, 0},
		{"secret test", "standard", "minute", 100, 0},
	}
	for _, w := range want {
		e := u[ids[w.key]]
		if e == nil {
			t.Fatalf("no usage for %s", w.key)
		}
		win := jobj(t, e, "buckets", w.bucket, w.window)
		if win["limit"] != w.limit || win["used"] != w.used || win["remaining"] != w.limit-w.used {
			t.Errorf("%s %s %s: %v, want limit %v used %v", w.key, w.bucket, w.window, win, w.limit, w.used)
		}
		if r, _ := win["reset"].(float64); r < float64(asked) {
			t.Errorf("%s %s %s: reset %v in the past", w.key, w.bucket, w.window, win["reset"])
		}
	}
	if u[ids["secret live"]]["last_used_at"] == nil || u[ids["secret test"]]["last_used_at"] != nil {
		t.Errorf("usage last_used_at: %v / %v", u[ids["secret live"]]["last_used_at"], u[ids["secret test"]]["last_used_at"])
	}
	// Reading usage counts nothing.
	u = usage()
	if got := jobj(t, u[ids["secret live"]], "buckets", "standard", "minute")["used"]; got != 4.0 {
		t.Errorf("used %v after reading usage twice, want 4", got)
	}
	// Revoked keys drop out.
	wantStatus(t, s.AdminDo(t, "DELETE", "/admin/v1/keys/"+ids["public test"], nil), 204)
	if u = usage(); len(u) != 2 || u[ids["public test"]] != nil {
		t.Errorf("usage after revoke: %v", u)
	}
	// Usage survives a graceful restart.
	stopOK(t, s)
	s.Restart()
	if got := jobj(t, usage()[ids["secret live"]], "buckets", "standard", "minute")["used"]; got != 4.0 {
		t.Errorf("used %v after restart, want 4", got)
	}
	wantError(t, s.AdminDo(t, "GET", "/admin/v1/projects/proj_missing/usage", nil), 404, "not_found", "")
}

func TestAdminErrorsHealthMetrics(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := s.Project(t, "metrics", "", nil)
	key := s.Key(t, p, "secret", "live")
	wantStatus(t, Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "counted"}), 201)

	t.Run("unknown project", func(t *testing.T) {
		for _, rt := range []struct{ method, path string }{
			{"GET", "/admin/v1/projects/proj_nope"},
			{"PATCH", "/admin/v1/projects/proj_nope"},
			{"DELETE", "/admin/v1/projects/proj_nope"},
			{"GET", "/admin/v1/projects/proj_nope/keys"},
			{"POST", "/admin/v1/projects/proj_nope/keys"},
			{"GET", "/admin/v1/projects/proj_nope/usage"},
			{"GET", "/admin/v1/projects/proj_nope/event-definitions"},
			{"POST", "/admin/v1/projects/proj_nope/event-definitions"},
			{"GET", "/admin/v1/projects/proj_nope/event-definitions/x"},
			{"PUT", "/admin/v1/projects/proj_nope/event-definitions/x"},
			{"DELETE", "/admin/v1/projects/proj_nope/event-definitions/x"},
			{"DELETE", "/admin/v1/keys/key_nope"},
		} {
			var body any
			switch rt.method {
			case "POST", "PUT", "PATCH":
				body = map[string]any{"name": "x", "type": "secret", "environment": "live"}
			}
			r := s.AdminDo(t, rt.method, rt.path, body)
			if r.Status != 404 {
				t.Errorf("%s %s: status %d, want 404; %s", rt.method, rt.path, r.Status, r.Body)
				continue
			}
			m := wantError(t, r, 404, "not_found", "")
			if msg, _ := m["message"].(string); !strings.HasSuffix(msg, "not found") {
				t.Errorf("%s %s: message %q", rt.method, rt.path, msg)
			}
		}
		wantError(t, s.AdminDo(t, "GET", "/admin/v1/nothing", nil), 404, "not_found", "")
		wantError(t, s.AdminDo(t, "GET", "/admin/v2/projects", nil), 404, "not_found", "")
	})

	t.Run("method not allowed", func(t *testing.T) {
		for _, tc := range []struct {
			method, path string
			allow        []string
		}{
			{"PUT", "/admin/v1/projects", []string{"GET", "POST"}},
			{"DELETE", "/admin/v1/projects", []string{"GET", "POST"}},
			{"POST", "/admin/v1/projects/" + p, []string{"GET", "PATCH", "DELETE"}},
			{"PUT", "/admin/v1/projects/" + p + "/keys", []string{"GET", "POST"}},
			{"GET", "/admin/v1/keys/key_x", []string{"DELETE"}},
			{"PATCH", "/admin/v1/projects/" + p + "/event-definitions/x", []string{"GET", "PUT", "DELETE"}},
			{"POST", "/metrics", []string{"GET"}},
		} {
			r := s.AdminDo(t, tc.method, tc.path, nil)
			if r.Status != 405 {
				t.Errorf("%s %s: status %d, want 405; %s", tc.method, tc.path, r.Status, r.Body)
				continue
			}
			wantError(t, r, 405, "method_not_allowed", "")
			allow := strings.Split(strings.ReplaceAll(r.Header.Get("Allow"), " ", ""), ",")
			for _, m := range tc.allow {
				if !containsStr(allow, m) {
					t.Errorf("%s %s: Allow %q lacks %s", tc.method, tc.path, r.Header.Get("Allow"), m)
				}
			}
			if containsStr(allow, tc.method) {
				t.Errorf("%s %s: Allow %q lists the refused method", tc.method, tc.path, r.Header.Get("Allow"))
			}
		}
	})

	t.Run("healthz", func(t *testing.T) {
		for _, base := range []string{s.Public, s.Admin} {
			r := Do(t, "GET", base+"/healthz", "", nil)
			wantStatus(t, r, 200)
			if string(r.Body) != `{"status":"ok"}` || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Errorf("%s/healthz: %s %q", base, r.Body, r.Header.Get("Content-Type"))
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		r := Do(t, "GET", s.Admin+"/metrics", "", nil)
		wantStatus(t, r, 200)
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("metrics Content-Type %q", ct)
		}
		body := string(r.Body)
		for _, want := range []string{
			"# TYPE eventd_http_requests_total counter",
			`eventd_http_requests_total{code="201",route="create_event"} 1`,
			"# TYPE eventd_commits_total counter",
			"# HELP eventd_commits_total",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
		if n := metricValue(t, body, "eventd_commits_total"); n < 1 {
			t.Errorf("eventd_commits_total %v after a stored event", n)
		}
		if n := metricValue(t, body, "eventd_events_stored_total"); n != 1 {
			t.Errorf("eventd_events_stored_total %v, want 1", n)
		}
		// Every sample line is name{labels} value.
		sampleAcked := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eEInfNa]+$`)
		for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
			if !strings.HasPrefix(line, "#") && !sampleAcked.MatchString(line) {
				t.Errorf("not a Prometheus sampleAcked line: %q", line)
			}
		}
		// Not on the public listener.
		wantError(t, Do(t, "GET", s.Public+"/metrics", "", nil), 404, "not_found", "")
	})
}

// canonJSON re-encodes a JSON body with sorted object keys.
func canonJSON(t testing.TB, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v %s", err, b)
	}
	return mustJSON(t, v)
}

func containsStr(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// metricValue is the value of an unlabelled sampleAcked in Prometheus text.
func metricValue(t testing.TB, body, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

func randomKey(prefix string) string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := []byte(prefix)
	for len(b) < len(prefix)+32 {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b = append(b, alphabet[n.Int64()])
	}
	return string(b)
}

func TestUnknownKeysCreateNoState(t *testing.T) {
	t.Parallel()
	s := Start(t)
	gauge := func() float64 {
		t.Helper()
		r := Do(t, "GET", s.Admin+"/metrics", "", nil)
		wantStatus(t, r, 200)
		return metricValue(t, string(r.Body), "eventd_key_actors")
	}
	if n := gauge(); n != 0 {
		t.Fatalf("eventd_key_actors %v at start", n)
	}
	type req struct{ method, path string }
	reqs := []req{{"POST", "/events"}, {"POST", "/events/batch"}, {"GET", "/events"}, {"GET", "/verify"}, {"GET", "/rate-limit"}, {"GET", "/events/evt_01M7ZY85470E8CVXX80KRHCAF2"}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	jobs := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				rq := reqs[i%len(reqs)]
				prefix := []string{"sk_live_", "pk_live_", "sk_test_", "pk_test_"}[i%4]
				if i%10 == 0 {
					prefix = "sk_live_" // mostly secret live keys, as in the brief
				}
				k := randomKey(prefix)
				var body string
				if rq.method == "POST" {
					body = `{"event":"x","events":[{"event":"x"}]}`
				}
				url := s.Public + rq.path
				var status int
				var err error
				if i%3 == 0 {
					sep := "?"
					if strings.Contains(url, "?") {
						sep = "&"
					}
					status, err = statusOf(rq.method, url+sep+"api_key="+k, "", body)
				} else {
					status, err = statusOf(rq.method, url, k, body)
				}
				if err != nil || status != 401 {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%s %s: %d %v", rq.method, rq.path, status, err))
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < 1000; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Errorf("%d requests with unknown keys did not get 401, e.g. %v", len(bad), bad[:min(5, len(bad))])
	}
	if n := gauge(); n != 0 {
		t.Errorf("eventd_key_actors %v after 1000 unknown keys, want 0", n)
	}
	// Control: a real key does make one.
	p := s.Project(t, "control", "", nil)
	wantStatus(t, Do(t, "GET", s.Public+"/verify", s.Key(t, p, "secret", "live"), nil), 200)
	if n := gauge(); n != 1 {
		t.Errorf("eventd_key_actors %v after one known key, want 1", n)
	}
}

// statusOf sends one request and returns its status.
func statusOf(method, url, key, body string) (int, error) {
	req, err := newAdminTestRequest(method, url, key, body)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func newAdminTestRequest(method, url, key, body string) (*http.Request, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return req, nil
}

// TestAdminExecutionTrace: the admin listener serves a runtime execution
// trace, which eventd-bench --trace saves and tools/tracegaps reads; only
// with the token.
func TestAdminExecutionTrace(t *testing.T) {
	s := Start(t)
	if r := Do(t, "GET", s.Admin+"/debug/pprof/trace?seconds=1", "", nil); r.Status != 401 {
		t.Fatalf("trace without the token: %d, want 401", r.Status)
	}
	r := Do(t, "GET", s.Admin+"/debug/pprof/trace?seconds=1", s.Token, nil)
	// A trace file starts with its Go version header, e.g. "go 1.26 trace".
	head := r.Body[:min(16, len(r.Body))]
	if r.Status != 200 || !bytes.HasPrefix(head, []byte("go 1.")) || !bytes.Contains(head, []byte(" trace")) {
		t.Fatalf("trace: %d, starts %q", r.Status, head)
	}
}
