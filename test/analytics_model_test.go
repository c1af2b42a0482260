package test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// updateGolden rewrites the golden files of the generated-data tests.
var updateGolden = flag.Bool("update", false, "rewrite testdata golden files")

// genEvent is one generated event.
type genEvent struct {
	Name, Visitor, Path string
	At                  time.Time
}

// label is how a paths answer names the event: a pageview by its path.
func (e genEvent) label() string {
	if e.Name == "pageview" {
		return e.Path
	}
	return e.Name
}

// splitmix is a tiny deterministic generator, so the data (and the golden
// files) never change with the Go version's math/rand.
type splitmix uint64

func (s *splitmix) intn(n int) int {
	*s += 0x9E3779B97F4A7C15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return int((z ^ (z >> 31)) % uint64(n))
}

// genDay0 is a Monday, so weeks start on a whole day of the data.
var genDay0 = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)

const genDays = 14

// generateVisits makes 40 visitors' visits over two weeks: pageviews,
// signups, logins and clicks, with gaps just under, at and over the
// 30-minute session timeout, sessions that run past midnight, and every
// visitor's events at distinct times (paths are sequences in time order).
func generateVisits() []genEvent {
	rng := splitmix(15)
	pages := []string{"/", "/pricing", "/docs", "/blog", "/signup"}
	gaps := []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute, 29 * time.Minute, 30 * time.Minute, 31 * time.Minute}
	var out []genEvent
	for v := range 40 {
		visitor := fmt.Sprintf("v%02d", v)
		var last time.Time
		for range 1 + rng.intn(4) {
			at := genDay0.Add(time.Duration(rng.intn(genDays*24*60)) * time.Minute)
			if v%10 == 0 {
				at = genDay0.Add(time.Duration(rng.intn(genDays)*24+23)*time.Hour + 50*time.Minute) // runs past midnight
			}
			if !at.After(last) {
				at = last.Add(2 * time.Hour)
			}
			for i := range 1 + rng.intn(6) {
				if i > 0 {
					at = at.Add(gaps[rng.intn(len(gaps))])
				}
				e := genEvent{Name: "pageview", Visitor: visitor, Path: pages[rng.intn(len(pages))], At: at}
				switch r := rng.intn(20); {
				case i > 0 && r < 3:
					e = genEvent{Name: "signup", Visitor: visitor, At: at}
				case i > 0 && r < 7:
					e = genEvent{Name: "login", Visitor: visitor, At: at}
				case i > 0 && r < 9:
					e = genEvent{Name: "click", Visitor: visitor, At: at}
				}
				out = append(out, e)
				last = at
			}
		}
	}
	return out
}

