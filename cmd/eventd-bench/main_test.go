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
// the others produce the JSON and HTML files. It checks the plumbing, not
// speed: no figure is asserted.
func TestRunAgainstNoop(t *testing.T) {
	dir := t.TempDir()
	jsonOut, htmlOut := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	code := run([]string{"--target", "noop", "--noop-inproc", "--scenarios", "single,mixed,ratelimit",
		"--rounds", "2", "--duration", "200ms", "--warmup", "0", "--json", jsonOut, "--html", htmlOut})
	if code != 0 {
		t.Fatalf("exit code %d", code)
	}
	b, err := os.ReadFile(jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Scenarios []struct {
			Name   string `json:"name"`
			Eventd struct {
				OK     uint64 `json:"ok"`
				Rounds []any  `json:"rounds"`
			} `json:"eventd"`
			Ceilings []struct {
				Name  string  `json:"name"`
				Ratio float64 `json:"ratio"`
			} `json:"ceilings"`
		} `json:"scenarios"`
		NotDone []string `json:"not_done"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != 2 || rep.Scenarios[0].Name != "single" || rep.Scenarios[1].Name != "mixed" {
		t.Fatalf("scenarios %+v", rep.Scenarios)
	}
	for _, sc := range rep.Scenarios {
		if sc.Eventd.OK == 0 || len(sc.Eventd.Rounds) != 2 || len(sc.Ceilings) == 0 || sc.Ceilings[0].Ratio <= 0 {
			t.Errorf("%s: %+v", sc.Name, sc)
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
