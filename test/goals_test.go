package test

import (
	"strings"
	"testing"
	"time"
)

// anGoalCounts maps a goal name to its completions and visitors.
type anGoalCounts map[string][2]float64

func anGoals(t *testing.T, body map[string]any) anGoalCounts {
	t.Helper()
	if body["type"] != "goals" {
		t.Fatalf("type %v", body["type"])
	}
	out := anGoalCounts{}
	for _, d := range body["data"].([]any) {
		m := d.(map[string]any)
		if !strings.HasPrefix(m["goal_id"].(string), "goal_") {
			t.Errorf("goal_id %v", m["goal_id"])
		}
		out[m["name"].(string)] = [2]float64{m["completions"].(float64), m["visitors"].(float64)}
	}
	return out
}

// anWaitGoals polls type=goals until it reports want (goals are evaluated
// after commit, asynchronously), failing after 15 s.
func anWaitGoals(t *testing.T, keys *anKeys, query string, want anGoalCounts) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := anGoals(t, keys.get("type=goals&"+query))
		same := len(got) == len(want)
		for k, v := range want {
			same = same && got[k] == v
		}
		if same {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("type=goals&%s = %v, want %v", query, got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestGoalsCRUD(t *testing.T) {
	s := Start(t)
	proj := s.Project(t, "goals", "", nil)
	base := "/admin/v1/projects/" + proj + "/goals"

	r := s.AdminDo(t, "POST", base, map[string]any{"name": "Big purchase", "environment": "live", "type": "value",
		"event": "purchase", "property": "amount", "op": "gte", "threshold": 100})
	wantStatus(t, r, 201)
	g := r.JSON(t)
	id, _ := g["id"].(string)
	if !strings.HasPrefix(id, "goal_") || g["name"] != "Big purchase" || g["type"] != "value" || g["threshold"] != float64(100) ||
		g["op"] != "gte" || g["property"] != "amount" || g["environment"] != "live" || g["created_at"] == nil {
		t.Fatalf("created goal %s", r.Body)
	}
	if _, ok := g["steps"]; ok {
		t.Errorf("value goal shows steps: %s", r.Body)
	}
	r = s.AdminDo(t, "POST", base, map[string]any{"name": "Pricing signup", "environment": "live", "type": "occurrence",
		"event": "signup", "where": map[string]any{"property": "source", "op": "eq", "value": "pricing"}})
	wantStatus(t, r, 201)
	if w, _ := r.JSON(t)["where"].(map[string]any); w["value"] != "pricing" {
		t.Errorf("where not echoed: %s", r.Body)
	}
	r = s.AdminDo(t, "POST", base, map[string]any{"name": "Activated", "environment": "test", "type": "sequence",
		"steps": []string{"signup", "activate"}, "window": 86400})
	wantStatus(t, r, 201)

	r = s.AdminDo(t, "GET", base, nil)
	wantStatus(t, r, 200)
	list := r.JSON(t)["data"].([]any)
	if len(list) != 3 || list[0].(map[string]any)["id"] != id {
		t.Fatalf("list %s", r.Body)
	}
	wantStatus(t, s.AdminDo(t, "GET", base+"/"+id, nil), 200)
	r = s.AdminDo(t, "PUT", base+"/"+id, map[string]any{"name": "Bigger purchase", "environment": "live", "type": "value",
		"event": "purchase", "property": "amount", "op": "gt", "threshold": 500})
	wantStatus(t, r, 200)
	if m := r.JSON(t); m["name"] != "Bigger purchase" || m["threshold"] != float64(500) || m["updated_at"] == nil || m["created_at"] != g["created_at"] {
		t.Errorf("updated goal %s", r.Body)
	}

	for _, tc := range []struct {
		body   map[string]any
		fields []string
	}{
		{map[string]any{"environment": "live", "type": "occurrence", "event": "x"}, []string{"name"}},
		{map[string]any{"name": "x", "environment": "staging", "type": "occurrence", "event": "x"}, []string{"environment"}},
		{map[string]any{"name": "x", "environment": "live", "type": "funnel"}, []string{"type"}},
		{map[string]any{"name": "x", "environment": "live", "type": "occurrence", "event": "bad name"}, []string{"event"}},
		{map[string]any{"name": "x", "environment": "live", "type": "occurrence", "event": "x", "where": map[string]any{"property": "p", "op": "gt", "value": "a"}}, []string{"where.value"}},
		{map[string]any{"name": "x", "environment": "live", "type": "value", "event": "x", "property": "amount", "op": "above"}, []string{"op", "threshold"}},
		{map[string]any{"name": "x", "environment": "live", "type": "sequence", "steps": []string{"a"}}, []string{"steps", "window"}},
		{map[string]any{"name": "x", "environment": "live", "type": "sequence", "steps": []string{"a", "b"}, "window": 60, "event": "a"}, []string{"event"}},
	} {
		m := wantError(t, s.AdminDo(t, "POST", base, tc.body), 400, "bad_request", "")
		anWantDetails(t, m, tc.fields...)
	}
	wantError(t, s.AdminDo(t, "POST", base, "not json"), 400, "bad_request", "")
	wantError(t, s.AdminDo(t, "POST", "/admin/v1/projects/proj_nope/goals", map[string]any{"name": "x", "environment": "live", "type": "occurrence", "event": "x"}), 404, "not_found", "")
	wantError(t, s.AdminDo(t, "GET", base+"/goal_nope", nil), 404, "not_found", "")
	other := s.Project(t, "other", "", nil)
	wantError(t, s.AdminDo(t, "GET", "/admin/v1/projects/"+other+"/goals/"+id, nil), 404, "not_found", "")

	wantStatus(t, s.AdminDo(t, "DELETE", base+"/"+id, nil), 204)
	wantError(t, s.AdminDo(t, "GET", base+"/"+id, nil), 404, "not_found", "")
	wantError(t, s.AdminDo(t, "DELETE", base+"/"+id, nil), 404, "not_found", "")
	wantError(t, Do(t, "GET", s.Admin+base, "", nil), 401, "unauthorized", "")
}

func TestGoalsCompletions(t *testing.T) {
	s := Start(t)
	proj := s.Project(t, "goals", "enterprise", nil)
	keys := &anKeys{t: t, s: s, proj: proj, env: "live"}
	testKeys := &anKeys{t: t, s: s, proj: proj, env: "test"}
	base := "/admin/v1/projects/" + proj + "/goals"
	create := func(body map[string]any) string {
		t.Helper()
		r := s.AdminDo(t, "POST", base, body)
		wantStatus(t, r, 201)
		return r.JSON(t)["id"].(string)
	}
	create(map[string]any{"name": "pricing_signup", "environment": "live", "type": "occurrence", "event": "signup",
		"where": map[string]any{"property": "source", "op": "eq", "value": "pricing"}})
	create(map[string]any{"name": "big_purchase", "environment": "live", "type": "value", "event": "purchase",
		"property": "amount", "op": "gte", "threshold": 30})
	create(map[string]any{"name": "quick_buyer", "environment": "live", "type": "sequence",
		"steps": []string{"signup", "purchase"}, "window": 3600})
	pageviewID := create(map[string]any{"name": "pageview", "environment": "live", "type": "occurrence", "event": "pageview"})
	create(map[string]any{"name": "test_signup", "environment": "test", "type": "occurrence", "event": "signup"})

	anPost(t, s, keys.next(), anFixture)
	// Repeats do not complete a goal twice for one visitor.
	anPost(t, s, keys.next(), []anEvent{
		{"2026-11-06T08:00:00Z", "signup", "alice", map[string]any{"source": "pricing"}},
		{"2026-11-06T09:00:00Z", "purchase", "bob", map[string]any{"amount": 500}},
		{"2026-11-06T10:00:00Z", "pageview", "", nil},                              // anonymous: each one completes
		{"2026-11-06T10:00:01Z", "pageview", "frank", nil},                         // once for frank
		{"2026-11-06T10:00:02Z", "pageview", "frank", nil},                         // not twice
		{"2026-11-04T15:00:00Z", "purchase", "erin", map[string]any{"amount": 10}}, // erin buys first...
	})
	// ...and her signup, 30 minutes earlier, arrives later (backfilled): the sequence still completes.
	anPost(t, s, keys.next(), []anEvent{{"2026-11-04T14:30:00Z", "signup", "erin", nil}})

	all := "from=2026-11-01&to=2026-11-07"
	anWaitGoals(t, keys, all, anGoalCounts{
		"pricing_signup": {3, 3}, // alice, carol, dave
		"big_purchase":   {2, 2}, // bob (100), carol (30.01); bob's 500 is a repeat
		"quick_buyer":    {2, 2}, // bob exactly 3600 s, erin out of order; carol 25 h
		"pageview":       {3, 1}, // two anonymous, frank once
	})
	// The range filters completions by the completing event's time.
	anWaitGoals(t, keys, "from=2026-11-05&to=2026-11-05", anGoalCounts{
		"pricing_signup": {1, 1}, "big_purchase": {1, 1}, "quick_buyer": {0, 0}, "pageview": {0, 0},
	})
	// Goals are per environment.
	anPost(t, s, testKeys.next(), []anEvent{{"2026-11-04T10:00:00Z", "signup", "tess", nil}})
	anWaitGoals(t, testKeys, all, anGoalCounts{"test_signup": {1, 1}})

	// Completions survive a restart, and events acknowledged just before a
	// crash are evaluated after it (the goals actor catches up from its cursor).
	anPost(t, s, keys.next(), []anEvent{{"2026-11-06T12:00:00Z", "signup", "gina", map[string]any{"source": "pricing"}}})
	s.Kill()
	s.Restart()
	anPost(t, s, keys.next(), []anEvent{{"2026-11-06T12:30:00Z", "signup", "hank", map[string]any{"source": "pricing"}}})
	want := anGoalCounts{"pricing_signup": {5, 5}, "big_purchase": {2, 2}, "quick_buyer": {2, 2}, "pageview": {3, 1}}
	anWaitGoals(t, keys, all, want)
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	s.Restart()
	anWaitGoals(t, keys, all, want)

	// A new goal counts from its creation on, not retroactively.
	create(map[string]any{"name": "any_signup", "environment": "live", "type": "occurrence", "event": "signup"})
	want["any_signup"] = [2]float64{0, 0}
	anWaitGoals(t, keys, all, want)
	anPost(t, s, keys.next(), []anEvent{{"2026-11-06T13:00:00Z", "signup", "ivy", nil}})
	want["any_signup"] = [2]float64{1, 1}
	anWaitGoals(t, keys, all, want)

	// Deleting a goal removes it and its completions.
	wantStatus(t, s.AdminDo(t, "DELETE", base+"/"+pageviewID, nil), 204)
	delete(want, "pageview")
	anWaitGoals(t, keys, all, want)
}
