package test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// accessLine is one line of the JSON access log.
type accessLine struct {
	Msg        string  `json:"msg"`
	RequestID  string  `json:"request_id"`
	KeyID      string  `json:"key_id"`
	Route      string  `json:"route"`
	Method     string  `json:"method"`
	Status     int     `json:"status"`
	BytesOut   int     `json:"bytes_out"`
	DurationMS float64 `json:"duration_ms"`
}

// readAccessLog polls the log file until it holds at least n lines. The
// route wrapper writes a line before fasthttp sends the response, so the
// lines of answered requests are there; the poll only guards the test
// against that detail changing.
func readAccessLog(t *testing.T, path string, n int) []accessLine {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var lines []accessLine
		if f, err := os.Open(path); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var l accessLine
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					f.Close()
					t.Fatalf("access log line %q: %v", sc.Text(), err)
				}
				lines = append(lines, l)
			}
			f.Close()
		}
		if len(lines) >= n || time.Now().After(deadline) {
			return lines
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// With --access-log, every request gets a JSON line naming its request id,
// key id (never the key), route, method, status, bytes and duration.
func TestAccessLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	s := Start(t, "--access-log", path, "--access-log-sample", "1")
	p := s.Project(t, "a", "", nil)
	key := s.Key(t, p, "secret", "live")
	var keyID string
	for _, k := range s.AdminDo(t, "GET", "/admin/v1/projects/"+p+"/keys", nil).JSON(t)["data"].([]any) {
		keyID = k.(map[string]any)["id"].(string)
	}
	created := Do(t, "POST", s.Public+"/events", key, map[string]any{"event": "signup"}, "X-Request-Id: trace-123")
	wantStatus(t, created, 201)
	wantStatus(t, Do(t, "POST", s.Public+"/events", key, map[string]any{}), 400)
	wantStatus(t, Do(t, "GET", s.Public+"/nope", "", nil), 404)

	// The admin requests above (project, key, list) came first.
	lines := readAccessLog(t, path, 6)
	if len(lines) != 6 {
		t.Fatalf("%d access lines, want 6: %+v", len(lines), lines)
	}
	create, bad, notFound := lines[3], lines[4], lines[5]
	if create.Msg != "access" || create.RequestID != "trace-123" || create.KeyID != keyID || create.Route != "create_event" ||
		create.Method != "POST" || create.Status != 201 || create.BytesOut != len(created.Body) || create.DurationMS <= 0 {
		t.Errorf("create line %+v (key id %s, body %d bytes)", create, keyID, len(created.Body))
	}
	if bad.Status != 400 || bad.KeyID != keyID || !strings.HasPrefix(bad.RequestID, "req_") {
		t.Errorf("400 line %+v", bad)
	}
	if notFound.Status != 404 || notFound.Route != "not_found" || notFound.KeyID != "" || notFound.Method != "GET" {
		t.Errorf("404 line %+v", notFound)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), key) {
		t.Fatal("the access log holds an API key")
	}
}

// --access-log-sample 0.5 logs some requests, not all; 0 (or no
// --access-log) writes nothing.
func TestAccessLogSampled(t *testing.T) {
	dir := t.TempDir()
	half, none := filepath.Join(dir, "half.log"), filepath.Join(dir, "none.log")
	s := Start(t, "--access-log", half, "--access-log-sample", "0.5")
	const n = 200
	for i := 0; i < n; i++ {
		wantStatus(t, Do(t, "GET", s.Public+"/healthz", "", nil), 200)
	}
	lines := readAccessLog(t, half, 1) // every answered request's line is written
	// Binomial(200, 0.5): outside 50..150 has probability ~1e-12.
	if len(lines) < 50 || len(lines) > 150 {
		t.Errorf("%d of %d requests logged at sample 0.5", len(lines), n)
	}
	s0 := Start(t, "--access-log", none, "--access-log-sample", "0")
	wantStatus(t, Do(t, "GET", s0.Public+"/healthz", "", nil), 200)
	if _, err := os.Stat(none); !os.IsNotExist(err) {
		t.Errorf("sample 0 created the log file: %v", err)
	}
}

// A sample outside 0..1 is a usage error (exit status 2).
func TestAccessLogBadSample(t *testing.T) {
	r := runCLI(t, nil, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--access-log", "-", "--access-log-sample", "1.5")
	if r.code != 2 || !strings.Contains(r.stderr, "--access-log-sample") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
}

// --access-log - writes the lines to standard output, apart from the
// service's log on standard error.
func TestAccessLogStdout(t *testing.T) {
	s := Start(t, "--access-log", "-")
	wantStatus(t, Do(t, "GET", s.Public+"/healthz", "", nil), 200)
	if err := s.Stop(); err != nil { // the harness reads stdout whole at exit
		t.Fatal(err)
	}
	var found bool
	for _, line := range strings.Split(s.Stdout(), "\n") {
		var l accessLine
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "access" && l.Route == "healthz" && l.Status == 200 {
			found = true
		}
	}
	if !found {
		t.Fatalf("no access line for /healthz on stdout:\n%s", s.Stdout())
	}
	if strings.Contains(s.Logs(), `"msg":"access"`) || strings.Contains(s.Logs(), "msg=access") {
		t.Error("access lines on stderr")
	}
}
