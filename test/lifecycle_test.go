package test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitStdout waits (bounded) until the stopped server's stdout has been
// collected: the harness reads it to the end only when the process exits.
func waitStdout(t *testing.T, s *Server) string {
	t.Helper()
	for i := 0; i < 100; i++ {
		if out := s.Stdout(); out != "" {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no stdout from the first start\nlogs:\n%s", s.Logs())
	return ""
}

func stopOK(t *testing.T, s *Server) {
	t.Helper()
	if err := s.Stop(); err != nil {
		t.Fatalf("SIGTERM exit: %v\n%s", err, s.Logs())
	}
}

var (
	secretTestKeyRE = regexp.MustCompile(`\bsk_test_[0-9A-Za-z]{32}\b`)
	publicTestKeyRE = regexp.MustCompile(`\bpk_test_[0-9A-Za-z]{32}\b`)
)

func TestFirstStartBanner(t *testing.T) {
	t.Parallel()
	s := Start(t)
	stopOK(t, s)
	banner := waitStdout(t, s)
	t.Logf("banner:\n%s", banner)

	if !regexp.MustCompile(`created project "default" \(proj_[0-9A-Za-z]+\)`).MatchString(banner) {
		t.Errorf("banner does not name project \"default\" with its id")
	}
	sk := secretTestKeyRE.FindAllString(banner, -1)
	pk := publicTestKeyRE.FindAllString(banner, -1)
	if len(sk) == 0 || len(pk) == 0 {
		t.Fatalf("banner lacks an sk_test_ and a pk_test_ key (40 characters)")
	}
	for _, k := range []string{sk[0], pk[0]} {
		if len(k) != 40 {
			t.Errorf("key %q has %d characters, want 40", k, len(k))
		}
	}
	curl := regexp.MustCompile(`curl .*-X POST http://127\.0\.0\.1:\d+/events -H 'Authorization: Bearer ` + sk[0] + `'.*-d '(\{.*\})'`).FindStringSubmatch(banner)
	if curl == nil {
		t.Fatalf("banner has no ready-to-paste curl line with the secret key")
	}
	if strings.Contains(banner, "admin token:") {
		t.Errorf("banner prints the admin token although --admin-token was given")
	}
	if strings.Contains(banner, s.Token) {
		t.Errorf("banner shows the admin token given on the command line")
	}

	s.Restart()
	tests := []struct {
		key, typ string
		perms    []any
	}{
		{sk[0], "secret", []any{"read", "write"}},
		{pk[0], "public", []any{"write"}},
	}
	for _, tc := range tests {
		r := Do(t, "GET", s.Public+"/verify", tc.key, nil)
		wantStatus(t, r, 200)
		v := r.JSON(t)
		if v["valid"] != true || v["key_type"] != tc.typ || v["environment"] != "test" {
			t.Errorf("verify %s key: %s", tc.typ, r.Body)
		}
		if got, _ := json.Marshal(v["permissions"]); string(got) != mustJSON(t, tc.perms) {
			t.Errorf("verify %s key permissions %s", tc.typ, got)
		}
		if p, _ := v["project"].(map[string]any); p["name"] != "default" {
			t.Errorf("verify %s key project %v, want default", tc.typ, v["project"])
		}
	}
	// What the curl line sends works (against the new port).
	r := Do(t, "POST", s.Public+"/events", sk[0], curl[1])
	wantStatus(t, r, 201)
	wantStatus(t, Do(t, "POST", s.Public+"/events", pk[0], map[string]any{"event": "from_public"}), 201)
	r = Do(t, "GET", s.Public+"/events", sk[0], nil)
	wantStatus(t, r, 200)
	if total := r.JSON(t)["pagination"].(map[string]any)["total"]; total != 2.0 {
		t.Errorf("the two default keys share the test dataset: total %v, want 2", total)
	}

	// The second start on the same data dir prints no keys and creates no project.
	stopOK(t, s)
	time.Sleep(100 * time.Millisecond) // let the harness collect the second stdout
	if out := s.Stdout(); out != banner {
		t.Errorf("second start printed to stdout:\n%s", strings.TrimPrefix(out, banner))
	}
	s.Restart()
	r = s.AdminDo(t, "GET", "/admin/v1/projects", nil)
	wantStatus(t, r, 200)
	if n := len(r.JSON(t)["data"].([]any)); n != 1 {
		t.Errorf("%d projects after two starts, want 1 (default)", n)
	}
}

func TestGeneratedAdminToken(t *testing.T) {
	t.Parallel()
	s := StartNoToken(t)
	if !regexp.MustCompile(`^adm_[0-9A-Za-z]{20,}$`).MatchString(s.Token) {
		t.Errorf("generated admin token %q", s.Token)
	}
	path := filepath.Join(s.Dir, "admin_token")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, perm)
	}
	wantStatus(t, s.AdminDo(t, "GET", "/admin/v1/projects", nil), 200)
	wantError(t, Do(t, "GET", s.Admin+"/admin/v1/projects", "adm_not_the_token", nil), 401, "unauthorized", "")

	stopOK(t, s)
	banner := waitStdout(t, s)
	if n := strings.Count(banner, s.Token); n != 1 {
		t.Errorf("first start shows the generated admin token %d times, want once:\n%s", n, banner)
	}
	if !strings.Contains(banner, "admin token:") {
		t.Errorf("banner has no admin token line:\n%s", banner)
	}

	// A restart keeps the token and does not print it again.
	s.Restart()
	wantStatus(t, s.AdminDo(t, "GET", "/admin/v1/projects", nil), 200)
	stopOK(t, s)
	time.Sleep(100 * time.Millisecond)
	if n := strings.Count(s.Stdout(), s.Token); n != 1 {
		t.Errorf("admin token printed %d times over two starts, want once", n)
	}
	b, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(b)) != s.Token {
		t.Errorf("admin_token changed on restart: %q %v", b, err)
	}
}

