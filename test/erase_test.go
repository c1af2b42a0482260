package test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// analyticsTotal runs GET /analytics and returns its total.
func analyticsTotal(t *testing.T, s *Server, key, query string) float64 {
	t.Helper()
	r := Do(t, "GET", s.Public+"/analytics?"+query, key, nil)
	wantStatus(t, r, 200)
	return r.JSON(t)["total"].(float64)
}

func listTotal(t *testing.T, s *Server, key, query string) float64 {
	t.Helper()
	r := Do(t, "GET", s.Public+"/events?"+query, key, nil)
	wantStatus(t, r, 200)
	return r.JSON(t)["pagination"].(map[string]any)["total"].(float64)
}

func waitJob(t *testing.T, s *Server, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r := s.AdminDo(t, "GET", "/admin/v1/jobs/"+id, nil)
		wantStatus(t, r, 200)
		j := r.JSON(t)
		if j["status"] != "running" {
			return j
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("job %s still running after 30 s", id)
	return nil
}

func TestEraseVisitor(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "gdpr", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	other := s.Key(t, s.Project(t, "other", "", streamLimits), "secret", "live")

	day := time.Now().UTC().Truncate(24 * time.Hour)
	var aIDs []string
	post := func(k, name, visitor string, amount float64, at time.Time, headers ...string) string {
		r := Do(t, "POST", s.Public+"/events", k, map[string]any{"event": name, "visitor_id": visitor,
			"properties": map[string]any{"amount": amount}, "timestamp": at.Format(time.RFC3339Nano)}, headers...)
		wantStatus(t, r, 201)
		return r.JSON(t)["id"].(string)
	}
	first := post(key, "warmup", "v_b", 1, day.Add(-72*time.Hour))
	for d := 0; d < 3; d++ {
		at := day.Add(time.Duration(-d*24)*time.Hour + time.Hour)
		aIDs = append(aIDs, post(key, "purchase", "v_a", 10, at), post(key, "signup", "v_a", 5, at.Add(time.Minute)))
		post(key, "purchase", "v_b", 7, at.Add(30*time.Second))
		post(other, "purchase", "v_a", 3, at) // same visitor id, other project: untouched
	}
	aIDs = append(aIDs, post(key, "purchase", "v_a", 2, day.Add(-time.Hour), "Idempotency-Key: order-1"))

	rng := fmt.Sprintf("from=%s&to=%s", day.Add(-96*time.Hour).Format("2006-01-02"), day.Format("2006-01-02"))
	if got := listTotal(t, s, key, rng); got != 11 {
		t.Fatalf("total before erase %v, want 11", got)
	}
	if got := analyticsTotal(t, s, key, "type=timeseries&metric=unique_visitors&"+rng); got != 2 {
		t.Fatalf("unique visitors before %v, want 2", got)
	}

	r := s.AdminDo(t, "DELETE", "/admin/v1/projects/"+p+"/visitors/v_a?environment=live", nil)
	wantStatus(t, r, 202)
	if loc := r.Header.Get("Location"); !strings.HasPrefix(loc, "/admin/v1/jobs/job_") {
		t.Fatalf("Location %q", loc)
	}
	job := waitJob(t, s, r.JSON(t)["id"].(string))
	if job["status"] != "succeeded" || job["events_erased"].(float64) != 7 {
		t.Fatalf("job %v", job)
	}

	for _, id := range aIDs {
		if r := Do(t, "GET", s.Public+"/events/"+id, key, nil); r.Status != 404 {
			t.Fatalf("erased event %s still readable: %d", id, r.Status)
		}
	}
	checks := []struct {
		name  string
		got   float64
		wants float64
	}{
		{"list total", listTotal(t, s, key, rng), 4},
		{"list by visitor", listTotal(t, s, key, "visitor_id=v_a"), 0},
		{"list by name", listTotal(t, s, key, "event=signup"), 0},
		{"count", analyticsTotal(t, s, key, "type=timeseries&metric=count&"+rng), 4},
		{"sum", analyticsTotal(t, s, key, "type=timeseries&metric=sum&property=amount&"+rng), 22},
		{"unique visitors", analyticsTotal(t, s, key, "type=timeseries&metric=unique_visitors&"+rng), 1},
		{"unique visitors by hour", analyticsTotal(t, s, key, "type=timeseries&interval=hour&metric=unique_visitors&"+rng), 1},
		{"other project untouched", listTotal(t, s, other, "visitor_id=v_a"), 3},
	}
	for _, c := range checks {
		if c.got != c.wants {
			t.Errorf("%s after erase: %v, want %v", c.name, c.got, c.wants)
		}
	}

	// The stream's since-replay no longer carries the visitor.
	c := dial(t, wsURL(s, "?since="+first), bearer(key))
	for i := 0; i < 3; i++ {
		if e := readEvent(t, c); e.VisitorID != "v_b" {
			t.Fatalf("replay after erase gave %+v", e)
		}
	}
	expectSilence(t, c, 300*time.Millisecond)

	// Its idempotency record went too: the same key stores anew.
	again := post(key, "purchase", "v_a", 2, day.Add(-time.Hour), "Idempotency-Key: order-1")
	if again == aIDs[len(aIDs)-1] {
		t.Fatal("idempotency record of an erased event survived")
	}

	// With suppress, the visitor's new events are refused, also after a restart.
	r = s.AdminDo(t, "DELETE", "/admin/v1/projects/"+p+"/visitors/v_a?environment=live&suppress=true", nil)
	wantStatus(t, r, 202)
	waitJob(t, s, r.JSON(t)["id"].(string))
	for round := 0; round < 2; round++ {
		r = Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "purchase", "visitor_id": "v_a"})
		m := wantError(t, r, 422, "validation_error", "")
		if _, ok := m["details"].(map[string]any)["visitor_id"]; !ok {
			t.Fatalf("422 without details.visitor_id: %s", r.Body)
		}
		s.Restart()
	}
	post(key, "purchase", "v_b", 1, day) // others still fine

	for _, bad := range []string{"/admin/v1/projects/nope/visitors/v_a", "/admin/v1/projects/" + p + "/visitors/v_a?environment=prod",
		"/admin/v1/projects/" + p + "/visitors/v_a?suppress=maybe"} {
		if r := s.AdminDo(t, "DELETE", bad, nil); r.Status != 404 && r.Status != 400 {
			t.Fatalf("DELETE %s: %d", bad, r.Status)
		}
	}
	if r := s.AdminDo(t, "GET", "/admin/v1/jobs/job_nope", nil); r.Status != 404 {
		t.Fatalf("unknown job: %d", r.Status)
	}
}

