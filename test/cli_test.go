package test

import (
	"bytes"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// cliResult is one finished eventd admin command.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs the eventd binary with args and env (on top of the test's
// environment without EVENTD_* variables), bounded to 30 s.
func runCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(cleanEnv(), env...)
	cmd.Dir = t.TempDir() // no ./data/admin_token to fall back on
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("eventd %v did not finish in 30 s", args)
	}
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("eventd %v: %v", args, err)
	}
	return res
}

// cli runs an admin command against s with --admin-url and --admin-token and expects success.
func (s *Server) cli(t *testing.T, args ...string) string {
	t.Helper()
	r := runCLI(t, nil, append(args, "--admin-url", s.Admin, "--admin-token", s.Token)...)
	if r.code != 0 {
		t.Fatalf("eventd %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	if r.stderr != "" {
		t.Errorf("eventd %v wrote to stderr: %s", args, r.stderr)
	}
	return r.stdout
}

// tableRow finds the row of a tabwriter table whose first column is id.
func tableRow(t *testing.T, out, id string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == id {
			return f
		}
	}
	t.Fatalf("no row for %s in:\n%s", id, out)
	return nil
}

func TestCLIProjectsAndKeys(t *testing.T) {
	t.Parallel()
	s := Start(t)

	// projects create
	out := s.cli(t, "projects", "create", "--name", "CLI Project", "--plan", "professional")
	m := regexp.MustCompile(`^created project (proj_[0-9A-Za-z]+) \(CLI Project, plan professional\)\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("projects create printed %q", out)
	}
	pid := m[1]
	p := s.AdminDo(t, "GET", "/admin/v1/projects/"+pid, nil)
	wantStatus(t, p, 200)
	if pm := p.JSON(t); pm["name"] != "CLI Project" || pm["plan"] != "professional" {
		t.Errorf("created project: %s", p.Body)
	}

	// projects list
	out = s.cli(t, "projects", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "ID NAME PLAN CREATED" {
		t.Fatalf("projects list:\n%s", out)
	}
	row := tableRow(t, out, pid)
	if strings.Join(row[1:len(row)-1], " ") != "CLI Project professional" || !adminTimeRE.MatchString(row[len(row)-1]) {
		t.Errorf("projects list row %q", row)
	}
	if !strings.Contains(out, " default ") {
		t.Errorf("projects list lacks the default project:\n%s", out)
	}

	// keys create
	out = s.cli(t, "keys", "create", "--project", pid, "--name", "web", "--type", "public", "--env", "live")
	km := regexp.MustCompile(`^created live public key (key_[0-9A-Za-z]+)\n(pk_live_[0-9A-Za-z]{32})\n.*shown once.*\n$`).FindStringSubmatch(out)
	if km == nil {
		t.Fatalf("keys create printed %q", out)
	}
	keyID, key := km[1], km[2]
	v := Do(t, "GET", s.Public+"/verify", key, nil)
	wantStatus(t, v, 200)
	if vm := v.JSON(t); vm["key_type"] != "public" || vm["environment"] != "live" || jobj(t, vm, "project")["id"] != pid {
		t.Errorf("verify the CLI's key: %s", v.Body)
	}
	wantStatus(t, Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "from_cli_key"}), 201)
	// Defaults: secret test.
	out = s.cli(t, "keys", "create", "--project", pid, "--name", "server")
	if !regexp.MustCompile(`^created test secret key key_[0-9A-Za-z]+\nsk_test_[0-9A-Za-z]{32}\n`).MatchString(out) {
		t.Errorf("keys create with defaults printed %q", out)
	}

	// keys list: no key text, the row of the used key has a last-used time.
	out = s.cli(t, "keys", "list", "--project", pid)
	if strings.Contains(out, key) || strings.Contains(out, key[8:]) {
		t.Errorf("keys list shows the key text:\n%s", out)
	}
	if strings.Join(strings.Fields(strings.SplitN(out, "\n", 2)[0]), " ") != "ID NAME TYPE ENV PREFIX CREATED LAST USED REVOKED" {
		t.Errorf("keys list header:\n%s", out)
	}
	row = tableRow(t, out, keyID)
	if len(row) != 8 || row[1] != "web" || row[2] != "public" || row[3] != "live" || !strings.HasPrefix(key, row[4]) ||
		!adminTimeRE.MatchString(row[5]) || !adminTimeRE.MatchString(row[6]) || row[7] != "-" {
		t.Errorf("keys list row %q", row)
	}

	// keys revoke: flags before or after the id.
	out = s.cli(t, "keys", "revoke", keyID)
	if out != "revoked "+keyID+"\n" {
		t.Errorf("keys revoke printed %q", out)
	}
	wantError(t, Do(t, "GET", s.Public+"/verify", key, nil), 401, "unauthorized", "")
	row = tableRow(t, s.cli(t, "keys", "list", "--project", pid), keyID)
	if !adminTimeRE.MatchString(row[len(row)-1]) {
		t.Errorf("revoked key row %q", row)
	}
	// Flags after the positional argument work too.
	other := regexp.MustCompile(`key_[0-9A-Za-z]+`).FindString(s.cli(t, "keys", "create", "--project", pid, "--name", "tmp"))
	r := runCLI(t, nil, "keys", "revoke", other, "--admin-url", s.Admin, "--admin-token", s.Token)
	if r.code != 0 || r.stdout != "revoked "+other+"\n" {
		t.Errorf("keys revoke ID --flags: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func TestCLIEnvironmentAndTokenFile(t *testing.T) {
	t.Parallel()
	s := StartNoToken(t)
	env := []string{"EVENTD_ADMIN_URL=" + s.Admin, "EVENTD_ADMIN_TOKEN=" + s.Token}
	r := runCLI(t, env, "projects", "create", "--name", "from env")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "created project proj_") {
		t.Fatalf("projects create with EVENTD_ADMIN_URL/EVENTD_ADMIN_TOKEN: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	pid := strings.Fields(r.stdout)[2]
	r = runCLI(t, env, "projects", "list")
	if r.code != 0 || !strings.Contains(r.stdout, pid) || !strings.Contains(r.stdout, "from env") {
		t.Errorf("projects list with env: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, env, "keys", "create", "--project", pid, "--name", "k", "--type", "secret", "--env", "live")
	if r.code != 0 || !regexp.MustCompile(`\nsk_live_[0-9A-Za-z]{32}\n`).MatchString(r.stdout) {
		t.Errorf("keys create with env: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	// A flag wins over the environment.
	r = runCLI(t, env, "projects", "list", "--admin-token", "adm_wrong")
	if r.code == 0 || !strings.Contains(r.stderr, "401") {
		t.Errorf("--admin-token over EVENTD_ADMIN_TOKEN: exit %d %q", r.code, r.stderr)
	}
	// Without a token, the CLI reads <data>/admin_token.
	r = runCLI(t, []string{"EVENTD_ADMIN_URL=" + s.Admin}, "projects", "list", "--data", s.Dir)
	if r.code != 0 || !strings.Contains(r.stdout, pid) {
		t.Errorf("projects list --data: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, []string{"EVENTD_ADMIN_URL=" + s.Admin, "EVENTD_DATA=" + s.Dir}, "projects", "list")
	if r.code != 0 || !strings.Contains(r.stdout, pid) {
		t.Errorf("projects list with EVENTD_DATA: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func TestCLIErrors(t *testing.T) {
	t.Parallel()
	s := Start(t)
	pid := s.Project(t, "cli errors", "", nil)
	auth := []string{"--admin-url", s.Admin, "--admin-token", s.Token}
	cases := []struct {
		name string
		args []string
		env  []string
		want []string // all in stderr
	}{
		{"wrong token", []string{"projects", "list", "--admin-url", s.Admin, "--admin-token", "adm_wrong"}, nil, []string{"401", "Invalid or missing admin token"}},
		{"no token at all", []string{"projects", "list", "--admin-url", s.Admin}, nil, []string{"no admin token"}},
		{"server down", []string{"projects", "list", "--admin-url", "http://127.0.0.1:1", "--admin-token", "x"}, nil, []string{"connection refused"}},
		{"bad plan", append([]string{"projects", "create", "--name", "x", "--plan", "gold"}, auth...), nil, []string{"400", "plan", "free, professional, enterprise"}},
		{"missing name", append([]string{"projects", "create"}, auth...), nil, []string{"400", "name"}},
		{"unknown projects command", append([]string{"projects", "delete"}, auth...), nil, []string{`unknown projects command "delete"`}},
		{"projects without command", []string{"projects"}, nil, []string{"usage"}},
		{"unknown flag", append([]string{"projects", "list", "--bogus"}, auth...), nil, []string{"bogus"}},
		{"stray argument", append([]string{"projects", "list", "extra"}, auth...), nil, []string{"unexpected argument", "extra"}},
		{"keys create without project", append([]string{"keys", "create", "--name", "k"}, auth...), nil, []string{"--project is required"}},
		{"keys list without project", append([]string{"keys", "list"}, auth...), nil, []string{"--project is required"}},
		{"keys create unknown project", append([]string{"keys", "create", "--project", "proj_missing", "--name", "k"}, auth...), nil, []string{"404", "Project not found"}},
		{"keys list unknown project", append([]string{"keys", "list", "--project", "proj_missing"}, auth...), nil, []string{"404", "Project not found"}},
		{"keys bad type", append([]string{"keys", "create", "--project", pid, "--name", "k", "--type", "admin"}, auth...), nil, []string{"400", "type", "public or secret"}},
		{"keys bad env", append([]string{"keys", "create", "--project", pid, "--name", "k", "--env", "prod"}, auth...), nil, []string{"environment", "live or test"}},
		{"keys missing name", append([]string{"keys", "create", "--project", pid}, auth...), nil, []string{"name"}},
		{"revoke without id", append([]string{"keys", "revoke"}, auth...), nil, []string{"usage: eventd keys revoke KEY_ID"}},
		{"revoke two ids", append([]string{"keys", "revoke", "key_a", "key_b"}, auth...), nil, []string{"usage: eventd keys revoke KEY_ID"}},
		{"revoke unknown key", append([]string{"keys", "revoke", "key_missing"}, auth...), nil, []string{"404", "Key not found"}},
		{"unknown keys command", append([]string{"keys", "rotate"}, auth...), nil, []string{`unknown keys command "rotate"`}},
		{"unknown command", []string{"frobnicate"}, nil, []string{`unknown command "frobnicate"`}},
		{"no command", nil, nil, []string{"Usage"}},
		{"env token wrong", []string{"projects", "list"}, []string{"EVENTD_ADMIN_URL=" + s.Admin, "EVENTD_ADMIN_TOKEN=adm_wrong"}, []string{"401"}},
	}
	for _, tc := range cases {
		r := runCLI(t, tc.env, tc.args...)
		if r.code == 0 {
			t.Errorf("%s: eventd %v exited 0; stdout %q", tc.name, tc.args, r.stdout)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: stderr %q lacks %q", tc.name, r.stderr, w)
			}
		}
		if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
			t.Errorf("%s: crashed: %s", tc.name, r.stderr)
		}
	}
	// None of the failures changed anything.
	out := s.cli(t, "projects", "list")
	if n := len(strings.Split(strings.TrimSpace(out), "\n")); n != 3 {
		t.Errorf("projects after failed commands:\n%s", out)
	}
	out = s.cli(t, "keys", "list", "--project", pid)
	if n := len(strings.Split(strings.TrimSpace(out), "\n")); n != 1 {
		t.Errorf("keys after failed commands:\n%s", out)
	}
}

// TestVersionAndHealthcheck runs the packaging subcommands on the real
// binary: version prints the three build values, healthcheck exits 0 against
// a running server (found through EVENTD_LISTEN, as in the container image)
// and 1 when nothing answers.
func TestVersionAndHealthcheck(t *testing.T) {
	r := runCLI(t, nil, "version")
	if r.code != 0 || !regexp.MustCompile(`^version: \S+\ncommit: \S+\ngo: go1\.\S+\n$`).MatchString(r.stdout) {
		t.Fatalf("eventd version: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	s := Start(t)
	listen := strings.TrimPrefix(s.Public, "http://")
	tests := []struct {
		name string
		env  []string
		args []string
		code int
	}{
		{"flag", nil, []string{"healthcheck", "--listen", listen}, 0},
		{"environment", []string{"EVENTD_LISTEN=" + listen}, []string{"healthcheck"}, 0},
		{"admin listener", nil, []string{"healthcheck", "--listen", strings.TrimPrefix(s.Admin, "http://")}, 0},
		{"nothing listening", nil, []string{"healthcheck", "--listen", "127.0.0.1:1", "--timeout", "5s"}, 1},
		{"bad address", nil, []string{"healthcheck", "--listen", "nonsense"}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.env, tc.args...)
			if r.code != tc.code {
				t.Fatalf("eventd %v: exit %d, want %d\n%s%s", tc.args, r.code, tc.code, r.stdout, r.stderr)
			}
			if tc.code == 0 && !strings.Contains(r.stdout, `"status":"ok"`) {
				t.Fatalf("eventd %v printed %q", tc.args, r.stdout)
			}
		})
	}
}