// TestAnalyticsGenerated checks sessions, retention and paths on generated
// data twice: against a naive model of docs/analytics.md written here
// independently of engine/analytics, and byte for byte against golden files
// (go test ./test -run TestAnalyticsGenerated -update rewrites them). Then it
// erases the busiest visitor and checks that every answer equals the
// model's without that visitor.
func TestAnalyticsGenerated(t *testing.T) {
	s := Start(t)
	p := s.Project(t, "generated", "", nil)
	key := s.Key(t, p, "secret", "live")
	events := generateVisits()
	var batch []any
	for _, e := range events {
		m := map[string]any{"event": e.Name, "visitor_id": e.Visitor, "timestamp": e.At.Format(time.RFC3339)}
		if e.Name == "pageview" {
			m["properties"] = map[string]any{"path": e.Path}
		}
		batch = append(batch, m)
		if len(batch) == 100 {
			wantStatus(t, Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": batch}), 201)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		wantStatus(t, Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": batch}), 201)
	}

	from, to := genDay0.Format("2006-01-02"), genDay0.AddDate(0, 0, genDays).Format("2006-01-02")
	rng := "&from=" + from + "&to=" + to
	queries := []struct{ name, query string }{
		{"sessions_day", "type=sessions&interval=day" + rng},
		{"sessions_entry", "type=sessions&group_by=entry_page" + rng},
		{"sessions_exit", "type=sessions&group_by=exit_page" + rng},
		{"retention_day", "type=retention&cohort_event=signup&return_event=login&period=day&periods=7&from=" + from + "&to=" + genDay0.AddDate(0, 0, genDays-1).Format("2006-01-02")},
		{"retention_week", "type=retention&cohort_event=pageview&return_event=login&period=week&periods=2" + rng},
		{"paths_forward", "type=paths&start_event=pageview&steps=3&limit=100" + rng},
		{"paths_backward", "type=paths&end_event=signup&steps=2&limit=100" + rng},
	}
	check := func(evs []genEvent, golden bool) {
		t.Helper()
		for _, q := range queries {
			r := Do(t, "GET", s.Public+"/analytics?"+q.query, key, nil)
			wantStatus(t, r, 200)
			want := modelAnswer(t, q.name, evs)
			// The generated traffic has no bots: every answer says none were left out.
			if m, ok := want.(map[string]any); ok {
				m["bots_excluded"] = 0
			}
			if err := sameJSON(r.Body, want); err != nil {
				w, _ := json.Marshal(want)
				t.Errorf("%s: %v\n got %s\nwant %s", q.name, err, r.Body, w)
			}
			if golden {
				compareGolden(t, filepath.Join("testdata", "analytics", q.name+".json"), r.Body)
			}
		}
	}
	check(events, true)

	// The busiest visitor's events leave every answer.
	counts := map[string]int{}
	for _, e := range events {
		counts[e.Visitor]++
	}
	busiest := ""
	for v, n := range counts {
		if busiest == "" || n > counts[busiest] || n == counts[busiest] && v < busiest {
			busiest = v
		}
	}
	r := s.AdminDo(t, "DELETE", "/admin/v1/projects/"+p+"/visitors/"+busiest+"?environment=live", nil)
	wantStatus(t, r, 202)
	if job := waitJob(t, s, r.JSON(t)["id"].(string)); job["status"] != "succeeded" || job["events_erased"].(float64) != float64(counts[busiest]) {
		t.Fatalf("erasure job %v, want %d events erased", job, counts[busiest])
	}
	rest := slices.DeleteFunc(slices.Clone(events), func(e genEvent) bool { return e.Visitor == busiest })
	check(rest, false)
}

// compareGolden compares got with the file, or rewrites it under -update.
func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(bytes.TrimSpace(got), '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
		t.Errorf("%s differs:\n got %s\nwant %s", path, got, want)
	}
}

// sameJSON compares two JSON documents, numbers within 1e-9 relative.
func sameJSON(got []byte, want any) error {
	var g any
	if err := json.Unmarshal(got, &g); err != nil {
		return err
	}
	w, err := json.Marshal(want)
	if err != nil {
		return err
	}
	var wv any
	_ = json.Unmarshal(w, &wv)
	return jsonDiff("", g, wv)
}

func jsonDiff(at string, g, w any) error {
	switch w := w.(type) {
	case map[string]any:
		gm, ok := g.(map[string]any)
		if !ok || len(gm) != len(w) {
			return fmt.Errorf("%s: got %v, want %v", at, g, w)
		}
		for k, wv := range w {
			if err := jsonDiff(at+"."+k, gm[k], wv); err != nil {
				return err
			}
		}
	case []any:
		ga, ok := g.([]any)
		if !ok || len(ga) != len(w) {
			return fmt.Errorf("%s: got %v, want %v", at, g, w)
		}
		for i := range w {
			if err := jsonDiff(fmt.Sprintf("%s[%d]", at, i), ga[i], w[i]); err != nil {
				return err
			}
		}
	case float64:
		gf, ok := g.(float64)
		if !ok || math.Abs(gf-w) > 1e-9*math.Max(1, math.Abs(w)) {
			return fmt.Errorf("%s: got %v, want %v", at, g, w)
		}
	default:
		if g != w {
			return fmt.Errorf("%s: got %v, want %v", at, g, w)
		}
	}
	return nil
}

