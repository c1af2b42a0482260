package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunAgainstNoop drives the whole command against the in-process no-op
// server: scenarios that need eventd's admin API are skipped and listed,
// the others produce the JSON and HTML files, and single and mixed run
// again after a (tiny) loaded phase. It checks the plumbing, not speed: no
// figure is asserted.
func TestRunAgainstNoop(t *testing.T) {
	dir := t.TempDir()
	jsonOut, htmlOut := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	code := run([]string{"--target", "noop", "--noop-inproc", "--scenarios", "single,mixed,ratelimit",
		"--rounds", "2", "--duration", "200ms", "--warmup", "0", "--json", jsonOut, "--html", htmlOut, "--loaded-events", "2000"})
	if code != 0 {
		t.Fatalf("exit code %d", code)
	}
	b, err := os.ReadFile(jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Scenarios []struct {
			Name     string `json:"name"`
			Scenario string `json:"scenario"`
			Phase    string `json:"phase"`
			Eventd   struct {
				OK     uint64 `json:"ok"`
				Rounds []any  `json:"rounds"`
			} `json:"eventd"`
			Ceilings []struct {
				Name  string  `json:"name"`
				Ratio float64 `json:"ratio"`
			} `json:"ceilings"`
		} `json:"scenarios"`
		NotDone []string `json:"not_done"`
		Loaded  *struct {
			Events uint64 `json:"events"`
			Loads  []struct {
				Subject string `json:"subject"`
				Events  uint64 `json:"events"`
			} `json:"loads"`
			Rows []struct {
				Scenario    string  `json:"scenario"`
				FreshRatio  float64 `json:"fresh_ratio"`
				LoadedRatio float64 `json:"loaded_ratio"`
			} `json:"rows"`
		} `json:"loaded"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sc := range rep.Scenarios {
		names = append(names, sc.Name+"|"+sc.Scenario+"|"+sc.Phase)
	}
	if got, want := strings.Join(names, ", "), "single|single|fresh, single (loaded 2k)|single|loaded, mixed|mixed|fresh, mixed (loaded 2k)|mixed|loaded"; got != want {
		t.Fatalf("scenarios %s\nwant      %s", got, want)
	}
	if l := rep.Loaded; l == nil || l.Events != 2000 || len(l.Loads) != 2 || l.Loads[0].Subject != "pebble" || l.Loads[0].Events != 2000 ||
		l.Loads[1].Subject != "eventd" || l.Loads[1].Events != 2000 || len(l.Rows) != 2 || l.Rows[1].Scenario != "mixed" || l.Rows[1].LoadedRatio <= 0 {
		t.Errorf("loaded phase %+v", l)
	}
	for _, sc := range rep.Scenarios {
		if sc.Eventd.OK == 0 || len(sc.Eventd.Rounds) != 2 || len(sc.Ceilings) == 0 || sc.Ceilings[0].Ratio <= 0 {
			t.Errorf("%s: %+v", sc.Name, sc)
		}
		if sc.Scenario != "single" {
			continue
		}
		var ceilings []string
		for _, c := range sc.Ceilings {
			if c.Ratio <= 0 {
				t.Errorf("%s: ceiling %s without a ratio", sc.Name, c.Name)
			}
			ceilings = append(ceilings, c.Name)
		}
		if got, want := strings.Join(ceilings, ", "), "noop, pebble, fsync noop"; got != want {
			t.Errorf("%s: ceilings %s, want %s", sc.Name, got, want)
		}
	}
	if got := strings.Join(rep.NotDone, "\n"); !strings.Contains(got, "ratelimit: needs the admin API") || !strings.Contains(got, "analytics") {
		t.Errorf("not done: %q", got)
	}
	if h, err := os.ReadFile(htmlOut); err != nil || !strings.Contains(string(h), `<script id="data"`) {
		t.Errorf("html: %v", err)
	}
}

func TestOptionsCheck(t *testing.T) {
	for _, args := range [][]string{
		{"--scenarios", "nope"},
		{"--rounds", "0"},
		{"--target", "http://127.0.0.1:1"},
		{"--admin-url", "http://x"},
		{"--batch-size", "101"},
		{"--scenarios", "none"},
	} {
		if code := run(args); code != 2 {
			t.Errorf("%v: exit code %d, want 2", args, code)
		}
	}
	o := options{soak: 1, scenarios: "single"}
	if len(o.scenarioList()) != 0 {
		t.Error("--soak alone should run no scenario")
	}
	o.scenariosSet = true
	if len(o.scenarioList()) != 1 {
		t.Error("--soak with --scenarios should run them")
	}
}

// TestCompactionNote reads the compactions by kind from /metrics.
func TestCompactionNote(t *testing.T) {
	metrics := []byte(`# HELP eventd_pebble_compactions_total Compactions completed, by kind.
eventd_pebble_compactions_total{kind="default"} 3
eventd_pebble_compactions_total{kind="move"} 40
eventd_pebble_compactions_total{kind="delete_only"} 2
eventd_pebble_compaction_bytes_written_total 1e+06
`)
	want := "Pebble's compactions since eventd started: 45, of which 40 moves and 3 merges (default); 2 of other kinds"
	if got := compactionNote(metrics); got != want {
		t.Errorf("compactionNote = %q, want %q", got, want)
	}
	if got := compactionNote(nil); got != "Pebble's compactions since eventd started: none reported" {
		t.Errorf("compactionNote(nil) = %q", got)
	}
}
