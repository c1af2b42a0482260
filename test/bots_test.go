package test

import (
	"net/url"
	"testing"
)

// botsAnswer is the part of an analytics answer the bots test reads.
type botsAnswer struct {
	total        float64
	botsExcluded any // float64, or nil when absent
}

func botsQuery(t *testing.T, s *Server, secret, query string) botsAnswer {
	t.Helper()
	r := Do(t, "GET", s.Public+"/analytics?"+query, secret, nil)
	wantStatus(t, r, 200)
	m := r.JSON(t)
	a := botsAnswer{botsExcluded: m["bots_excluded"]}
	switch tot := m["total"].(type) {
	case float64:
		a.total = tot
	case map[string]any: // type=sessions: the total is a stats object
		a.total, _ = tot["sessions"].(float64)
	}
	return a
}

// TestAnalyticsBots: a crawler's pageview is flagged at ingest, listed
// like any event, left out of analytics by default with the count of what
// was left out, counted with bots=include, on every type that takes the
// parameter, and the same after kill -9 (the bot series are derived data
// rebuilt from the log on start). Unknown values are a 400.
func TestAnalyticsBots(t *testing.T) {
	s := Start(t)
	proj := s.Project(t, "bots", "", nil)
	secret := s.Key(t, proj, "secret", "live")
	public := s.Key(t, proj, "public", "live")
	for _, v := range []struct{ visitor, ua, path string }{
		{"v-alice", enChrome, "/"},
		{"v-bob", enIPhone, "/pricing"},
		{"v-crawler", enGooglebot, "/"},
	} {
		wantStatus(t, Do(t, "POST", s.Public+"/events", public, map[string]any{"event": "pageview", "visitor_id": v.visitor,
			"properties": map[string]any{"url": "https://shop.example" + v.path, "path": v.path}}, "User-Agent: "+v.ua), 201)
	}
	wantStatus(t, Do(t, "POST", s.Public+"/events", public, map[string]any{"event": "signup", "visitor_id": "v-alice"},
		"User-Agent: "+enChrome), 201)

	check := func(t *testing.T, s *Server) {
		t.Helper()
		r := Do(t, "GET", s.Public+"/events", secret, nil)
		wantStatus(t, r, 200)
		if got := r.JSON(t)["pagination"].(map[string]any)["total"]; got != 4.0 {
			t.Errorf("GET /events total = %v; lists show every event, bots included: want 4", got)
		}
		for _, c := range []struct {
			query         string
			total         float64
			botsExcluded  any
			totalIncluded float64
		}{
			{"", 3, 1.0, 4},
			{"event=pageview", 2, 1.0, 3},
			{"metric=unique_visitors", 2, 1.0, 3},
			{"interval=hour", 3, 1.0, 4},
			{"type=breakdown&group_by=event", 3, 1.0, 4},
			{"type=breakdown&group_by=" + url.QueryEscape("properties.$browser"), 3, 1.0, 4},
			{"event=pageview&where=" + url.QueryEscape("path:eq:/"), 1, 1.0, 2},
			{"visitor_id=v-crawler", 0, 1.0, 1},
			{"type=sessions", 2, 1.0, 3},
		} {
			got := botsQuery(t, s, secret, c.query)
			if got.total != c.total || got.botsExcluded != c.botsExcluded {
				t.Errorf("%q: total %v, bots_excluded %v; want %v, %v", c.query, got.total, got.botsExcluded, c.total, c.botsExcluded)
			}
			sep := "&"
			if c.query == "" {
				sep = ""
			}
			got = botsQuery(t, s, secret, c.query+sep+"bots=include")
			if got.total != c.totalIncluded || got.botsExcluded != nil {
				t.Errorf("%q with bots=include: total %v, bots_excluded %v; want %v, absent", c.query, got.total, got.botsExcluded, c.totalIncluded)
			}
			if got := botsQuery(t, s, secret, c.query+sep+"bots=exclude"); got.total != c.total || got.botsExcluded != c.botsExcluded {
				t.Errorf("%q with bots=exclude: %+v, not the default", c.query, got)
			}
		}
		// A property breakdown by browser shows Googlebot only with bots=include.
		r = Do(t, "GET", s.Public+"/analytics?type=breakdown&group_by=properties.$browser&bots=include", secret, nil)
		wantStatus(t, r, 200)
		if !hasRow(r.JSON(t), "Googlebot", 1) {
			t.Errorf("bots=include breakdown by $browser lacks Googlebot: %s", r.Body)
		}
		r = Do(t, "GET", s.Public+"/analytics?type=breakdown&group_by=properties.$browser", secret, nil)
		if hasRow(r.JSON(t), "Googlebot", 1) {
			t.Errorf("the default breakdown by $browser shows Googlebot: %s", r.Body)
		}
		// Funnels, retention and paths leave the crawler out too.
		r = Do(t, "GET", s.Public+"/analytics?type=funnel&steps=pageview,signup", secret, nil)
		wantStatus(t, r, 200)
		f := r.JSON(t)
		if steps := f["steps"].([]any); steps[0].(map[string]any)["visitors"] != 2.0 || f["bots_excluded"] != 1.0 {
			t.Errorf("funnel: %s; want 2 visitors at the first step, 1 bot excluded", r.Body)
		}
		r = Do(t, "GET", s.Public+"/analytics?type=retention&cohort_event=pageview&bots=include", secret, nil)
		wantStatus(t, r, 200)
		if c := r.JSON(t)["cohorts"].([]any); len(c) != 1 || c[0].(map[string]any)["size"] != 3.0 {
			t.Errorf("retention with bots: %s; want one cohort of 3", r.Body)
		}
		r = Do(t, "GET", s.Public+"/analytics?type=retention&cohort_event=pageview", secret, nil)
		if m := r.JSON(t); m["cohorts"].([]any)[0].(map[string]any)["size"] != 2.0 || m["bots_excluded"] != 1.0 {
			t.Errorf("retention: %s; want one cohort of 2, 1 bot excluded", r.Body)
		}
		r = Do(t, "GET", s.Public+"/analytics?type=paths&start_event=pageview", secret, nil)
		if m := r.JSON(t); m["bots_excluded"] != 1.0 || len(m["transitions"].([]any)) != 1 {
			t.Errorf("paths: %s; want alice's one transition, 1 bot excluded", r.Body)
		}
	}
	t.Run("live", func(t *testing.T) { check(t, s) })
	s.Kill()
	s.Restart()
	t.Run("after kill -9", func(t *testing.T) { check(t, s) })

	t.Run("the dashboard's admin route takes bots too", func(t *testing.T) {
		r := s.AdminDo(t, "GET", "/admin/v1/projects/"+proj+"/analytics?environment=live&bots=include", nil)
		wantStatus(t, r, 200)
		if m := r.JSON(t); m["total"] != 4.0 || m["bots_excluded"] != nil {
			t.Errorf("admin analytics bots=include: %s", r.Body)
		}
	})

	t.Run("unknown values and types without bots are 400s naming bots", func(t *testing.T) {
		for _, q := range []string{"bots=yes", "bots=", "bots=INCLUDE", "type=goals&bots=include"} {
			r := Do(t, "GET", s.Public+"/analytics?"+q, secret, nil)
			details := wantError(t, r, 400, "bad_request", "Invalid query parameters")["details"].(map[string]any)
			if details["bots"] == nil {
				t.Errorf("%s: details %v do not name bots", q, details)
			}
		}
	})
}

// hasRow reports whether a breakdown answer has a row key with value.
func hasRow(m map[string]any, key string, value float64) bool {
	rows, _ := m["data"].([]any)
	for _, r := range rows {
		if row := r.(map[string]any); row["key"] == key && row["value"] == value {
			return true
		}
	}
	return false
}