// startRaw runs "eventd serve" with exactly args and env (plus the process
// environment without EVENTD_* variables). Unlike Start it also reads JSON logs.
func startRaw(t *testing.T, dir string, env []string, args ...string) *Server {
	t.Helper()
	s := &Server{t: t, Dir: dir, Env: env}
	t.Cleanup(func() {
		if s.cmd != nil {
			s.Kill()
		}
	})
	s.launch(append([]string{"serve"}, args...), append(cleanEnv(), env...))
	return s
}

// cleanEnv is the test's environment without EVENTD_* variables.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EVENTD_") {
			out = append(out, kv)
		}
	}
	return out
}

// runServeFail runs "eventd serve" expecting it to exit non-zero at once; it returns stderr.
func runServeFail(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve"}, args...)...)
	cmd.Env = append(cleanEnv(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Fatalf("eventd serve %v with %v: exit %v, want a non-zero status\n%s", args, env, err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("eventd serve %v with %v kept running, want an error exit", args, env)
	}
	return stderr.String()
}

func TestEnvironmentVariables(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{
		"EVENTD_DATA=" + dir,
		"EVENTD_LISTEN=127.0.0.1:0",
		"EVENTD_ADMIN_LISTEN=127.0.0.1:0",
		"EVENTD_ADMIN_TOKEN=adm_from_env_01234567890",
		"EVENTD_SHARDS=3",
		"EVENTD_LOG_FORMAT=json",
	}

	t.Run("env only", func(t *testing.T) {
		s := startRaw(t, dir, env)
		s.Token = "adm_from_env_01234567890"
		r := s.AdminDo(t, "GET", "/admin/v1/projects", nil)
		wantStatus(t, r, 200)
		if _, err := os.Stat(filepath.Join(dir, "pebble")); err != nil {
			t.Errorf("EVENTD_DATA not used: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "admin_token")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("admin_token written although EVENTD_ADMIN_TOKEN is set: %v", err)
		}
		wantStatus(t, Do(t, "GET", s.Public+"/healthz", "", nil), 200)
		stopOK(t, s)
		var listening map[string]any
		lines := strings.Split(strings.TrimSpace(s.Logs()), "\n")
		for _, line := range lines {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Errorf("EVENTD_LOG_FORMAT=json: log line is not JSON: %s", line)
				continue
			}
			if m["msg"] == "eventd listening" {
				listening = m
			}
		}
		if listening == nil {
			t.Fatalf("no JSON \"eventd listening\" line:\n%s", s.Logs())
		}
		if listening["shards"] != 3.0 {
			t.Errorf("EVENTD_SHARDS=3: listening line says shards %v", listening["shards"])
		}
		if listening["data"] != dir {
			t.Errorf("EVENTD_DATA: listening line says data %v", listening["data"])
		}
		if last := lines[len(lines)-1]; !strings.Contains(last, `"msg":"stopped"`) {
			t.Errorf("last log line %s, want msg stopped", last)
		}
	})

	t.Run("flags win", func(t *testing.T) {
		s := startRaw(t, dir, env, "--shards", "5", "--log-format", "text", "--admin-token", "adm_from_flag_0123456789")
		logs := s.Logs()
		if !strings.Contains(logs, "shards=5") {
			t.Errorf("--shards 5 with EVENTD_SHARDS=3: %s", logs)
		}
		if strings.Contains(logs, `{"time"`) {
			t.Errorf("--log-format text with EVENTD_LOG_FORMAT=json still logs JSON:\n%s", logs)
		}
		s.Token = "adm_from_flag_0123456789"
		wantStatus(t, s.AdminDo(t, "GET", "/admin/v1/projects", nil), 200)
		wantError(t, Do(t, "GET", s.Admin+"/admin/v1/projects", "adm_from_env_01234567890", nil), 401, "unauthorized", "")
		stopOK(t, s)
	})

	t.Run("bad values", func(t *testing.T) {
		cases := []struct {
			env  []string
			args []string
			want string
		}{
			{[]string{"EVENTD_LOG_FORMAT=xml"}, nil, "log-format"},
			{[]string{"EVENTD_SHARDS=many"}, nil, "EVENTD_SHARDS"},
			{nil, []string{"--log-format", "yaml"}, "log-format"},
			{nil, []string{"--tls-cert", "/nonexistent.pem"}, "tls"},
		}
		for _, tc := range cases {
			base := []string{"EVENTD_DATA=" + t.TempDir(), "EVENTD_LISTEN=127.0.0.1:0", "EVENTD_ADMIN_LISTEN=127.0.0.1:0"}
			out := runServeFail(t, append(base, tc.env...), tc.args...)
			if !strings.Contains(out, tc.want) {
				t.Errorf("%v %v: error output %q does not mention %q", tc.env, tc.args, out, tc.want)
			}
		}
	})
}

func TestSIGINTStopsCleanly(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := s.Project(t, "sigint", "", nil)
	key := s.Key(t, p, "secret", "live")
	id := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "before_sigint"}).JSON(t)["id"].(string)
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("eventd did not stop within 30 s of SIGINT")
	}
	s.cmd = nil
	s.mu.Lock()
	err := s.exitErr
	s.mu.Unlock()
	if err != nil {
		t.Fatalf("SIGINT exit: %v", err)
	}
	if !strings.Contains(s.Logs(), "msg=stopped") {
		t.Errorf("no stopped line after SIGINT:\n%s", s.Logs())
	}
	s.Restart()
	wantStatus(t, Do(t, "GET", s.Public+"/events/"+id, key, nil), 200)
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A SIGTERM that arrives right after "eventd listening" still stops cleanly.
func TestSIGTERMRightAfterStart(t *testing.T) {
	t.Parallel()
	s := Start(t)
	for i := 0; i < 5; i++ {
		if i > 0 {
			s.Restart()
		}
		if err := s.Stop(); err != nil {
			t.Fatalf("start %d: SIGTERM right after start: %v\n%s", i+1, err, s.Logs())
		}
	}
}

