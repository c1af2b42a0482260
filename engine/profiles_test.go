package engine

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/eventd/eventd/actors"
	"github.com/eventd/eventd/engine/analytics"
	"github.com/eventd/eventd/engine/ratelimit"
	"github.com/eventd/eventd/storage"
)

// TestProfileThroughEngine writes identify and alias events with
// Pending.Profile set through the key actor and a shard, as the Segment
// routes do, then reads the person back from either id and through the
// admin calls; a replay of an idempotency key changes nothing.
func TestProfileThroughEngine(t *testing.T) {
	e, proj := openTestEngine(t)
	p := secretKey(t, e, proj)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	write := func(visitor, idem string, u *storage.ProfileUpdate) {
		t.Helper()
		pe := actors.Pending{
			Event:   storage.Event{Name: "identify", VisitorID: visitor, HasVisitor: true, Timestamp: u.Timestamp, Properties: []byte("{}")},
			IdemKey: idem, Hash: uint64(len(u.Traits)), Profile: u,
		}
		rep, err := e.Submit(p, ratelimit.Standard, actors.SingleWrite(p.Dataset(), time.Now().UnixMilli(), pe, false), false)
		if err != nil || !rep.Allowed {
			t.Fatalf("submit: %v", err)
		}
		e.Release(rep)
	}
	write("anon-1", "", &storage.ProfileUpdate{ID: "anon-1", Traits: []byte(`{"theme":"dark"}`), Timestamp: base})
	write("user-1", "m1", &storage.ProfileUpdate{ID: "user-1", Traits: []byte(`{"email":"a@example.com","plan":"free"}`),
		Links: []string{"anon-1"}, Timestamp: base + 1000})
	write("user-1", "m2", &storage.ProfileUpdate{ID: "user-1", Traits: []byte(`{"plan":"pro"}`), Timestamp: base + 2000})
	// The same messageId and body again: a replay, never a second update.
	write("user-1", "m1", &storage.ProfileUpdate{ID: "user-1", Traits: []byte(`{"email":"a@example.com","plan":"free"}`),
		Links: []string{"anon-1"}, Timestamp: base + 1000})

	for _, id := range []string{"user-1", "anon-1"} {
		prof, err := e.Profile(p, id)
		if err != nil {
			t.Fatalf("Profile(%s): %v", id, err)
		}
		var traits map[string]any
		if err := json.Unmarshal(prof.Traits, &traits); err != nil {
			t.Fatalf("traits %s: %v", prof.Traits, err)
		}
		if traits["plan"] != "pro" || traits["email"] != "a@example.com" || traits["theme"] != "dark" || len(traits) != 3 {
			t.Errorf("%s: traits %s", id, prof.Traits)
		}
		if *prof.FirstSeen != "2026-03-01T12:00:00.000Z" || *prof.LastSeen != "2026-03-01T12:00:02.000Z" {
			t.Errorf("%s: seen %s..%s", id, *prof.FirstSeen, *prof.LastSeen)
		}
		other := "anon-1"
		if id == "anon-1" {
			other = "user-1"
		}
		if !slices.Equal(prof.LinkedIDs, []string{other}) {
			t.Errorf("%s: linked %v", id, prof.LinkedIDs)
		}
	}
	var out map[string]any
	prof, _ := e.Profile(p, "user-1")
	if err := json.Unmarshal(prof.AppendJSON(nil), &out); err != nil {
		t.Fatalf("AppendJSON: %v", err)
	}
	if _, err := e.Profile(p, "nobody"); err != ErrNotFound {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := e.Profile(p, ""); err != ErrNotFound {
		t.Errorf("empty id: %v", err)
	}
	if _, err := e.GetProfile(proj.ID, Test, "user-1"); err != ErrNotFound {
		t.Errorf("test environment: %v", err)
	}
	if _, err := e.GetProfile(proj.ID, Live, "anon-1"); err != nil {
		t.Errorf("admin read: %v", err)
	}
	page, err := e.ListProfiles(proj.ID, "", "", 1)
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != "anon-1" || !page.Pagination.HasMore || *page.Pagination.NextAfter != "anon-1" {
		t.Fatalf("page 1: %+v %v", page, err)
	}
	page, err = e.ListProfiles(proj.ID, Live, "anon-1", 10)
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != "user-1" || page.Pagination.HasMore || page.Pagination.NextAfter != nil {
		t.Fatalf("page 2: %+v %v", page, err)
	}
	if _, err := e.ListProfiles(proj.ID, Live, "", 0); err == nil {
		t.Error("limit 0 accepted")
	}
	if _, err := e.ListProfiles("prj_nope", Live, "", 10); err != ErrNotFound {
		t.Errorf("unknown project: %v", err)
	}

	// The erasure job removes the profile and its links.
	job, err := e.EraseVisitor(proj.ID, Live, "user-1", false)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, _ := e.GetJob(job.ID)
		if j.Status != JobRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("erasure did not finish")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := e.Profile(p, "user-1"); err != ErrNotFound {
		t.Errorf("after erasure: %v", err)
	}
	if prof, err := e.Profile(p, "anon-1"); err != nil || len(prof.LinkedIDs) != 0 {
		t.Errorf("anon-1 after erasure: %+v %v", prof, err)
	}
}

// TestAnalyticsResolveLinkedIDs: a funnel whose first step was done by an
// anonymous id and the next by the user id linked to it converts the person
// once; a breakdown by property counts linked ids as one unique visitor.
// Unlinked ids stay apart.
func TestAnalyticsResolveLinkedIDs(t *testing.T) {
	e, proj := openTestEngine(t)
	p := secretKey(t, e, proj)
	base := time.Now().Add(-time.Hour).UnixMilli()
	write := func(ev, visitor string, at int64, u *storage.ProfileUpdate) {
		t.Helper()
		pe := actors.Pending{Event: storage.Event{Name: ev, VisitorID: visitor, HasVisitor: true, Timestamp: at,
			Properties: []byte(`{"plan":"pro"}`)}, Profile: u}
		rep, err := e.Submit(p, ratelimit.Standard, actors.SingleWrite(p.Dataset(), time.Now().UnixMilli(), pe, false), false)
		if err != nil || !rep.Allowed {
			t.Fatalf("submit: %v", err)
		}
		e.Release(rep)
	}
	query := func(q analytics.Query) any {
		t.Helper()
		q.From, q.To = base-1000, base+time.Hour.Milliseconds()
		res, err := e.Analytics(p, q)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	funnel := func() []int64 {
		res := query(analytics.Query{Type: analytics.Funnel, Steps: []string{"view", "signup", "purchase"}, Window: 3600})
		var out []int64
		for _, s := range res.(*FunnelResult).Steps {
			out = append(out, s.Visitors)
		}
		return out
	}
	uniques := func() float64 {
		res := query(analytics.Query{Type: analytics.Breakdown, Metric: analytics.UniqueVisitors, GroupBy: "properties.plan", GroupProperty: "plan", Limit: 10})
		return res.(*BreakdownResult).Total
	}
	write("view", "anon_1", base, nil)
	write("view", "anon_2", base, nil)
	write("signup", "user_1", base+1000, nil)
	write("purchase", "user_1", base+2000, nil)
	if got := funnel(); !slices.Equal(got, []int64{2, 0, 0}) {
		t.Fatalf("before the link: funnel %v", got)
	}
	if got := uniques(); got != 3 {
		t.Fatalf("before the link: %v unique visitors", got)
	}
	// The identify that links them (its own event is not a funnel step).
	write("identify", "user_1", base+3000, &storage.ProfileUpdate{ID: "user_1", Links: []string{"anon_1"}, Timestamp: base + 3000})
	if got := funnel(); !slices.Equal(got, []int64{2, 1, 1}) {
		t.Errorf("after the link: funnel %v, want [2 1 1]", got)
	}
	if got := uniques(); got != 2 {
		t.Errorf("after the link: %v unique visitors, want 2", got)
	}
}