// modelAnswer computes a query's answer from the events the way
// docs/analytics.md describes it, naively.
func modelAnswer(t *testing.T, name string, evs []genEvent) any {
	byVisitor := map[string][]genEvent{}
	for _, e := range evs {
		byVisitor[e.Visitor] = append(byVisitor[e.Visitor], e)
	}
	for _, es := range byVisitor {
		slices.SortFunc(es, func(a, b genEvent) int { return a.At.Compare(b.At) })
	}
	switch name {
	case "sessions_day", "sessions_entry", "sessions_exit":
		return modelSessions(name, byVisitor)
	case "retention_day":
		return modelRetention(byVisitor, "signup", "login", "day", 7, genDay0, genDay0.AddDate(0, 0, genDays))
	case "retention_week":
		return modelRetention(byVisitor, "pageview", "login", "week", 2, genDay0, genDay0.AddDate(0, 0, genDays+1))
	case "paths_forward":
		return modelPaths(byVisitor, "pageview", "", 3)
	case "paths_backward":
		return modelPaths(byVisitor, "", "signup", 2)
	}
	t.Fatalf("no model for %s", name)
	return nil
}

type modelSession struct {
	visitor      string
	start, end   time.Time
	pages, count int
	entry, exit  string
}

func modelSessions(name string, byVisitor map[string][]genEvent) any {
	var all []modelSession
	for v, es := range byVisitor {
		var cur *modelSession
		for _, e := range es {
			if cur == nil || e.At.Sub(cur.end) > 30*time.Minute {
				all = append(all, modelSession{visitor: v, start: e.At})
				cur = &all[len(all)-1]
			}
			cur.end = e.At
			cur.count++
			if e.Name == "pageview" {
				cur.pages++
				if cur.entry == "" {
					cur.entry = e.Path
				}
				cur.exit = e.Path
			}
		}
	}
	if name != "sessions_day" {
		n := map[string]int{}
		for _, s := range all {
			if page := map[bool]string{true: s.entry, false: s.exit}[name == "sessions_entry"]; page != "" {
				n[page]++
			}
		}
		rows := []map[string]any{}
		for k, v := range n {
			rows = append(rows, map[string]any{"key": k, "value": v})
		}
		slices.SortFunc(rows, func(a, b map[string]any) int {
			return cmp.Or(cmp.Compare(b["value"].(int), a["value"].(int)), cmp.Compare(a["key"].(string), b["key"].(string)))
		})
		return map[string]any{"type": "sessions", "group_by": map[bool]string{true: "entry_page", false: "exit_page"}[name == "sessions_entry"],
			"total": sessionStats(all), "rows": rows}
	}
	var data []map[string]any
	for d := range genDays + 1 {
		day := genDay0.AddDate(0, 0, d)
		var in []modelSession
		for _, s := range all {
			if !s.start.Before(day) && s.start.Before(day.AddDate(0, 0, 1)) {
				in = append(in, s)
			}
		}
		row := map[string]any{"timestamp": day.Format("2006-01-02T15:04:05.000Z"), "sessions": 0, "visitors": 0, "bounce_rate": 0,
			"duration_mean_s": 0, "duration_median_s": 0, "pages_per_session": 0}
		if len(in) > 0 {
			row = sessionStats(in)
			row["timestamp"] = day.Format("2006-01-02T15:04:05.000Z")
		}
		data = append(data, row)
	}
	return map[string]any{"type": "sessions", "interval": "day", "total": sessionStats(all), "data": data}
}

