package docs

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const unitPath = "deploy/eventd.service"

// unitSettings reads a systemd unit's Key=Value lines, by section, in order
// (a key may repeat: SystemCallFilter).
func unitSettings(t *testing.T, text string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: line %q is not Key=Value", unitPath, line)
			}
			out[section+"."+k] = append(out[section+"."+k], v)
		}
	}
	return out
}

// TestSystemdUnitSandbox pins the settings the deployment relies on, so an
// edit cannot quietly drop the sandbox or the restart policy.
func TestSystemdUnitSandbox(t *testing.T) {
	b, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	got := unitSettings(t, string(b))
	for _, want := range []struct{ key, value string }{
		{"Service.ExecStart", "/usr/local/bin/eventd serve --data %S/eventd"},
		{"Service.DynamicUser", "yes"},
		{"Service.StateDirectory", "eventd"},
		{"Service.ProtectSystem", "strict"},
		{"Service.ProtectHome", "yes"},
		{"Service.NoNewPrivileges", "yes"},
		{"Service.PrivateTmp", "yes"},
		{"Service.Restart", "on-failure"},
		{"Service.LimitNOFILE", "1048576"},
		{"Service.CapabilityBoundingSet", ""},
		{"Install.WantedBy", "multi-user.target"},
	} {
		t.Run(want.key, func(t *testing.T) {
			if v := got[want.key]; len(v) != 1 || v[0] != want.value {
				t.Fatalf("%s = %q, want exactly %q", want.key, v, want.value)
			}
		})
	}
}

// TestSystemdUnitVerifies runs systemd-analyze verify on the unit, which
// parses every setting the way systemd would. verify insists that
// ExecStart's binary exists, so the check runs on a copy whose ExecStart is
// this test's own executable. verify exits 0 even on settings it ignores
// as invalid, so any output at all fails the test.
func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed here (Debian: apt-get install systemd); the unit's settings are still checked by TestSystemdUnitSandbox")
	}
	b, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit := strings.ReplaceAll(string(b), "/usr/local/bin/eventd", self)
	dir := t.TempDir()
	path := filepath.Join(dir, "eventd.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, analyze, "verify", path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err != nil || strings.TrimSpace(out.String()) != "" {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", unitPath, err, out.String())
	}
}