func TestRetention(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "ret", "", streamLimits)
	key := s.Key(t, p, "secret", "live")
	testKey := s.Key(t, p, "secret", "test")
	day := time.Now().UTC().Truncate(24 * time.Hour)
	old := day.Add(-10*24*time.Hour + 3*time.Hour)
	recent := day.Add(-24*time.Hour + 3*time.Hour)
	var oldIDs, newIDs []string
	for i := 0; i < 5; i++ {
		for _, k := range []string{key, testKey} {
			r := Do(t, "POST", s.Public+"/events", k, map[string]any{"event": "tick", "visitor_id": fmt.Sprint("v", i), "timestamp": old.Add(time.Duration(i) * time.Minute).Format(time.RFC3339)})
			wantStatus(t, r, 201)
			if k == key {
				oldIDs = append(oldIDs, r.JSON(t)["id"].(string))
			}
			r = Do(t, "POST", s.Public+"/events", k, map[string]any{"event": "tick", "visitor_id": fmt.Sprint("v", i), "timestamp": recent.Add(time.Duration(i) * time.Minute).Format(time.RFC3339)})
			wantStatus(t, r, 201)
			if k == key {
				newIDs = append(newIDs, r.JSON(t)["id"].(string))
			}
		}
	}
	r := s.AdminDo(t, "PATCH", "/admin/v1/projects/"+p, map[string]any{"retention_days": map[string]int{"live": 5}})
	wantStatus(t, r, 200)
	if rd := r.JSON(t)["retention_days"].(map[string]any); rd["live"] != float64(5) || rd["test"] != float64(0) {
		t.Fatalf("retention_days %v", rd)
	}
	if r := s.AdminDo(t, "PATCH", "/admin/v1/projects/"+p, map[string]any{"retention_days": map[string]int{"live": -1}}); r.Status != 400 {
		t.Fatalf("negative retention: %d", r.Status)
	}
	s.Restart() // retention runs at start, then hourly

	for _, id := range oldIDs {
		if r := Do(t, "GET", s.Public+"/events/"+id, key, nil); r.Status != 404 {
			t.Fatalf("expired event %s still there: %d", id, r.Status)
		}
	}
	for _, id := range newIDs {
		wantStatus(t, Do(t, "GET", s.Public+"/events/"+id, key, nil), 200)
	}
	if got := listTotal(t, s, key, ""); got != 5 {
		t.Fatalf("live total %v, want 5", got)
	}
	if got := listTotal(t, s, key, "from="+old.Format("2006-01-02")); got != 5 {
		t.Fatalf("live total from the expired day %v, want 5", got)
	}
	if got := listTotal(t, s, testKey, ""); got != 10 {
		t.Fatalf("test environment (no retention) total %v, want 10", got)
	}
	// Day rollups of expired days are kept for charts; finer ones are gone.
	rng := "from=" + old.Format("2006-01-02") + "&to=" + old.Format("2006-01-02")
	if got := analyticsTotal(t, s, key, "type=timeseries&interval=day&"+rng); got != 5 {
		t.Fatalf("day count of an expired day %v, want 5 (kept)", got)
	}
}