// sessionStats summarises sessions as one bucket of type=sessions.
func sessionStats(ss []modelSession) map[string]any {
	visitors := map[string]bool{}
	var durations []float64
	bounces, pages := 0, 0
	total := 0.0
	for _, s := range ss {
		visitors[s.visitor] = true
		d := s.end.Sub(s.start).Seconds()
		durations = append(durations, d)
		total += d
		pages += s.pages
		if s.pages == 1 && s.count == 1 {
			bounces++
		}
	}
	slices.Sort(durations)
	n := len(ss)
	median := (durations[(n-1)/2] + durations[n/2]) / 2 // the middle one, or the mean of the middle two
	return map[string]any{"sessions": n, "visitors": len(visitors), "bounce_rate": float64(bounces) / float64(n),
		"duration_mean_s": total / float64(n), "duration_median_s": median, "pages_per_session": float64(pages) / float64(n)}
}

// modelRetention: a visitor's first cohort event in [from, to) puts them in
// that period's cohort; returned[k] counts those with a return event in the
// k-th period after it (k = 0: at or after their first cohort event).
func modelRetention(byVisitor map[string][]genEvent, cohort, ret, period string, periods int, from, to time.Time) any {
	step := func(t time.Time, k int) time.Time {
		if period == "week" {
			return t.AddDate(0, 0, 7*k)
		}
		return t.AddDate(0, 0, k)
	}
	type row struct {
		size     int
		returned []int
	}
	rows := map[time.Time]*row{}
	for _, es := range byVisitor {
		i := slices.IndexFunc(es, func(e genEvent) bool { return e.Name == cohort && !e.At.Before(from) && e.At.Before(to) })
		if i < 0 {
			continue
		}
		first := es[i].At
		start := from
		for !step(start, 1).After(first) {
			start = step(start, 1)
		}
		r := rows[start]
		if r == nil {
			r = &row{returned: make([]int, periods)}
			rows[start] = r
		}
		r.size++
		for k := range periods {
			lo, hi := step(start, k), step(start, k+1)
			if k == 0 {
				lo = first
			}
			if slices.ContainsFunc(es, func(e genEvent) bool { return e.Name == ret && !e.At.Before(lo) && e.At.Before(hi) }) {
				r.returned[k]++
			}
		}
	}
	var starts []time.Time
	for s := range rows {
		starts = append(starts, s)
	}
	slices.SortFunc(starts, time.Time.Compare)
	cohorts := []map[string]any{}
	for _, s := range starts {
		cohorts = append(cohorts, map[string]any{"start": s.Format("2006-01-02T15:04:05.000Z"), "size": rows[s].size, "returned": rows[s].returned})
	}
	return map[string]any{"type": "retention", "period": period, "cohorts": cohorts}
}

// modelPaths: from each visitor's first start event forwards (or up to the
// first end event, backwards), the k-th transition counts at step k.
func modelPaths(byVisitor map[string][]genEvent, start, end string, steps int) any {
	type edge struct {
		step     int
		from, to string
	}
	n := map[edge]int{}
	for _, es := range byVisitor {
		anchor := cmp.Or(start, end)
		i := slices.IndexFunc(es, func(e genEvent) bool { return e.Name == anchor })
		if i < 0 {
			continue
		}
		for k := 1; k <= steps; k++ {
			a, b := i+k-1, i+k
			if start == "" {
				a, b = i-k, i-k+1
			}
			if a < 0 || b >= len(es) {
				break
			}
			n[edge{k, es[a].label(), es[b].label()}]++
		}
	}
	var ts []map[string]any
	for e, c := range n {
		ts = append(ts, map[string]any{"step": e.step, "from": e.from, "to": e.to, "count": c})
	}
	slices.SortFunc(ts, func(a, b map[string]any) int {
		return cmp.Or(cmp.Compare(a["step"].(int), b["step"].(int)), cmp.Compare(b["count"].(int), a["count"].(int)),
			cmp.Compare(a["from"].(string), b["from"].(string)), cmp.Compare(a["to"].(string), b["to"].(string)))
	})
	out := map[string]any{"type": "paths", "steps": steps, "transitions": ts}
	if start != "" {
		out["start_event"] = start
	} else {
		out["end_event"] = end
	}
	return out
}
