package test

import (
	"encoding/json"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
)

// dashboardPath is the Grafana dashboard shipped for operators.
const dashboardPath = "../docs/grafana/eventd.json"

// TestGrafanaDashboardMetricsExported loads docs/grafana/eventd.json as
// Grafana would import it and checks that every metric family its PromQL
// queries is exported by a running server after some traffic, so a rename
// cannot leave a panel silently empty.
func TestGrafanaDashboardMetricsExported(t *testing.T) {
	exprs := dashboardExprs(t)
	queried := map[string]bool{}
	for _, e := range exprs {
		for _, name := range promqlMetrics(e) {
			queried[name] = true
		}
	}
	if len(queried) < 30 {
		t.Fatalf("only %d metrics queried; the tokenizer or the dashboard is broken: %v", len(queried), queried)
	}

	s := Start(t)
	p := s.Project(t, "grafana", "", nil)
	key := s.Key(t, p, "secret", "live")
	wantStatus(t, Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "signup"}), 201)
	wantStatus(t, Do(t, "POST", s.Public+"/events/batch", key, map[string]any{"events": []map[string]any{{"event": "a"}, {"event": "b"}}}), 201)
	wantStatus(t, Do(t, "POST", s.Public+"/events", key, map[string]any{}), 400)
	wantStatus(t, Do(t, "POST", s.Public+"/events", "sk_live_unknown", map[string]any{"event": "x"}), 401)

	body := string(s.AdminDo(t, "GET", "/metrics", nil).Body)
	families := exportedFamilies(t, body)
	// Some values the traffic above must have moved: the full status code,
	// fsyncs seen by Pebble's histogram, the build's identity.
	for _, prefix := range []string{
		`eventd_http_requests_total{code="201",route="create_event"} 1`,
		`eventd_http_requests_total{code="400",route="create_event"} 1`,
		`eventd_http_requests_total{code="401",route="create_event"} 1`,
		`eventd_build_info{goversion="go`,
		`eventd_pebble_write_stalls_total{reason="l0_file_count"} 0`,
	} {
		if !strings.Contains(body, "\n"+prefix) {
			t.Errorf("/metrics lacks %s", prefix)
		}
	}
	if v := metricValue(t, body, "eventd_pebble_wal_fsync_duration_seconds_count"); v < 2 {
		t.Errorf("eventd_pebble_wal_fsync_duration_seconds_count %v after two synced writes", v)
	}
	if _, ok := families["go_heap_objects_bytes"]; ok {
		t.Error("go_heap_objects_bytes: eventd writes no go_ metric of its own (the standard collector does)")
	}
	var missing []string
	for name := range queried {
		if !familyExported(families, name) {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the dashboard queries metrics /metrics does not export: %v", missing)
	}
}

// dashboardExprs parses the dashboard, checks what an import needs (the
// datasource input every query uses, unique panel ids, the schema) and
// returns every target's expression.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Inputs []struct {
			Name     string `json:"name"`
			PluginID string `json:"pluginId"`
		} `json:"__inputs"`
		SchemaVersion int    `json:"schemaVersion"`
		Title         string `json:"title"`
		UID           string `json:"uid"`
		Panels        []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource *struct {
				Type string `json:"type"`
				UID  string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if d.SchemaVersion < 36 || d.Title == "" || d.UID == "" {
		t.Errorf("schemaVersion %d, title %q, uid %q", d.SchemaVersion, d.Title, d.UID)
	}
	if len(d.Inputs) != 1 || d.Inputs[0].Name != "DS_PROMETHEUS" || d.Inputs[0].PluginID != "prometheus" {
		t.Errorf("__inputs %+v: want the one DS_PROMETHEUS datasource", d.Inputs)
	}
	ids := map[int]bool{}
	var exprs []string
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${DS_PROMETHEUS}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %+v, %d targets", p.Title, p.Datasource, len(p.Targets))
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q target %s: no expression", p.Title, tg.RefID)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	return exprs
}

// exportedFamilies maps each family in an exposition to its TYPE.
func exportedFamilies(t *testing.T, body string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if f := strings.Fields(rest); len(f) == 2 {
				out[f[0]] = f[1]
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no families in /metrics:\n%s", body)
	}
	return out
}

// familyExported reports whether a queried series name belongs to an
// exported family: the family itself, or a histogram's _bucket, _sum or
// _count (a summary's _sum or _count).
func familyExported(families map[string]string, name string) bool {
	if _, ok := families[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		switch families[base] {
		case "histogram":
			return true
		case "summary":
			return suffix != "_bucket"
		}
	}
	return false
}

// promqlKeywords are PromQL words that are neither metrics nor functions.
var promqlKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset"}

// promqlMetrics returns the metric names an expression selects. It is a
// small tokenizer, enough for the dashboard's PromQL: identifiers outside
// label matchers ({...}), range selectors ([...]) and strings, not followed
// by "(" (functions and aggregations), not keywords, and not in the label
// list after by/without/on/ignoring/group_left/group_right.
func promqlMetrics(expr string) []string {
	var out []string
	isStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c >= '0' && c <= '9' }
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(expr) && expr[j] != c {
				if expr[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			i = j + 1
		case c == '{' || c == '[':
			closer := byte('}')
			if c == '[' {
				closer = ']'
			}
			j := i + 1
			for j < len(expr) && expr[j] != closer {
				if expr[j] == '"' { // a matcher's value may hold the closer
					j++
					for j < len(expr) && expr[j] != '"' {
						if expr[j] == '\\' {
							j++
						}
						j++
					}
				}
				j++
			}
			i = j + 1
		case c == '$': // a dashboard variable such as $__rate_interval
			i++
			for i < len(expr) && isPart(expr[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.': // a number, e.g. 0.99 or 1e3
			i++
			for i < len(expr) && (isPart(expr[i]) || expr[i] == '.') {
				i++
			}
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && expr[k] == ' ' {
				k++
			}
			switch {
			case slices.Contains(promqlKeywords, word):
				if k < len(expr) && expr[k] == '(' { // a label list: by (le), on (instance)
					if end := strings.IndexByte(expr[k:], ')'); end >= 0 {
						j = k + end + 1
					}
				}
			case k < len(expr) && expr[k] == '(',
				strings.HasPrefix(expr[k:], "by ") || strings.HasPrefix(expr[k:], "by(") || strings.HasPrefix(expr[k:], "without"):
				// a function, or an aggregation (sum by (le) (...))
			default:
				out = append(out, word)
			}
			i = j
		default:
			i++
		}
	}
	return out
}

func TestPromqlMetrics(t *testing.T) {
	for expr, want := range map[string]string{
		`histogram_quantile(0.99, sum by (le) (rate(a_seconds_bucket{route=~"x|y}"}[$__rate_interval])))`: "a_seconds_bucket",
		`sum(rate(b_total[5m])) by (code) / ignoring(code) group_left sum(c_total)`:                       "b_total c_total",
		`d > bool 1 and on (instance) e{quantile="1"} offset 5m`:                                          "d e",
		`rate(f[1m]) / rate(g_count[1m])`:                                                                 "f g_count",
	} {
		if got := strings.Join(promqlMetrics(expr), " "); got != want {
			t.Errorf("%s: got %q, want %q", expr, got, want)
		}
	}
}
