package bench

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

func sampleReport() *Report {
	e := &Series{Name: "eventd", Unit: UnitRequests}
	r := &Result{Requests: 100, OK: 100, Events: 100, Elapsed: 2 * time.Second, Expect: 201,
		Started:  time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC),
		Statuses: map[int]uint64{201: 100}, Errors: map[string]uint64{},
		PerSecond: []Sample{{Second: 0, Requests: 50, OK: 50, Events: 50}, {Second: 1, Requests: 50, OK: 50, Events: 50}}}
	for i := 1; i <= 100; i++ {
		r.Latency.Record(time.Duration(i) * 10 * time.Microsecond)
	}
	e.Add(r)
	n := &Series{Name: "noop </script><b>", Unit: UnitRequests}
	n.Add(r)
	sc := &ScenarioResult{Name: "single", Description: "d", Eventd: e, Ceilings: []*Series{n}, Others: []*Series{e}}
	sc.Check("p99", "< 5ms", "1ms", true)
	sc.Check("ratio", "≥ 0.50", "0.2", false)
	sc.Note("a note with <html> & \"quotes\"")
	origin := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rep := &Report{StartedAt: origin, Machine: ThisMachine(), Config: map[string]any{"rounds": 1},
		Scenarios: []ScenarioReport{ScenarioJSON(sc, origin)},
		Memory:    []MemSample{{T: 0.5, RSS: 1 << 20}, {T: 1.5, RSS: 2 << 20}},
		NotDone:   []string{"analytics: x"}}
	rep.Soak = &SoakReport{Workload: "w", Duration: 60, Load: SeriesJSON(e, origin),
		Samples: []MemSample{{T: 0, RSS: 1 << 20, HeapInuse: 1 << 19}, {T: 30, RSS: 1 << 20}, {T: 60, RSS: 1 << 20}}}
	rep.Soak.Trend = AnalyzeMemory(rep.Soak.Samples, 0)
	return rep
}

func TestWriteHTMLIsSelfContained(t *testing.T) {
	rep := sampleReport()
	var b strings.Builder
	if err := WriteHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	// Nothing is fetched from elsewhere: no src or href attributes, no CSS
	// imports or url(), no fetch; the only URL is the SVG namespace name.
	for _, re := range []string{`(?i)\ssrc\s*=`, `(?i)\shref\s*=`, `@import`, `url\(`, `fetch\(`, `XMLHttpRequest`} {
		if regexp.MustCompile(re).MatchString(out) {
			t.Errorf("report matches %s", re)
		}
	}
	for _, m := range regexp.MustCompile(`https?://[^"'\s)]+`).FindAllString(out, -1) {
		if m != "http://www.w3.org/2000/svg" {
			t.Errorf("external URL %s", m)
		}
	}
	// The data cannot close its script element early.
	if strings.Count(out, "</script>") != 2 {
		t.Errorf("%d </script> in the report", strings.Count(out, "</script>"))
	}
	// The embedded data round-trips.
	i := strings.Index(out, `<script id="data" type="application/json">`)
	j := strings.Index(out[i:], "</script>")
	raw := out[i+len(`<script id="data" type="application/json">`) : i+j]
	var back Report
	if err := json.Unmarshal([]byte(raw), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Scenarios) != 1 || back.Scenarios[0].Eventd.Rounds[0].StartS != 1 || len(back.Scenarios[0].Targets) != 2 || back.Soak == nil {
		t.Errorf("round trip: %+v", back.Scenarios)
	}
}

func TestWriteTableTargetsAndOthers(t *testing.T) {
	e := &Series{Name: "eventd", Unit: UnitRequests}
	e.Add(&Result{Requests: 10, OK: 10, Elapsed: time.Second, Statuses: map[int]uint64{201: 10}, FailedStatuses: map[int]uint64{}})
	o := &Series{Name: "eventd at 5,000/s", Unit: UnitRequests}
	o.Add(&Result{Requests: 10, OK: 8, Elapsed: time.Second, Statuses: map[int]uint64{201: 8, 503: 2}, FailedStatuses: map[int]uint64{503: 2}})
	sc := &ScenarioResult{Name: "stream", Eventd: e, Ceilings: []*Series{e}, Others: []*Series{o}, Load: [2]float64{1.5, 2}}
	sc.Check("delivery p99", "< 50ms", "80ms", false)
	sc.Note("delivered 1,000 messages/s")
	var b strings.Builder
	WriteTable(&b, []*ScenarioResult{sc})
	out := b.String()
	for _, want := range []string{"  eventd at 5,000/s", "MISSED delivery p99: 80ms (goal < 50ms)", "- delivered 1,000 messages/s",
		"stream (load 1.50 -> 2.00)", "stream / eventd at 5,000/s: 2 of 10 requests failed: 2×503"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