// eventd runs Go with one processor more than the CPUs (a flush or
// compaction holds one), unless GOMAXPROCS is set or a CPU quota sized it
// below the CPUs; the start log says which.
func TestSpareProcessor(t *testing.T) {
	t.Parallel()
	procsRE := regexp.MustCompile(`msg=processors gomaxprocs=(\d+) cpus=(\d+) spare=(\d+)`)
	start := func(t *testing.T, env []string) (gomaxprocs, cpus, spare int) {
		t.Helper()
		dir := t.TempDir()
		s := &Server{t: t, Dir: dir}
		t.Cleanup(func() {
			if s.cmd != nil {
				s.Kill()
			}
		})
		var base []string
		for _, kv := range cleanEnv() {
			if !strings.HasPrefix(kv, "GOMAXPROCS=") {
				base = append(base, kv)
			}
		}
		s.launch([]string{"serve", "--data", dir, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
			"--admin-token", "adm_test_token_0123456789", "--ballast-size", "0", "--min-free-disk", "0"}, append(base, env...))
		m := procsRE.FindStringSubmatch(s.Logs())
		if m == nil {
			t.Fatalf("no processors line in the start log:\n%s", s.Logs())
		}
		gomaxprocs, _ = strconv.Atoi(m[1])
		cpus, _ = strconv.Atoi(m[2])
		spare, _ = strconv.Atoi(m[3])
		return gomaxprocs, cpus, spare
	}
	t.Run("default", func(t *testing.T) {
		g, cpus, spare := start(t, nil)
		// Without a quota Go's own choice is the CPUs; with one it is below.
		if !(spare == 1 && g == cpus+1) && !(spare == 0 && g < cpus) {
			t.Errorf("gomaxprocs=%d cpus=%d spare=%d: want one spare processor, or none under a CPU quota", g, cpus, spare)
		}
	})
	t.Run("GOMAXPROCS set", func(t *testing.T) {
		if g, _, spare := start(t, []string{"GOMAXPROCS=1"}); g != 1 || spare != 0 {
			t.Errorf("GOMAXPROCS=1: gomaxprocs=%d spare=%d, want 1 and 0", g, spare)
		}
	})
}
